//! The compiler from a session's rules to the kernel tables, and the userspace [`RuleTables`]
//! over them.
//!
//! Each rule becomes, by its [`Shape`]: an LPM entry (`P\0` for an exact path, `P/` for a
//! subtree), a name-table slot (basename, directory component, basename or directory suffix or
//! prefix, within a scope), or a Defer entry on its longest literal directory prefix. Anything over a limit
//! (key length, name length, slots per name) also becomes a Defer entry on a shorter prefix, so
//! the tables are never silently weaker than the rules.
use std::collections::{BTreeMap, BTreeSet, HashMap};

use fp_common::policy::{
    HEADER_BASENAMES, HEADER_DIRNAMES, Lookup, MAX_NAME, MAX_PREFIX, NAME_FILTER_WORDS, NameKey,
    NameKind, NameSlot, NameValue, OpEntry, PrefixValue, ROOT_SCOPE, RuleTables, ScopeValue,
    TableHeader, TableVerdict,
};

use super::error::{ErrorKind, PolicyError};
use super::glob::{Shape, shape};
use super::{Layer, Op, Rule, Verdict};

/// One session's kernel tables (session id 0; the loader puts the real id in every key).
#[derive(Clone, Debug)]
pub struct KernelTables {
    header: TableHeader,
    /// LPM entries by key bytes (`P/` or `P\0`), inheritance already folded in.
    prefixes: BTreeMap<Vec<u8>, PrefixValue>,
    names: HashMap<NameKey, NameValue>,
    /// By scope id; id 0 is the root and never looked up.
    scopes: Vec<ScopeValue>,
    /// Targets of exact and subtree rules with restrictive verdicts, for the inode table.
    anchors: BTreeMap<Anchor, [OpEntry; 3]>,
    /// Directories with an LPM entry at or below them (`/` is the root), without their trailing
    /// '/': a directory moved from or to one of them is refused ([`fp_common::refer`]).
    interior: BTreeSet<Vec<u8>>,
}

/// A rule target the kernel also matches by inode identity: a path, and whether the rule covers
/// the file itself (`P`) or everything below it (`P/**`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Anchor {
    pub path: Vec<u8>,
    pub subtree: bool,
    /// A subtree of the policy or its profile (not a built-in list): files hardlinked below it before the session
    /// are looked for and entered too. Built-in trees (/root, cgroupfs, ...) are too large to
    /// scan at every session start; their files are protected by path and by the identity of the
    /// tree (docs/threat-model.md).
    pub scan_hardlinks: bool,
}

pub fn compile(rules: &[Rule], defaults: [Verdict; 3]) -> Result<KernelTables, PolicyError> {
    let mut c = Compiler::default();
    for rule in rules {
        c.rule(rule)?;
    }
    c.finish(defaults)
}

type ScopedSlot = (NameSlot, Vec<u8>);

#[derive(Default)]
struct Compiler {
    direct: BTreeMap<Vec<u8>, [OpEntry; 3]>,
    /// Slots by (kind, name), each with its scope directory (for deferring an overflow).
    names: BTreeMap<(NameKind, Vec<u8>), Vec<ScopedSlot>>,
    /// Scope ids by (the scope's key, whether it holds the directory's own entries only).
    scope_ids: BTreeMap<(Vec<u8>, bool), u16>,
    anchors: BTreeMap<Anchor, [OpEntry; 3]>,
}

