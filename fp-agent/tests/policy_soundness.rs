//! Soundness of the compiler: for random rule sets of both schemas (layered global + overlay)
//! and random nasty paths, the kernel tables' verdict equals the exact evaluator's or is Defer,
//! and the same with every name-table lookup made (the header's name filter changes nothing).
//! And principle 1: a policy every command accepts (no rule left to userspace) is decided
//! exactly, for every path and op (`accepted_policies_are_decided_exactly`).
//!
//! A case is one path checked for every op against one generated rule set; CI runs 100_000
//! (`CASES` rule sets x `PATHS_PER_CASE` paths, about 12 s: the test profile optimizes the
//! crates involved). `PROPTEST_CASES=2000000 cargo test -p fp-agent --test policy_soundness --
//! --nocapture` runs millions and prints how many the kernel decided.
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use fp_agent::policy::{
    EffectivePolicy, FileKind, KernelTables, LoadOptions, Op, TableVerdict, layer, parse_str,
};
use fp_common::policy::{
    DirContext, Evaluation, Lookup, MAX_PREFIX, MAX_STEPS, NAME_FILTER_WORDS, NameKind, NameValue,
    OpEntry, PrefixValue, RuleTables, ScopeValue, TableHeader, evaluate, evaluate_seeded,
    unmatched,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// Path components: ordinary, dot files, floor names, unicode, glob-looking bytes, long.
fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "a", "b", "ab", "src", "tmp", "ws", "secrets", "node_modules", ".git", "hooks",
            ".env", ".env.local", ".ssh", "id_rsa", "x.pem", "a.key", "key", ".bashrc", "etc",
            "usr", "lib", "root", "dev", "null", "proc", "self", "fp", "shadow", "é", "日本",
            "a*b", "[x]", "{a,b}", "x.pem.bak", "pem", ".pem",
        ])
        .prop_map(str::to_string),
        1 => "[a-z.é]{1,12}",
        1 => Just("l".repeat(200)),
        1 => Just("n".repeat(255)),
    ]
}

fn path() -> impl Strategy<Value = Vec<u8>> {
    let anchored = prop_oneof![
        Just(String::new()),
        Just("/tmp/ws".to_string()),
        Just("/root".to_string()),
        Just("/usr".to_string()),
        Just("/etc".to_string()),
    ];
    (anchored, prop::collection::vec(component(), 0..8), 0usize..4)
        .prop_map(|(anchor, comps, deep)| {
            let mut p = anchor;
            for c in comps {
                p.push('/');
                p.push_str(&c);
            }
            // Deep trees: many components.
            for _ in 0..deep * 25 {
                p.push_str("/d");
            }
            if p.is_empty() {
                p.push('/');
            }
            p.truncate(4096);
            let mut bytes = p.into_bytes();
            while bytes.last() == Some(&b'/') && bytes.len() > 1 {
                bytes.pop();
            }
            bytes
        })
        .prop_filter("valid kernel path", |p| {
            // Kernel paths have no empty, `.` or `..` components, and components of at most
            // NAME_MAX bytes.
            std::str::from_utf8(p).is_ok_and(|s| {
                s == "/"
                    || s.split('/').skip(1).all(|c| !matches!(c, "" | "." | "..") && c.len() <= 255)
            })
        })
}

/// A glob component: literal or one of the wildcard forms.
fn glob_component() -> impl Strategy<Value = String> {
    prop_oneof![
        24 => component().prop_map(|c| escape(&c)),
        8 => Just("**".to_string()),
        2 => component().prop_map(|c| format!("*{}", escape(&c))),
        2 => component().prop_map(|c| format!("{}*", escape(&c))),
        1 => Just("*".to_string()),
        1 => Just("?".to_string()),
        1 => Just("[ab]*".to_string()),
        1 => Just("{a,src,.env}".to_string()),
        1 => Just("*.{pem,key}".to_string()),
    ]
}

fn escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let esc = matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\');
            esc.then_some('\\').into_iter().chain(std::iter::once(c))
        })
        .collect()
}

