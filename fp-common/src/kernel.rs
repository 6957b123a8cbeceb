//! The ABI between the BPF programs and userspace: map keys and values, ring-buffer events, and the
//! names of the read-only globals that carry kernel struct offsets (resolved from BTF at load time).
//!
//! Bump [`ABI_VERSION`] whenever a layout here changes: pins live under a directory named after it,
//! so an agent never reuses maps written with another layout.

/// Version of the map/event layouts; part of the bpffs pin directory name.
pub const ABI_VERSION: u32 = 2;

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

macro_rules! hooks {
    ($($variant:ident = $value:literal, $name:literal;)*) => {
        /// LSM hook that produced an event. Its BPF program is `fp_<name>`, attached to
        /// `lsm/<name>` (see docs/hooks.md for the hook -> op table).
        #[repr(u8)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Hook {
            $($variant = $value,)*
        }

        impl Hook {
            pub const ALL: &[Hook] = &[$(Self::$variant,)*];

            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }

            fn default_program(self) -> &'static str {
                match self {
                    $(Self::$variant => concat!("fp_", $name),)*
                }
            }
        }
    };
}

hooks! {
    FileOpen = 1, "file_open";
    PathUnlink = 2, "path_unlink";
    PathMknod = 3, "path_mknod";
    PathRmdir = 4, "path_rmdir";
    PathMkdir = 5, "path_mkdir";
    PathSymlink = 6, "path_symlink";
    PathLink = 7, "path_link";
    PathRename = 8, "path_rename";
    PathTruncate = 9, "path_truncate";
    FileTruncate = 10, "file_truncate";
    PathChmod = 11, "path_chmod";
    PathChown = 12, "path_chown";
    InodeSetattr = 13, "inode_setattr";
    InodeSetxattr = 14, "inode_setxattr";
    InodeRemovexattr = 15, "inode_removexattr";
    InodeSetAcl = 16, "inode_set_acl";
    InodeRemoveAcl = 17, "inode_remove_acl";
    BprmCheckSecurity = 18, "bprm_check_security";
}

impl Hook {
    pub fn from_u8(v: u8) -> Option<Self> {
        Self::ALL.iter().copied().find(|h| *h as u8 == v)
    }

    /// Hooks that only some supported kernels have, because the operation they guard goes through
    /// another hook there: ftruncate and O_TRUNC reach path_truncate before 6.2, and POSIX ACLs
    /// reach inode_setxattr/inode_removexattr before 6.2.
    pub fn is_optional(self) -> bool {
        matches!(self, Self::FileTruncate | Self::InodeSetAcl | Self::InodeRemoveAcl)
    }

    /// BPF program for this hook on a kernel whose `bpf_lsm_<hook>` takes `params`: hooks whose
    /// arguments moved between kernels have one program per layout (an LSM program reads its
    /// arguments at constant offsets).
    pub fn program(self, params: &[&[u8]]) -> &'static str {
        match self {
            Self::InodeSetattr if params.first() == Some(&b"idmap".as_slice()) => {
                "fp_inode_setattr_idmap"
            }
            _ => self.default_program(),
        }
    }
}

/// What an operation does to the file it touches, as hooks report it. Read, write and delete share
/// their encoding with [`crate::policy::Op`]; exec is decided as a read ([`Op::policy_op`]).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read = 0,
    Write = 1,
    Delete = 2,
    Exec = 3,
}

impl Op {
    pub fn from_u8(v: u8) -> Option<Self> {
        [Self::Read, Self::Write, Self::Delete, Self::Exec].into_iter().find(|o| *o as u8 == v)
    }

    /// The policy op that decides this operation.
    pub const fn policy_op(self) -> crate::policy::Op {
        match self {
            Self::Read | Self::Exec => crate::policy::Op::Read,
            Self::Write => crate::policy::Op::Write,
            Self::Delete => crate::policy::Op::Delete,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Delete => "delete",
            Self::Exec => "exec",
        }
    }
}

/// `DenyEvent::flags`: the hook had no mount (inode hooks get only a dentry), so `path` is
/// relative to the root of the file's filesystem, not to the system root.
pub const EVENT_PATH_FS_RELATIVE: u8 = 1;

/// Why a program denied an operation.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DenyReason {
    /// The resolved path matched a deny prefix.
    PathRule = 1,
    /// The file or one of its ancestor directories is a denied inode (bind mounts, hardlinks).
    InodeRule = 2,
    /// The path could not be resolved completely (too long, disconnected, a read error, or the
    /// decision was interleaved with another on the same CPU): fail closed.
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
    /// [`Op`] of the operation.
    pub op: u8,
    /// `EVENT_*` bits.
    pub flags: u8,
    pub _pad: [u8; 4],
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
    OFF_FILE_F_MODE = "file"."f_mode";
    OFF_FILE_F_FLAGS = "file"."f_flags";
    OFF_LINUX_BINPRM_FILE = "linux_binprm"."file";
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
        assert_eq!(size_of::<DenyEvent>(), 8 + 8 + 6 * 4 + 4 + 4 + 16 + PATH_MAX);
    }

    #[test]
    fn hooks_and_ops_round_trip() {
        for h in Hook::ALL {
            assert_eq!(Hook::from_u8(*h as u8), Some(*h));
        }
        assert_eq!(Hook::from_u8(0), None);
        assert_eq!(Op::from_u8(Op::Exec as u8), Some(Op::Exec));
        assert_eq!(Op::from_u8(4), None);
        for op in [Op::Read, Op::Write, Op::Delete] {
            assert_eq!(op.policy_op() as u8, op as u8, "{op:?} shares the policy's encoding");
        }
        assert_eq!(Op::Exec.policy_op(), crate::policy::Op::Read);
        let unlink: &[&[u8]] = &[b"dir", b"dentry"];
        assert_eq!(Hook::PathUnlink.program(unlink), "fp_path_unlink");
        let setattr_6_1: &[&[u8]] = &[b"dentry", b"attr"];
        let setattr_6_12: &[&[u8]] = &[b"idmap", b"dentry", b"attr"];
        assert_eq!(Hook::InodeSetattr.program(setattr_6_1), "fp_inode_setattr");
        assert_eq!(Hook::InodeSetattr.program(setattr_6_12), "fp_inode_setattr_idmap");
    }

    #[test]
    fn walk_bounds_are_masks() {
        assert!(PATH_MAX.is_power_of_two());
    }
}
