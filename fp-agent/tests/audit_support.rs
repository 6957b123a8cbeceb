//! Shared helpers of the audit integration tests (included with `#[path]`).
#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::time::Duration;

use fp_agent::audit::checkpoint::{SignerKey, VerifierKey};
use fp_agent::audit::verify::{self, Report, VerifyOptions};
use fp_agent::audit::{
    Event, FileDecision, LogWriter, Op, RawPath, SessionStart, Verdict, WriterConfig, chain,
    segments,
};

pub fn signer() -> SignerKey {
    SignerKey::generate("fp-test").unwrap()
}

/// A config that never checkpoints or rotates on its own.
pub fn config(path: &Path, signer: &SignerKey) -> WriterConfig {
    let mut config = WriterConfig::new(path.to_path_buf(), signer.clone());
    config.checkpoint_every_records = u64::MAX;
    config.checkpoint_every = Duration::from_secs(3600);
    config.rotate_age = Duration::from_secs(3600);
    config
}

pub fn decision(i: u64) -> Event {
    Event::Decision(FileDecision {
        session: format!("s{}", i % 3),
        agent: "coder".into(),
        cgroup: 77,
        pid: 1000 + i as u32,
        tgid: 1000,
        uid: 1000,
        gid: 1000,
        comm: "bash".into(),
        exe: RawPath::from("/usr/bin/bash"),
        op: if i.is_multiple_of(4) { Op::Write } else { Op::Read },
        hook: "file_open".into(),
        path: RawPath(format!("/work/file-{i}\u{e9}").into_bytes()),
        target_path: None,
        directory: false,
        target_exists: false,
        target_pid: None,
        target_cgroup: None,
        interface: None,
        device: None,
        dev: 2049,
        ino: 5000 + i,
        decision: if i.is_multiple_of(5) { Verdict::Deny } else { Verdict::Allow },
        rule: "read /work/**".into(),
        rule_source: "policy.toml:3:1".into(),
        policy_hash: "sha256:ab".into(),
        approver: None,
        reason: None,
    })
}

pub fn session_start() -> Event {
    Event::SessionStart(SessionStart {
        session: "s0".into(),
        agent: "coder".into(),
        cgroup: 77,
        pid: 1000,
        uid: 1000,
        policy_hash: "sha256:ab".into(),
        floor_exceptions: vec!["read ~/.ssh/known_hosts".into()],
        profile: Some("claude-code".into()),
        backend: Some("fmod_ret".into()),
        command: vec!["bash".into()],
    })
}

/// Writes `events` decisions with a checkpoint after every `every` of them, then closes (which
/// adds a final checkpoint). Returns the active segment path.
pub fn write_log(dir: &Path, signer: &SignerKey, events: u64, every: u64) -> PathBuf {
    let path = dir.join("audit.log");
    let mut log = LogWriter::open(config(&path, signer)).unwrap();
    for i in 0..events {
        log.append(decision(i));
        if (i + 1) % every == 0 {
            log.checkpoint().unwrap();
        }
    }
    log.flush(true).unwrap();
    log.close().unwrap();
    path
}

pub fn verify_with(path: &Path, key: Option<&VerifierKey>, trusted: Option<String>) -> Report {
    let segments = segments::expand(&[path.to_path_buf()]).unwrap();
    let options = VerifyOptions { key: key.cloned(), trusted_checkpoint: trusted };
    verify::verify(&segments, &options, &mut |_| {}).unwrap()
}

pub fn lines(path: &Path) -> Vec<Vec<u8>> {
    let data = std::fs::read(path).unwrap();
    data.split_inclusive(|&b| b == b'\n').map(|l| l.to_vec()).collect()
}

pub fn write_lines(path: &Path, lines: &[Vec<u8>]) {
    std::fs::write(path, lines.concat()).unwrap();
}

/// The hash a line claims.
pub fn line_hash(line: &[u8]) -> [u8; 32] {
    chain::split_line(line.strip_suffix(b"\n").unwrap_or(line)).unwrap().1
}

/// Rewrites a line's JSON with `edit` and `prev`, and reseals it as an attacker without the key
/// could.
pub fn reseal(line: &[u8], prev: &[u8; 32], edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let mut value: serde_json::Value = serde_json::from_slice(line).unwrap();
    edit(&mut value);
    value["prev"] = hex::encode(prev).into();
    let object = value.as_object_mut().unwrap();
    object.remove("hash");
    let mut sealed = serde_json::to_vec(&value).unwrap();
    sealed.pop();
    chain::seal_in_place(&mut sealed, 0);
    sealed
}

/// Reseals every line from `from` on so that the chain links again.
pub fn rechain(lines: &mut [Vec<u8>], from: usize) {
    for i in from..lines.len() {
        let prev = line_hash(&lines[i - 1]);
        lines[i] = reseal(&lines[i], &prev, |_| {});
    }
}
