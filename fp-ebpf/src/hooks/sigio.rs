//! Hooks on the signals a file sends its owner (crate::sigio): the session boundary for SIGIO.
use aya_ebpf::{
    macros::{fentry, fmod_ret, lsm},
    programs::{FEntryContext, LsmContext},
};

use crate::sigio::{decide_signal, remember_owner};

/// A file's owner is set (F_SETOWN, F_SETOWN_EX, FIOSETOWN, SIOCSPGRP), by any task: the file's
/// signals are decided against the setter's session.
#[lsm(hook = "file_set_fowner")]
pub fn fp_file_set_fowner(ctx: LsmContext) -> i32 {
    // file_set_fowner(struct file *file): no return value.
    remember_owner(ctx.arg(0));
    0
}

/// [`fp_file_set_fowner`] at the entry of security_file_set_fowner, which returns nothing.
#[fentry(function = "security_file_set_fowner")]
pub fn fp_fentry_file_set_fowner(ctx: FEntryContext) -> u32 {
    remember_owner(ctx.arg(0));
    0
}

/// A file signals one task of its owner (SIGIO, SIGURG, the F_SETSIG signal), from whatever task
/// or interrupt does the I/O: decided by the setter's session, not the current task's.
#[lsm(hook = "file_send_sigiotask")]
pub fn fp_file_send_sigiotask(ctx: LsmContext) -> i32 {
    // file_send_sigiotask(struct task_struct *tsk, struct fown_struct *fown, int sig, int ret)
    file_send_sigiotask(ctx.arg(3), ctx.arg(0), ctx.arg(1))
}

/// [`fp_file_send_sigiotask`] on security_file_send_sigiotask.
#[fmod_ret(function = "security_file_send_sigiotask")]
pub fn fp_fmod_ret_file_send_sigiotask(ctx: FEntryContext) -> i32 {
    file_send_sigiotask(ctx.arg(3), ctx.arg(0), ctx.arg(1))
}

/// Keeps the denial of the programs before (`ret`), else decides the signal.
#[inline(always)]
fn file_send_sigiotask(ret: i32, task: u64, fown: u64) -> i32 {
    if ret != 0 {
        return ret;
    }
    decide_signal(task, fown)
}
