//! The session of the current task, its counters, and failing closed for sessions.
use aya_ebpf::{
    helpers::bpf_get_current_ancestor_cgroup_id,
    macros::map,
    maps::{Array, HashMap},
};
use core::intrinsics::{AtomicOrdering, atomic_xadd};
use fp_common::kernel::{
    CgroupSession, SESSION_AUDIT_ONLY, SESSION_SLOT_COUNT, SLOT_SHARED, SessionCounters,
    SessionInfo, SessionSlot, session_slot,
};

use crate::kernel::{EACCES, SESSION_CGROUP_LEVEL, off};

#[map]
pub(crate) static SESSIONS: HashMap<u64, SessionInfo> = HashMap::with_max_entries(1024, 0);

/// The session each session cgroup's attachment of the `#[lsm_cgroup]` programs (the checks of
/// pending files) serves, in the cgroup's own storage. Its successor, `BPF_MAP_TYPE_CGRP_STORAGE`, needs Linux 6.2.
#[expect(deprecated, reason = "the storage lsm_cgroup programs can read on Linux 6.1")]
#[map]
pub(crate) static CGROUP_SESSION: aya_ebpf::maps::CgroupStorage<CgroupSession> =
    aya_ebpf::maps::CgroupStorage::new();

/// The sessions by the low bits of their cgroup id, with their settings
/// (fp_common::kernel::SessionSlot): what every session check reads. fp-agent writes a
/// session's slot before its `SESSIONS` entry, and after the entry's removal.
#[map]
static SESSION_SLOTS: Array<SessionSlot> = Array::with_max_entries(SESSION_SLOT_COUNT, 0);

#[map]
pub(crate) static COUNTERS: HashMap<u64, SessionCounters> = HashMap::with_max_entries(1024, 0);

/// The session of the current task: its cgroup id (the ancestor at the session level) and its
/// settings, copied (userspace replaces the value on reload).
pub(crate) struct Session {
    pub(crate) id: u64,
    pub(crate) info: SessionInfo,
    /// Read from the cgroup's storage ([`attached_session`]) rather than its slot: false in
    /// every `#[lsm]` program once inlined, so such a program, which may not call
    /// `bpf_get_local_storage`, keeps no such call for the verifier to refuse.
    attached: bool,
}

impl Session {
    /// The session's tables id as its value reads now, from where this one was read: differs
    /// from `info.tables` once a reload replaced the tables or the session ended (0). Userspace
    /// writes the cgroup's storage and the slot before `SESSIONS` on reload, and clears the
    /// storage first at the end.
    #[inline(always)]
    pub(crate) fn tables_now(&self) -> u64 {
        match self.attached {
            // SAFETY: as in `attached_session`.
            true => unsafe {
                core::ptr::read_volatile(&(*CGROUP_SESSION.get_ptr_mut()).info.tables)
            },
            false => session(self.id).map_or(0, |s| s.info.tables),
        }
    }
}

#[inline(always)]
fn ancestor(level: i32) -> u64 {
    // SAFETY: a helper call with a plain integer argument.
    unsafe { bpf_get_current_ancestor_cgroup_id(level) }
}

#[inline(always)]
pub(crate) fn current_session() -> Option<Session> {
    // The task's cgroup at the session level: a session's, or 0 above that level (the
    // sessions' parent itself, or shallower).
    match ancestor(off(&SESSION_CGROUP_LEVEL) as i32) {
        0 => None,
        id => session(id),
    }
}

/// The session of cgroup `id`: from its slot of `SESSION_SLOTS` when that names it or another
/// id, or none; looked up in `SESSIONS` when several share it or it was read half-written. Also
/// for a decision made on its behalf in whatever task runs then (a file's signal, crate::sigio).
#[inline(always)]
pub(crate) fn session(id: u64) -> Option<Session> {
    if let Some(slot) = SESSION_SLOTS.get_ptr(session_slot(id)) {
        // What nearly every task of the host pays: one word read says its slot holds no session.
        // SAFETY: reads of an array value; read half-written, its check word says so (a value
        // of 0 needs none: fp_common::kernel::SessionSlot).
        if unsafe { core::ptr::read_volatile(&(*slot).value) } == 0 {
            return None;
        }
        // SAFETY: as above.
        let slot = unsafe { core::ptr::read_volatile(slot) };
        if slot.intact() {
            if slot.value == id {
                return Some(Session { id, info: slot.info, attached: false });
            }
            if slot.value != SLOT_SHARED {
                return None;
            }
        }
    }
    // SAFETY: a copy out of the map value.
    let info = unsafe { SESSIONS.get(&id) }.copied()?;
    Some(Session { id, info, attached: false })
}

/// The session of an `#[lsm_cgroup]` program's task: the one whose cgroup the program is attached
/// to (the kernel runs it for no other task), read from that cgroup's storage with no lookup.
/// `None` while userspace has not written it (it does once the programs are attached) or after it
/// zeroed it (first, as the session ends).
#[inline(always)]
pub(crate) fn attached_session() -> Option<Session> {
    // SAFETY: the helper returns the storage of the cgroup this program runs for, never null;
    // copied out at once (userspace replaces the value on reload).
    let here = unsafe { *CGROUP_SESSION.get_ptr_mut() };
    (here.cgroup != 0).then_some(Session { id: here.cgroup, info: here.info, attached: true })
}

#[inline(always)]
pub(crate) fn count(session: u64, counter: impl FnOnce(*mut SessionCounters) -> *mut u64) {
    if let Some(c) = COUNTERS.get_ptr_mut(&session) {
        // SAFETY: `c` points into a map value that lives as long as the program runs.
        unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(counter(c), 1) };
    }
}

/// Fail closed for session tasks when a hook's own arguments cannot be read (audit-only sessions
/// are let through).
#[inline(always)]
pub(crate) fn unreadable(session: &Session) -> i32 {
    if session.info.flags & SESSION_AUDIT_ONLY == 0 { -EACCES } else { 0 }
}
