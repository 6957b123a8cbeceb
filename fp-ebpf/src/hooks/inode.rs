//! Hooks on inodes (attributes, xattrs, ACLs): they get a dentry but no mount.
use aya_ebpf::{
    macros::{fentry, lsm},
    programs::{FEntryContext, LsmContext},
};
use fp_common::kernel::Hook;

use crate::{
    cache,
    cgroups::{self, Change},
    decide::decide_inode,
    session::Session,
};

/// Every attribute change (utimes, and again chmod/chown/truncate after their path hooks). The
/// hook gets no mount, so it decides by inode identity only. The truncation of a session's own
/// cgroup's control file (`open(O_TRUNC)`) passes, as its path hooks let it (crate::cgroups).
#[inline(always)]
fn inode_setattr(session: &Session, dentry: u64) -> i32 {
    if cgroups::own(session, dentry, Change::File) {
        return 0;
    }
    decide_inode(session, Hook::InodeSetattr, dentry)
}

hook! {
    /// inode_setattr before its `idmap` argument (6.1). Userspace loads this program or
    /// [`fp_inode_setattr_idmap`], after the hook's prototype in the kernel's BTF: the arguments
    /// of an LSM context must be read at constant offsets. (security_inode_setattr takes a
    /// namespace first on every kernel fp supports.)
    lsm("inode_setattr", ret = 2) fp_inode_setattr;
    // inode_setattr(struct dentry *dentry, struct iattr *attr, int ret)
    |session, ctx| inode_setattr(session, ctx.arg(0))
}

hook! {
    /// inode_setattr with its leading `idmap` argument (6.12; `mnt_userns` in
    /// security_inode_setattr on 6.1).
    lsm("inode_setattr", ret = 3) fp_inode_setattr_idmap;
    fmod_ret("security_inode_setattr") fp_fmod_ret_inode_setattr_idmap;
    // inode_setattr(struct mnt_idmap *idmap, struct dentry *dentry, struct iattr *attr, int ret)
    |session, ctx| inode_setattr(session, ctx.arg(1))
}

hook! {
    lsm("inode_setxattr", ret = 6) fp_inode_setxattr;
    fmod_ret("security_inode_setxattr") fp_fmod_ret_inode_setxattr;
    // inode_setxattr(userns or idmap, struct dentry *dentry, const char *name, const void *value,
    //                size_t size, int flags, int ret)
    |session, ctx| decide_inode(session, Hook::InodeSetxattr, ctx.arg(1))
}

hook! {
    lsm("inode_removexattr", ret = 3) fp_inode_removexattr;
    fmod_ret("security_inode_removexattr") fp_fmod_ret_inode_removexattr;
    // inode_removexattr(userns or idmap, struct dentry *dentry, const char *name, int ret)
    |session, ctx| decide_inode(session, Hook::InodeRemovexattr, ctx.arg(1))
}

hook! {
    /// POSIX ACLs since 6.2 (before, they are xattrs).
    lsm("inode_set_acl", ret = 4) fp_inode_set_acl;
    fmod_ret("security_inode_set_acl") fp_fmod_ret_inode_set_acl;
    // inode_set_acl(struct mnt_idmap *idmap, struct dentry *dentry, const char *acl_name,
    //               struct posix_acl *kacl, int ret)
    |session, ctx| decide_inode(session, Hook::InodeSetAcl, ctx.arg(1))
}

hook! {
    lsm("inode_remove_acl", ret = 3) fp_inode_remove_acl;
    fmod_ret("security_inode_remove_acl") fp_fmod_ret_inode_remove_acl;
    // inode_remove_acl(struct mnt_idmap *idmap, struct dentry *dentry, const char *acl_name,
    //                  int ret)
    |session, ctx| decide_inode(session, Hook::InodeRemoveAcl, ctx.arg(1))
}

/// A dentry gets an inode: a new file, a lookup, or a freed dentry's memory come back as another
/// file. Any task, in a session or not: the verdict cache must forget the address.
#[lsm(hook = "d_instantiate")]
pub fn fp_d_instantiate(ctx: LsmContext) -> i32 {
    // d_instantiate(struct dentry *dentry, struct inode *inode): no return value.
    cache::forget(ctx.arg(0));
    0
}

/// [`fp_d_instantiate`] at the entry of security_d_instantiate, which returns nothing (so no
/// fmod_ret program attaches there).
#[fentry(function = "security_d_instantiate")]
pub fn fp_fentry_d_instantiate(ctx: FEntryContext) -> u32 {
    cache::forget(ctx.arg(0));
    0
}
