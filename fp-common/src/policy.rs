//! The kernel-side decision core: the table types the policy compiler fills and the BPF programs
//! read, and [`evaluate`], the one function that turns table hits into a verdict.
//!
//! Semantics (the compiler in `fp_agent::policy` guarantees them):
//! - every table entry carries, per op, a `rank`; among all entries that match a path the one with
//!   the highest rank decides. The rank encodes layer (floors above user rules above the runtime
//!   base), tier, specificity and strictness, so "strictest tier wins" (schema v1) and "most
//!   specific glob wins, strictest on a tie" (schema v2) are both just "highest rank wins";
//! - an entry whose verdict is [`TableVerdict::Defer`] stands for a rule the kernel cannot match
//!   exactly: if it outranks every decided hit the answer is Defer ("ask userspace");
//! - no hit at all gives the session's default verdict for the op (rank 0).
//!
//! `evaluate` is written for the BPF verifier: constant loop bounds, no recursion, no panicking
//! operations, no allocation and a small stack.

/// Longest path the kernel hands to [`evaluate`] (PATH_MAX, without the NUL).
pub const MAX_PATH: usize = 4096;
/// Bytes of path stored in an LPM key: 256 bytes of key data minus the 8-byte session id.
pub const MAX_PREFIX: usize = 248;
/// Longest single component (NAME_MAX).
pub const MAX_COMPONENT: usize = 255;
/// Longest name, suffix or prefix stored in the name table.
pub const MAX_NAME: usize = 64;
/// Components the component-name lookups inspect: as many as a path of [`MAX_PATH`] bytes can
/// have, so every path the kernel resolves is evaluated in full (the bound exists for the
/// verifier; a deeper path would defer).
pub const MAX_DEPTH: usize = MAX_PATH / 2;
/// Rules sharing one name-table key; more become defer entries on their scope.
pub const NAME_SLOTS: usize = 4;
/// `rule_id` of a decision made by the session default rather than a rule.
pub const NO_RULE: u32 = u32::MAX;
/// Scope id meaning "anywhere" (no prefix check).
pub const ROOT_SCOPE: u16 = 0;

pub use crate::op::Op;

/// What the tables say about a (path, op).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TableVerdict {
    Allow = 0,
    Prompt = 1,
    Deny = 2,
    /// The kernel cannot decide exactly: ask userspace.
    Defer = 3,
}

impl TableVerdict {
    /// Order of strictness: Allow < Prompt < Defer < Deny. Defer ranks above Prompt because the
    /// exact evaluator may still deny what the kernel could not decide.
    pub const fn strictness(self) -> u8 {
        match self {
            TableVerdict::Allow => 0,
            TableVerdict::Prompt => 1,
            TableVerdict::Defer => 2,
            TableVerdict::Deny => 3,
        }
    }

    /// The stricter of two verdicts: what one operation that needs both accesses gets (an open
    /// for reading and writing needs read and write).
    pub const fn stricter(self, other: TableVerdict) -> TableVerdict {
        if other.strictness() > self.strictness() { other } else { self }
    }

    pub const fn name(self) -> &'static str {
        match self {
            TableVerdict::Allow => "allow",
            TableVerdict::Prompt => "prompt",
            TableVerdict::Deny => "deny",
            TableVerdict::Defer => "defer",
        }
    }

    /// Decodes a map byte; anything unknown is Deny (fail closed).
    pub const fn from_u8(v: u8) -> Self {
        match v {
            0 => TableVerdict::Allow,
            1 => TableVerdict::Prompt,
            3 => TableVerdict::Defer,
            _ => TableVerdict::Deny,
        }
    }
}

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
}

/// The session has basename (exact) entries.
pub const HEADER_BASENAMES: u8 = 1;
/// The session has directory-component entries.
pub const HEADER_DIRNAMES: u8 = 2;

/// The decision one entry carries for one op.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpEntry {
    /// 0 means "no rule for this op here".
    pub rank: u32,
    pub rule_id: u32,
    /// A `TableVerdict` byte.
    pub verdict: u8,
    pub _pad: [u8; 3],
}

