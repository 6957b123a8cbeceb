//! The session of the current task, its counters, and failing closed for sessions.
use aya_ebpf::{helpers::bpf_get_current_ancestor_cgroup_id, macros::map, maps::HashMap};
use core::intrinsics::{AtomicOrdering, atomic_xadd};
use fp_common::kernel::{CgroupSession, SESSION_AUDIT_ONLY, SessionCounters, SessionInfo};

use crate::kernel::{EACCES, SESSION_CGROUP_LEVEL, SESSION_PARENT_CGROUP, global, off};

#[map]
pub(crate) static SESSIONS: HashMap<u64, SessionInfo> = HashMap::with_max_entries(1024, 0);

/// The session each session cgroup's attachment of the `#[lsm_cgroup]` programs serves, in the
/// cgroup's own storage. Its successor, `BPF_MAP_TYPE_CGRP_STORAGE`, needs Linux 6.2.
#[expect(deprecated, reason = "the storage lsm_cgroup programs can read on Linux 6.1")]
#[map]
pub(crate) static CGROUP_SESSION: aya_ebpf::maps::CgroupStorage<CgroupSession> =
    aya_ebpf::maps::CgroupStorage::new();

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
    let level = off(&SESSION_CGROUP_LEVEL) as i32;
    // Outside the sessions' parent: outside every session, without a map lookup (what every
    // task of the host pays). Only that parent holds session cgroups.
    if ancestor(level - 1) != global(&SESSION_PARENT_CGROUP) {
        return None;
    }
    // A task in the parent itself has no ancestor at the session level: 0, no session.
    let id = ancestor(level);
    if id == 0 {
        return None;
    }
    session(id)
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
