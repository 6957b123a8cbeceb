//! Hooks on ioctls (crate::terminal): the session boundary for terminals.
use aya_ebpf::{macros::lsm, programs::LsmContext};
use fp_common::kernel::Hook;

use super::in_session;
use crate::terminal::refuse_terminal_input;

/// Every ioctl(2) of a 64-bit caller, on any file.
#[lsm(hook = "file_ioctl")]
pub fn fp_file_ioctl(ctx: LsmContext) -> i32 {
    // file_ioctl(struct file *file, unsigned int cmd, unsigned long arg, int ret)
    in_session(ctx.arg(3), |session| refuse_terminal_input(session, Hook::FileIoctl, ctx.arg(1)))
}

/// Every ioctl(2) of a 32-bit caller, which would pass `file_ioctl` by.
#[lsm(hook = "file_ioctl_compat")]
pub fn fp_file_ioctl_compat(ctx: LsmContext) -> i32 {
    // file_ioctl_compat(struct file *file, unsigned int cmd, unsigned long arg, int ret)
    in_session(ctx.arg(3), |session| {
        refuse_terminal_input(session, Hook::FileIoctlCompat, ctx.arg(1))
    })
}