impl OpEntry {
    /// Whether this entry beats `other`: higher rank wins; on equal rank a decided verdict beats
    /// Defer (equal rank means equal specificity and strictness, so both give the same verdict).
    pub fn outranks(&self, other: &OpEntry) -> bool {
        let defer = TableVerdict::Defer as u8;
        self.rank > other.rank
            || (self.rank == other.rank
                && self.rank != 0
                && other.verdict == defer
                && self.verdict != defer)
    }
}

/// LPM trie key data: session id then path bytes. The key's prefix length counts the session id's
/// 64 bits plus 8 bits per path byte. Entries are `P/` (everything under P) or `P\0` (P exactly).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PrefixKeyData {
    pub session_id: u64,
    pub path: [u8; MAX_PREFIX],
}

impl PrefixKeyData {
    /// The key for `path` (an entry's bytes, or the bytes looked up) in `session_id`, with its LPM
    /// prefix length in bits; None if `path` is longer than [`MAX_PREFIX`].
    pub fn new(session_id: u64, path: &[u8]) -> Option<(u32, Self)> {
        if path.len() > MAX_PREFIX {
            return None;
        }
        let mut key = PrefixKeyData { session_id, path: [0; MAX_PREFIX] };
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
}

impl NameKind {
    /// Indexed by the `kind` byte of a [`NameKey`].
    pub const ALL: [NameKind; 4] =
        [NameKind::Basename, NameKind::Dirname, NameKind::Suffix, NameKind::Prefix];
}

/// Name-table key. `name` is zero-padded; names never contain NUL.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NameKey {
    pub session_id: u64,
    pub kind: u8,
    pub len: u8,
    pub _pad: [u8; 6],
    pub name: [u8; MAX_NAME],
}

impl NameKey {
    /// The key for `name`, or None if it is longer than [`MAX_NAME`].
    pub fn new(session_id: u64, kind: NameKind, name: &[u8]) -> Option<Self> {
        if name.len() > MAX_NAME {
            return None;
        }
        let mut key = NameKey {
            session_id,
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
    /// The match must start at or below this scope ([`ROOT_SCOPE`]: anywhere).
    pub scope_id: u16,
    /// [`Op::bit`] mask of the ops this slot decides.
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

/// Scope-table key: a directory prefix that name entries are confined to.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ScopeKey {
    pub session_id: u64,
    pub scope_id: u16,
    pub _pad: [u8; 6],
}

/// A scope: `path[..len]` is an absolute directory path ending in `/`; `mask[i]` is 0xff for
/// `i < len` and 0 after, so the comparison needs no branch on `len` (see `in_scope`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScopeValue {
    pub len: u16,
    pub _pad: [u8; 6],
    pub path: [u8; MAX_PREFIX],
    pub mask: [u8; MAX_PREFIX],
}

impl ScopeValue {
    /// The scope `path` (at most [`MAX_PREFIX`] bytes, ending in `/`).
    pub fn new(path: &[u8]) -> Option<Self> {
        if path.len() > MAX_PREFIX {
            return None;
        }
        let mut scope = ScopeValue {
            len: path.len() as u16,
            _pad: [0; 6],
            path: [0; MAX_PREFIX],
            mask: [0; MAX_PREFIX],
        };
        for (i, b) in path.iter().enumerate() {
            scope.path[i] = *b;
            scope.mask[i] = 0xff;
        }
        Some(scope)
    }
}

/// Inode-table key: a rule's target by identity, so that aliases (bind mounts, other mount
/// namespaces, hardlinks made before the session, symlinked directories) match the rule too. `dev`
/// is the kernel's `s_dev` encoding (`major << 20 | minor`), not userspace's `st_dev`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InodeKey {
    pub session_id: u64,
    pub ino: u64,
    pub dev: u32,
    pub _pad: u32,
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

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all of these are repr(C), Copy, contain only integers and byte arrays, and have no
    // implicit padding (asserted below).
    unsafe impl aya::Pod for super::TableHeader {}
    unsafe impl aya::Pod for super::OpEntry {}
    unsafe impl aya::Pod for super::PrefixKeyData {}
    unsafe impl aya::Pod for super::PrefixValue {}
    unsafe impl aya::Pod for super::NameKey {}
    unsafe impl aya::Pod for super::NameSlot {}
    unsafe impl aya::Pod for super::NameValue {}
    unsafe impl aya::Pod for super::ScopeKey {}
    unsafe impl aya::Pod for super::ScopeValue {}
    unsafe impl aya::Pod for super::InodeKey {}
    unsafe impl aya::Pod for super::InodeValue {}
}

