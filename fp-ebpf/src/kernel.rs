//! The kernel as the programs read it: struct offsets (read-only globals written by userspace
//! from the running kernel's BTF, see fp_common::kernel::KERNEL_FIELDS), the session cgroup level,
//! reads of kernel memory and the kernel's constants.

use fp_common::kernel::RDONLY_CAST_CALL;

pub(crate) const EACCES: i32 = 13;
/// A rename or link the REFER rule refuses (fp_common::refer): as Landlock, so `mv` copies.
pub(crate) const EXDEV: i32 = 18;
/// `fmode_t` bits of `file.f_mode`, and `__FMODE_EXEC` as it stays in `file.f_flags`.
pub(crate) const FMODE_READ: u32 = 0x1;
pub(crate) const FMODE_WRITE: u32 = 0x2;
pub(crate) const FMODE_EXEC: u32 = 0x20;
pub(crate) const F_FLAGS_EXEC: u32 = 0x20;
/// `file.f_mode`: this open created the file.
pub(crate) const FMODE_CREATED: u32 = 0x10_0000;
/// `__O_TMPFILE`, as it stays in `file.f_flags`.
pub(crate) const F_FLAGS_TMPFILE: u32 = 0o2000_0000;
/// `path_rename` flag: both names stay and swap places.
pub(crate) const RENAME_EXCHANGE: u32 = 1 << 1;

macro_rules! offsets {
    ($($name:ident),* $(,)?) => {
        $(
            #[unsafe(no_mangle)]
            pub(crate) static $name: u32 = 0;
        )*
    };
}
offsets!(
    OFF_FILE_F_PATH,
    OFF_FILE_F_INODE,
    OFF_PATH_MNT,
    OFF_PATH_DENTRY,
    OFF_DENTRY_D_PARENT,
    OFF_DENTRY_D_NAME,
    OFF_DENTRY_D_INODE,
    OFF_QSTR_LEN,
    OFF_QSTR_NAME,
    OFF_INODE_I_INO,
    OFF_INODE_I_MODE,
    OFF_INODE_I_NLINK,
    OFF_INODE_I_SB,
    OFF_INODE_I_RDEV,
    OFF_SUPER_BLOCK_S_DEV,
    OFF_SUPER_BLOCK_S_MAGIC,
    OFF_VFSMOUNT_MNT_ROOT,
    OFF_MOUNT_MNT,
    OFF_MOUNT_MNT_PARENT,
    OFF_MOUNT_MNT_MOUNTPOINT,
    OFF_MOUNT_MNT_NS,
    OFF_MNT_NAMESPACE_NS,
    OFF_NS_COMMON_INUM,
    OFF_FILE_F_MODE,
    OFF_FILE_F_FLAGS,
    OFF_LINUX_BINPRM_FILE,
    OFF_TASK_STRUCT_TGID,
    OFF_INODE_I_FLAGS,
    OFF_SUPER_BLOCK_S_FLAGS,
    OFF_TASK_STRUCT_CGROUPS,
    OFF_CSS_SET_DFL_CGRP,
    OFF_CGROUP_LEVEL,
    OFF_CGROUP_ANCESTORS,
    OFF_CGROUP_KN,
    OFF_KERNFS_NODE_ID,
    OFF_FILE_F_OWNER,
    OFF_PROC_INODE_VFS_INODE,
    OFF_PROC_INODE_PDE,
    OFF_PROC_INODE_SYSCTL,
    OFF_SOCKET_SK,
    OFF_SOCK_SK_CGRP_DATA,
    OFF_SOCK_CGROUP_DATA_CGROUP,
    OFF_SOCK_SK_PEER_PID,
    OFF_PID_NUMBERS,
    OFF_UPID_NR,
    OFF_UNIX_SOCK_ADDR,
    OFF_UNIX_SOCK_PATH,
    OFF_UNIX_SOCK_PEER,
    OFF_UNIX_ADDRESS_LEN,
    OFF_UNIX_ADDRESS_NAME,
    OFF_INODE_I_PRIVATE,
    OFF_KERNFS_NODE_PRIV,
    OFF_CGROUP_ROOT,
    OFF_CGROUP_ROOT_FLAGS,
    OFF_TASK_STRUCT_NSPROXY,
    OFF_NSPROXY_CGROUP_NS,
    OFF_CGROUP_NAMESPACE_ROOT_CSET,
    // fp_common::kernel::OPTIONAL_FIELDS: the offset plus one, 0 where the kernel lacks it.
    OFF_FOWN_STRUCT_FILE,
);