fn glob() -> impl Strategy<Value = String> {
    let anchor = prop::sample::select(vec!["/", "<workspace>/", "~/", "**/", "/tmp/", "/usr/"]);
    (anchor, prop::collection::vec(glob_component(), 0..5)).prop_map(|(a, comps)| {
        let g = format!("{a}{}", comps.join("/"));
        if g.ends_with('/') && g.len() > 1 { g.trim_end_matches('/').to_string() } else { g }
    })
}

/// A glob of a shape the kernel's tables decide (docs/policy.md, "Kernel tables").
fn decidable_glob() -> impl Strategy<Value = String> {
    let dir = prop::sample::select(vec!["/", "<workspace>/", "~/", "/tmp/", "/usr/", "/tmp/ws/a/"]);
    let shape = prop::sample::select(vec![
        "{}",
        "{}/**",
        "{}*",
        "*{}",
        "**/{}",
        "**/{}/**",
        "**/*{}",
        "**/{}*",
        "{}*/**",
        "*{}/**",
        "**/{}*/**",
        "**/*{}/**",
    ]);
    // Names within the tables' limits (docs/policy.md, "Limits"); longer ones are refused.
    let name = component().prop_filter("a name the tables key", |c| c.len() <= 64);
    (dir, shape, name).prop_map(|(d, shape, c)| format!("{d}{}", shape.replace("{}", &escape(&c))))
}

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// A `[file_policy]` file of either schema; empty lists and omitted fields exercise layering.
fn policy_text() -> impl Strategy<Value = String> {
    policy_text_of(|| glob().boxed())
}

/// [`policy_text`] with its globs from `glob`.
fn policy_text_of(glob: fn() -> BoxedStrategy<String>) -> impl Strategy<Value = String> {
    let list = move || prop::collection::vec(glob(), 0..4);
    let tier = || prop::sample::select(vec!["silent", "prompt", "deny"]);
    let v1 = (
        prop::option::of(prop::sample::select(vec!["deny", "prompt", "read", "write"])),
        list(),
        list(),
        list(),
        list(),
    )
        .prop_map(|(default, deny, prompt, read, write)| {
            let mut t = String::from("[file_policy]\n");
            if let Some(d) = default {
                t += &format!("default = \"{d}\"\n");
            }
            for (k, v) in [
                ("deny_paths", deny),
                ("prompt_paths", prompt),
                ("read_paths", read),
                ("write_paths", write),
            ] {
                t += &format!("{k} = {}\n", toml_list(&v));
            }
            t
        });
    let v2 = ([tier(), tier(), tier()], prop::collection::vec((list(), list(), list()), 3))
        .prop_map(|(defaults, ops)| {
            let mut t = String::from("[file_policy.defaults]\n");
            for (op, d) in ["read", "write", "delete"].iter().zip(defaults) {
                t += &format!("{op} = \"{d}\"\n");
            }
            for (op, (silent, prompt, deny)) in ["read", "write", "delete"].iter().zip(ops) {
                t += &format!(
                    "[file_policy.{op}]\nsilent = {}\nprompt = {}\ndeny = {}\n",
                    toml_list(&silent),
                    toml_list(&prompt),
                    toml_list(&deny)
                );
            }
            t
        });
    prop_oneof![v1, v2]
}

const CASES: u32 = 2_000;
const PATHS_PER_CASE: usize = 50;