// No implicit padding: each size is the sum of its fields.
const _: () = {
    use core::mem::size_of;
    assert!(size_of::<TableHeader>() == 3 + 1 + 4 + 8 + 8);
    assert!(size_of::<OpEntry>() == 4 + 4 + 1 + 3);
    assert!(size_of::<PrefixKeyData>() == 8 + MAX_PREFIX);
    assert!(size_of::<PrefixKeyData>() == 256);
    assert!(size_of::<PrefixValue>() == 3 * 12 + 4);
    assert!(size_of::<NameKey>() == 8 + 1 + 1 + 6 + MAX_NAME);
    assert!(size_of::<NameSlot>() == 4 + 4 + 2 + 1 + 1);
    assert!(size_of::<NameValue>() == 4 + NAME_SLOTS * 12);
    assert!(size_of::<ScopeKey>() == 8 + 2 + 6);
    assert!(size_of::<ScopeValue>() == 2 + 6 + 2 * MAX_PREFIX);
    assert!(size_of::<InodeKey>() == 8 + 8 + 4 + 4);
    assert!(size_of::<InodeValue>() == 6 * 12);
};

/// Random access to the bytes of the path under evaluation. Userspace evaluates slices; the BPF
/// programs evaluate the path they assembled in map memory, read with indexes the verifier can
/// bound.
pub trait PathBytes {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The byte at `i`; only asked for `i < len()`.
    fn at(&self, i: usize) -> u8;
}

impl PathBytes for [u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }

    fn at(&self, i: usize) -> u8 {
        self.get(i).copied().unwrap_or(0)
    }
}

/// Lookups into one session's tables. Userspace implements it over the compiled tables, the BPF
/// programs over their maps (the tables id is part of every map key and hidden here).
pub trait RuleTables {
    type Path: PathBytes + ?Sized;
    /// The session header; None (unknown session) makes the evaluation deny.
    fn header(&self) -> Option<&TableHeader>;
    /// The longest LPM entry that is a byte prefix of `path` followed by NUL, looked up with at
    /// most [`MAX_PREFIX`] bytes of that key.
    fn longest_prefix(&self, path: &Self::Path) -> Option<&PrefixValue>;
    /// The name-table entry of `kind` for `path[start..start + len]` (`len <= MAX_NAME`).
    fn name(
        &self,
        kind: NameKind,
        path: &Self::Path,
        start: usize,
        len: usize,
    ) -> Option<&NameValue>;
    /// The scope with this id.
    fn scope(&self, scope_id: u16) -> Option<&ScopeValue>;
}

/// The tables' answer for one (path, op).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableDecision {
    pub verdict: TableVerdict,
    /// The deciding rule, or [`NO_RULE`] for the session default.
    pub rule_id: u32,
}

/// Steps [`evaluate`] needs at most: per component a scan and one step per name slot of its
/// directory-name entry, then per lookup on the final component (basename, each suffix and prefix
/// length) one step per slot, and the last.
pub const MAX_STEPS: usize = MAX_DEPTH * (1 + NAME_SLOTS) + (1 + 2 * MAX_NAME) * NAME_SLOTS + 2;

const PHASE_DONE: u32 = 0;
/// Find the end of the component at `cursor`.
const PHASE_SCAN: u32 = 1;
/// Pick the next lookup on the final component `cursor..end` (`lookup`, see [`next_lookup`]).
const PHASE_FINAL: u32 = 2;
/// Examine slot `slot` of the name entry (`name_kind`, `name_start`, `name_len`), then go on
/// with `resume`.
const PHASE_SLOT: u32 = 3;

/// Rank of a verdict the evaluation itself imposes (unresolvable or malformed input): above every
/// rule.
const FORCED: u32 = u32::MAX;

