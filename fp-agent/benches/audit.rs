//! Audit log throughput: records appended per second (chain + group commit to a real file) and
//! verification MB/s. Run: `FP_EBPF_STUB=1 cargo bench -p fp-agent --bench audit`.
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fp_agent::audit::checkpoint::SignerKey;
use fp_agent::audit::verify::{self, VerifyOptions};
use fp_agent::audit::{Event, FileDecision, LogWriter, Op, RawPath, Verdict, WriterConfig};

const BATCH: u64 = 10_000;

fn event(i: u64) -> Event {
    Event::Decision(FileDecision {
        session: "bench-session".into(),
        agent: "coder".into(),
        cgroup: 4242,
        pid: 31337,
        tgid: 31337,
        uid: 1000,
        gid: 1000,
        comm: "cargo".into(),
        exe: RawPath::from("/usr/bin/cargo"),
        op: Op::Read,
        hook: "file_open".into(),
        path: RawPath(format!("/home/dev/project/src/module_{}/file_{i}.rs", i % 97).into_bytes()),
        target_path: None,
        directory: false,
        target_exists: false,
        target_pid: None,
        target_cgroup: None,
        interface: None,
        device: None,
        dev: 2049,
        ino: 1_000_000 + i,
        decision: Verdict::Allow,
        rule: "read /home/dev/project/**".into(),
        rule_source: "/etc/fp/agents/coder.toml:12:1".into(),
        policy_hash: "sha256:5f2b9c0e".into(),
        approver: None,
        reason: None,
    })
}

fn config(dir: &std::path::Path, key: &SignerKey) -> WriterConfig {
    let mut config = WriterConfig::new(dir.join("audit.log"), key.clone());
    config.sync_on_deny = false;
    config.rotate_bytes = u64::MAX;
    config
}

fn append(c: &mut Criterion) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let key = SignerKey::generate("bench").unwrap();
    let mut log = LogWriter::open(config(dir.path(), &key)).unwrap();
    let mut group = c.benchmark_group("audit");
    group.throughput(Throughput::Elements(BATCH));
    let mut i = 0;
    group.bench_function("append_records", |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                log.append(event(i));
                i += 1;
                // One write(2) per 64 records, as the writer thread batches a busy channel.
                if i % 64 == 0 {
                    log.flush(false).unwrap();
                }
                if log.checkpoint_due() {
                    log.checkpoint().unwrap();
                }
            }
        })
    });
    group.finish();
    log.close().unwrap();
}

/// The whole pipeline: producers' `record` through the channel to the writer thread, including
/// start (resume) and shutdown (final checkpoint and sync) once per 100,000 events.
fn append_via_handle(c: &mut Criterion) {
    const EVENTS: u64 = 100_000;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let key = SignerKey::generate("bench").unwrap();
    let mut config = config(dir.path(), &key);
    config.channel_capacity = EVENTS as usize;
    let mut group = c.benchmark_group("audit");
    group.throughput(Throughput::Elements(EVENTS));
    group.sample_size(10);
    group.bench_function("record_via_handle", |b| {
        b.iter(|| {
            let (handle, writer) = fp_agent::audit::start(config.clone()).unwrap();
            for i in 0..EVENTS {
                assert!(handle.record(event(i)));
            }
            writer.shutdown().unwrap();
        })
    });
    group.finish();
}

fn verify_throughput(c: &mut Criterion) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let key = SignerKey::generate("bench").unwrap();
    let mut log = LogWriter::open(config(dir.path(), &key)).unwrap();
    for i in 0..100_000 {
        log.append(event(i));
        if log.checkpoint_due() {
            log.checkpoint().unwrap();
        }
    }
    log.close().unwrap();
    let segments = vec![dir.path().join("audit.log")];
    let bytes = std::fs::metadata(&segments[0]).unwrap().len();
    let options = VerifyOptions { key: Some(key.verifier()), trusted_checkpoint: None };
    let mut group = c.benchmark_group("audit");
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(10);
    group.bench_function("verify", |b| {
        b.iter(|| {
            let report = verify::verify(&segments, &options, &mut |_| {}).unwrap();
            assert!(report.problem.is_none());
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    targets = append, append_via_handle, verify_throughput
}
criterion_main!(benches);