#[test]
fn tables_agree_with_exact_evaluator_or_defer() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse::<u32>().ok())
        .map_or(CASES, |total| (total / PATHS_PER_CASE as u32).max(1));
    let mut runner =
        TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let strategy = (
        policy_text(),
        policy_text(),
        prop::bool::ANY,
        prop::collection::vec(path(), PATHS_PER_CASE),
    );
    let built = AtomicUsize::new(0);
    let decided = AtomicUsize::new(0);
    let checks = AtomicUsize::new(0);
    let accepted_policies = AtomicUsize::new(0);
    let options = LoadOptions { workspace: Some("/tmp/ws".into()), ..LoadOptions::default() };
    runner
        .run(&strategy, |(global, overlay, same_schema_only, paths)| {
            let file = Path::new("p.toml");
            let g = parse_str(file, &global, FileKind::Config).expect("generated TOML parses");
            let o = parse_str(file, &overlay, FileKind::Policy).expect("generated TOML parses");
            let fields = match layer(&g, &o) {
                Ok(Some(f)) => f,
                // Different schemas cannot layer: check the overlay alone.
                _ if same_schema_only => return Ok(()),
                _ => o,
            };
            let policy = match EffectivePolicy::from_fields(&fields, &options) {
                Ok(p) => p,
                // Generated globs can be invalid (e.g. `**` next to text); errors are fine here.
                Err(_) => return Ok(()),
            };
            built.fetch_add(1, Ordering::Relaxed);
            // A policy every command accepts (no rule left to userspace) is decided exactly:
            // its tables never defer (explain never answers other than the kernel).
            let accepted = policy.require_kernel_decided().is_ok();
            if accepted {
                accepted_policies.fetch_add(1, Ordering::Relaxed);
            }
            for p in &paths {
                for op in Op::ALL {
                    let exact = policy.decide(p, op).verdict.table();
                    let table = evaluate(policy.tables(), p, op);
                    // The header's name filter only skips lookups that find nothing.
                    let unfiltered = evaluate(&Altered::unfiltered(policy.tables()), p, op);
                    prop_assert_eq!(table, unfiltered, "name filter, path {:?}", p);
                    checks.fetch_add(1, Ordering::Relaxed);
                    if table.verdict != TableVerdict::Defer {
                        decided.fetch_add(1, Ordering::Relaxed);
                    }
                    prop_assert!(
                        !accepted || table.verdict == exact,
                        "accepted policy, path {:?} op {op:?}: tables {:?} vs exact {exact:?}\nglobal:\n{global}\noverlay:\n{overlay}",
                        String::from_utf8_lossy(p),
                        table.verdict,
                    );
                    prop_assert!(
                        table.verdict == TableVerdict::Defer || table.verdict == exact,
                        "path {:?} op {op:?}: tables {:?} (rule {}) vs exact {exact:?}\nglobal:\n{global}\noverlay:\n{overlay}",
                        String::from_utf8_lossy(p),
                        table.verdict,
                        table.rule_id,
                    );
                }
            }
            Ok(())
        })
        .unwrap();
    let (built, checks, decided) = (built.into_inner(), checks.into_inner(), decided.into_inner());
    let accepted = accepted_policies.into_inner();
    eprintln!(
        "{built} policies of {cases} ({accepted} accepted: no rule left to userspace), {checks} \
         (path, op) checks, {decided} decided in the kernel"
    );

    // The generators must mostly produce valid policies and the kernel must decide most paths,
    // or the property proves little.
    assert!(built * 2 > cases as usize, "only {built} of {cases} generated policies were valid");
    assert!(decided * 4 > checks, "only {decided} of {checks} checks were decided in the kernel");
}

/// Principle 1 on the policies every command accepts (`require_kernel_decided`): of globs of the
/// shapes the kernel decides, most policies are accepted, and their tables answer exactly what
/// the exact evaluator does, for every path and op: no Defer, so `explain` is what the kernel does.
#[test]
fn accepted_policies_are_decided_exactly() {
    let mut runner = TestRunner::new(Config {
        cases: CASES / 2,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        policy_text_of(|| decidable_glob().boxed()),
        prop::collection::vec(path(), PATHS_PER_CASE),
    );
    let (built, accepted) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let options = LoadOptions { workspace: Some("/tmp/ws".into()), ..LoadOptions::default() };
    runner
        .run(&strategy, |(text, paths)| {
            let fields = parse_str(Path::new("p.toml"), &text, FileKind::Policy)
                .expect("generated TOML parses");
            let Ok(policy) = EffectivePolicy::from_fields(&fields, &options) else {
                return Ok(());
            };
            built.fetch_add(1, Ordering::Relaxed);
            if policy.require_kernel_decided().is_err() {
                return Ok(());
            }
            accepted.fetch_add(1, Ordering::Relaxed);
            for p in &paths {
                for op in Op::ALL {
                    let exact = policy.decide(p, op).verdict.table();
                    let table = evaluate(policy.tables(), p, op);
                    prop_assert_eq!(
                        table.verdict,
                        exact,
                        "path {:?} op {:?}\n{}",
                        String::from_utf8_lossy(p),
                        op,
                        text
                    );
                }
            }
            Ok(())
        })
        .unwrap();
    let (built, accepted) = (built.into_inner(), accepted.into_inner());
    eprintln!("{built} policies of {}, {accepted} accepted", CASES / 2);
    assert!(accepted * 2 > built, "only {accepted} of {built} policies were accepted");
}

/// A session's tables as the kernel may read them: with a name filter that admits every name
/// (every lookup is made), or with the LPM lookup answered by a directory cache entry.
struct Altered<'a> {
    tables: &'a KernelTables,
    header: TableHeader,
    /// The longest match every lookup answers, if not the tables'.
    lpm: Option<Option<PrefixValue>>,
}

