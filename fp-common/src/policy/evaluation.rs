//! The evaluation: one bounded walk of a path through a session's tables that answers every op.
use super::{
    Decisions, HEADER_BASENAMES, HEADER_DIRNAMES, MAX_COMPONENT, MAX_DEPTH, MAX_NAME, MAX_PATH,
    MAX_PREFIX, NAME_SLOTS, NO_RULE, NameKind, Op, OpEntry, PathBytes, PrefixValue, ROOT_SCOPE,
    RuleTables, TableDecision, TableHeader, TableVerdict,
};

/// Name lookups on one component at most: its exact name, then each suffix and prefix length.
const LOOKUPS: usize = 1 + 2 * MAX_NAME;

/// Bytes of a component one step scans for its end: a longer component takes more steps. The BPF
/// verifier walks every iteration of a bounded loop, and every exit of this one, once per program
/// that evaluates; a whole component (up to NAME_MAX) per step cost it about 10,000 instructions
/// per evaluation, where components are rarely longer than this.
const SCAN_CHUNK: usize = 32;

/// Steps that scan one component at most.
const SCAN_STEPS: usize = (MAX_COMPONENT + 1).div_ceil(SCAN_CHUNK);

/// Steps [`evaluate`] needs at most: per component its scan, then per name lookup on it (exact,
/// each suffix and prefix length; directories and the final component alike) a pick and one step
/// per slot, and the last.
pub const MAX_STEPS: usize = (MAX_DEPTH + 1) * (SCAN_STEPS + LOOKUPS * (1 + NAME_SLOTS)) + 1;

const PHASE_DONE: u32 = 0;
/// Find the end of the component at `cursor`.
const PHASE_SCAN: u32 = 1;
/// Go on finding it from `end`, where the last step stopped.
const PHASE_SCAN_ON: u32 = 5;
/// Pick the next lookup on the final component `cursor..end` (`lookup`, see [`next_lookup`]).
const PHASE_FINAL: u32 = 2;
/// Examine slot `slot` of the name entry (`name_kind`, `name_start`, `name_len`), then go on
/// with `resume`.
const PHASE_SLOT: u32 = 3;
/// Pick the next lookup on the directory component `cursor..end` (`lookup`, see
/// [`next_lookup`]), or go on with the next component.
const PHASE_DIR: u32 = 4;

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
    /// [`PrefixValue::id`](super::PrefixValue::id) of the longest LPM match (0: none).
    pub prefix_id: u32,
    phase: u32,
    /// Start of the current component.
    cursor: u64,
    /// End of the current component (its '/' or the path's length); while it is scanned
    /// (PHASE_SCAN_ON), where the scan goes on.
    end: u64,
    /// Components scanned so far.
    depth: u64,
    /// Next lookup on the current component: 0 its exact name, n in 1..=MAX_NAME suffix of
    /// length n, MAX_NAME + n prefix of length n.
    lookup: u64,
    /// The name entry being examined: `NameKind` byte, bytes of the path, next slot.
    name_kind: u64,
    name_start: u64,
    name_len: u64,
    slot: u64,
    /// Phase after the name entry: SCAN (of the next component), DIR (the next lookup on this
    /// directory) or FINAL.
    resume: u64,
    /// The best directory-name hit per op, whatever else was offered: with `cursor` and `depth`
    /// at the final component, what every name in the same directory shares ([`DirContext`]).
    dirs: [OpEntry; 3],
    /// 1 once the scan reached the final component.
    at_final: u64,
}

