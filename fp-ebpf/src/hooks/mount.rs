//! Hooks on the mount table: all refused for sessions.
use fp_common::kernel::Hook;

use crate::{
    kernel::{OFF_VFSMOUNT_MNT_ROOT, dentry_identity, off, path_identity, read, sb_identity},
    protect::refuse_mount,
};

hook! {
    /// mount(2) in every form: a new filesystem, bind, move, remount and propagation changes (so
    /// `unshare -m`, which makes the new namespace's mounts private, is refused too).
    lsm("sb_mount", ret = 5) fp_sb_mount;
    fmod_ret("security_sb_mount") fp_fmod_ret_sb_mount;
    // sb_mount(const char *dev_name, const struct path *path, const char *type,
    //          unsigned long flags, void *data, int ret)
    |session, ctx| refuse_mount(session, Hook::SbMount, || path_identity(ctx.arg(1)))
}

hook! {
    /// umount(2), lazy (MNT_DETACH) included.
    lsm("sb_umount", ret = 2) fp_sb_umount;
    fmod_ret("security_sb_umount") fp_fmod_ret_sb_umount;
    // sb_umount(struct vfsmount *mnt, int flags, int ret)
    |session, ctx| {
        refuse_mount(session, Hook::SbUmount, || {
            dentry_identity(read(ctx.arg::<u64>(0), off(&OFF_VFSMOUNT_MNT_ROOT))?)
        })
    }
}

hook! {
    /// A remount through mount(2) (sb_mount has refused it already: defence in depth).
    lsm("sb_remount", ret = 2) fp_sb_remount;
    fmod_ret("security_sb_remount") fp_fmod_ret_sb_remount;
    // sb_remount(struct super_block *sb, void *mnt_opts, int ret)
    |session, ctx| refuse_mount(session, Hook::SbRemount, || sb_identity(ctx.arg(0)))
}

hook! {
    /// A new filesystem instance for userspace: mount(2) (refused by sb_mount already) and the
    /// new mount API's `fsconfig(FSCONFIG_CMD_CREATE)`, so `fsmount` never gets a filesystem to
    /// mount.
    lsm("sb_kern_mount", ret = 1) fp_sb_kern_mount;
    fmod_ret("security_sb_kern_mount") fp_fmod_ret_sb_kern_mount;
    // sb_kern_mount(const struct super_block *sb, int ret)
    |session, ctx| refuse_mount(session, Hook::SbKernMount, || sb_identity(ctx.arg(0)))
}

hook! {
    lsm("sb_pivotroot", ret = 2) fp_sb_pivotroot;
    fmod_ret("security_sb_pivotroot") fp_fmod_ret_sb_pivotroot;
    // sb_pivotroot(const struct path *old_path, const struct path *new_path, int ret)
    |session, ctx| refuse_mount(session, Hook::SbPivotroot, || path_identity(ctx.arg(1)))
}

hook! {
    /// move_mount(2): attaching a mount made with the new mount API (fsmount, open_tree) or
    /// moving an existing one.
    lsm("move_mount", ret = 2) fp_move_mount;
    fmod_ret("security_move_mount") fp_fmod_ret_move_mount;
    // move_mount(const struct path *from_path, const struct path *to_path, int ret)
    |session, ctx| refuse_mount(session, Hook::MoveMount, || path_identity(ctx.arg(1)))
}