/// cgroup v2 level of session cgroups (depth of the configured parent + 1): the session of a task
/// is its ancestor at this level.
#[unsafe(no_mangle)]
pub(crate) static SESSION_CGROUP_LEVEL: u32 = 0;

/// Addresses of the `rename_lock` and `mount_lock` sequences (fp_common::kernel::SEQ_COUNTERS),
/// for the verdict cache; 0 turns it off.
#[unsafe(no_mangle)]
pub(crate) static RENAME_SEQ: u64 = 0;
#[unsafe(no_mangle)]
pub(crate) static MOUNT_SEQ: u64 = 0;

/// BTF id of `struct seqcount` where the kernel has `bpf_rdonly_cast` and userspace made the
/// object's calls of it (fp_common::kernel::SEQCOUNT_BTF_ID); 0: [`read_sequence`] takes a
/// helper call.
#[unsafe(no_mangle)]
pub(crate) static SEQCOUNT_BTF_ID: u32 = 0;

/// The `sequence` of the `struct seqcount` at `at` (a plain number: [`RENAME_SEQ`] or
/// [`MOUNT_SEQ`]): one probing load through a `bpf_rdonly_cast` pointer where the kernel has the
/// kfunc (the verifier turns the call into a move), else a `bpf_probe_read_kernel` call, ~75
/// instructions, on every verdict cache hit.
#[inline(always)]
pub(crate) fn read_sequence(at: u64) -> Option<u32> {
    // A constant to the verifier (see `off`): the branch not taken is never verified, so on a
    // kernel without the kfunc its unrewritten call is dropped unseen.
    let btf_id = off(&SEQCOUNT_BTF_ID) as u32;
    if btf_id == 0 {
        return read(at, 0).ok();
    }
    // SAFETY: the number fp_common::kernel::RDONLY_CAST_CALL, which userspace rewrote into the
    // kfunc `bpf_rdonly_cast(void *obj, u32 btf_id)`, called as the helpers are (by number).
    let cast: unsafe extern "C" fn(u64, u32) -> u64 =
        unsafe { core::mem::transmute(RDONLY_CAST_CALL as usize) };
    // SAFETY: as above; the verifier checks the load against the struct's BTF and guards it.
    Some(load(unsafe { cast(at, btf_id) }, 0))
}

/// A `u64` read-only global, read as [`off`] reads offsets.
#[inline(always)]
pub(crate) fn global(g: &u64) -> u64 {
    // SAFETY: a read of our own read-only global (see `off`).
    unsafe { core::ptr::read_volatile(g) }
}

#[inline(always)]
pub(crate) fn off(global: &u32) -> usize {
    // SAFETY: a read of our own read-only global; volatile so the compiler keeps the load that the
    // loader's value replaces.
    unsafe { core::ptr::read_volatile(global) as usize }
}

/// A field of a kernel object the program holds a BTF-typed pointer to (a hook's argument, or a
/// pointer loaded from one with this function): one load, which the verifier checks against the
/// kernel's BTF at the offset userspace resolved from it (a read-only global, so a constant to the
/// verifier), instead of a `bpf_probe_read_kernel` helper call. A load that faults reads 0 (the
/// verifier turns it into a probing load): callers treat 0 as unreadable where it matters.
/// Never on a plain number ([`read`] is for those: map values, pointers read with helpers).
#[inline(always)]
pub(crate) fn load<T: Copy>(typed: u64, offset: usize) -> T {
    // SAFETY: the verifier checks the access against the kernel's BTF and guards it.
    unsafe { core::ptr::read_volatile((typed as *const u8).add(offset) as *const T) }
}

/// The mount and dentry of a BTF-typed `struct path *`, with [`load`] (0 for one it could not
/// read).
#[inline(always)]
pub(crate) fn path_parts(path: u64) -> (u64, u64) {
    (load(path, off(&OFF_PATH_MNT)), load(path, off(&OFF_PATH_DENTRY)))
}

/// The `struct path` inside a BTF-typed `struct file *` (BTF-typed too).
#[inline(always)]
pub(crate) fn file_path(file: u64) -> u64 {
    file + off(&OFF_FILE_F_PATH) as u64
}

#[inline(always)]
pub(crate) fn read<T: Copy>(base: u64, offset: usize) -> Result<T, ()> {
    // SAFETY: bpf_probe_read_kernel checks the address; failures surface as Err.
    unsafe { aya_ebpf::helpers::bpf_probe_read_kernel((base as usize + offset) as *const T) }
        .map_err(|_| ())
}

