//! Hooks on inodes (attributes, xattrs, ACLs): they get a dentry but no mount.
use aya_ebpf::{
    macros::{lsm, lsm_cgroup},
    programs::LsmContext,
};
use fp_common::kernel::Hook;

use super::{in_session, in_session_cgroup};
use crate::{
    cache,
    cgroups::{self, Change},
    decide::decide_inode,
};

/// Every attribute change (utimes, and again chmod/chown/truncate after their path hooks). The
/// hook gets no mount, so it decides by inode identity only. The truncation of a session's own
/// cgroup's control file (`open(O_TRUNC)`) passes, as its path hooks let it (crate::cgroups).
#[inline(always)]
fn inode_setattr(dentry: u64, ret: i32) -> i32 {
    in_session_cgroup(ret, |session| {
        if cgroups::own(session, dentry, Change::File) {
            return 0;
        }
        decide_inode(session, Hook::InodeSetattr, dentry)
    })
}

/// inode_setattr before its `idmap` argument (6.1). Userspace loads this program or
/// [`fp_inode_setattr_idmap`], after the hook's prototype in the kernel's BTF: the arguments
/// of an LSM context must be read at constant offsets.
#[lsm_cgroup(hook = "inode_setattr")]
pub fn fp_inode_setattr(ctx: LsmContext) -> i32 {
    // inode_setattr(struct dentry *dentry, struct iattr *attr, int ret)
    inode_setattr(ctx.arg(0), ctx.arg(2))
}

/// inode_setattr with its leading `idmap` argument (6.12).
#[lsm_cgroup(hook = "inode_setattr")]
pub fn fp_inode_setattr_idmap(ctx: LsmContext) -> i32 {
    // inode_setattr(struct mnt_idmap *idmap, struct dentry *dentry, struct iattr *attr, int ret)
    inode_setattr(ctx.arg(1), ctx.arg(3))
}

#[lsm(hook = "inode_setxattr")]
pub fn fp_inode_setxattr(ctx: LsmContext) -> i32 {
    // inode_setxattr(userns or idmap, struct dentry *dentry, const char *name, const void *value,
    //                size_t size, int flags, int ret)
    in_session(ctx.arg(6), |session| decide_inode(session, Hook::InodeSetxattr, ctx.arg(1)))
}

#[lsm(hook = "inode_removexattr")]
pub fn fp_inode_removexattr(ctx: LsmContext) -> i32 {
    // inode_removexattr(userns or idmap, struct dentry *dentry, const char *name, int ret)
    in_session(ctx.arg(3), |session| decide_inode(session, Hook::InodeRemovexattr, ctx.arg(1)))
}

/// POSIX ACLs since 6.2 (before, they are xattrs).
#[lsm(hook = "inode_set_acl")]
pub fn fp_inode_set_acl(ctx: LsmContext) -> i32 {
    // inode_set_acl(struct mnt_idmap *idmap, struct dentry *dentry, const char *acl_name,
    //               struct posix_acl *kacl, int ret)
    in_session(ctx.arg(4), |session| decide_inode(session, Hook::InodeSetAcl, ctx.arg(1)))
}

#[lsm(hook = "inode_remove_acl")]
pub fn fp_inode_remove_acl(ctx: LsmContext) -> i32 {
    // inode_remove_acl(struct mnt_idmap *idmap, struct dentry *dentry, const char *acl_name, int ret)
    in_session(ctx.arg(3), |session| decide_inode(session, Hook::InodeRemoveAcl, ctx.arg(1)))
}

/// A dentry gets an inode: a new file, a lookup, or a freed dentry's memory come back as another
/// file. Any task, in a session or not: the verdict cache must forget the address.
#[lsm(hook = "d_instantiate")]
pub fn fp_d_instantiate(ctx: LsmContext) -> i32 {
    // d_instantiate(struct dentry *dentry, struct inode *inode): no return value.
    cache::forget(ctx.arg(0));
    0
}