impl Compiler {
    fn rule(&mut self, rule: &Rule) -> Result<(), PolicyError> {
        match shape(&rule.glob) {
            Shape::Exact(path) => {
                let mut key = path.clone();
                key.push(0);
                self.prefix_or_defer(rule, key, &path);
                self.anchor(rule, Anchor { path, subtree: false, scan_hardlinks: false });
            }
            Shape::Subtree(dir) => {
                let mut key = dir.clone();
                key.push(b'/');
                self.prefix_or_defer(rule, key, &dir);
                let scan_hardlinks = matches!(rule.layer, Layer::Profile | Layer::Policy);
                self.anchor(rule, Anchor { path: dir, subtree: true, scan_hardlinks });
            }
            Shape::Name { scope, kind, name, exact, children_only } => {
                let mut scope_key = scope.clone();
                scope_key.push(b'/');
                if scope_key.len() > MAX_PREFIX {
                    self.defer(rule, &scope);
                    return Ok(());
                }
                let scope_id = self.scope_id(&scope, scope_key, children_only)?;
                for (ops, verdict, rank) in op_groups(rule, exact) {
                    let slot = NameSlot { rank, rule_id: rule.id, scope_id, ops, verdict };
                    self.names.entry((kind, name.clone())).or_default().push((slot, scope.clone()));
                }
            }
            Shape::Defer(dir) => self.defer(rule, &dir),
        }
        Ok(())
    }

    /// An LPM entry at `key` if it fits, else a Defer entry on `dir`.
    fn prefix_or_defer(&mut self, rule: &Rule, key: Vec<u8>, dir: &[u8]) {
        if key.len() > MAX_PREFIX {
            self.defer(rule, dir);
            return;
        }
        for op in Op::ALL {
            if let Some(v) = rule.verdicts[op.index()] {
                self.offer(key.clone(), op, rule.ranks[op.index()], rule.id, v.table());
            }
        }
    }

    /// Records the rule's restrictive verdicts on its target for the inode table. Allow verdicts
    /// are left out: an alias must never gain an access its own path would not have.
    fn anchor(&mut self, rule: &Rule, anchor: Anchor) {
        for op in Op::ALL {
            let Some(v) = rule.verdicts[op.index()] else { continue };
            if v.table() == TableVerdict::Allow {
                continue;
            }
            let entry = OpEntry {
                rank: rule.ranks[op.index()],
                rule_id: rule.id,
                verdict: v.table() as u8,
                _pad: [0; 3],
            };
            let slot = &mut self.anchors.entry(anchor.clone()).or_default()[op.index()];
            if entry.outranks(slot) {
                *slot = entry;
            }
        }
    }

    /// Defer entry covering everything below `dir`, cut to a key that fits.
    fn defer(&mut self, rule: &Rule, dir: &[u8]) {
        let mut key = dir.to_vec();
        key.push(b'/');
        if key.len() > MAX_PREFIX {
            let cut = key[..MAX_PREFIX].iter().rposition(|b| *b == b'/').unwrap_or(0);
            key.truncate(cut + 1);
        }
        for op in Op::ALL {
            if rule.verdicts[op.index()].is_some() {
                self.offer(key.clone(), op, rule.ranks[op.index()], rule.id, TableVerdict::Defer);
            }
        }
    }

    fn offer(&mut self, key: Vec<u8>, op: Op, rank: u32, rule_id: u32, verdict: TableVerdict) {
        let entry = OpEntry { rank, rule_id, verdict: verdict as u8, _pad: [0; 3] };
        let slot = &mut self.direct.entry(key).or_default()[op.index()];
        if entry.outranks(slot) {
            *slot = entry;
        }
    }

    fn scope_id(
        &mut self,
        scope: &[u8],
        key: Vec<u8>,
        children_only: bool,
    ) -> Result<u16, PolicyError> {
        if scope.is_empty() && !children_only {
            return Ok(ROOT_SCOPE);
        }
        let next = self.scope_ids.len() + 1;
        let key = (key, children_only);
        if let Some(id) = self.scope_ids.get(&key) {
            return Ok(*id);
        }
        let id = u16::try_from(next).map_err(|_| {
            PolicyError::new(ErrorKind::Limit, None, "more than 65535 distinct name scopes")
        })?;
        self.scope_ids.insert(key, id);
        Ok(id)
    }

