//! Hooks on paths: names created, removed, linked and renamed, and attribute changes by path.
use fp_common::{
    kernel::{Hook, KernelOp},
    refer::MoveKind,
};

use crate::{
    cgroups::{self, Change},
    decide::{decide_in_dir, decide_path},
    floor::refuse_device_node,
    kernel::{OFF_PATH_MNT, RENAME_EXCHANGE, load, off, path_parts},
    moves::decide_move,
    session::unreadable,
};

hook! {
    lsm("path_unlink", ret = 2) fp_path_unlink;
    fmod_ret("security_path_unlink") fp_fmod_ret_path_unlink;
    // path_unlink(const struct path *dir, struct dentry *dentry, int ret)
    |session, ctx| {
        decide_in_dir(session, Hook::PathUnlink, KernelOp::Delete, ctx.arg(0), ctx.arg(1))
    }
}

hook! {
    /// Also the removal of one of the session's own cgroups (crate::cgroups).
    lsm("path_rmdir", ret = 2) fp_path_rmdir;
    fmod_ret("security_path_rmdir") fp_fmod_ret_path_rmdir;
    // path_rmdir(const struct path *dir, struct dentry *dentry, int ret)
    |session, ctx| {
        if cgroups::own(session, ctx.arg(1), Change::Remove) {
            return 0;
        }
        decide_in_dir(session, Hook::PathRmdir, KernelOp::Delete, ctx.arg(0), ctx.arg(1))
    }
}

hook! {
    /// Creation of a regular file, FIFO, socket or device node: `open(O_CREAT)` calls it before
    /// creating, so a denied path is never created. Device nodes are refused first
    /// (crate::floor).
    lsm("path_mknod", ret = 4) fp_path_mknod;
    fmod_ret("security_path_mknod") fp_fmod_ret_path_mknod;
    // path_mknod(const struct path *dir, struct dentry *dentry, umode_t mode, unsigned int dev,
    //            int ret)
    |session, ctx| {
        let (mode, dev): (u16, u32) = (ctx.arg(2), ctx.arg(3));
        if let Some(refused) = refuse_device_node(session, mode as u32, dev) {
            return refused;
        }
        // `open(O_CREAT)` of a session's own cgroup's control file (`echo 1 > cgroup.procs`):
        // the kernel makes no file on cgroupfs (crate::cgroups).
        if cgroups::own(session, path_parts(ctx.arg(0)).1, Change::Create) {
            return 0;
        }
        decide_in_dir(session, Hook::PathMknod, KernelOp::Write, ctx.arg(0), ctx.arg(1))
    }
}

hook! {
    /// Also a cgroup made in one of the session's own (crate::cgroups).
    lsm("path_mkdir", ret = 3) fp_path_mkdir;
    fmod_ret("security_path_mkdir") fp_fmod_ret_path_mkdir;
    // path_mkdir(const struct path *dir, struct dentry *dentry, umode_t mode, int ret)
    |session, ctx| {
        if cgroups::own(session, path_parts(ctx.arg(0)).1, Change::Create) {
            return 0;
        }
        decide_in_dir(session, Hook::PathMkdir, KernelOp::Write, ctx.arg(0), ctx.arg(1))
    }
}

hook! {
    /// The new name of a symlink; its target text is not a file access (it is resolved, and
    /// checked, when used).
    lsm("path_symlink", ret = 3) fp_path_symlink;
    fmod_ret("security_path_symlink") fp_fmod_ret_path_symlink;
    // path_symlink(const struct path *dir, struct dentry *dentry, const char *old_name, int ret)
    |session, ctx| {
        decide_in_dir(session, Hook::PathSymlink, KernelOp::Write, ctx.arg(0), ctx.arg(1))
    }
}

hook! {
    /// A hardlink makes the file's content reachable under a new name: the new name must be
    /// writable and no more permissive than the old one for any op (fp_common::refer). The
    /// kernel refuses links across mounts before this hook, so the source lies on the new name's
    /// mount.
    lsm("path_link", ret = 3) fp_path_link;
    fmod_ret("security_path_link") fp_fmod_ret_path_link;
    // path_link(struct dentry *old_dentry, const struct path *new_dir, struct dentry *new_dentry,
    //           int ret)
    |session, ctx| {
        let mnt = load::<u64>(ctx.arg(1), off(&OFF_PATH_MNT));
        if mnt == 0 {
            return unreadable(session);
        }
        decide_move(session, Hook::PathLink, MoveKind::Link, (mnt, ctx.arg(0)), (mnt, ctx.arg(2)))
    }
}

hook! {
    /// rename(2) and RENAME_EXCHANGE, of files and directories: the accesses the move needs and
    /// the REFER rule (fp_common::refer), both names walked once.
    lsm("path_rename", ret = 5) fp_path_rename;
    fmod_ret("security_path_rename") fp_fmod_ret_path_rename;
    // path_rename(const struct path *old_dir, struct dentry *old_dentry,
    //             const struct path *new_dir, struct dentry *new_dentry, unsigned int flags,
    //             int ret)
    |session, ctx| {
        let flags: u32 = ctx.arg(4);
        let kind = if flags & RENAME_EXCHANGE != 0 { MoveKind::Exchange } else { MoveKind::Rename };
        let old_mnt = load::<u64>(ctx.arg(0), off(&OFF_PATH_MNT));
        let new_mnt = load::<u64>(ctx.arg(2), off(&OFF_PATH_MNT));
        if old_mnt == 0 || new_mnt == 0 {
            return unreadable(session);
        }
        decide_move(session, Hook::PathRename, kind, (old_mnt, ctx.arg(1)), (new_mnt, ctx.arg(3)))
    }
}

hook! {
    /// truncate(2); before 6.2 also ftruncate(2) and open(O_TRUNC) (of a session's own cgroup's
    /// control file too: crate::cgroups).
    lsm("path_truncate", ret = 1) fp_path_truncate;
    fmod_ret("security_path_truncate") fp_fmod_ret_path_truncate;
    // path_truncate(const struct path *path, int ret)
    |session, ctx| {
        if cgroups::own(session, path_parts(ctx.arg(0)).1, Change::File) {
            return 0;
        }
        decide_path(session, Hook::PathTruncate, KernelOp::Write, false, ctx.arg(0))
    }
}

hook! {
    lsm("path_chmod", ret = 2) fp_path_chmod;
    fmod_ret("security_path_chmod") fp_fmod_ret_path_chmod;
    // path_chmod(const struct path *path, umode_t mode, int ret)
    |session, ctx| decide_path(session, Hook::PathChmod, KernelOp::Write, false, ctx.arg(0))
}

hook! {
    lsm("path_chown", ret = 3) fp_path_chown;
    fmod_ret("security_path_chown") fp_fmod_ret_path_chown;
    // path_chown(const struct path *path, kuid_t uid, kgid_t gid, int ret)
    |session, ctx| decide_path(session, Hook::PathChown, KernelOp::Write, false, ctx.arg(0))
}