/// One evaluation of a path for all three ops at once, advanced a bounded piece of work at a
/// time by [`Evaluation::step`]: a component scan, or one name-table slot. One walk and one
/// evaluation answer every op an operation needs (an open for reading and writing, both names of
/// a rename). Plain integers only: the BPF programs keep it in map memory between the iterations
/// of a `bpf_loop`, so that each iteration is verified once, with no loop-carried state the
/// verifier would have to follow.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evaluation {
    /// The best hit so far per op (see [`OpEntry::outranks`]); rank 0 is the op's default.
    pub best: [OpEntry; 3],
    /// [`PrefixValue::id`] of the longest LPM match (0: none).
    pub prefix_id: u32,
    phase: u32,
    /// Start of the current component.
    cursor: u64,
    /// End of the current component (its '/' or the path's length).
    end: u64,
    /// Components scanned so far.
    depth: u64,
    /// Next final-component lookup: 0 basename, n in 1..=MAX_NAME suffix of length n,
    /// MAX_NAME + n prefix of length n.
    lookup: u64,
    /// The name entry being examined: `NameKind` byte, bytes of the path, next slot.
    name_kind: u64,
    name_start: u64,
    name_len: u64,
    slot: u64,
    /// Phase after the name entry: SCAN (of the next component) or FINAL.
    resume: u64,
}

/// The tables' answer for all three ops of one path.
pub type Decisions = [TableDecision; 3];

impl Evaluation {
    /// Starts evaluating `path` (absolute, normalized, no trailing NUL) for every op: the
    /// defaults, a `seed` hit per op found by other means (the kernel's inode-identity entries;
    /// rank 0 for none) and the LPM lookup. Name lookups, if the tables have names, are left to
    /// [`Self::step`].
    ///
    /// A path ending in '/' (`/a/b/`) evaluates what decides everything below the directory
    /// `/a/b` except the names of what lies below: its LPM entry and its own components as
    /// directory names (the context [`crate::refer`] compares when a directory moves).
    pub fn start<T: RuleTables>(tables: &T, path: &T::Path, seed: &[OpEntry; 3]) -> Self {
        let mut e = Evaluation {
            best: [OpEntry::default(); 3],
            prefix_id: 0,
            phase: PHASE_DONE,
            cursor: 1,
            end: 0,
            depth: 0,
            lookup: 0,
            name_kind: 0,
            name_start: 0,
            name_len: 0,
            slot: 0,
            resume: 0,
        };
        e.restart(tables, path, seed);
        e
    }

    /// [`Self::start`] in place: the BPF programs keep the evaluation in map memory, and a
    /// returned copy would cost as much stack as the caller may use.
    pub fn restart<T: RuleTables>(&mut self, tables: &T, path: &T::Path, seed: &[OpEntry; 3]) {
        let forced = OpEntry {
            rank: FORCED,
            rule_id: NO_RULE,
            verdict: TableVerdict::Deny as u8,
            _pad: [0; 3],
        };
        self.best = [forced; 3];
        self.prefix_id = 0;
        self.phase = PHASE_DONE;
        self.cursor = 1;
        self.end = 0;
        self.depth = 0;
        self.lookup = 0;
        self.name_kind = 0;
        self.name_start = 0;
        self.name_len = 0;
        self.slot = 0;
        self.resume = 0;
        let Some(header) = tables.header() else {
            return;
        };
        let len = path.len();
        if path.is_empty() || len > MAX_PATH || path.at(0) != b'/' {
            return;
        }
        let prefix = tables.longest_prefix(path);
        if let Some(value) = prefix {
            self.prefix_id = value.id;
        }
        for op in Op::ALL {
            let default = op.of(&header.defaults);
            *op.of_mut(&mut self.best) =
                OpEntry { rank: 0, rule_id: NO_RULE, verdict: default, _pad: [0; 3] };
            self.offer(op, op.at(seed));
            if let Some(value) = prefix {
                self.offer(op, op.at(&value.ops));
            }
        }
        let names = header.flags & (HEADER_BASENAMES | HEADER_DIRNAMES) != 0
            || header.suffix_lengths != 0
            || header.prefix_lengths != 0;
        if names {
            self.phase = PHASE_SCAN;
        }
    }

    /// Does one bounded piece of the evaluation; true once it is done.
    pub fn step<T: RuleTables>(&mut self, tables: &T, path: &T::Path) -> bool {
        match self.phase {
            PHASE_SCAN => self.scan(tables, path),
            PHASE_FINAL => self.final_lookup(tables),
            PHASE_SLOT => self.examine_slot(tables, path),
            _ => self.phase = PHASE_DONE,
        }
        self.phase == PHASE_DONE
    }

