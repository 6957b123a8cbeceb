//! Cgroups as the boundary sees them: whether one lies in a session's subtree, and the session's
//! own cgroups (docs/threat-model.md, "Sub-cgroups"): a session process may make,
//! remove and configure cgroups below its session's, and move its own processes between them,
//! when the kernel keeps those moves inside the session. It does so when two things hold: the
//! hierarchy is mounted with `nsdelegate`, and the process lives in a cgroup namespace whose root
//! lies in the session (fp's `fp run` puts the session's first process in one rooted at the
//! session's cgroup). The kernel then refuses every migration by `cgroup.procs` or
//! `cgroup.threads` whose source or destination lies outside that namespace
//! (`cgroup_procs_write_permission`), and every write to the namespace root's own files but the
//! delegatable ones (`cgroup.procs`, `cgroup.threads`, `cgroup.subtree_control`). fp lets the
//! process write the files of the cgroups at or below its namespace's root, make cgroups below
//! them and remove those; everything else on cgroupfs stays read-only to sessions (fp's floor).
use aya_ebpf::helpers::bpf_get_current_task;

use crate::{
    kernel::{
        OFF_CGROUP_ANCESTORS, OFF_CGROUP_KN, OFF_CGROUP_LEVEL, OFF_CGROUP_NAMESPACE_ROOT_CSET,
        OFF_CGROUP_ROOT, OFF_CGROUP_ROOT_FLAGS, OFF_CSS_SET_DFL_CGRP, OFF_DENTRY_D_INODE,
        OFF_DENTRY_D_PARENT, OFF_INODE_I_PRIVATE, OFF_INODE_I_SB, OFF_KERNFS_NODE_ID,
        OFF_KERNFS_NODE_PRIV, OFF_NSPROXY_CGROUP_NS, OFF_SUPER_BLOCK_S_MAGIC,
        OFF_TASK_STRUCT_NSPROXY, SESSION_CGROUP_LEVEL, load, off, read,
    },
    session::Session,
};

/// The id of a `struct cgroup *` (its kernfs node's, the `st_ino` of its directory).
#[inline(always)]
fn cgroup_id(cgroup: u64) -> Result<u64, ()> {
    read(read::<u64>(cgroup, off(&OFF_CGROUP_KN))?, off(&OFF_KERNFS_NODE_ID))
}

/// The id of the `struct cgroup *` `cgroup` (a cgroup v2), and whether it lies in the subtree of
/// the session cgroup `session`: its ancestor at the session level is that cgroup
/// (`cgroup_is_descendant`). Read with helper calls: `ancestors` is an array of pointers past the
/// struct's end, which the verifier's typed loads do not reach.
#[inline(always)]
pub(crate) fn cgroup_in_session(cgroup: u64, session: u64) -> Result<(u64, bool), ()> {
    let id = cgroup_id(cgroup)?;
    let level = off(&SESSION_CGROUP_LEVEL);
    if read::<i32>(cgroup, off(&OFF_CGROUP_LEVEL))? < level as i32 {
        return Ok((id, false));
    }
    let ancestor: u64 = read(cgroup, off(&OFF_CGROUP_ANCESTORS) + level * 8)?;
    Ok((id, cgroup_id(ancestor)? == session))
}

/// cgroup v2's `s_magic`.
const CGROUP2_SUPER_MAGIC: u64 = 0x6367_7270;
/// `cgroup_root.flags`: cgroup namespaces are delegation boundaries (mount option `nsdelegate`).
const CGRP_ROOT_NS_DELEGATE: u32 = 1 << 3;

/// What a session process does to a cgroupfs object.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Writes or truncates the file at the dentry (a cgroup's control file).
    File,
    /// Makes a cgroup in the directory at the dentry.
    Create,
    /// Removes the cgroup at the dentry.
    Remove,
}

