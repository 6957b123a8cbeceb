//! The name table: rules on a path component's name (basename, directory name, suffix, prefix),
//! up to [`NAME_SLOTS`] of them behind one key.
use super::{MAX_NAME, NAME_SLOTS};

/// Which component a name-table entry is compared with.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NameKind {
    /// The final component equals the name (`**/.env`).
    Basename = 0,
    /// A non-final component equals the name (`**/.ssh/**`).
    Dirname = 1,
    /// The final component ends with the name (`**/*.pem`).
    Suffix = 2,
    /// The final component starts with the name (`**/.env.*`).
    Prefix = 3,
    /// A non-final component ends with the name (`**/*.d/**`).
    DirSuffix = 4,
    /// A non-final component starts with the name (`/tmp/claude-*/**`).
    DirPrefix = 5,
}

impl NameKind {
    /// Indexed by the `kind` byte of a [`NameKey`].
    pub const ALL: [NameKind; 6] = [
        NameKind::Basename,
        NameKind::Dirname,
        NameKind::Suffix,
        NameKind::Prefix,
        NameKind::DirSuffix,
        NameKind::DirPrefix,
    ];

    /// Whether it is compared with a directory on the way (a non-final component): its hits
    /// are the same for every name in that directory.
    pub const fn is_directory(self) -> bool {
        matches!(self, NameKind::Dirname | NameKind::DirSuffix | NameKind::DirPrefix)
    }
}

/// Name-table key. `name` is zero-padded; names never contain NUL.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NameKey {
    /// The tables the entry belongs to (`SessionInfo::tables`).
    pub tables_id: u64,
    pub kind: u8,
    pub len: u8,
    pub _pad: [u8; 6],
    pub name: [u8; MAX_NAME],
}

impl NameKey {
    /// The key for `name`, or None if it is longer than [`MAX_NAME`].
    pub fn new(tables_id: u64, kind: NameKind, name: &[u8]) -> Option<Self> {
        if name.len() > MAX_NAME {
            return None;
        }
        let mut key = NameKey {
            tables_id,
            kind: kind as u8,
            len: name.len() as u8,
            _pad: [0; 6],
            name: [0; MAX_NAME],
        };
        for i in 0..MAX_NAME {
            match (key.name.get_mut(i), name.get(i)) {
                (Some(dst), Some(src)) => *dst = *src,
                _ => break,
            }
        }
        Some(key)
    }
}

/// One rule behind a name-table key.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NameSlot {
    pub rank: u32,
    pub rule_id: u32,
    /// The match must start at or below this scope ([`ROOT_SCOPE`](super::ROOT_SCOPE): anywhere).
    pub scope_id: u16,
    /// [`Op::bit`](super::Op::bit) mask of the ops this slot decides.
    pub ops: u8,
    /// A `TableVerdict` byte.
    pub verdict: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NameValue {
    pub count: u8,
    pub _pad: [u8; 3],
    pub slots: [NameSlot; NAME_SLOTS],
}