pub(crate) use fp_common::floor::PROC_SUPER_MAGIC;
/// `mount.mnt_ns` of kernel-internal mounts: `ERR_PTR(-EINVAL)`.
pub(crate) const MNT_NS_INTERNAL: u64 = -22i64 as u64;

/// The inode of a dentry (0 for a negative one) and whether it is a directory.
#[inline(always)]
pub(crate) fn dentry_kind(dentry: u64) -> Result<(u64, bool), ()> {
    let inode: u64 = read(dentry, off(&OFF_DENTRY_D_INODE))?;
    if inode == 0 {
        return Ok((0, false));
    }
    let mode: u16 = read(inode, off(&OFF_INODE_I_MODE))?;
    Ok((inode, mode & S_IFMT == S_IFDIR))
}

/// Whether a dentry is a file other than a directory with more than one link: another of its
/// names may lie anywhere on its filesystem. True if unreadable (fail closed); false for a
/// negative dentry (a name being created).
#[inline(always)]
pub(crate) fn several_links(dentry: u64) -> bool {
    match dentry_kind(dentry) {
        Ok((0, _) | (_, true)) => false,
        Ok((inode, false)) => read::<u32>(inode, off(&OFF_INODE_I_NLINK)).map_or(true, |n| n > 1),
        Err(()) => true,
    }
}

const S_IFMT: u16 = 0o170000;
const S_IFDIR: u16 = 0o040000;

/// `super_block.s_flags`: a pseudo filesystem userspace cannot mount (`init_pseudo`: pidfs, nsfs,
/// anon inodes, sockets, pipes).
const SB_NOUSER: u64 = 1 << 31;
/// `inode.i_flags`: an inode of the kernel's own, outside every permission check
/// (`security_inode_permission` skips it).
const S_PRIVATE: u32 = 1 << 9;

/// Whether the file of the BTF-typed `struct inode *` (a `struct file`'s `f_inode`) is no path
/// object: the inode is private or lies on a filesystem no mount table can show (Landlock's
/// `is_nouser_or_private`). Such files have no path a rule could name, and opening one grants
/// nothing by itself (signals, fds and namespaces of a pidfd's process are each checked by
/// their own hook); since 6.9 every pidfd is opened through file_open (pidfs), `pidfd_open` and
/// `clone3(CLONE_PIDFD)` alike.
#[inline(always)]
pub(crate) fn pseudo_file(inode: u64) -> bool {
    let sb: u64 = load(inode, off(&OFF_INODE_I_SB));
    inode != 0
        && (load::<u32>(inode, off(&OFF_INODE_I_FLAGS)) & S_PRIVATE != 0
            || sb != 0 && load::<u64>(sb, off(&OFF_SUPER_BLOCK_S_FLAGS)) & SB_NOUSER != 0)
}

/// (inode number, device) of a `struct inode *`, the identity inode-table rules and events use.
#[inline(always)]
pub(crate) fn inode_identity(inode: u64) -> Result<(u64, u32), ()> {
    let ino: u64 = read(inode, off(&OFF_INODE_I_INO))?;
    let sb: u64 = read(inode, off(&OFF_INODE_I_SB))?;
    let dev: u32 = read(sb, off(&OFF_SUPER_BLOCK_S_DEV))?;
    Ok((ino, dev))
}

/// [`inode_identity`] of a BTF-typed `struct inode *`, with [`load`] (a device of 0: unreadable).
#[inline(always)]
pub(crate) fn loaded_identity(inode: u64) -> (u64, u32) {
    let sb: u64 = load(inode, off(&OFF_INODE_I_SB));
    (load(inode, off(&OFF_INODE_I_INO)), load(sb, off(&OFF_SUPER_BLOCK_S_DEV)))
}

/// (inode number, device) of a dentry.
#[inline(always)]
pub(crate) fn dentry_identity(dentry: u64) -> Result<(u64, u32), ()> {
    inode_identity(read(dentry, off(&OFF_DENTRY_D_INODE))?)
}

/// (inode number, device) of a `struct path *`.
#[inline(always)]
pub(crate) fn path_identity(path: u64) -> Result<(u64, u32), ()> {
    dentry_identity(read(path, off(&OFF_PATH_DENTRY))?)
}

/// The device of a `struct super_block *` (inode number 0: the filesystem as a whole).
#[inline(always)]
pub(crate) fn sb_identity(sb: u64) -> Result<(u64, u32), ()> {
    Ok((0, read(sb, off(&OFF_SUPER_BLOCK_S_DEV))?))
}
