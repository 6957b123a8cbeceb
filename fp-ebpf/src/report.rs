//! The ring-buffer event of a decision.
use aya_ebpf::{
    helpers::{
        bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_current_uid_gid,
        generated::bpf_probe_read_kernel,
    },
    macros::map,
    maps::{RingBuf, ring_buf::RingBufEntry},
};
use core::ffi::c_void;
use fp_common::kernel::{
    DecisionEvent, EVENT_DENIED, EVENT_PATH_FS_RELATIVE, Hook, KernelOp, PATH_MAX, Reason,
};

use crate::{
    outcome::Outcome,
    session::{Session, count},
    state::{
        SCRATCH,
        walk::{NO_MOUNT, RESOLVED},
    },
};

#[map]
pub(crate) static EVENTS: RingBuf = RingBuf::with_byte_size(1 << 22, 0);

/// What the event of a rename or link carries besides the one of a file.
#[derive(Clone, Copy)]
pub(crate) struct MoveEvent {
    /// `EVENT_MOVE_DIR`, `EVENT_TARGET_EXISTS`, `EVENT_EXCHANGE`.
    pub(crate) flags: u8,
    /// The source's identity (the walk's is the target's by then).
    pub(crate) ino: u64,
    pub(crate) dev: u64,
}

/// The process a refusal at the session boundary aimed at (crate::boundary).
#[derive(Clone, Copy)]
pub(crate) struct Target {
    /// Its cgroup v2 id.
    pub(crate) cgroup: u64,
    pub(crate) tgid: u64,
}

/// What an event says besides the outcome (one argument: BPF functions take at most five).
#[derive(Clone, Copy)]
pub(crate) struct Report {
    pub(crate) hook: Hook,
    pub(crate) op: KernelOp,
    /// The kernel refused the operation.
    pub(crate) denied: bool,
    /// A rename's or link's.
    pub(crate) mv: Option<MoveEvent>,
    /// `EVENT_*` flags the event carries besides those of its outcome, walk and move
    /// (`EVENT_DEVICE`, `EVENT_KERNEL_SETTING`).
    pub(crate) flags: u8,
    /// `DecisionEvent::fs_magic`.
    pub(crate) fs_magic: u32,
}

impl Report {
    /// The report of `hook` deciding `op`, refused or not, with nothing more to say.
    pub(crate) const fn new(hook: Hook, op: KernelOp, denied: bool) -> Self {
        Report { hook, op, denied, mv: None, flags: 0, fs_magic: 0 }
    }
}

/// Counts a decision in the session's counters and reserves its event (None, counted as
/// dropped, when the ring buffer is full).
#[inline(always)]
fn reserve(
    session: &Session,
    outcome: &Outcome,
    denied: bool,
) -> Option<RingBufEntry<DecisionEvent>> {
    if denied {
        count(session.id, |c| unsafe { &raw mut (*c).denied });
    }
    if outcome.reason == Reason::Unresolved {
        count(session.id, |c| unsafe { &raw mut (*c).unresolved });
    }
    if outcome.reason == Reason::Boundary {
        count(session.id, |c| unsafe { &raw mut (*c).boundary });
    }
    let entry = EVENTS.reserve::<DecisionEvent>(0);
    if entry.is_none() {
        count(session.id, |c| unsafe { &raw mut (*c).dropped });
    }
    entry
}

/// Fills what every event says: the session, the current task, the outcome and `what` (its
/// `flags` besides `EVENT_DENIED`), with no file and no target process.
///
/// SAFETY: `ev` is a reserved, exclusively owned ring buffer record.
#[inline(always)]
unsafe fn stamp(
    ev: *mut DecisionEvent,
    session: &Session,
    outcome: &Outcome,
    what: &Report,
    flags: u8,
) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let uid_gid = bpf_get_current_uid_gid();
    // SAFETY: as the caller promised.
    unsafe {
        (*ev).session = session.id;
        (*ev).ino = 0;
        (*ev).dev = 0;
        (*ev).pid = pid_tgid as u32;
        (*ev).tgid = (pid_tgid >> 32) as u32;
        (*ev).uid = uid_gid as u32;
        (*ev).gid = (uid_gid >> 32) as u32;
        (*ev).rule_id = outcome.rule_id;
        (*ev).hook = what.hook as u8;
        (*ev).reason = outcome.reason as u8;
        (*ev).op = what.op as u8;
        (*ev).flags = flags | what.flags | if what.denied { EVENT_DENIED } else { 0 };
        (*ev).verdict = outcome.verdict as u8;
        (*ev)._pad = [0; 3];
        (*ev).target_cgroup = 0;
        (*ev).target_pid = 0;
        (*ev).fs_magic = what.fs_magic;
        (*ev).comm = bpf_get_current_comm().unwrap_or([0; 16]);
        (*ev).path_len = 0;
        (*ev).target_len = 0;
    }
}

