//! Latency of `explain` (exact evaluator + kernel disposition), of the kernel tables' `evaluate`
//! alone, and of loading and compiling a policy.
//! `FP_EBPF_STUB=1 cargo bench -p fp-agent --bench policy`
use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use fp_agent::policy::{EffectivePolicy, LoadOptions, Op};
use fp_common::policy::evaluate;

fn options() -> LoadOptions {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    LoadOptions {
        policy_files: vec![examples.join("coding-agent.toml")],
        config_file: Some(examples.join("config.toml")),
        workspace: Some("/home/dev/project".into()),
        ..LoadOptions::default()
    }
}

const PATHS: [&str; 4] = [
    "/home/dev/project/src/policy/compile.rs",
    "/home/dev/project/secrets/prod.env",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/home/dev/.ssh/id_ed25519",
];

fn bench(c: &mut Criterion) {
    let policy = EffectivePolicy::load(&options()).unwrap();
    c.bench_function("explain (decide: exact + kernel disposition)", |b| {
        b.iter(|| {
            for p in PATHS {
                black_box(policy.decide(black_box(p.as_bytes()), Op::Write));
            }
        })
    });
    c.bench_function("kernel tables evaluate", |b| {
        b.iter(|| {
            for p in PATHS {
                black_box(evaluate(policy.tables(), black_box(p.as_bytes()), Op::Write));
            }
        })
    });
    c.bench_function("load + compile", |b| b.iter(|| EffectivePolicy::load(&options()).unwrap()));
}

criterion_group!(benches, bench);
criterion_main!(benches);