impl<'a> Altered<'a> {
    fn unfiltered(tables: &'a KernelTables) -> Self {
        let header = TableHeader { name_filter: [u64::MAX; NAME_FILTER_WORDS], ..*tables.header() };
        Altered { tables, header, lpm: None }
    }

    fn with_lpm(tables: &'a KernelTables, lpm: Option<PrefixValue>) -> Self {
        Altered { tables, header: *tables.header(), lpm: Some(lpm) }
    }
}

impl RuleTables for Altered<'_> {
    type Path = [u8];

    fn header(&self) -> Option<&TableHeader> {
        Some(&self.header)
    }

    fn longest_prefix(&self, path: &[u8]) -> Lookup<'_, PrefixValue> {
        match &self.lpm {
            Some(lpm) => Ok(lpm.as_ref()),
            None => self.tables.longest_prefix(path),
        }
    }

    fn name(&self, kind: NameKind, path: &[u8], start: usize, len: usize) -> Lookup<'_, NameValue> {
        self.tables.name(kind, path, start, len)
    }

    fn scope(&self, scope_id: u16) -> Option<&ScopeValue> {
        self.tables.scope(scope_id)
    }
}

/// Strictness of an exact verdict for the no-gain comparison: allow < prompt < deny.
fn strictness(v: TableVerdict) -> u8 {
    match v {
        TableVerdict::Allow => 0,
        TableVerdict::Prompt => 1,
        _ => 2,
    }
}

const MOVE_CASES: u32 = 1_000;
const MOVES_PER_CASE: usize = 20;