    /// The verdict for `op`: the best hit once done; Deny if asked before.
    pub fn decision(&self, op: Op) -> TableDecision {
        let best = op.of(&self.best);
        if self.phase != PHASE_DONE {
            return decision(TableVerdict::Deny, NO_RULE);
        }
        decision(TableVerdict::from_u8(best.verdict), best.rule_id)
    }

    /// Whether the evaluation has finished.
    pub fn done(&self) -> bool {
        self.phase == PHASE_DONE
    }

    /// The verdicts of all three ops.
    pub fn decisions(&self) -> Decisions {
        Op::ALL.map(|op| self.decision(op))
    }

    fn offer(&mut self, op: Op, candidate: &OpEntry) {
        let best = op.of_mut(&mut self.best);
        if candidate.outranks(best) {
            *best = *candidate;
        }
    }

    /// Stops with a verdict no rule can override.
    fn force(&mut self, verdict: TableVerdict) {
        let entry =
            OpEntry { rank: FORCED, rule_id: NO_RULE, verdict: verdict as u8, _pad: [0; 3] };
        self.best = [entry; 3];
        self.phase = PHASE_DONE;
    }

    /// Examines the name entry of `kind` for `path[start..start + len]`, slot by slot, then
    /// resumes with `resume`.
    fn examine_name(&mut self, kind: NameKind, start: usize, len: usize, resume: u32) {
        self.name_kind = kind as u64;
        self.name_start = start as u64;
        self.name_len = len as u64;
        self.slot = 0;
        self.resume = resume as u64;
        if len > MAX_NAME {
            self.resume_after_name();
        } else {
            self.phase = PHASE_SLOT;
        }
    }

    /// Goes on after a name entry: with the next component, or the next final lookup.
    fn resume_after_name(&mut self) {
        if self.resume == PHASE_SCAN as u64 {
            self.cursor = self.end + 1;
            self.phase = PHASE_SCAN;
        } else {
            self.phase = PHASE_FINAL;
        }
    }

    fn scan<T: RuleTables>(&mut self, tables: &T, path: &T::Path) {
        let Some(header) = tables.header() else {
            return self.force(TableVerdict::Deny);
        };
        let (start, len) = (self.cursor as usize, path.len());
        if start >= len {
            self.phase = PHASE_DONE;
            return;
        }
        if self.depth >= MAX_DEPTH as u64 {
            // A component beyond reach might match a name rule.
            return self.force(TableVerdict::Defer);
        }
        self.depth += 1;
        let Some(end) = component_end(path, start) else {
            return self.force(TableVerdict::Defer);
        };
        self.end = end as u64;
        if end >= len {
            self.lookup = 0;
            self.phase = PHASE_FINAL;
        } else if header.flags & HEADER_DIRNAMES != 0 {
            self.examine_name(NameKind::Dirname, start, end - start, PHASE_SCAN);
        } else {
            self.cursor = end as u64 + 1;
        }
    }

    /// Picks the next name lookup the header calls for on the final component.
    fn final_lookup<T: RuleTables>(&mut self, tables: &T) {
        let Some(header) = tables.header() else {
            return self.force(TableVerdict::Deny);
        };
        let start = self.cursor as usize;
        let len = (self.end as usize).wrapping_sub(start);
        match next_lookup(header, self.lookup, len) {
            Some((kind, at, n, next)) => {
                self.lookup = next;
                self.examine_name(kind, start + at, n, PHASE_FINAL);
            }
            None => self.phase = PHASE_DONE,
        }
    }