    fn finish(mut self, defaults: [Verdict; 3]) -> Result<KernelTables, PolicyError> {
        let mut header = TableHeader {
            defaults: defaults.map(|v| v.table() as u8),
            flags: 0,
            _pad: [0; 4],
            suffix_lengths: 0,
            prefix_lengths: 0,
            dir_suffix_lengths: 0,
            dir_prefix_lengths: 0,
            name_filter: [0; NAME_FILTER_WORDS],
        };
        let mut names = HashMap::new();
        let pending = std::mem::take(&mut self.names);
        for ((kind, name), mut slots) in pending {
            // Highest ranks keep their slots; the rest defer on their scope.
            slots.sort_by(|a, b| b.0.rank.cmp(&a.0.rank).then(a.0.rule_id.cmp(&b.0.rule_id)));
            let mut value = NameValue::default();
            for (i, (slot, scope)) in slots.into_iter().enumerate() {
                match value.slots.get_mut(i) {
                    Some(dst) => *dst = slot,
                    None => self.defer_slot(&slot, &scope),
                }
            }
            value.count = value.slots.iter().filter(|s| s.ops != 0).count() as u8;
            let Some(key) = NameKey::new(0, kind, &name) else {
                return Err(PolicyError::new(ErrorKind::Limit, None, "name longer than MAX_NAME"));
            };
            let bit = 1u64 << (name.len().clamp(1, MAX_NAME) - 1);
            match kind {
                NameKind::Basename => header.flags |= HEADER_BASENAMES,
                NameKind::Dirname => header.flags |= HEADER_DIRNAMES,
                NameKind::Suffix => header.suffix_lengths |= bit,
                NameKind::Prefix => header.prefix_lengths |= bit,
                NameKind::DirSuffix => header.dir_suffix_lengths |= bit,
                NameKind::DirPrefix => header.dir_prefix_lengths |= bit,
            }
            header.admit_name(kind, &name);
            names.insert(key, value);
        }
        let mut scopes = vec![empty_scope(); self.scope_ids.len() + 1];
        for ((key, children_only), id) in &self.scope_ids {
            // Keys longer than MAX_PREFIX never get a scope id (they defer).
            scopes[*id as usize] = ScopeValue::new(key, *children_only).unwrap_or_else(empty_scope);
        }
        // Every scope has an LPM entry (its covering entries' values, so no verdict changes):
        // then the longest match of a directory names the deepest scope above it too, which is
        // what lets the kernel compare two directories by that entry alone.
        for (key, _) in self.scope_ids.keys() {
            self.direct.entry(key.clone()).or_default();
        }
        let prefixes = self.fold();
        let interior = interior(prefixes.keys());
        Ok(KernelTables { header, prefixes, names, scopes, anchors: self.anchors, interior })
    }

    fn defer_slot(&mut self, slot: &NameSlot, scope: &[u8]) {
        let mut key = scope.to_vec();
        key.push(b'/');
        for op in Op::ALL {
            if slot.ops & op.bit() != 0 {
                self.offer(key.clone(), op, slot.rank, slot.rule_id, TableVerdict::Defer);
            }
        }
    }

    /// Folds every entry's ancestors into it, so the longest match alone answers; numbers the
    /// entries from 1.
    fn fold(&self) -> BTreeMap<Vec<u8>, PrefixValue> {
        self.direct
            .keys()
            .zip(1..)
            .map(|(key, id)| {
                let mut value = PrefixValue { id, ..PrefixValue::default() };
                let ends = key.iter().enumerate().filter(|(_, b)| **b == b'/').map(|(i, _)| i + 1);
                for end in ends.chain(std::iter::once(key.len())) {
                    let Some(entries) = self.direct.get(&key[..end]) else { continue };
                    for (dst, src) in value.ops.iter_mut().zip(entries) {
                        if src.outranks(dst) {
                            *dst = *src;
                        }
                    }
                }
                (key.clone(), value)
            })
            .collect()
    }
}

