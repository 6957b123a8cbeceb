//! One session's tables as the kernel holds them (header, LPM prefixes, scopes, inodes) and the
//! lookups the evaluation makes into them.
use super::{MAX_PREFIX, NameKind, NameValue, OpEntry};

/// Per-session header: defaults and which name-table lookups are worth doing.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableHeader {
    /// Default verdict per op (indexed by `Op as usize`), a `TableVerdict` byte.
    pub defaults: [u8; 3],
    /// `HEADER_*` flags.
    pub flags: u8,
    pub _pad: [u8; 4],
    /// Bit `n - 1` set: some basename-suffix entry is `n` bytes long.
    pub suffix_lengths: u64,
    /// Bit `n - 1` set: some basename-prefix entry is `n` bytes long.
    pub prefix_lengths: u64,
    /// Bit `n - 1` set: some directory-suffix entry is `n` bytes long.
    pub dir_suffix_lengths: u64,
    /// Bit `n - 1` set: some directory-prefix entry is `n` bytes long.
    pub dir_prefix_lengths: u64,
    /// The name filter: the bit (`filter_bit`) of every name-table key is set, so a clear bit proves
    /// a lookup would find nothing (and it is skipped; a lookup costs far more than the bit).
    pub name_filter: [u64; NAME_FILTER_WORDS],
}

/// Words of [`TableHeader::name_filter`]: 4096 bits.
pub const NAME_FILTER_WORDS: usize = 64;

/// The filter bit of a name of `kind`: a hash of its kind, length and first, second and last
/// bytes (what an evaluation reads of a component with three masked loads).
fn filter_bit(kind: NameKind, len: usize, first: u8, second: u8, last: u8) -> usize {
    let word = (kind as u64)
        | ((len as u64 & 0xff) << 8)
        | ((first as u64) << 16)
        | ((second as u64) << 24)
        | ((last as u64) << 32);
    (word.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - 12)) as usize
}

impl TableHeader {
    /// Sets the filter bit of the name-table key (`kind`, `name`).
    pub fn admit_name(&mut self, kind: NameKind, name: &[u8]) {
        let at = |i: usize| if i < name.len() { name[i] } else { 0 };
        let bit = filter_bit(kind, name.len(), at(0), at(1), at(name.len().wrapping_sub(1)));
        if let Some(word) = self.name_filter.get_mut(bit / 64) {
            *word |= 1 << (bit % 64);
        }
    }

    /// False only if the name table has no entry of `kind` for `path[start..start + len]`.
    pub fn may_have_name<P: PathBytes + ?Sized>(
        &self,
        kind: NameKind,
        path: &P,
        start: usize,
        len: usize,
    ) -> bool {
        let at = |i: usize| if i < len { path.at(start + i) } else { 0 };
        let bit = filter_bit(kind, len, at(0), at(1), at(len.wrapping_sub(1)));
        self.name_filter.get(bit / 64).is_none_or(|word| word >> (bit % 64) & 1 != 0)
    }
}

/// The session has basename (exact) entries.
pub const HEADER_BASENAMES: u8 = 1;
/// The session has directory-component entries.
pub const HEADER_DIRNAMES: u8 = 2;

/// LPM trie key data: an id then path bytes. The key's prefix length counts the id's 64 bits plus
/// 8 bits per path byte. Entries are `P/` (everything under P) or `P\0` (P exactly).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PrefixKeyData {
    /// Whose entry it is: the tables id in `PREFIXES` and `INTERIOR`, the session's cgroup id in
    /// `GRANTS` (a grant outlives a reload's new tables).
    pub id: u64,
    pub path: [u8; MAX_PREFIX],
}

impl PrefixKeyData {
    /// The key for `path` (an entry's bytes, or the bytes looked up) under `id`, with its LPM
    /// prefix length in bits; None if `path` is longer than [`MAX_PREFIX`].
    pub fn new(id: u64, path: &[u8]) -> Option<(u32, Self)> {
        if path.len() > MAX_PREFIX {
            return None;
        }
        let mut key = PrefixKeyData { id, path: [0; MAX_PREFIX] };
        for i in 0..MAX_PREFIX {
            match (key.path.get_mut(i), path.get(i)) {
                (Some(dst), Some(src)) => *dst = *src,
                _ => break,
            }
        }
        Some((64 + 8 * path.len() as u32, key))
    }
}

/// LPM trie value: the compiler has already folded every shorter covering entry into it, so the
/// longest match alone answers.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefixValue {
    pub ops: [OpEntry; 3],
    /// Unique per entry of one session's tables (never 0): two paths whose longest match is the
    /// same entry see the same LPM entries and the same name scopes above them
    /// ([`crate::refer`] compares directories by it).
    pub id: u32,
}

/// Scope-table key: a directory prefix that name entries are confined to.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ScopeKey {
    pub tables_id: u64,
    pub scope_id: u16,
    pub _pad: [u8; 6],
}