    /// Offers slot `self.slot` of the current name entry if it applies to the op and its scope
    /// contains the component at `self.cursor`; moves on to the next slot or to `resume`.
    fn examine_slot<T: RuleTables>(&mut self, tables: &T, path: &T::Path) {
        let kind = match NameKind::ALL.get(self.name_kind as usize) {
            Some(kind) => *kind,
            None => return self.force(TableVerdict::Deny),
        };
        let (start, len) = (self.name_start as usize, self.name_len as usize);
        let slot = self.slot as usize;
        let value = tables.name(kind, path, start, len);
        let count = value.map_or(0, |v| v.count as usize);
        if let Some(slot) = value.and_then(|v| v.slots.get(slot)).filter(|_| slot < count) {
            // The ops this slot could still decide.
            let mut wanted = 0u8;
            for op in Op::ALL {
                if slot.ops & op.bit() != 0 && slot.rank >= op.of(&self.best).rank {
                    wanted |= op.bit();
                }
            }
            let scope = match wanted {
                0 => Some(false),
                _ => in_scope(tables, slot.scope_id, path, self.cursor as usize),
            };
            let verdict = match scope {
                Some(true) => Some(slot.verdict),
                Some(false) => None,
                // A scope missing from the tables: the rule might apply; userspace decides.
                None => Some(TableVerdict::Defer as u8),
            };
            if let Some(verdict) = verdict {
                let candidate =
                    OpEntry { rank: slot.rank, rule_id: slot.rule_id, verdict, _pad: [0; 3] };
                for op in Op::ALL {
                    if wanted & op.bit() != 0 {
                        self.offer(op, &candidate);
                    }
                }
            }
        }
        self.slot += 1;
        if (self.slot as usize) >= count.min(NAME_SLOTS) {
            self.resume_after_name();
        }
    }
}

/// The final-component lookup at or after `from` that the header calls for, on a component of
/// `len` bytes: (kind, offset in the component, length, the `from` of the lookup after it).
/// Straight-line code (no loop), so that the BPF verifier sees one path per outcome.
fn next_lookup(
    header: &TableHeader,
    from: u64,
    len: usize,
) -> Option<(NameKind, usize, usize, u64)> {
    let max = MAX_NAME as u64;
    if from == 0 && header.flags & HEADER_BASENAMES != 0 {
        return Some((NameKind::Basename, 0, len, 1));
    }
    // Lengths 1..=len, as bits 0..len-1.
    let fits = if len >= 64 { u64::MAX } else { (1u64 << len) - 1 };
    let from = from.max(1);
    if from <= max {
        let remaining = header.suffix_lengths & fits & !((1u64 << (from - 1)) - 1);
        if remaining != 0 {
            let n = remaining.trailing_zeros() as u64 + 1;
            return Some((NameKind::Suffix, len - n as usize, n as usize, n + 1));
        }
    }
    let from = from.max(max + 1) - max;
    if from <= max {
        let remaining = header.prefix_lengths & fits & !((1u64 << (from - 1)) - 1);
        if remaining != 0 {
            let n = remaining.trailing_zeros() as u64 + 1;
            return Some((NameKind::Prefix, 0, n as usize, max + n + 1));
        }
    }
    None
}

const fn decision(verdict: TableVerdict, rule_id: u32) -> TableDecision {
    TableDecision { verdict, rule_id }
}

/// Evaluates `path` (absolute, normalized, no trailing NUL) for every op against one session's
/// tables, seeded with `seed` (inode-identity hits; `[OpEntry::default(); 3]` for none). A
/// trailing '/' asks for the context below a directory (see [`Evaluation::start`]).
pub fn evaluate_seeded<T: RuleTables>(
    tables: &T,
    path: &T::Path,
    seed: &[OpEntry; 3],
) -> Evaluation {
    let mut e = Evaluation::start(tables, path, seed);
    for _ in 0..MAX_STEPS {
        if e.step(tables, path) {
            break;
        }
    }
    e
}

/// Evaluates `path` (absolute, normalized, no trailing NUL) for every op.
pub fn evaluate_all<T: RuleTables>(tables: &T, path: &T::Path) -> Decisions {
    evaluate_seeded(tables, path, &[OpEntry::default(); 3]).decisions()
}

/// Evaluates `path` (absolute, normalized, no trailing NUL) for `op` against one session's tables.
pub fn evaluate<T: RuleTables>(tables: &T, path: &T::Path, op: Op) -> TableDecision {
    op.of(&evaluate_all(tables, path))
}

/// Index of the '/' ending the component at `start`, or the path's length; None if the component
/// is longer than NAME_MAX.
fn component_end<P: PathBytes + ?Sized>(path: &P, start: usize) -> Option<usize> {
    let len = path.len();
    for i in 0..=MAX_COMPONENT {
        let at = start + i;
        if at >= len || path.at(at) == b'/' {
            return Some(at);
        }
    }
    None
}

