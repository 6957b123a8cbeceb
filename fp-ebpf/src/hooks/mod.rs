//! The `#[lsm]` programs, by the object they guard (docs/hooks.md has the hook -> op table).
mod file;
mod inode;
mod mount;
mod path;
mod task;

/// Keeps the denial of an earlier BPF LSM program on the same hook (`ret`), else decides: fp never
/// turns another program's denial into an allow.
#[inline(always)]
pub(crate) fn unless_denied(ret: i32, decision: impl FnOnce() -> i32) -> i32 {
    if ret != 0 { ret } else { decision() }
}