/// A scope: `path[..len]` is an absolute directory path ending in `/`; `mask[i]` is 0xff for
/// `i < len` and 0 after, so the comparison needs no branch on `len` (see `in_scope`). Aligned
/// for word reads of `path` and `mask`.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScopeValue {
    pub len: u16,
    /// Nonzero: only the directory's own entries are in the scope, not what lies deeper (the
    /// rule `dir/prefix*`, whose `*` does not cross a `/`).
    pub children_only: u8,
    pub _pad: [u8; 5],
    pub path: [u8; MAX_PREFIX],
    pub mask: [u8; MAX_PREFIX],
}

impl ScopeValue {
    /// The scope `path` (at most [`MAX_PREFIX`] bytes, ending in `/`), of the directory's own
    /// entries only if `children_only`.
    pub fn new(path: &[u8], children_only: bool) -> Option<Self> {
        if path.len() > MAX_PREFIX {
            return None;
        }
        let mut scope = ScopeValue {
            len: path.len() as u16,
            children_only: children_only as u8,
            _pad: [0; 5],
            path: [0; MAX_PREFIX],
            mask: [0; MAX_PREFIX],
        };
        for (i, b) in path.iter().enumerate() {
            scope.path[i] = *b;
            scope.mask[i] = 0xff;
        }
        Some(scope)
    }

    /// `path[8 * w..8 * w + 8]` as a little-endian word ([`PathBytes::word`]'s order).
    #[inline(always)]
    pub fn path_word(&self, w: usize) -> u64 {
        word_at(&self.path, w)
    }

    /// `mask[8 * w..8 * w + 8]` as a little-endian word.
    #[inline(always)]
    pub fn mask_word(&self, w: usize) -> u64 {
        word_at(&self.mask, w)
    }
}

/// Word `w` of `bytes`, little-endian; 0 past the end.
#[inline(always)]
fn word_at(bytes: &[u8; MAX_PREFIX], w: usize) -> u64 {
    match bytes.get(8 * w..8 * w + 8).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
        Some(b) => u64::from_le_bytes(b),
        None => 0,
    }
}

/// Inode-table key: a rule's target by identity, so that aliases (bind mounts, other mount
/// namespaces, hardlinks made before the session, symlinked directories) match the rule too. `dev`
/// is the kernel's `s_dev` encoding (`major << 20 | minor`), not userspace's `st_dev`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InodeKey {
    pub tables_id: u64,
    pub ino: u64,
    pub dev: u32,
    pub _pad: u32,
}

/// The bit of device `dev` (an [`InodeKey`]'s) in a session's
/// [`crate::kernel::SessionInfo::inode_devices`].
pub fn device_bit(dev: u32) -> u64 {
    1 << ((dev as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58)
}

/// Whether an inode table whose entries' devices set the bits `devices` ([`device_bit`]) may have
/// an entry on `dev`: false proves a lookup there would find nothing.
pub fn may_have_inode(devices: u64, dev: u32) -> bool {
    devices & device_bit(dev) != 0
}

/// Inode-table value: the entries of the rules whose target this inode is. Only restrictive
/// verdicts (Prompt, Deny, Defer) are stored: an alias never gains what its path would not.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InodeValue {
    /// For the file itself (exact rules).
    pub this: [OpEntry; 3],
    /// For everything below this directory (subtree rules).
    pub below: [OpEntry; 3],
}

/// Random access to the bytes of the path under evaluation. Userspace evaluates slices; the BPF
/// programs evaluate the path they assembled in map memory, read with indexes the verifier can
/// bound.
pub trait PathBytes {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The byte at `i`; any byte at or past `len()` (callers mask it).
    fn at(&self, i: usize) -> u8;
    /// The bytes at `i..i + 8` as a little-endian word, for `i < MAX_PREFIX`; as with
    /// [`Self::at`], any bytes at or past `len()`.
    fn word(&self, i: usize) -> u64 {
        let mut bytes = [0; 8];
        for (k, byte) in bytes.iter_mut().enumerate() {
            *byte = self.at(i + k);
        }
        u64::from_le_bytes(bytes)
    }
}

impl PathBytes for [u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }

    fn at(&self, i: usize) -> u8 {
        self.get(i).copied().unwrap_or(0)
    }
}

/// A lookup whose key could not be built (the BPF programs copy the path's bytes with a helper,
/// which can fail): the evaluation denies rather than take it for "no entry".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unreadable;

/// The entry a key finds, if any, or [`Unreadable`].
pub type Lookup<'a, V> = Result<Option<&'a V>, Unreadable>;

/// Lookups into one session's tables. Userspace implements it over the compiled tables, the BPF
/// programs over their maps (the tables id is part of every map key and hidden here).
pub trait RuleTables {
    type Path: PathBytes + ?Sized;
    /// The session header; None (unknown session) makes the evaluation deny.
    fn header(&self) -> Option<&TableHeader>;
    /// The longest LPM entry that is a byte prefix of `path` followed by NUL, looked up with at
    /// most [`MAX_PREFIX`] bytes of that key.
    fn longest_prefix(&self, path: &Self::Path) -> Lookup<'_, PrefixValue>;
    /// The name-table entry of `kind` for `path[start..start + len]` (`len <= MAX_NAME`).
    fn name(
        &self,
        kind: NameKind,
        path: &Self::Path,
        start: usize,
        len: usize,
    ) -> Lookup<'_, NameValue>;
    /// The scope with this id.
    fn scope(&self, scope_id: u16) -> Option<&ScopeValue>;
}
