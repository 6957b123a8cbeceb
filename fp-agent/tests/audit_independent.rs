//! The independent Python writer/verifier (tests/audit-independent/fpaudit.py, written from
//! docs/audit-format.md) against fp, in both directions. python3 and openssl are required: a
//! missing tool fails these tests.
#[path = "audit_support.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fp_agent::audit::checkpoint::SignerKey;
use fp_agent::audit::{
    Event, FileDecision, LogWriter, OrphanCleanup, OrphanOutcome, RawPath, segments,
};
use support::*;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/audit-independent/fpaudit.py")
}

fn run(cmd: &mut Command) -> Output {
    let output = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn fp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fp"))
}

/// `fp audit keygen` in `dir`; returns (private, public) key paths.
fn keygen(dir: &Path) -> (PathBuf, PathBuf) {
    let prefix = dir.join("key");
    let status = run(fp().args(["audit", "keygen", "--name", "fp-test"]).arg(&prefix)).status;
    assert!(status.success());
    let private = dir.join("key.key");
    let mode = std::os::unix::fs::PermissionsExt::mode(&private.metadata().unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "the signer key is private");
    let again = run(fp().args(["audit", "keygen"]).arg(&prefix)).status;
    assert_eq!(again.code(), Some(2), "an existing key is not replaced without --force");
    (private, dir.join("key.pub"))
}

#[test]
fn required_tools_are_installed() {
    assert!(run(Command::new("python3").arg("--version")).status.success(), "python3 is required");
    assert!(run(Command::new("openssl").arg("version")).status.success(), "openssl is required");
}

#[test]
fn independent_verifier_accepts_fp_logs_and_rejects_tampering() {
    let dir = tempfile::tempdir().unwrap();
    let (private, public) = keygen(dir.path());
    let signer = SignerKey::load(&private).unwrap();
    let path = dir.path().join("audit.log");
    let mut config = config(&path, &signer);
    config.rotate_bytes = 8192;
    let mut log = LogWriter::open(config).unwrap();
    log.append(session_start());
    // What a start found of a killed fp run: a kind both verifiers know.
    for (cgroup, outcome) in [(Some(42), OrphanOutcome::Kept), (None, OrphanOutcome::Removed)] {
        log.append(Event::OrphanCleanup(OrphanCleanup {
            session: "run-812-4711".into(),
            pid: 812,
            cgroup,
            pids: u32::from(outcome == OrphanOutcome::Kept),
            outcome,
            reason: None,
        }));
    }
    for i in 0..60 {
        let mut event = decision(i);
        if let (3, Event::Decision(d)) = (i % 7, &mut event) {
            *d = FileDecision { path: RawPath(b"/tmp/\xff\xfe-odd".to_vec()), ..d.clone() };
        }
        log.append(event);
        log.flush(false).unwrap();
        if log.rotation_due() {
            log.rotate().unwrap();
        }
    }
    log.close().unwrap();
    let all = segments::expand(std::slice::from_ref(&path)).unwrap();
    assert!(all.len() > 2, "the log rotated");
    let verify_with = |key: &Path, segments: &[PathBuf]| {
        run(Command::new("python3")
            .arg(script())
            .arg("verify")
            .arg("--pubkey")
            .arg(key)
            .args(segments))
    };
    let verify = |segments: &[PathBuf]| verify_with(&public, segments);
    let output = verify(&all);
    assert!(output.status.success(), "fpaudit.py rejected an fp log");
    assert!(String::from_utf8_lossy(&output.stdout).contains("\"ok\": true"));
    // A key the log does not name: a mix-up, not tampering (exit 2), as fp says.
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let (_, other) = keygen(&other_dir);
    let output = verify_with(&other, &all);
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stdout));
    assert!(String::from_utf8_lossy(&output.stdout).contains("wrong-key"));
    let mut lines = support::lines(&all[1]);
    lines[2] = String::from_utf8(lines[2].clone()).unwrap().replace("coder", "c0der").into_bytes();
    write_lines(&all[1], &lines);
    let output = verify(&all);
    assert_eq!(output.status.code(), Some(1), "fpaudit.py missed a modified record");
    assert!(String::from_utf8_lossy(&output.stdout).contains("modified-record"));
}

#[test]
fn fp_verifies_and_replays_an_independently_written_log() {
    let dir = tempfile::tempdir().unwrap();
    let (private, public) = keygen(dir.path());
    let log = dir.path().join("independent.log");
    let status = run(Command::new("python3")
        .arg(script())
        .args(["write", "--count", "35", "--key"])
        .arg(&private)
        .arg("--out")
        .arg(&log))
    .status;
    assert!(status.success(), "fpaudit.py write failed");
    let output = run(fp().args(["audit", "verify", "--json", "--pubkey"]).arg(&public).arg(&log));
    assert_eq!(output.status.code(), Some(0), "fp rejected the independent log");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["records"], 1 + 35 + 4);
    assert_eq!(report["checkpoints_verified"], 4);
    let output = run(fp()
        .args(["audit", "replay", "--json", "--decision", "deny", "--pubkey"])
        .arg(&public)
        .arg(&log));
    assert!(output.status.success());
    let replay: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let records = replay["records"].as_array().unwrap();
    assert_eq!(records.len(), 9);
    assert_eq!(records[0]["path"]["b64"], "L3dvcmsvaW5kZXAtMP8=", "non-UTF-8 bytes survive");
    // With a key the log does not name: cannot verify (exit 2), the cause on the first line.
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let (_, other) = keygen(&other_dir);
    let output = run(fp().args(["audit", "verify", "--pubkey"]).arg(&other).arg(&log));
    assert_eq!(output.status.code(), Some(2));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.starts_with("CANNOT VERIFY: the log is signed by key "), "{text}");
    // Replay refuses it, and says so in its JSON too.
    let output = run(fp().args(["audit", "replay", "--json", "--pubkey"]).arg(&other).arg(&log));
    assert_eq!(output.status.code(), Some(2));
    let refused: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(refused["refused"].as_str().unwrap().starts_with("refusing to replay"), "{refused}");
}