/// The REFER rule (fp_common::refer) on the compiled tables never lets a rename, exchange or link
/// give content an access the exact evaluator withholds: whenever the tables allow a move, the
/// accesses it needs are allowed exactly, no op is gained at the new name, and for a directory no
/// path below it gains one (checked for generated relative paths).
#[test]
fn moves_the_tables_allow_gain_nothing_under_the_exact_evaluator() {
    use fp_agent::policy::Name;
    use fp_common::refer::{MoveKind, MoveVerdict};
    let mut runner = TestRunner::new(Config {
        cases: MOVE_CASES,
        failure_persistence: None,
        ..Config::default()
    });
    let kind = prop::sample::select(vec![MoveKind::Rename, MoveKind::Exchange, MoveKind::Link]);
    let moves = prop::collection::vec(
        (path(), path(), kind, prop::bool::ANY, prop::bool::ANY),
        MOVES_PER_CASE,
    );
    let below = prop::collection::vec(prop::collection::vec(component(), 1..4), 6);
    let strategy = (policy_text(), moves, below);
    let options = LoadOptions { workspace: Some("/tmp/ws".into()), ..LoadOptions::default() };
    let (allowed, checked) = (AtomicUsize::new(0), AtomicUsize::new(0));
    runner
        .run(&strategy, |(text, moves, below)| {
            let file = Path::new("p.toml");
            let fields = parse_str(file, &text, FileKind::Policy).expect("generated TOML parses");
            let Ok(policy) = EffectivePolicy::from_fields(&fields, &options) else {
                return Ok(());
            };
            let exact = |p: &[u8], op: Op| policy.decide(p, op).verdict.table();
            for (src, dst, kind, dir, exists) in moves {
                if src == dst || src.starts_with(&dst) || dst.starts_with(&src) {
                    continue;
                }
                let dir = dir && kind != MoveKind::Link;
                let exists = exists || kind == MoveKind::Exchange;
                checked.fetch_add(1, Ordering::Relaxed);
                let s = Name { path: &src, exists: true, dir };
                let d = Name { path: &dst, exists, dir: dir && kind == MoveKind::Exchange };
                if policy.decide_move(kind, s, d) != MoveVerdict::Allow {
                    continue;
                }
                allowed.fetch_add(1, Ordering::Relaxed);
                let show = || {
                    format!(
                        "{kind:?} {} -> {} (dir {dir}, exists {exists})\npolicy:\n{text}",
                        String::from_utf8_lossy(&src),
                        String::from_utf8_lossy(&dst)
                    )
                };
                let needed: &[(&[u8], Op)] = match kind {
                    MoveKind::Rename if exists => {
                        &[(&src, Op::Delete), (&dst, Op::Write), (&dst, Op::Delete)]
                    }
                    MoveKind::Rename => &[(&src, Op::Delete), (&dst, Op::Write)],
                    MoveKind::Exchange => &[
                        (&src, Op::Delete),
                        (&src, Op::Write),
                        (&dst, Op::Delete),
                        (&dst, Op::Write),
                    ],
                    MoveKind::Link => &[(&dst, Op::Write)],
                };
                for (p, op) in needed {
                    prop_assert!(exact(p, *op) == TableVerdict::Allow, "{op:?} needed: {}", show());
                }
                let flows: &[(&Vec<u8>, &Vec<u8>)] = match kind {
                    MoveKind::Exchange => &[(&src, &dst), (&dst, &src)],
                    _ => &[(&src, &dst)],
                };
                for (from, to) in flows {
                    let mut pairs = vec![(from.to_vec(), to.to_vec())];
                    if dir {
                        for r in &below {
                            let rel = format!("/{}", r.join("/"));
                            let join = |p: &[u8]| [p, rel.as_bytes()].concat();
                            pairs.push((join(from), join(to)));
                        }
                    }
                    for (a, b) in pairs {
                        for op in Op::ALL {
                            let (was, now) = (exact(&a, op), exact(&b, op));
                            let gains = strictness(now) < strictness(was)
                                || (a == **from && was != TableVerdict::Allow && now != was);
                            prop_assert!(
                                !gains,
                                "{op:?} of {} was {was:?}, at {} it is {now:?}: {}",
                                String::from_utf8_lossy(&a),
                                String::from_utf8_lossy(&b),
                                show()
                            );
                        }
                    }
                }
            }
            Ok(())
        })
        .unwrap();
    let (allowed, checked) = (allowed.into_inner(), checked.into_inner());
    eprintln!("{checked} moves checked, {allowed} allowed by the tables");
    // About 1.5% of generated moves pass the REFER rule (most random policies withhold some
    // access on one side); 0.5% keeps the check far from noise while proving it is not vacuous.
    assert!(
        allowed * 200 > checked,
        "only {allowed} of {checked} moves were allowed: the property proves little"
    );
}

const SIBLING_CASES: u32 = 1_000;
const SIBLINGS_PER_CASE: usize = 40;

/// An inode-identity hit per op, as the kernel's walk offers them (rank 0: none).
fn seed() -> impl Strategy<Value = [OpEntry; 3]> {
    // Ranks across the rules' (layer, tier, class and literal bits: policy/build.rs), so that a
    // hit may outrank any rule.
    let entry = (prop_oneof![2 => Just(0u32), 1 => 1u32..u32::MAX >> 1], 0u32..8, 0u8..4).prop_map(
        |(rank, rule_id, verdict)| OpEntry {
            rank,
            rule_id: if rank == 0 { fp_common::policy::NO_RULE } else { rule_id },
            verdict: if rank == 0 { 0 } else { verdict },
            _pad: [0; 3],
        },
    );
    [entry.clone(), entry.clone(), entry]
}

