//! Hooks on the mount table: all refused for sessions.
use aya_ebpf::{macros::lsm, programs::LsmContext};
use fp_common::kernel::Hook;

use super::in_session;
use crate::{
    kernel::{OFF_VFSMOUNT_MNT_ROOT, dentry_identity, off, path_identity, read, sb_identity},
    protect::refuse_mount,
};

/// mount(2) in every form: a new filesystem, bind, move, remount and propagation changes (so
/// `unshare -m`, which makes the new namespace's mounts private, is refused too).
#[lsm(hook = "sb_mount")]
pub fn fp_sb_mount(ctx: LsmContext) -> i32 {
    // sb_mount(const char *dev_name, const struct path *path, const char *type,
    //          unsigned long flags, void *data, int ret)
    in_session(ctx.arg(5), |session| {
        refuse_mount(session, Hook::SbMount, || path_identity(ctx.arg(1)))
    })
}

/// umount(2), lazy (MNT_DETACH) included.
#[lsm(hook = "sb_umount")]
pub fn fp_sb_umount(ctx: LsmContext) -> i32 {
    // sb_umount(struct vfsmount *mnt, int flags, int ret)
    in_session(ctx.arg(2), |session| {
        refuse_mount(session, Hook::SbUmount, || {
            dentry_identity(read(ctx.arg::<u64>(0), off(&OFF_VFSMOUNT_MNT_ROOT))?)
        })
    })
}

/// A remount through mount(2) (sb_mount has refused it already: defence in depth).
#[lsm(hook = "sb_remount")]
pub fn fp_sb_remount(ctx: LsmContext) -> i32 {
    // sb_remount(struct super_block *sb, void *mnt_opts, int ret)
    in_session(ctx.arg(2), |session| {
        refuse_mount(session, Hook::SbRemount, || sb_identity(ctx.arg(0)))
    })
}

/// A new filesystem instance for userspace: mount(2) (refused by sb_mount already) and the new
/// mount API's `fsconfig(FSCONFIG_CMD_CREATE)`, so `fsmount` never gets a filesystem to mount.
#[lsm(hook = "sb_kern_mount")]
pub fn fp_sb_kern_mount(ctx: LsmContext) -> i32 {
    // sb_kern_mount(const struct super_block *sb, int ret)
    in_session(ctx.arg(1), |session| {
        refuse_mount(session, Hook::SbKernMount, || sb_identity(ctx.arg(0)))
    })
}

#[lsm(hook = "sb_pivotroot")]
pub fn fp_sb_pivotroot(ctx: LsmContext) -> i32 {
    // sb_pivotroot(const struct path *old_path, const struct path *new_path, int ret)
    in_session(ctx.arg(2), |session| {
        refuse_mount(session, Hook::SbPivotroot, || path_identity(ctx.arg(1)))
    })
}

/// move_mount(2): attaching a mount made with the new mount API (fsmount, open_tree) or moving
/// an existing one.
#[lsm(hook = "move_mount")]
pub fn fp_move_mount(ctx: LsmContext) -> i32 {
    // move_mount(const struct path *from_path, const struct path *to_path, int ret)
    in_session(ctx.arg(2), |session| {
        refuse_mount(session, Hook::MoveMount, || path_identity(ctx.arg(1)))
    })
}