/// Reports a decision. For a move, `path` is the source saved in `other` and `target` the
/// target's path the walk left in the buffer.
pub(crate) fn report(session: &Session, outcome: &Outcome, what: &Report) {
    let Some(s) = SCRATCH.get_ptr(0) else {
        return;
    };
    // SAFETY: this CPU's scratch value, filled by `check`.
    let (w, path, other) = unsafe { (&(*s).walk, &(*s).path, &(*s).other) };
    let Some(mut entry) = reserve(session, outcome, what.denied) else {
        return;
    };
    let ev = entry.as_mut_ptr();
    let mv = what.mv;
    // SAFETY: `ev` is a reserved, exclusively owned ring buffer record of the right size.
    unsafe {
        let relative = if w.vfsmount == NO_MOUNT { EVENT_PATH_FS_RELATIVE } else { 0 };
        stamp(ev, session, outcome, what, relative);
        (*ev).ino = w.ino;
        (*ev).dev = w.dev as u32;
        // An unresolved path is never reported as a (truncated) string.
        let start = w.pos as usize & (PATH_MAX - 1);
        let len = if w.state == RESOLVED { (PATH_MAX - start) & (PATH_MAX - 1) } else { 0 };
        let src = (path.as_ptr() as usize + start) as *const c_void;
        let (first, second) = match mv {
            Some(_) => ((*ev).target.as_mut_ptr(), (*ev).path.as_mut_ptr()),
            None => ((*ev).path.as_mut_ptr(), (*ev).target.as_mut_ptr()),
        };
        let mut first_len = len as u32;
        if bpf_probe_read_kernel(first as *mut c_void, len as u32, src) != 0 {
            first_len = 0;
        }
        let mut second_len = 0u32;
        if let Some(mv) = mv {
            (*ev).flags |= mv.flags;
            (*ev).ino = mv.ino;
            (*ev).dev = mv.dev as u32;
            second_len = ((*s).other_len as usize & (PATH_MAX - 1)) as u32;
            let from = other.as_ptr() as *const c_void;
            if bpf_probe_read_kernel(second as *mut c_void, second_len, from) != 0 {
                second_len = 0;
            }
        }
        (*ev).path_len = if mv.is_some() { second_len } else { first_len };
        (*ev).target_len = if mv.is_some() { first_len } else { 0 };
    }
    entry.submit(0);
}

/// Reports a decision about a process (a refusal at the session boundary, crate::boundary): the
/// event names `target` and no file. Touches no scratch value: the hooks of signals also run in
/// interrupt context (a signal sent on I/O completion, a socket's SIGIO), on top of a decision
/// that may be using this CPU's.
pub(crate) fn report_process(session: &Session, outcome: &Outcome, what: &Report, target: &Target) {
    let Some(mut entry) = reserve(session, outcome, what.denied) else {
        return;
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: `ev` is a reserved, exclusively owned ring buffer record of the right size.
    unsafe {
        stamp(ev, session, outcome, what, EVENT_PATH_FS_RELATIVE);
        (*ev).target_cgroup = target.cgroup;
        (*ev).target_pid = target.tgid as u32;
    }
    entry.submit(0);
}

/// A unix socket a refusal at the session boundary names (crate::unix).
pub(crate) struct Socket {
    /// The process that serves it.
    pub(crate) server: Target,
    /// Its file's identity (a socket bound to a path; 0 otherwise).
    pub(crate) ino: u64,
    pub(crate) dev: u32,
    /// The address its server bound it to: where the `sun_path` bytes lie in kernel memory and
    /// how many there are, at most 108 (a path as the server wrote it, or an abstract name,
    /// which starts with NUL).
    pub(crate) address: u64,
    pub(crate) len: u32,
}

/// Reports a refusal at the session boundary about a unix socket: the event names its server
/// (as a target process; its cgroup alone for a datagram socket), its file by identity and its
/// address (as the path).
pub(crate) fn report_socket(session: &Session, outcome: &Outcome, what: &Report, socket: &Socket) {
    let Some(mut entry) = reserve(session, outcome, what.denied) else {
        return;
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: `ev` is a reserved, exclusively owned ring buffer record of the right size.
    unsafe {
        stamp(ev, session, outcome, what, 0);
        (*ev).target_cgroup = socket.server.cgroup;
        (*ev).target_pid = socket.server.tgid as u32;
        (*ev).ino = socket.ino;
        (*ev).dev = socket.dev;
        // Masked to the buffer, from a volatile read: see crate::unix.
        let len = core::ptr::read_volatile(&socket.len) & (PATH_MAX as u32 - 1);
        let to = (*ev).path.as_mut_ptr() as *mut c_void;
        if bpf_probe_read_kernel(to, len, socket.address as *const c_void) == 0 {
            (*ev).path_len = len;
        }
    }
    entry.submit(0);
}