/// What the evaluation of a path learned above its final component, the same for every name in
/// that directory: the best directory-name hits of the directories on the way, where the final
/// component starts and how many components precede it. [`Evaluation::resume_below`] continues
/// the evaluation of a sibling's path from here, skipping the directories' scan.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirContext {
    pub dirs: [OpEntry; 3],
    /// Start of the final component: the directory's path is `path[..cursor - 1]`.
    pub cursor: u64,
    pub depth: u64,
}

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
            dirs: [OpEntry::default(); 3],
            at_final: 0,
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
        self.dirs = [OpEntry::default(); 3];
        self.at_final = 0;
        let Some(header) = tables.header() else {
            return;
        };
        let len = path.len();
        if path.is_empty() || len > MAX_PATH || path.at(0) != b'/' {
            return;
        }
        let Ok(prefix) = tables.longest_prefix(path) else {
            return; // denied, as forced above
        };
        if let Some(value) = prefix {
            self.prefix_id = value.id;
        }
        unnamed(&mut self.best, header, seed, prefix);
        let names = header.flags & (HEADER_BASENAMES | HEADER_DIRNAMES) != 0
            || header.suffix_lengths | header.prefix_lengths != 0
            || header.dir_suffix_lengths | header.dir_prefix_lengths != 0;
        if names {
            self.phase = PHASE_SCAN;
        }
    }

    /// Does one bounded piece of the evaluation; true once it is done.
    pub fn step<T: RuleTables>(&mut self, tables: &T, path: &T::Path) -> bool {
        match self.phase {
            PHASE_SCAN | PHASE_SCAN_ON => self.scan(tables, path),
            PHASE_FINAL => self.final_lookup(tables, path),
            PHASE_SLOT => self.examine_slot(tables, path),
            PHASE_DIR => match tables.header() {
                Some(header) => self.dir_lookup(header, path),
                None => self.force(TableVerdict::Deny),
            },
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

    /// What this finished evaluation shares with every path in the same directory; None when it
    /// did not reach the final component's lookups normally (a forced verdict, a path ending in
    /// '/').
    pub fn context(&self) -> Option<DirContext> {
        let forced = Op::ALL.iter().any(|op| op.of(&self.best).rank == FORCED);
        (self.phase == PHASE_DONE && self.at_final == 1 && !forced).then_some(DirContext {
            dirs: self.dirs,
            cursor: self.cursor,
            depth: self.depth.wrapping_sub(1),
        })
    }

    /// Continues an evaluation just [`Self::restart`]ed on a path whose directory is the one of
    /// `context` (the same bytes up to `context.cursor`) as if its directories had been scanned:
    /// their hits are offered and the scan goes on at the final component. The verdicts and
    /// deciding rules are those of the whole evaluation (the property test
    /// `sibling_evaluations_resume_exactly` in fp-agent's tests/policy_soundness.rs).
    pub fn resume_below(&mut self, context: &DirContext) {
        if self.phase != PHASE_SCAN {
            return; // a forced verdict, or tables without names: nothing to skip
        }
        self.cursor = context.cursor;
        self.depth = context.depth;
        self.dirs = context.dirs;
        for op in Op::ALL {
            self.offer(op, op.at(&context.dirs));
        }
    }

    /// The verdicts of all three ops.
    pub fn decisions(&self) -> Decisions {
        Op::ALL.map(|op| self.decision(op))
    }

    fn offer(&mut self, op: Op, candidate: &OpEntry) {
        offer(&mut self.best, op, candidate);
    }

    /// Stops with a verdict no rule can override.
    fn force(&mut self, verdict: TableVerdict) {
        let entry =
            OpEntry { rank: FORCED, rule_id: NO_RULE, verdict: verdict as u8, _pad: [0; 3] };
        self.best = [entry; 3];
        self.phase = PHASE_DONE;
    }

    /// Examines the name entry of `kind` for `path[start..start + len]`, slot by slot, then
    /// resumes with `resume`; at once if the header's filter proves there is none.
    fn examine_name<P: PathBytes + ?Sized>(
        &mut self,
        header: &TableHeader,
        path: &P,
        (kind, start, len): (NameKind, usize, usize),
        resume: u32,
    ) {
        self.name_kind = kind as u64;
        self.name_start = start as u64;
        self.name_len = len as u64;
        self.slot = 0;
        self.resume = resume as u64;
        if !admits(header, path, kind, start, len) {
            self.resume_after_name();
        } else {
            self.phase = PHASE_SLOT;
        }
    }

    /// Goes on after a name entry: with the next component, the next lookup on this directory,
    /// or the next final lookup.
    fn resume_after_name(&mut self) {
        if self.resume == PHASE_SCAN as u64 {
            self.cursor = self.end + 1;
            self.phase = PHASE_SCAN;
        } else if self.resume == PHASE_DIR as u64 {
            self.phase = PHASE_DIR;
        } else {
            self.phase = PHASE_FINAL;
        }
    }

    fn scan<T: RuleTables>(&mut self, tables: &T, path: &T::Path) {
        let Some(header) = tables.header() else {
            return self.force(TableVerdict::Deny);
        };
        let (start, len) = (self.cursor as usize, path.len());
        let from = if self.phase == PHASE_SCAN_ON {
            self.end as usize
        } else {
            if start >= len {
                self.phase = PHASE_DONE;
                return;
            }
            if self.depth >= MAX_DEPTH as u64 {
                // A component beyond reach might match a name rule.
                return self.force(TableVerdict::Defer);
            }
            self.depth += 1;
            start
        };
        let end = match component_end(path, start, from) {
            Scan::End(end) => end,
            Scan::From(next) => {
                self.end = next as u64;
                self.phase = PHASE_SCAN_ON;
                return;
            }
            Scan::TooLong => return self.force(TableVerdict::Defer),
        };
        self.end = end as u64;
        self.lookup = 0;
        if end >= len {
            self.at_final = 1;
            self.phase = PHASE_FINAL;
        } else {
            self.dir_lookup(header, path);
        }
    }

    /// Makes the next lookup the header calls for on the directory component `cursor..end`, or
    /// goes on with the next component. Without directory entries of any kind, a directory
    /// costs the scan step alone. Inlined: as a function of its own it would be a BPF subprogram
    /// whose frame adds to the programs' 512-byte combined stack.
    #[inline(always)]
    fn dir_lookup<P: PathBytes + ?Sized>(&mut self, header: &TableHeader, path: &P) {
        let start = self.cursor as usize;
        // The component's end as `scan` stored it, read back from memory (the BPF programs' map
        // memory): one unknown number to the verifier, not one constant per exit of
        // `component_end`'s loop, each of which it would follow through every lookup.
        let end = *core::hint::black_box(&self.end);
        let len = (end as usize).wrapping_sub(start);
        match next_lookup(Lookups::directory(header), self.lookup, len) {
            Some((kind, at, n, next)) => {
                self.lookup = next;
                // Straight to the next component unless directory suffixes or prefixes are
                // looked up: a policy without them pays no step per directory for them.
                let resume = match header.dir_suffix_lengths | header.dir_prefix_lengths {
                    0 => PHASE_SCAN,
                    _ => PHASE_DIR,
                };
                self.examine_name(header, path, (kind, start + at, n), resume);
            }
            None => {
                self.cursor = self.end + 1;
                self.phase = PHASE_SCAN;
            }
        }
    }

    /// Picks the next name lookup the header calls for on the final component.
    fn final_lookup<T: RuleTables>(&mut self, tables: &T, path: &T::Path) {
        let Some(header) = tables.header() else {
            return self.force(TableVerdict::Deny);
        };
        let start = self.cursor as usize;
        let len = (self.end as usize).wrapping_sub(start);
        match next_lookup(Lookups::last(header), self.lookup, len) {
            Some((kind, at, n, next)) => {
                self.lookup = next;
                self.examine_name(header, path, (kind, start + at, n), PHASE_FINAL);
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
        let Ok(value) = tables.name(kind, path, start, len) else {
            return self.force(TableVerdict::Deny);
        };
        let count = value.map_or(0, |v| v.count as usize);
        if let Some(slot) = value.and_then(|v| v.slots.get(slot)).filter(|_| slot < count) {
            // Whether the slot could still decide an op: in the whole evaluation, or (a
            // directory name) among the directories' hits, which siblings with other hits reuse.
            // One flag, not a set of ops: the verifier would follow each set apart (offers
            // below compare ranks again).
            let dirname = kind.is_directory();
            let mut wanted = false;
            for op in Op::ALL {
                let open = slot.rank >= op.of(&self.best).rank
                    || (dirname && slot.rank >= op.of(&self.dirs).rank);
                wanted |= slot.ops & op.bit() != 0 && open;
            }
            let scope = match wanted {
                false => Some(false),
                true => in_scope(tables, slot.scope_id, path, self.cursor as usize),
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
                    if slot.ops & op.bit() == 0 {
                        continue;
                    }
                    self.offer(op, &candidate);
                    let dirs = op.of_mut(&mut self.dirs);
                    if dirname && candidate.outranks(dirs) {
                        *dirs = candidate;
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

/// The lookups a component gets: (kind, lengths) of its exact name (if any entry has one), of its
/// suffixes and of its prefixes (bit `n - 1` of a length mask: some entry is `n` bytes long).
struct Lookups {
    exact: Option<NameKind>,
    suffix: (NameKind, u64),
    prefix: (NameKind, u64),
}

impl Lookups {
    /// On the final component.
    #[inline(always)]
    fn last(header: &TableHeader) -> Self {
        Lookups {
            exact: (header.flags & HEADER_BASENAMES != 0).then_some(NameKind::Basename),
            suffix: (NameKind::Suffix, header.suffix_lengths),
            prefix: (NameKind::Prefix, header.prefix_lengths),
        }
    }

    /// On a directory on the way.
    #[inline(always)]
    fn directory(header: &TableHeader) -> Self {
        Lookups {
            exact: (header.flags & HEADER_DIRNAMES != 0).then_some(NameKind::Dirname),
            suffix: (NameKind::DirSuffix, header.dir_suffix_lengths),
            prefix: (NameKind::DirPrefix, header.dir_prefix_lengths),
        }
    }
}

/// The lookup at or after `from` that `lookups` call for on a component of `len` bytes: (kind,
/// offset in the component, length, the `from` of the lookup after it). Straight-line code (no
/// loop), so that the BPF verifier sees one path per outcome.
#[inline(always)]
fn next_lookup(lookups: Lookups, from: u64, len: usize) -> Option<(NameKind, usize, usize, u64)> {
    let max = MAX_NAME as u64;
    if from == 0
        && let Some(kind) = lookups.exact
    {
        return Some((kind, 0, len, 1));
    }
    // Lengths 1..=len, as bits 0..len-1.
    let fits = if len >= 64 { u64::MAX } else { (1u64 << len) - 1 };
    let from = from.max(1);
    if from <= max {
        let remaining = lookups.suffix.1 & fits & !((1u64 << (from - 1)) - 1);
        if remaining != 0 {
            let n = remaining.trailing_zeros() as u64 + 1;
            return Some((lookups.suffix.0, len - n as usize, n as usize, n + 1));
        }
    }
    let from = from.max(max + 1) - max;
    if from <= max {
        let remaining = lookups.prefix.1 & fits & !((1u64 << (from - 1)) - 1);
        if remaining != 0 {
            let n = remaining.trailing_zeros() as u64 + 1;
            return Some((lookups.prefix.0, 0, n as usize, max + n + 1));
        }
    }
    None
}

/// Whether the evaluation looks up the name entry of `kind` for `path[start..start + len]`: false
/// when it cannot exist (too long for the table, or not admitted by the header's filter).
fn admits<P: PathBytes + ?Sized>(
    header: &TableHeader,
    path: &P,
    kind: NameKind,
    start: usize,
    len: usize,
) -> bool {
    len <= MAX_NAME && header.may_have_name(kind, path, start, len)
}

/// Where [`unmatched_step`] leaves the check of a final component.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unmatched {
    /// Go on with the lookup `from` this.
    Next(u64),
    /// A lookup the evaluation would make (or a component it would not evaluate normally).
    Admitted,
    /// No lookup left: no name entry can match the component.
    Proven,
}

/// One step of proving that no name entry can match the final component `path[start..start +
/// len]`: the lookup at or after `from` (0 first) that the evaluation makes on it (the same
/// [`next_lookup`] and [`admits`]). One lookup per step, for the BPF programs' `bpf_loop`.
pub fn unmatched_step<P: PathBytes + ?Sized>(
    header: &TableHeader,
    path: &P,
    (start, len): (usize, usize),
    from: u64,
) -> Unmatched {
    if len == 0 || len > MAX_COMPONENT {
        return Unmatched::Admitted; // not a name the evaluation reaches the lookups with
    }
    match next_lookup(Lookups::last(header), from, len) {
        None => Unmatched::Proven,
        Some((kind, at, n, _)) if admits(header, path, kind, start + at, n) => Unmatched::Admitted,
        Some((.., next)) => Unmatched::Next(next),
    }
}

/// Whether no name entry can match the final component `path[start..start + len]`: then every
/// name of a directory gets [`DirContext::unmatched_names`]' verdicts.
pub fn unmatched<P: PathBytes + ?Sized>(
    header: &TableHeader,
    path: &P,
    component: (usize, usize),
) -> bool {
    let mut from = 0;
    for _ in 0..=2 * MAX_NAME + 1 {
        match unmatched_step(header, path, component, from) {
            Unmatched::Next(next) => from = next,
            done => return done == Unmatched::Proven,
        }
    }
    false
}

impl DirContext {
    /// The best hit per op of every name in the directory that no name entry can match
    /// ([`unmatched`]) and that has no inode-table entry of its own, as its evaluation ends: the
    /// defaults, `up` (the inode-table hits above it), the LPM match `prefix` all its names share
    /// (none if the directory has no key at or below it) and the directories' hits: the verdicts
    /// and deciding rules of the whole evaluation (the property test
    /// `sibling_evaluations_resume_exactly` in fp-agent's tests/policy_soundness.rs).
    pub fn unmatched_names(
        &self,
        header: &TableHeader,
        up: &[OpEntry; 3],
        prefix: Option<&PrefixValue>,
    ) -> [OpEntry; 3] {
        let mut best = [OpEntry::default(); 3];
        unnamed(&mut best, header, up, prefix);
        for op in Op::ALL {
            offer(&mut best, op, op.at(&self.dirs));
        }
        best
    }
}

/// Sets `best` to the best hit per op before any name lookup: the defaults, the `seed` hits and
/// the LPM match. In place: the BPF programs keep an evaluation in map memory (see `restart`).
fn unnamed(
    best: &mut [OpEntry; 3],
    header: &TableHeader,
    seed: &[OpEntry; 3],
    prefix: Option<&PrefixValue>,
) {
    for op in Op::ALL {
        let default = op.of(&header.defaults);
        *op.of_mut(best) = OpEntry { rank: 0, rule_id: NO_RULE, verdict: default, _pad: [0; 3] };
        offer(best, op, op.at(seed));
        if let Some(value) = prefix {
            offer(best, op, op.at(&value.ops));
        }
    }
}

/// Keeps `candidate` as `op`'s best hit if it outranks it.
fn offer(best: &mut [OpEntry; 3], op: Op, candidate: &OpEntry) {
    let best = op.of_mut(best);
    if candidate.outranks(best) {
        *best = *candidate;
    }
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

/// Where [`component_end`] left the scan of a component.
enum Scan {
    /// The index of the '/' ending it, or the path's length.
    End(usize),
    /// Not found in this chunk: go on from here.
    From(usize),
    /// Longer than NAME_MAX.
    TooLong,
}

/// Scans the component at `start` for its end, [`SCAN_CHUNK`] bytes from `from`.
fn component_end<P: PathBytes + ?Sized>(path: &P, start: usize, from: usize) -> Scan {
    let len = path.len();
    for i in 0..SCAN_CHUNK {
        let at = from + i;
        if at >= len || path.at(at) == b'/' {
            return Scan::End(at);
        }
        if at - start >= MAX_COMPONENT {
            return Scan::TooLong;
        }
    }
    Scan::From(from + SCAN_CHUNK)
}

/// Whether `path` starts with the scope and the component at `start` lies at or below it (right
/// at it, for a scope of the directory's own entries); None if the scope is missing or malformed.
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
    if start < len || (scope.children_only != 0 && start != len) {
        return Some(false);
    }
    // A fixed trip count, no early exit and no branch: the BPF verifier then walks it once with
    // every index known (a loop bounded by `len` becomes a counter it cannot relate to the
    // pointer it advances, and a branch per word multiplies its states). A word at a time: the
    // verifier walks every iteration, in every program that evaluates.
    let mut differs = 0u64;
    for w in 0..MAX_PREFIX / 8 {
        differs |= (path.word(8 * w) ^ scope.path_word(w)) & scope.mask_word(w);
    }
    Some(differs == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{
        Lookup, NAME_FILTER_WORDS, NameSlot, NameValue, PrefixValue, ScopeValue, Unreadable,
    };

    /// Tables with one header and at most one name entry and scope, for the fail-closed cases.
    struct Tiny {
        header: Option<TableHeader>,
        name: Option<NameValue>,
        /// Lookups that fail as a BPF program's key copy can: [`PREFIX`] and/or [`NAMES`].
        unreadable: u8,
    }

    const PREFIX: u8 = 1;
    const NAMES: u8 = 2;

    impl RuleTables for Tiny {
        type Path = [u8];
        fn header(&self) -> Option<&TableHeader> {
            self.header.as_ref()
        }
        fn longest_prefix(&self, _: &[u8]) -> Lookup<'_, PrefixValue> {
            if self.unreadable & PREFIX != 0 { Err(Unreadable) } else { Ok(None) }
        }
        fn name(
            &self,
            kind: NameKind,
            path: &[u8],
            start: usize,
            len: usize,
        ) -> Lookup<'_, NameValue> {
            if self.unreadable & NAMES != 0 {
                return Err(Unreadable);
            }
            let found = path.get(start..start + len) == Some(b".env".as_slice());
            Ok(self.name.as_ref().filter(|_| found && kind == NameKind::Basename))
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
            dir_suffix_lengths: 0,
            dir_prefix_lengths: 0,
            // Admits every name: these tests look at the lookups themselves.
            name_filter: [u64::MAX; NAME_FILTER_WORDS],
        }
    }

    #[test]
    fn unknown_session_denies() {
        let t = Tiny { header: None, name: None, unreadable: 0 };
        assert_eq!(evaluate(&t, b"/x", Op::Read).verdict, TableVerdict::Deny);
    }

    #[test]
    fn unreadable_lookups_deny_instead_of_finding_nothing() {
        for (flags, unreadable) in
            [(0, PREFIX), (HEADER_BASENAMES, NAMES), (HEADER_DIRNAMES, NAMES)]
        {
            let t = Tiny { header: Some(header(flags)), name: None, unreadable };
            assert_eq!(evaluate(&t, b"/a/b", Op::Read).verdict, TableVerdict::Deny);
            let readable = Tiny { unreadable: 0, ..t };
            assert_eq!(evaluate(&readable, b"/a/b", Op::Read).verdict, TableVerdict::Allow);
        }
    }

    #[test]
    fn the_name_filter_skips_only_lookups_that_find_nothing() {
        // Every key admitted is looked up, wherever its bytes are in the path.
        let mut h = header(HEADER_BASENAMES | HEADER_DIRNAMES);
        h.name_filter = [0; NAME_FILTER_WORDS];
        let names: [&[u8]; 5] = [b".env", b"a", b"id_ed25519", b".keystore", &[b'x'; MAX_NAME]];
        for (kind, name) in NameKind::ALL.iter().flat_map(|k| names.map(|n| (*k, n))) {
            h.admit_name(kind, name);
            let path = [b"/some/dir/".as_slice(), name, b"/tail"].concat();
            assert!(h.may_have_name(kind, path.as_slice(), 10, name.len()));
        }
        // A filter without the name: the (unreadable) lookup is never made.
        h.name_filter = [0; NAME_FILTER_WORDS];
        let t = Tiny { header: Some(h), name: None, unreadable: NAMES };
        assert_eq!(evaluate(&t, b"/a/b", Op::Read).verdict, TableVerdict::Allow);
    }

    #[test]
    fn relative_or_overlong_paths_deny() {
        let t = Tiny { header: Some(header(0)), name: None, unreadable: 0 };
        assert_eq!(evaluate(&t, b"x", Op::Read).verdict, TableVerdict::Deny);
        assert_eq!(evaluate(&t, &[b'/'; MAX_PATH + 1], Op::Read).verdict, TableVerdict::Deny);
        assert_eq!(evaluate(&t, b"/x", Op::Read).verdict, TableVerdict::Allow);
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
        let t = Tiny { header: Some(header(HEADER_BASENAMES)), name: Some(value), unreadable: 0 };
        assert_eq!(evaluate(&t, b"/a/.env", Op::Read).verdict, TableVerdict::Defer);
        assert_eq!(evaluate(&t, b"/a/.env", Op::Write).verdict, TableVerdict::Allow);
    }

    #[test]
    fn deep_paths_evaluate_and_overlong_components_defer_when_names_are_in_play() {
        let t = Tiny { header: Some(header(HEADER_DIRNAMES)), name: None, unreadable: 0 };
        let deep = b"/d".repeat(MAX_PATH / 2);
        assert_eq!(evaluate(&t, &deep, Op::Read).verdict, TableVerdict::Allow);
        let mut long = b"/".to_vec();
        long.extend([b'n'; MAX_COMPONENT + 1]);
        assert_eq!(evaluate(&t, &long, Op::Read).verdict, TableVerdict::Defer);
        // Scanned a chunk per step: components at and around the chunks' edges, up to NAME_MAX.
        for n in [SCAN_CHUNK - 1, SCAN_CHUNK, SCAN_CHUNK + 1, 2 * SCAN_CHUNK, MAX_COMPONENT] {
            let mut path = b"/".to_vec();
            path.extend(core::iter::repeat_n(b'n', n));
            path.extend(b"/x/");
            path.extend(core::iter::repeat_n(b'n', n));
            assert_eq!(evaluate(&t, &path, Op::Read).verdict, TableVerdict::Allow, "{n}");
        }
    }
}
