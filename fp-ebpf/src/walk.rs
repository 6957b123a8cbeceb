//! The path walk: from a dentry (and its mount) up to the root of the mount tree, one bpf_loop
//! step per name or mount crossing, building the path backwards in the scratch buffer and
//! collecting inode-table hits on the way.
use aya_ebpf::helpers::{bpf_get_current_pid_tgid, generated::bpf_probe_read_kernel_str};
use core::ffi::c_void;
use fp_common::{
    kernel::PATH_MAX,
    policy::{InodeKey, Op, may_have_inode},
};

use crate::{
    kernel::{
        MNT_NS_INTERNAL, OFF_DENTRY_D_INODE, OFF_DENTRY_D_NAME, OFF_DENTRY_D_PARENT,
        OFF_INODE_I_INO, OFF_INODE_I_SB, OFF_MNT_NAMESPACE_NS, OFF_MOUNT_MNT,
        OFF_MOUNT_MNT_MOUNTPOINT, OFF_MOUNT_MNT_NS, OFF_MOUNT_MNT_PARENT, OFF_NS_COMMON_INUM,
        OFF_QSTR_LEN, OFF_QSTR_NAME, OFF_SUPER_BLOCK_S_DEV, OFF_SUPER_BLOCK_S_MAGIC,
        OFF_VFSMOUNT_MNT_ROOT, PROC_SUPER_MAGIC, off, read,
    },
    state::{
        SCRATCH,
        walk::{LOCAL_KNOWN, LOCAL_NONE, LOCAL_PENDING, NO_MOUNT, RESOLVED, UNRESOLVED, Walk},
    },
    tables::INODES,
};

/// One step of the walk towards the root of the mount tree: either cross from a mount's root to
/// its mountpoint, or check the current dentry's inode and prepend its name. bpf_loop callback:
/// returns 0 to continue, 1 to stop.
pub(crate) extern "C" fn walk_step(_index: u64, _ctx: *mut c_void) -> i64 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return 1;
    };
    // SAFETY: per-CPU scratch, used by one program invocation at a time on this CPU.
    let s = unsafe { &mut *s };
    match step(&mut s.walk, &mut s.path) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(()) => {
            s.walk.state = UNRESOLVED;
            1
        }
    }
}

/// Offers the inode-table entry of (`ino`, `dev`) for every op: the file's own entries at depth
/// 0, the subtree entries above it (and, for the context below a directory, its own).
#[inline(always)]
fn offer_inode(w: &mut Walk, ino: u64, dev: u32) {
    if !may_have_inode(w.inode_devices, dev) {
        return;
    }
    let key = InodeKey { tables_id: w.tables, ino, dev, _pad: 0 };
    // SAFETY: a read of the map value.
    let Some(value) = (unsafe { INODES.get(&key) }) else {
        return;
    };
    let own = if w.depth == 0 { &value.this } else { &value.below };
    for op in Op::ALL {
        let (own, below) = (op.of(own), op.of(&value.below));
        if own.outranks(&op.of(&w.hit)) {
            *op.of_mut(&mut w.hit) = own;
        }
        if below.outranks(&op.of(&w.below)) {
            *op.of_mut(&mut w.below) = below;
        }
    }
    if w.depth == 0 {
        return;
    }
    for op in Op::ALL {
        let below = op.of(&value.below);
        if below.outranks(&op.of(&w.up)) {
            *op.of_mut(&mut w.up) = below;
        }
    }
}

