//! The ABI between the BPF programs and userspace: map keys and values, ring-buffer events, and the
//! names of the read-only globals that carry kernel struct offsets (resolved from BTF at load time).
//!
//! Bump [`ABI_VERSION`] whenever a layout here changes: pins live under a directory named after it,
//! so an agent never reuses maps written with another layout.

/// Version of the map/event layouts; part of the bpffs pin directory name.
pub const ABI_VERSION: u32 = 1;

/// Longest path the programs resolve (bytes, without NUL). Longer paths are denied for session
/// processes, never matched on a truncated string.
pub const PATH_MAX: usize = 4096;

/// Steps of the dentry/mount walk (components plus mount crossings). Every component takes at
/// least two bytes ("/x"), so this covers any path shorter than PATH_MAX plus 64 mount crossings;
/// a walk that has not reached the root by then is denied for sessions.
pub const MAX_WALK: usize = PATH_MAX / 2 + 64;

/// Bytes of path stored in an LPM trie key: the kernel caps LPM key data at 256 bytes, 8 of which
/// hold the session id. Deny rules longer than this are refused when compiled.
pub const LPM_PATH_BYTES: usize = 248;

/// LSM hook that produced an event.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    FileOpen = 1,
    PathUnlink = 2,
    PathMknod = 3,
}

impl Hook {
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::FileOpen),
            2 => Some(Self::PathUnlink),
            3 => Some(Self::PathMknod),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::FileOpen => "file_open",
            Self::PathUnlink => "path_unlink",
            Self::PathMknod => "path_mknod",
        }
    }
}

/// Why a program denied an operation.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DenyReason {
    /// The resolved path matched a deny prefix.
    PathRule = 1,
    /// The file or one of its ancestor directories is a denied inode (bind mounts, hardlinks).
    InodeRule = 2,
    /// The path could not be resolved completely (too long, too deep, read error): fail closed.
    Unresolved = 3,
}

impl DenyReason {
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::PathRule),
            2 => Some(Self::InodeRule),
            3 => Some(Self::Unresolved),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::PathRule => "path-rule",
            Self::InodeRule => "inode-rule",
            Self::Unresolved => "unresolved-path",
        }
    }
}

/// Value of the `SESSIONS` map, keyed by the session's cgroup id. Counters are updated atomically
/// by the programs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SessionInfo {
    pub flags: u64,
    pub denied: u64,
    /// Events that did not fit in the ring buffer (surfaced as loss records).
    pub dropped: u64,
    pub unresolved: u64,
}

/// Key of the `DENY_PATHS` LPM trie: session id, then path bytes. A rule `P` is stored twice: as
/// `P\0` (the exact path: lookups append a NUL) and as `P/` (everything below it).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PathKey {
    pub session: u64,
    pub path: [u8; LPM_PATH_BYTES],
}

/// Key of the `DENY_INODES` map: a denied file or directory by identity. `dev` is the kernel's
/// `s_dev` encoding (`major << 20 | minor`), not userspace's `st_dev`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InodeKey {
    pub session: u64,
    pub ino: u64,
    pub dev: u32,
    pub _pad: u32,
}

/// A denial, sent through the `EVENTS` ring buffer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DenyEvent {
    pub session: u64,
    pub ino: u64,
    pub dev: u32,
    pub pid: u32,
    pub tgid: u32,
    pub uid: u32,
    pub gid: u32,
    /// Valid bytes of `path` (0 when the path was not resolved).
    pub path_len: u32,
    pub hook: u8,
    pub reason: u8,
    pub _pad: [u8; 6],
    pub comm: [u8; 16],
    pub path: [u8; PATH_MAX],
}

/// Kernel struct fields the programs read. Each becomes a read-only global `u32` in the BPF
/// object named `global`, holding the byte offset of `field` in `struct strukt`, resolved from the
/// running kernel's BTF. A dotted field walks nested members (anonymous unions included).
pub struct KernelField {
    pub global: &'static str,
    pub strukt: &'static str,
    pub field: &'static str,
}

macro_rules! kernel_fields {
    ($($global:ident = $strukt:literal . $field:literal;)*) => {
        pub const KERNEL_FIELDS: &[KernelField] = &[
            $(KernelField { global: stringify!($global), strukt: $strukt, field: $field },)*
        ];
    };
}

kernel_fields! {
    OFF_FILE_F_PATH = "file"."f_path";
    OFF_PATH_MNT = "path"."mnt";
    OFF_PATH_DENTRY = "path"."dentry";
    OFF_DENTRY_D_PARENT = "dentry"."d_parent";
    OFF_DENTRY_D_NAME = "dentry"."d_name";
    OFF_DENTRY_D_INODE = "dentry"."d_inode";
    OFF_QSTR_LEN = "qstr"."len";
    OFF_QSTR_NAME = "qstr"."name";
    OFF_INODE_I_INO = "inode"."i_ino";
    OFF_INODE_I_SB = "inode"."i_sb";
    OFF_SUPER_BLOCK_S_DEV = "super_block"."s_dev";
    OFF_VFSMOUNT_MNT_ROOT = "vfsmount"."mnt_root";
    OFF_MOUNT_MNT = "mount"."mnt";
    OFF_MOUNT_MNT_PARENT = "mount"."mnt_parent";
    OFF_MOUNT_MNT_MOUNTPOINT = "mount"."mnt_mountpoint";
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all of these are repr(C), Copy, with explicit padding and no invalid bit patterns.
    unsafe impl aya::Pod for super::SessionInfo {}
    unsafe impl aya::Pod for super::PathKey {}
    unsafe impl aya::Pod for super::InodeKey {}
    unsafe impl aya::Pod for super::DenyEvent {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::size_of;

    #[test]
    fn layouts_have_no_implicit_padding() {
        assert_eq!(size_of::<SessionInfo>(), 32);
        assert_eq!(size_of::<PathKey>(), 8 + LPM_PATH_BYTES);
        assert_eq!(size_of::<PathKey>(), 256, "LPM key data is capped at 256 bytes");
        assert_eq!(size_of::<InodeKey>(), 24);
        assert_eq!(size_of::<DenyEvent>(), 8 + 8 + 6 * 4 + 2 + 6 + 16 + PATH_MAX);
    }

    #[test]
    fn walk_bounds_are_masks() {
        assert!(PATH_MAX.is_power_of_two());
    }
}
