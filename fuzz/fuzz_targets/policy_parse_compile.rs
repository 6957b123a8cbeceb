//! Arbitrary bytes as a policy file and as an operator config: parsing, layering, expansion and
//! compilation must never panic, and wherever the kernel tables decide they agree with the exact
//! evaluator. Run: `FP_EBPF_STUB=1 cargo +nightly fuzz run policy_parse_compile` (in fuzz/).
#![no_main]

use std::path::Path;

use fp_agent::policy::{EffectivePolicy, FileKind, LoadOptions, Op, TableVerdict, layer, parse_str};
use fp_common::policy::evaluate;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // The first line, if it looks like a path, is a path to decide; the rest is the policy.
    let (probe, body) = match text.split_once('\n') {
        Some((first, rest)) if first.starts_with('/') => (first, rest),
        _ => ("/tmp/ws/src/main.rs", text),
    };
    let file = Path::new("fuzz.toml");
    let config = parse_str(file, body, FileKind::Config);
    let Ok(policy) = parse_str(file, body, FileKind::Policy) else { return };
    let fields = match config.ok().and_then(|c| layer(&c, &policy).ok().flatten()) {
        Some(f) => f,
        None => policy,
    };
    let options = LoadOptions { workspace: Some("/tmp/ws".into()), ..LoadOptions::default() };
    let Ok(effective) = EffectivePolicy::from_fields(&fields, &options) else { return };
    let Some(path) = fp_agent::policy::normalize_path(probe.as_bytes()) else { return };
    for op in Op::ALL {
        let exact = effective.decide(&path, op).verdict.table();
        let table = evaluate(effective.tables(), &path, op).verdict;
        assert!(table == TableVerdict::Defer || table == exact, "{probe}: {table:?} vs {exact:?}");
    }
});
