//! The programs, by the object they guard (docs/hooks.md has the hook -> op table).
//!
//! The ten hooks every process of the host calls most (opens, reads and writes, maps, creations,
//! unlinks, renames, truncation and attribute changes) are `#[lsm_cgroup]` programs, attached to
//! each session's cgroup: the kernel runs them only for the tasks in sessions, so a task outside
//! every session runs none of fp's code there, and a session's task finds its session in its
//! cgroup's storage. The kernel has 10 such hooks for the whole host (`CGROUP_LSM_NUM`); the other
//! hooks are `#[lsm]` programs, which every task runs and which return at once outside sessions.
mod file;
mod floor;
mod inode;
mod mount;
mod path;
mod sigio;
mod task;
mod terminal;
mod unix;

use aya_ebpf::helpers::generated::bpf_set_retval;

use crate::{
    kernel::EACCES,
    session::{Session, attached_session, current_session},
};

/// The first work of every program: keeps the denial of an earlier BPF LSM program on the same
/// hook (`ret`: fp never turns another program's denial into an allow), then finds the session of
/// the current task (a task outside the sessions' parent cgroup: one cgroup-ancestor helper call
/// and a compare; inside it, a second call and a `SESSIONS` lookup). A task outside every session
/// returns here, before any read of the hook's arguments; a session task's
/// `decision` gets the session and never looks it up again.
#[inline(always)]
pub(crate) fn in_session(ret: i32, decision: impl FnOnce(&Session) -> i32) -> i32 {
    if ret != 0 {
        return ret;
    }
    match current_session() {
        Some(session) => decision(&session),
        None => 0,
    }
}

/// [`in_session`] for an `#[lsm_cgroup]` program: the kernel runs it only for the tasks of the
/// session whose cgroup it is attached to, and the session is read from that cgroup's storage (a
/// storage not written yet denies: fail closed); and the verdict (0 or -errno, as an `#[lsm]`
/// program returns it) is given as the kernel takes it from these programs: 1 to allow, 0 to deny
/// with the errno set by `bpf_set_retval`.
#[inline(always)]
pub(crate) fn in_session_cgroup(ret: i32, decision: impl FnOnce(&Session) -> i32) -> i32 {
    let verdict = match ret {
        0 => attached_session().map_or(-EACCES, |session| decision(&session)),
        denied => denied,
    };
    if verdict == 0 {
        return 1;
    }
    // SAFETY: a helper call with a plain integer argument.
    unsafe { bpf_set_retval(verdict) };
    0
}