#[inline(always)]
fn step(w: &mut Walk, path: &mut [u8; 2 * PATH_MAX]) -> Result<bool, ()> {
    let parent: u64 = read(w.dentry, off(&OFF_DENTRY_D_PARENT))?;
    // Identity first, also of mount roots: a bind mount of a rule's directory has it as root.
    let inode: u64 = read(w.dentry, off(&OFF_DENTRY_D_INODE))?;
    let mut sb = 0u64;
    if inode != 0 {
        let ino: u64 = read(inode, off(&OFF_INODE_I_INO))?;
        sb = read(inode, off(&OFF_INODE_I_SB))?;
        let dev: u32 = read(sb, off(&OFF_SUPER_BLOCK_S_DEV))?;
        if w.ino == 0 {
            (w.ino, w.dev) = (ino, dev as u64);
        }
        if w.depth == 0 {
            w.inode = inode;
        }
        if w.depth == 1 {
            w.dir_inode = inode;
        }
        offer_inode(w, ino, dev);
    }
    let mut own_proc_dir = false;
    if w.vfsmount == NO_MOUNT {
        // Inode hooks: the walk ends at the root of the file's filesystem.
        if w.dentry == parent {
            w.state = RESOLVED;
            return Ok(false);
        }
    } else {
        let mnt_root: u64 = read(w.vfsmount, off(&OFF_VFSMOUNT_MNT_ROOT))?;
        // A directory at the root of a procfs mount: maybe the task's own /proc/<tgid>.
        own_proc_dir = sb != 0
            && parent == mnt_root
            && w.dentry != mnt_root
            && read::<u64>(sb, off(&OFF_SUPER_BLOCK_S_MAGIC))? == PROC_SUPER_MAGIC;
        if own_proc_dir {
            w.per_task = 1;
        }
        if w.dentry != mnt_root && w.dentry == parent {
            // Its own parent but not its mount's root: disconnected from the mount tree (e.g.
            // reached through open_by_handle_at), so it has no path from the root.
            w.state = UNRESOLVED;
            return Ok(false);
        }
        if w.dentry == mnt_root {
            if w.depth == 1 {
                w.dir = 0;
            }
            if w.local_state == LOCAL_PENDING {
                // Every dentry an inode hook's walk of this file would offer has been offered.
                w.local_state = if parent == w.dentry { LOCAL_KNOWN } else { LOCAL_NONE };
                w.local = w.hit;
                w.local_up = w.up;
            }
            let parent_mount: u64 = read(w.mount, off(&OFF_MOUNT_MNT_PARENT))?;
            if parent_mount == w.mount {
                // The top of the file's mount tree, where its path starts: the root of a mount
                // namespace, or a kernel-internal mount (pipes, sockets, memfd). A detached
                // tree — lazily unmounted (no namespace), or a clone from open_tree(2) or
                // fsmount(2) in an anonymous namespace (one without an nsfs inode number) —
                // gives paths relative to some directory, which rules on real paths would miss.
                let ns: u64 = read(w.mount, off(&OFF_MOUNT_MNT_NS))?;
                let inum = off(&OFF_MNT_NAMESPACE_NS) + off(&OFF_NS_COMMON_INUM);
                if ns == 0 || (ns != MNT_NS_INTERNAL && read::<u32>(ns, inum)? == 0) {
                    return Err(());
                }
                w.state = RESOLVED;
                return Ok(false);
            }
            // The mountpoint is the same name as the mount's root: still the same depth.
            w.dentry = read(w.mount, off(&OFF_MOUNT_MNT_MOUNTPOINT))?;
            w.mount = parent_mount;
            w.vfsmount = parent_mount + off(&OFF_MOUNT_MNT) as u64;
            return Ok(true);
        }
    }
    let name_len: u32 = read(w.dentry, off(&OFF_DENTRY_D_NAME) + off(&OFF_QSTR_LEN))?;
    let name: u64 = read(w.dentry, off(&OFF_DENTRY_D_NAME) + off(&OFF_QSTR_NAME))?;
    let name_len = name_len as u64;
    // Keep at least one byte for the leading '/' of the whole path.
    if name_len > 255 || w.pos < name_len + 2 {
        return Err(());
    }
    let end = w.pos as usize;
    w.pos -= name_len;
    let at = (w.pos as usize) & (PATH_MAX - 1);
    // The _str variant takes a constant bound (a variable size loses its bounds on some
    // verifiers) and stops after the name's NUL, which lands on `end`: restored below.
    // SAFETY: at + 256 < 2 * PATH_MAX; the helper checks `name`.
    let copied = unsafe {
        bpf_probe_read_kernel_str(
            (path.as_mut_ptr() as usize + at) as *mut c_void,
            256,
            name as *const c_void,
        )
    };
    // A name that changed under us (concurrent rename) has another length: fail closed.
    if copied != name_len as i64 + 1 {
        return Err(());
    }
    // The task's own /proc/<tgid> is named as the task reached it, /proc/self, so that rules
    // on /proc/self (the runtime base) match. Other processes' directories keep their number.
    if own_proc_dir && is_current_tgid(path, at, name_len as usize) {
        if end < 6 {
            return Err(());
        }
        w.pos = (end - 4) as u64;
        for (i, b) in b"self".iter().enumerate() {
            // SAFETY: in bounds by the mask.
            unsafe { *path.get_unchecked_mut((w.pos as usize + i) & (PATH_MAX - 1)) = *b };
        }
    }
    let restored = if end == PATH_MAX { 0 } else { b'/' };
    // SAFETY: indices in bounds by the masks.
    unsafe {
        *path.get_unchecked_mut(end & (2 * PATH_MAX - 1)) = restored;
        w.pos -= 1;
        *path.get_unchecked_mut((w.pos as usize) & (PATH_MAX - 1)) = b'/';
    }
    // The file's directory, unless the file is a mount root (its siblings' first mount root
    // would be another).
    if w.depth == 0 && w.local_state == LOCAL_PENDING {
        (w.dir, w.dir_mount) = (parent, w.vfsmount);
    }
    w.dentry = parent;
    w.depth += 1;
    Ok(true)
}

/// Whether the `len` bytes at `at` in the path buffer are the current task's tgid in decimal.
#[inline(always)]
fn is_current_tgid(path: &[u8; 2 * PATH_MAX], at: usize, len: usize) -> bool {
    let mut tgid = bpf_get_current_pid_tgid() >> 32;
    if len == 0 || len > 10 {
        return false;
    }
    for k in 0..10 {
        if k >= len {
            break;
        }
        // SAFETY: in bounds by the mask.
        let digit = unsafe { *path.get_unchecked((at + len - 1 - k) & (2 * PATH_MAX - 1)) };
        if digit != b'0' + (tgid % 10) as u8 {
            return false;
        }
        tgid /= 10;
    }
    tgid == 0
}