/// Whether the BTF-typed `struct inode *` lies on cgroupfs: a few loads, what every caller asks
/// first (its answer is almost always no).
#[inline(always)]
pub(crate) fn on_cgroupfs(inode: u64) -> bool {
    let sb: u64 = load(inode, off(&OFF_INODE_I_SB));
    inode != 0 && sb != 0 && load::<u64>(sb, off(&OFF_SUPER_BLOCK_S_MAGIC)) == CGROUP2_SUPER_MAGIC
}

/// Whether the BTF-typed `dentry` lies on cgroupfs and the current task of `session` may make
/// `change` to it there: what the path and inode hooks ask.
#[inline(always)]
pub(crate) fn own(session: &Session, dentry: u64, change: Change) -> bool {
    on_cgroupfs(load(dentry, off(&OFF_DENTRY_D_INODE))) && delegated(session, dentry, change)
}

/// Whether the current task of `session` may make `change` to the cgroupfs object at `dentry`
/// (the caller checked [`on_cgroupfs`]): it lies in the cgroup namespace the kernel confines the
/// task's moves to (see the module docs). Anything unreadable answers no: the floor then
/// decides, as for every other file.
#[inline(always)]
pub(crate) fn delegated(session: &Session, dentry: u64, change: Change) -> bool {
    delegated_object(session, dentry, change).unwrap_or(false)
}

#[inline(always)]
fn delegated_object(session: &Session, dentry: u64, change: Change) -> Result<bool, ()> {
    // The cgroup directory: a file's parent, or the dentry itself.
    let dir = match change {
        Change::File => read(dentry, off(&OFF_DENTRY_D_PARENT))?,
        Change::Create | Change::Remove => dentry,
    };
    let inode: u64 = read(dir, off(&OFF_DENTRY_D_INODE))?;
    let Some(root) = namespace_root(session)? else { return Ok(false) };
    // A cgroup directory's kernfs node holds its `struct cgroup`.
    let cgroup: u64 =
        read(read::<u64>(inode, off(&OFF_INODE_I_PRIVATE))?, off(&OFF_KERNFS_NODE_PRIV))?;
    let root_level: i32 = read(root, off(&OFF_CGROUP_LEVEL))?;
    let level: i32 = read(cgroup, off(&OFF_CGROUP_LEVEL))?;
    // The namespace's root itself is never removed by the session.
    let lowest = if change == Change::Remove { root_level + 1 } else { root_level };
    if level < lowest {
        return Ok(false);
    }
    let ancestor: u64 = read(cgroup, off(&OFF_CGROUP_ANCESTORS) + root_level as usize * 8)?;
    Ok(ancestor == root)
}

/// The root cgroup of the current task's cgroup namespace, when the kernel keeps the task's
/// migrations inside it: the hierarchy is mounted `nsdelegate`, and the root lies in `session`.
/// Else None: cgroupfs stays read-only to the task. (`clone3(CLONE_INTO_CGROUP)` stays refused
/// either way: crate::boundary.)
#[inline(always)]
fn namespace_root(session: &Session) -> Result<Option<u64>, ()> {
    // SAFETY: a helper call without arguments.
    let task = unsafe { bpf_get_current_task() };
    let nsproxy: u64 = read(task, off(&OFF_TASK_STRUCT_NSPROXY))?;
    let namespace: u64 = read(nsproxy, off(&OFF_NSPROXY_CGROUP_NS))?;
    let css_set: u64 = read(namespace, off(&OFF_CGROUP_NAMESPACE_ROOT_CSET))?;
    let root: u64 = read(css_set, off(&OFF_CSS_SET_DFL_CGRP))?;
    let flags: u32 = read(read::<u64>(root, off(&OFF_CGROUP_ROOT))?, off(&OFF_CGROUP_ROOT_FLAGS))?;
    if flags & CGRP_ROOT_NS_DELEGATE == 0 || !cgroup_in_session(root, session.id)?.1 {
        return Ok(None);
    }
    Ok(Some(root))
}
