//! Hooks on the signals a file sends its owner (crate::sigio): the session boundary for SIGIO.
use aya_ebpf::{macros::lsm, programs::LsmContext};

use crate::sigio::{decide_signal, remember_owner};

/// A file's owner is set (F_SETOWN, F_SETOWN_EX, FIOSETOWN, SIOCSPGRP), by any task: the file's
/// signals are decided against the setter's session.
#[lsm(hook = "file_set_fowner")]
pub fn fp_file_set_fowner(ctx: LsmContext) -> i32 {
    // file_set_fowner(struct file *file): no return value.
    remember_owner(ctx.arg(0));
    0
}

/// A file signals one task of its owner (SIGIO, SIGURG, the F_SETSIG signal), from whatever task
/// or interrupt does the I/O: decided by the setter's session, not the current task's.
#[lsm(hook = "file_send_sigiotask")]
pub fn fp_file_send_sigiotask(ctx: LsmContext) -> i32 {
    // file_send_sigiotask(struct task_struct *tsk, struct fown_struct *fown, int sig, int ret)
    let ret: i32 = ctx.arg(3);
    if ret != 0 {
        return ret;
    }
    decide_signal(ctx.arg(0), ctx.arg(1))
}
