//! The `#[lsm]` programs, by the object they guard (docs/hooks.md has the hook -> op table).
mod file;
mod inode;
mod mount;
mod path;
mod task;

use crate::session::{Session, current_session};

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
