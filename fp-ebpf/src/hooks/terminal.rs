//! Hooks on ioctls (crate::terminal): the session boundary for terminals.
use fp_common::kernel::Hook;

use crate::terminal::refuse_terminal_input;

hook! {
    /// Every ioctl(2) of a 64-bit caller, on any file.
    lsm("file_ioctl", ret = 3) fp_file_ioctl;
    fmod_ret("security_file_ioctl") fp_fmod_ret_file_ioctl;
    // file_ioctl(struct file *file, unsigned int cmd, unsigned long arg, int ret)
    |session, ctx| refuse_terminal_input(session, Hook::FileIoctl, ctx.arg(1))
}

hook! {
    /// Every ioctl(2) of a 32-bit caller, which would pass `file_ioctl` by.
    lsm("file_ioctl_compat", ret = 3) fp_file_ioctl_compat;
    fmod_ret("security_file_ioctl_compat") fp_fmod_ret_file_ioctl_compat;
    // file_ioctl_compat(struct file *file, unsigned int cmd, unsigned long arg, int ret)
    |session, ctx| refuse_terminal_input(session, Hook::FileIoctlCompat, ctx.arg(1))
}