/// The directories at or above which some LPM key lies: for `P/` the directory `P` and its
/// ancestors, for `P\0` the ancestors of `P`. The root is `/`.
fn interior<'a>(keys: impl Iterator<Item = &'a Vec<u8>>) -> BTreeSet<Vec<u8>> {
    let mut dirs = BTreeSet::new();
    for key in keys {
        let Some((_, path)) = key.split_last() else { continue };
        // Every '/' of the key ends a directory that lies above (or is) what the key covers.
        for (i, b) in key.iter().enumerate().take(path.len() + 1) {
            if *b == b'/' {
                dirs.insert(if i == 0 { b"/".to_vec() } else { key[..i].to_vec() });
            }
        }
    }
    dirs
}

/// A rule's ops grouped by (verdict, rank), as name slots carry them; Defer if not `exact`.
fn op_groups(rule: &Rule, exact: bool) -> Vec<(u8, u8, u32)> {
    let mut groups: Vec<(u8, u8, u32)> = Vec::new();
    for op in Op::ALL {
        let Some(v) = rule.verdicts[op.index()] else { continue };
        let verdict = if exact { v.table() } else { TableVerdict::Defer };
        let (verdict, rank) = (verdict as u8, rule.ranks[op.index()]);
        match groups.iter_mut().find(|g| g.1 == verdict && g.2 == rank) {
            Some(g) => g.0 |= op.bit(),
            None => groups.push((op.bit(), verdict, rank)),
        }
    }
    groups
}

fn empty_scope() -> ScopeValue {
    ScopeValue {
        len: 0,
        children_only: 0,
        _pad: [0; 5],
        path: [0; MAX_PREFIX],
        mask: [0; MAX_PREFIX],
    }
}

impl RuleTables for KernelTables {
    type Path = [u8];

    fn header(&self) -> Option<&TableHeader> {
        Some(&self.header)
    }

    fn longest_prefix(&self, path: &[u8]) -> Lookup<'_, PrefixValue> {
        if path.len() < MAX_PREFIX {
            let mut exact = Vec::with_capacity(path.len() + 1);
            exact.extend_from_slice(path);
            exact.push(0);
            if let Some(v) = self.prefixes.get(&exact) {
                return Ok(Some(v));
            }
        }
        let reach = path.len().min(MAX_PREFIX);
        let mut dirs = (0..reach).rev().filter(|i| path[*i] == b'/');
        Ok(dirs.find_map(|i| self.prefixes.get(&path[..=i])))
    }

    fn name(&self, kind: NameKind, path: &[u8], start: usize, len: usize) -> Lookup<'_, NameValue> {
        let key = path.get(start..start + len).and_then(|name| NameKey::new(0, kind, name));
        Ok(key.and_then(|key| self.names.get(&key)))
    }

    fn scope(&self, scope_id: u16) -> Option<&ScopeValue> {
        self.scopes.get(scope_id as usize)
    }
}

impl KernelTables {
    pub fn header(&self) -> &TableHeader {
        &self.header
    }

    /// LPM entries: key bytes (`P/` or `P\0`, at most `MAX_PREFIX`) and value.
    pub fn prefixes(&self) -> impl Iterator<Item = (&[u8], &PrefixValue)> {
        self.prefixes.iter().map(|(k, v)| (k.as_slice(), v))
    }

    /// The ids of the rules these tables leave to userspace somewhere (a Defer entry).
    pub fn deferred_rules(&self) -> std::collections::BTreeSet<u32> {
        let defer = TableVerdict::Defer as u8;
        let prefixes = self.prefixes.values().flat_map(|v| {
            v.ops.iter().filter(|e| e.rank != 0 && e.verdict == defer).map(|e| e.rule_id)
        });
        let names = self.names.values().flat_map(|v| {
            v.slots.iter().filter(|s| s.ops != 0 && s.verdict == defer).map(|s| s.rule_id)
        });
        prefixes.chain(names).collect()
    }