#[test]
fn verify_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let (private, public) = keygen(dir.path());
    let path = write_log(dir.path(), &SignerKey::load(&private).unwrap(), 10, 4);
    let code = |cmd: &mut Command| run(cmd).status.code();
    assert_eq!(code(fp().args(["audit", "verify", "--pubkey"]).arg(&public).arg(&path)), Some(0));
    assert_eq!(code(fp().args(["audit", "verify"]).arg(&path)), Some(3), "no key: warnings");
    assert_eq!(
        code(fp().args(["audit", "verify", "--pubkey"]).arg(&public).arg(dir.path().join("nope"))),
        Some(2)
    );
    let sink = dir.path().join("sink");
    std::fs::write(&sink, "not a note").unwrap();
    let trusted = fp()
        .args(["audit", "verify", "--trusted-checkpoint"])
        .arg(&sink)
        .arg("--pubkey")
        .arg(&public)
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(trusted.status.code(), Some(2), "an unreadable trusted checkpoint cannot verify");
    let mut lines = support::lines(&path);
    lines.remove(3);
    write_lines(&path, &lines);
    let output = run(fp().args(["audit", "verify", "--json", "--pubkey"]).arg(&public).arg(&path));
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["problem"]["class"], "deleted-record");
    assert_eq!(report["problem"]["line"], 4);
    let refused = run(fp().args(["audit", "replay"]).arg(&path));
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--force"));
    assert!(run(fp().args(["audit", "replay", "--force"]).arg(&path)).status.success());
}

/// The forensic what-if: every recorded decision re-evaluated under another policy by the same
/// decision core sessions are compiled from.
#[test]
fn replay_under_another_policy_reports_the_differences() {
    let dir = tempfile::tempdir().unwrap();
    let (private, public) = keygen(dir.path());
    // 20 decisions on /work/file-N: writes when N % 4 == 0, recorded as denied when N % 5 == 0.
    let path = write_log(dir.path(), &SignerKey::load(&private).unwrap(), 20, 10);
    let policy = dir.path().join("reviewer.toml");
    std::fs::write(
        &policy,
        "[file_policy.defaults]\nread = \"silent\"\nwrite = \"deny\"\ndelete = \"deny\"\n",
    )
    .unwrap();
    let output = run(fp()
        .args(["audit", "replay", "--json", "--pubkey"])
        .arg(&public)
        .arg("--policy")
        .arg(&policy)
        .args(["--workspace", "/work"])
        .arg(&path));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let replay: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let what_if = &replay["what_if"];
    assert_eq!(what_if["evaluated"], 20, "{what_if}");
    // Writes 4, 8, 12, 16 were allowed and would now be denied; reads 5, 10, 15 the reverse.
    assert_eq!(what_if["would_now_deny"], 4, "{what_if}");
    assert_eq!(what_if["would_now_allow"], 3, "{what_if}");
    assert_eq!(what_if["would_now_prompt"], 0, "{what_if}");
    let first = &what_if["examples"][0];
    assert_eq!(first["op"], "write", "{first}");
    assert!(first.to_string().contains("default"), "{first}");

    // A filter nothing matches is said, not silent.
    let output = run(fp()
        .args(["audit", "replay", "--session", "nosuch", "--pubkey"])
        .arg(&public)
        .arg(&path));
    assert!(output.status.success());
    assert!(output.stdout.is_empty());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("none of the") && said.contains("matches the filter"), "{said}");

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[file_policy]\ndefault = \"sometimes\"\n").unwrap();
    let output = run(fp().args(["audit", "replay", "--policy"]).arg(&bad).arg(&path));
    assert_ne!(output.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("bad.toml"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn tail_follows_across_rotation() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let signer = fp_agent::audit::checkpoint::SignerKey::generate("fp-test").unwrap();
    let path = dir.path().join("audit.log");
    let mut log = LogWriter::open(config(&path, &signer)).unwrap();
    let mut child = fp()
        .args(["audit", "tail", "-f", "-n", "1", "--json"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let record: serde_json::Value = serde_json::from_str(&line).unwrap();
            if tx.send(record["seq"].as_u64().unwrap()).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    for i in 0..5 {
        log.append(decision(i));
    }
    log.flush(true).unwrap();
    log.rotate().unwrap();
    log.append(decision(5));
    log.flush(true).unwrap();
    let mut seen = Vec::new();
    // log-open 0, 5 decisions 1..=5, rotation checkpoint 6, log-open 7, decision 8.
    while seen.last() != Some(&8) {
        match rx.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(seq) => seen.push(seq),
            Err(e) => panic!("tail stopped after {seen:?}: {e}"),
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(seen, (0..=8).collect::<Vec<u64>>());
}