/// The kernel's directory cache (fp-ebpf/src/dirs.rs) decides a name from what a sibling's
/// evaluation learned above it (`Evaluation::context`, `resume_below`): for random rule sets,
/// paths, sibling names and inode-identity hits, that gives every op the verdict and the deciding
/// rule of the whole evaluation. In a directory no LPM key lies at or below (not `interior`), it
/// also takes the sibling's longest match for the name's, which gives the same again; and a name
/// there that no name entry can match (`unmatched`) gets `DirContext::unmatched_names`' verdict
/// and deciding rule (the directory cache's verdict for such names, with `own` as the hits above).
#[test]
fn sibling_evaluations_resume_exactly() {
    let mut runner = TestRunner::new(Config {
        cases: SIBLING_CASES,
        failure_persistence: None,
        ..Config::default()
    });
    let siblings = prop::collection::vec((path(), component(), seed(), seed()), SIBLINGS_PER_CASE);
    let options = LoadOptions { workspace: Some("/tmp/ws".into()), ..LoadOptions::default() };
    let (resumed_count, known_count) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let unmatched_count = AtomicUsize::new(0);
    runner
        .run(&(policy_text(), siblings), |(text, siblings)| {
            let file = Path::new("p.toml");
            let fields = parse_str(file, &text, FileKind::Policy).expect("generated TOML parses");
            let Ok(policy) = EffectivePolicy::from_fields(&fields, &options) else {
                return Ok(());
            };
            let tables = policy.tables();
            for (p, name, own, other) in &siblings {
                let Some(slash) = p.iter().rposition(|b| *b == b'/').filter(|s| *s > 0) else {
                    continue;
                };
                let mut sibling = p[..=slash].to_vec();
                sibling.extend_from_slice(name.as_bytes());
                let Some(context) = evaluate_seeded(tables, &sibling[..], other).context() else {
                    continue;
                };
                let whole = evaluate_seeded(tables, &p[..], own);
                let resumed = resume(tables, p, own, &context);
                resumed_count.fetch_add(1, Ordering::Relaxed);
                let why = |how: &str| {
                    format!(
                        "path {:?} resumed from sibling {:?}{how}\npolicy:\n{text}",
                        String::from_utf8_lossy(p),
                        String::from_utf8_lossy(&sibling),
                    )
                };
                prop_assert_eq!(resumed.decisions(), whole.decisions(), "{}", why(""));
                // The kernel keeps a directory's match only where its `dir\0` key fits.
                let dir = &p[..slash];
                if context.cursor as usize > MAX_PREFIX || tables.anchored(dir) {
                    continue;
                }
                let lpm = tables.longest_prefix(&sibling[..]).expect("userspace lookups").copied();
                let known = resume(&Altered::with_lpm(tables, lpm), p, own, &context);
                known_count.fetch_add(1, Ordering::Relaxed);
                prop_assert_eq!(known.decisions(), whole.decisions(), "{}", why(" and its match"));
                prop_assert_eq!(known.prefix_id, whole.prefix_id, "{}", why(" and its match"));
                // A name no name entry can match: the directory's verdict for such names.
                let header = tables.header();
                let cursor = context.cursor as usize;
                if !unmatched(header, &p[..], (cursor, p.len() - cursor)) {
                    continue;
                }
                let best = context.unmatched_names(header, own, lpm.as_ref());
                unmatched_count.fetch_add(1, Ordering::Relaxed);
                for op in Op::ALL {
                    let (entry, decided) = (op.of(&best), whole.decision(op));
                    let verdict = TableVerdict::from_u8(entry.verdict);
                    prop_assert_eq!(
                        (verdict, entry.rule_id),
                        (decided.verdict, decided.rule_id),
                        "{:?}: {}",
                        op,
                        why(" as a name no entry matches")
                    );
                }
            }
            Ok(())
        })
        .unwrap();
    let (resumed, known) = (resumed_count.into_inner(), known_count.into_inner());
    let unmatched = unmatched_count.into_inner();
    eprintln!(
        "{resumed} paths resumed from a sibling's context, {known} with its match, \
         {unmatched} decided as names no entry matches"
    );
    assert!(resumed > (SIBLING_CASES as usize) * SIBLINGS_PER_CASE / 4, "only {resumed} resumed");
    assert!(known > resumed / 4, "only {known} of {resumed} resumed with the sibling's match");
    assert!(unmatched > known / 4, "only {unmatched} of {known} were names no entry matches");
}

/// The evaluation of `path` resumed from a sibling's `context`, run to its end.
fn resume<T: RuleTables<Path = [u8]>>(
    tables: &T,
    path: &[u8],
    seed: &[OpEntry; 3],
    context: &DirContext,
) -> Evaluation {
    let mut resumed = Evaluation::start(tables, path, seed);
    resumed.resume_below(context);
    for _ in 0..MAX_STEPS {
        if resumed.step(tables, path) {
            break;
        }
    }
    resumed
}