    /// Name-table entries (keys carry tables id 0).
    pub fn names(&self) -> impl Iterator<Item = (&NameKey, &NameValue)> {
        self.names.iter()
    }

    /// Scopes by id (index 0, the root, is never looked up).
    pub fn scopes(&self) -> &[ScopeValue] {
        &self.scopes
    }

    /// Directories with an LPM entry at or below them (see [`fp_common::refer`]).
    pub fn interior(&self) -> impl Iterator<Item = &[u8]> {
        self.interior.iter().map(Vec::as_slice)
    }

    /// Whether a directory move from or to `dir` must be refused because a rule is anchored at
    /// or below it, or because its key would not fit (the kernel cannot tell).
    pub fn anchored(&self, dir: &[u8]) -> bool {
        dir.len() + 1 > MAX_PREFIX || self.interior.contains(dir)
    }

    /// Targets to enter into the inode table once resolved, with their restrictive entries.
    pub fn anchors(&self) -> impl Iterator<Item = (&Anchor, &[OpEntry; 3])> {
        self.anchors.iter()
    }

    /// The tables as JSON (`fp policy compile --json`), rules named by id.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let verdict = |v: u8| TableVerdict::from_u8(v).name();
        let ops = |entries: &[OpEntry; 3]| {
            let mut m = serde_json::Map::new();
            for op in Op::ALL {
                let e = entries[op.index()];
                if e.rank != 0 {
                    m.insert(
                        op.name().into(),
                        json!({"verdict": verdict(e.verdict), "rank": e.rank, "rule": e.rule_id}),
                    );
                }
            }
            m
        };
        let prefixes: Vec<_> = self
            .prefixes
            .iter()
            .map(|(k, v)| match k.split_last() {
                Some((0, path)) => {
                    json!({"path": text(path), "match": "exact", "ops": ops(&v.ops)})
                }
                _ => json!({"path": text(k), "match": "subtree", "ops": ops(&v.ops)}),
            })
            .collect();
        let mut names: Vec<_> = self
            .names
            .iter()
            .map(|(k, v)| {
                let kind = NameKind::ALL.get(k.kind as usize).map_or("?", |k| kind_name(*k));
                let slots: Vec<_> = v.slots[..v.count as usize]
                    .iter()
                    .map(|s| {
                        let ops: Vec<_> = Op::ALL
                            .iter()
                            .filter(|o| s.ops & o.bit() != 0)
                            .map(|o| o.name())
                            .collect();
                        json!({"ops": ops, "verdict": verdict(s.verdict), "rank": s.rank,
                               "rule": s.rule_id, "scope": s.scope_id})
                    })
                    .collect();
                json!({"kind": kind, "name": text(&k.name[..k.len as usize]), "slots": slots})
            })
            .collect();
        names.sort_by_key(|n| (n["kind"].to_string(), n["name"].to_string()));
        let scopes: Vec<_> = self
            .scopes
            .iter()
            .enumerate()
            .skip(1)
            .map(|(id, s)| json!({"id": id, "path": text(&s.path[..s.len as usize])}))
            .collect();
        let defaults: serde_json::Map<_, _> = Op::ALL
            .iter()
            .map(|o| (o.name().to_string(), json!(verdict(self.header.defaults[o.index()]))))
            .collect();
        json!({
            "defaults": defaults,
            "suffix_lengths": self.header.suffix_lengths,
            "prefix_lengths": self.header.prefix_lengths,
            "prefixes": prefixes,
            "names": names,
            "scopes": scopes,
            "interior": self.interior.iter().map(|d| text(d)).collect::<Vec<_>>(),
        })
    }
}

fn kind_name(kind: NameKind) -> &'static str {
    match kind {
        NameKind::Basename => "basename",
        NameKind::Dirname => "dirname",
        NameKind::Suffix => "suffix",
        NameKind::Prefix => "prefix",
        NameKind::DirSuffix => "directory suffix",
        NameKind::DirPrefix => "directory prefix",
    }
}