/// Whether `path` starts with the scope and the component at `start` lies at or below it; None
/// if the scope is missing or malformed.
fn in_scope<T: RuleTables>(
    tables: &T,
    scope_id: u16,
    path: &T::Path,
    start: usize,
) -> Option<bool> {
    if scope_id == ROOT_SCOPE {
        return Some(true);
    }
    let scope = tables.scope(scope_id)?;
    let len = scope.len as usize;
    if len > MAX_PREFIX {
        return None;
    }
    if start < len {
        return Some(false);
    }
    // A fixed trip count, no early exit and no branch: the BPF verifier then walks it once with
    // every index known (a loop bounded by `len` becomes a counter it cannot relate to the
    // pointer it advances, and a branch per byte multiplies its states).
    let mut differs = 0u8;
    for i in 0..MAX_PREFIX {
        differs |= (path.at(i) ^ scope.path[i]) & scope.mask[i];
    }
    Some(differs == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tables with one header and at most one name entry and scope, for the fail-closed cases.
    struct Tiny {
        header: Option<TableHeader>,
        name: Option<NameValue>,
    }

    impl RuleTables for Tiny {
        type Path = [u8];
        fn header(&self) -> Option<&TableHeader> {
            self.header.as_ref()
        }
        fn longest_prefix(&self, _: &[u8]) -> Option<&PrefixValue> {
            None
        }
        fn name(
            &self,
            kind: NameKind,
            path: &[u8],
            start: usize,
            len: usize,
        ) -> Option<&NameValue> {
            let name = path.get(start..start + len)?;
            (kind == NameKind::Basename && name == b".env").then_some(self.name.as_ref()?)
        }
        fn scope(&self, _: u16) -> Option<&ScopeValue> {
            None
        }
    }

    fn header(flags: u8) -> TableHeader {
        TableHeader {
            defaults: [TableVerdict::Allow as u8; 3],
            flags,
            _pad: [0; 4],
            suffix_lengths: 0,
            prefix_lengths: 0,
        }
    }

    #[test]
    fn unknown_session_denies() {
        let t = Tiny { header: None, name: None };
        assert_eq!(evaluate(&t, b"/x", Op::Read).verdict, TableVerdict::Deny);
    }

    #[test]
    fn relative_or_overlong_paths_deny() {
        let t = Tiny { header: Some(header(0)), name: None };
        assert_eq!(evaluate(&t, b"x", Op::Read).verdict, TableVerdict::Deny);
        assert_eq!(evaluate(&t, &[b'/'; MAX_PATH + 1], Op::Read).verdict, TableVerdict::Deny);
        assert_eq!(evaluate(&t, b"/x", Op::Read).verdict, TableVerdict::Allow);
    }

    #[test]
    fn unknown_verdict_byte_is_deny() {
        assert_eq!(TableVerdict::from_u8(7), TableVerdict::Deny);
    }

    #[test]
    fn missing_scope_defers() {
        let mut value = NameValue { count: 1, ..NameValue::default() };
        value.slots[0] = NameSlot {
            rank: 5,
            rule_id: 1,
            scope_id: 9,
            ops: Op::Read.bit(),
            verdict: TableVerdict::Deny as u8,
        };
        let t = Tiny { header: Some(header(HEADER_BASENAMES)), name: Some(value) };
        assert_eq!(evaluate(&t, b"/a/.env", Op::Read).verdict, TableVerdict::Defer);
        assert_eq!(evaluate(&t, b"/a/.env", Op::Write).verdict, TableVerdict::Allow);
    }

    #[test]
    fn deep_paths_evaluate_and_overlong_components_defer_when_names_are_in_play() {
        let t = Tiny { header: Some(header(HEADER_DIRNAMES)), name: None };
        let deep = b"/d".repeat(MAX_PATH / 2);
        assert_eq!(evaluate(&t, &deep, Op::Read).verdict, TableVerdict::Allow);
        let mut long = b"/".to_vec();
        long.extend([b'n'; MAX_COMPONENT + 1]);
        assert_eq!(evaluate(&t, &long, Op::Read).verdict, TableVerdict::Defer);
    }
}
