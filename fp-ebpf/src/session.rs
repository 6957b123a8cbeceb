//! The session of the current task, its counters, and failing closed for sessions.
use aya_ebpf::{
    helpers::bpf_get_current_ancestor_cgroup_id,
    macros::map,
    maps::{Array, HashMap, PerCpuArray},
};
use core::intrinsics::{AtomicOrdering, atomic_xadd};
use fp_common::kernel::{
    CgroupSession, SESSION_AUDIT_ONLY, SESSION_SLOT_COUNT, SLOT_SHARED, SessionCounters,
    SessionInfo, SessionSlot, session_slot,
};

use crate::{
    kernel::{EACCES, SESSION_CGROUP_LEVEL, off},
    writers,
};

#[map]
pub(crate) static SESSIONS: HashMap<u64, SessionInfo> = HashMap::with_max_entries(1024, 0);

/// The session each session cgroup's attachment of the `#[lsm_cgroup]` programs serves, in the
/// cgroup's own storage. Its successor, `BPF_MAP_TYPE_CGRP_STORAGE`, needs Linux 6.2.
#[expect(deprecated, reason = "the storage lsm_cgroup programs can read on Linux 6.1")]
#[map]
pub(crate) static CGROUP_SESSION: aya_ebpf::maps::CgroupStorage<CgroupSession> =
    aya_ebpf::maps::CgroupStorage::new();

/// The sessions by the low bits of their cgroup id (fp_common::kernel::slot_value): a slot
/// read whole that names another id, or none, says a cgroup is no session's. fp-agent writes a
/// session's slot before its `SESSIONS` entry, and after the entry's removal.
#[map]
static SESSION_SLOTS: Array<SessionSlot> = Array::with_max_entries(SESSION_SLOT_COUNT, 0);

/// Bumped by fp-agent after each write of `SESSIONS` (a session set, reloaded or ended): the
/// generation [`LAST_SESSION`]'s copy was looked up under.
#[map]
static SESSIONS_GENERATION: Array<u64> = Array::with_max_entries(1, 0);

/// Each CPU's copy of the last session [`current_session`] looked up in `SESSIONS`: a
/// session's tasks skip the hash lookup while they keep a CPU (every program on the fmod_ret
/// backend, the `#[lsm]` ones on the BPF LSM).
#[map]
static LAST_SESSION: PerCpuArray<LastSession> = PerCpuArray::with_max_entries(1, 0);

#[repr(C)]
struct LastSession {
    /// Its writers ([`crate::writers`]): a program preempted while it copies a session in may
    /// leave the copy half-written.
    writers: u64,
    id: u64,
    /// `SESSIONS_GENERATION` as read before the lookup: the copy stands while it is unchanged.
    generation: u64,
    info: SessionInfo,
}

#[map]
pub(crate) static COUNTERS: HashMap<u64, SessionCounters> = HashMap::with_max_entries(1024, 0);

/// The session of the current task: its cgroup id (the ancestor at the session level) and its
/// settings, copied (userspace replaces the value on reload).
pub(crate) struct Session {
    pub(crate) id: u64,
    pub(crate) info: SessionInfo,
    /// Read from the cgroup's storage ([`attached_session`]) rather than `SESSIONS`: a constant
    /// in each program once inlined, so an `#[lsm]` program, which may not call
    /// `bpf_get_local_storage`, keeps no such call for the verifier to refuse.
    attached: bool,
}

impl Session {
    /// The session's tables id as its value reads now, from where this one was read: differs
    /// from `info.tables` once a reload replaced the tables or the session ended (0). Userspace
    /// writes the cgroup's storage before `SESSIONS` on reload, and clears it first at the end.
    #[inline(always)]
    pub(crate) fn tables_now(&self) -> u64 {
        match self.attached {
            // SAFETY: as in `attached_session`.
            true => unsafe {
                core::ptr::read_volatile(&(*CGROUP_SESSION.get_ptr_mut()).info.tables)
            },
            false => session_info(self.id).map_or(0, |i| i.tables),
        }
    }
}

#[inline(always)]
fn ancestor(level: i32) -> u64 {
    // SAFETY: a helper call with a plain integer argument.
    unsafe { bpf_get_current_ancestor_cgroup_id(level) }
}

#[inline(always)]
fn session_info(id: u64) -> Option<SessionInfo> {
    // SAFETY: a copy out of the map value.
    unsafe { SESSIONS.get(&id) }.copied()
}

#[inline(always)]
pub(crate) fn current_session() -> Option<Session> {
    // The task's cgroup at the session level: a session's, or 0 above that level (the
    // sessions' parent itself, or shallower).
    let id = ancestor(off(&SESSION_CGROUP_LEVEL) as i32);
    if id == 0 {
        return None;
    }
    // What every task of the host pays: one slot read says whether the id can be a session's.
    if let Some(slot) = SESSION_SLOTS.get_ptr(session_slot(id)) {
        // SAFETY: a copy of an array value; torn, its check word says so.
        let slot = unsafe { core::ptr::read_volatile(slot) };
        if slot.intact() && slot.value != id && slot.value != SLOT_SHARED {
            return None;
        }
    }
    last_session(id)
}

/// [`session`] through this CPU's [`LAST_SESSION`]: its copy while `SESSIONS_GENERATION` says
/// no write of `SESSIONS` came after it and no program was writing it, else a lookup, copied in.
#[inline(always)]
fn last_session(id: u64) -> Option<Session> {
    // SAFETY: a read of the map's one value.
    let generation = SESSIONS_GENERATION.get(0).map(|g| unsafe { core::ptr::read_volatile(g) });
    let (Some(last), Some(generation)) = (LAST_SESSION.get_ptr_mut(0), generation) else {
        return session(id);
    };
    // SAFETY: this CPU's value, read field by field between two reads of its writers' counter.
    unsafe {
        let before = core::ptr::read_volatile(&(*last).writers);
        if writers::none(before)
            && core::ptr::read_volatile(&(*last).id) == id
            && core::ptr::read_volatile(&(*last).generation) == generation
        {
            let info = core::ptr::read_volatile(&(*last).info);
            if core::ptr::read_volatile(&(*last).writers) == before {
                return Some(Session { id, info, attached: false });
            }
        }
    }
    let found = session(id)?;
    // SAFETY: as above; written only by a writer alone (`writers`).
    unsafe {
        if writers::alone(writers::begin(&raw mut (*last).writers)) {
            core::ptr::write_volatile(&raw mut (*last).id, id);
            core::ptr::write_volatile(&raw mut (*last).generation, generation);
            core::ptr::write_volatile(&raw mut (*last).info, found.info);
        }
        writers::end(&raw mut (*last).writers);
    }
    Some(found)
}

/// The session of cgroup `id`, for a decision made on its behalf in whatever task runs then (a
/// file's signal, crate::sigio).
#[inline(always)]
pub(crate) fn session(id: u64) -> Option<Session> {
    session_info(id).map(|info| Session { id, info, attached: false })
}

/// The session of an `#[lsm_cgroup]` program's task: the one whose cgroup the program is attached
/// to (the kernel runs it for no other task), read from that cgroup's storage with no lookup.
/// `None` while userspace has not written it, which it does before any task joins the cgroup.
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
