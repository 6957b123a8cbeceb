//! The path walk's state (the walk itself is crate::walk).
use fp_common::{kernel::PATH_MAX, policy::OpEntry};

use crate::kernel::{OFF_MOUNT_MNT, off};

/// State of the dentry/mount walk. It lives in the per-CPU scratch map value, not on the stack:
/// the verifier tracks stack values precisely, so loop-carried state there never converges when
/// newer kernels (6.7+) re-verify bpf_loop callbacks. Plain integers only: LLVM may spill the
/// undefined payload of an enum, which the verifier rejects as an uninitialised read.
#[repr(C)]
pub(crate) struct Walk {
    pub(crate) tables: u64,
    /// The devices of the tables' inode-table entries (`SessionInfo::inode_devices`): the walk
    /// looks up `INODES` only for dentries on one of them.
    pub(crate) inode_devices: u64,
    pub(crate) vfsmount: u64,
    pub(crate) mount: u64,
    pub(crate) dentry: u64,
    /// Dentries visited; 0 while at the file itself.
    pub(crate) depth: u64,
    /// Start of the path in `Scratch::path`.
    pub(crate) pos: u64,
    /// End of the path: PATH_MAX, or PATH_MAX + 1 while a directory's trailing '/' is appended
    /// for its context (fp_common::policy::Evaluation::start).
    pub(crate) end: u64,
    /// Identity of the file itself (the first positive dentry; 0 until then).
    pub(crate) ino: u64,
    pub(crate) dev: u64,
    /// The best inode-table hit per op on the way, for the file itself (rank 0: none).
    pub(crate) hit: [OpEntry; 3],
    /// The same for what lies below the file as a directory (its own subtree entries count).
    pub(crate) below: [OpEntry; 3],
    pub(crate) state: u64,
    /// The file's own inode (0: a negative dentry), for the verdict cache.
    pub(crate) inode: u64,
    /// Nonzero when the path depends on the task (see [`crate::cache`]).
    pub(crate) per_task: u64,
    /// The inode-table hits of the file's own filesystem alone, which are what an inode hook
    /// ([`NO_MOUNT`]) decides by: `hit` as it stood at the file's mount root, if that root is its
    /// filesystem's root ([`LOCAL_KNOWN`]).
    pub(crate) local: [OpEntry; 3],
    pub(crate) local_state: u64,
    /// The hits of the dentries above the file (`hit` without the file's own entries), and the
    /// same as they stood with `local`: what its siblings share ([`crate::dirs`]).
    pub(crate) up: [OpEntry; 3],
    pub(crate) local_up: [OpEntry; 3],
    /// The file's directory, the mount it was reached in and its inode, when the walk went from
    /// the file to its parent within one mount, the file and the directory being no mount's
    /// root (0: the walk was of no use to [`crate::dirs`]).
    pub(crate) dir: u64,
    pub(crate) dir_mount: u64,
    pub(crate) dir_inode: u64,
    /// Nonzero: the file was resolved from its directory's entry (crate::dirs), not walked.
    pub(crate) in_dir: u64,
}

pub(crate) const WALKING: u64 = 0;
pub(crate) const RESOLVED: u64 = 1;
pub(crate) const UNRESOLVED: u64 = 2;

/// [`Walk::local_state`]: not at the first mount root yet; `local` holds the inode hook's hits;
/// the first mount root was not its filesystem's root (a bind mount of a directory).
pub(crate) const LOCAL_PENDING: u64 = 0;
pub(crate) const LOCAL_KNOWN: u64 = 1;
pub(crate) const LOCAL_NONE: u64 = 2;

/// `vfsmount` of hooks that get a dentry but no mount (inode_setattr, xattrs): their walk stops at
/// the root of the file's filesystem and only inode identity decides (docs/hooks.md).
pub(crate) const NO_MOUNT: u64 = 0;

/// The walk's state before its first step (also what [`crate::dirs::fp_dir_resolve`] starts from).
#[inline(always)]
pub(crate) unsafe fn start_walk(w: *mut Walk) {
    // SAFETY: the caller's scratch value. Field by field, as in `fp_check`.
    unsafe {
        let vfsmount = core::ptr::read_volatile(&(*w).vfsmount);
        (*w).mount = vfsmount.wrapping_sub(off(&OFF_MOUNT_MNT) as u64); // unused for NO_MOUNT
        (*w).depth = 0;
        (*w).pos = PATH_MAX as u64;
        (*w).end = PATH_MAX as u64;
        (*w).ino = 0;
        (*w).dev = 0;
        (*w).hit = [OpEntry::default(); 3];
        (*w).below = [OpEntry::default(); 3];
        (*w).state = WALKING;
        (*w).inode = 0;
        (*w).per_task = 0;
        (*w).local = [OpEntry::default(); 3];
        (*w).local_state = LOCAL_PENDING;
        (*w).up = [OpEntry::default(); 3];
        (*w).local_up = [OpEntry::default(); 3];
        (*w).dir = 0;
        (*w).dir_mount = 0;
        (*w).dir_inode = 0;
    }
}
