//! Every tamper class, produced from a real log and located by `verify`.
#[path = "audit_support.rs"]
mod support;

use fp_agent::audit::checkpoint::SignerKey;
use fp_agent::audit::verify::{ProblemClass, Report};
use fp_agent::audit::{CheckpointSink, LogWriter, WriterConfig, start};
use support::*;

/// 20 decisions, a checkpoint after every 5: lines are 1 log-open, then decisions with a
/// checkpoint line after each fifth, and the final checkpoint.
fn fixture() -> (tempfile::TempDir, std::path::PathBuf, SignerKey) {
    let dir = tempfile::tempdir().unwrap();
    let key = signer();
    let path = write_log(dir.path(), &key, 20, 5);
    (dir, path, key)
}

/// The fixture with its lines edited, verified with the right key.
fn tampered(edit: impl FnOnce(&mut Vec<Vec<u8>>)) -> (tempfile::TempDir, Report) {
    let (dir, path, key) = fixture();
    let mut lines = support::lines(&path);
    edit(&mut lines);
    write_lines(&path, &lines);
    let report = verify_with(&path, Some(&key.verifier()), None);
    (dir, report)
}

fn assert_problem(report: &Report, class: ProblemClass, line: u64, seq: u64) {
    let problem = report.problem.as_ref().unwrap_or_else(|| panic!("no problem in {report:#?}"));
    assert_eq!((problem.class, problem.line, problem.seq), (class, line, seq), "{problem:#?}");
    let offset: usize =
        support::lines(&problem.segment)[..line as usize - 1].iter().map(Vec::len).sum();
    assert_eq!(problem.offset, offset as u64);
}

#[test]
fn intact_log_verifies() {
    let (_dir, path, key) = fixture();
    let report = verify_with(&path, Some(&key.verifier()), None);
    assert!(report.problem.is_none(), "{report:#?}");
    assert_eq!(report.records, 1 + 20 + 5);
    assert_eq!(report.checkpoints_verified, 5);
    assert_eq!(report.unsealed_tail, 0);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

#[test]
fn modified_record_is_located() {
    let (_dir, report) = tampered(|lines| {
        lines[5] =
            String::from_utf8(lines[5].clone()).unwrap().replace("file-", "FILE-").into_bytes();
    });
    assert_problem(&report, ProblemClass::ModifiedRecord, 6, 5);
    assert_eq!(report.exit_code(), 1);
}

#[test]
fn modified_and_resealed_record_is_located() {
    let (_dir, report) = tampered(|lines| {
        let prev = line_hash(&lines[4]);
        lines[5] = reseal(&lines[5], &prev, |v| v["decision"] = "allow".into());
    });
    assert_problem(&report, ProblemClass::ModifiedRecord, 6, 5);
}

#[test]
fn deleted_record_is_located() {
    let (_dir, report) = tampered(|lines| {
        lines.remove(5);
    });
    assert_problem(&report, ProblemClass::DeletedRecord, 6, 5);
}

#[test]
fn inserted_record_is_located() {
    let (_dir, report) = tampered(|lines| {
        let prev = line_hash(&lines[4]);
        let forged = reseal(&lines[5], &prev, |v| v["path"] = "/etc/shadow".into());
        lines.insert(5, forged);
    });
    assert_problem(&report, ProblemClass::InsertedRecord, 6, 5);
}

#[test]
fn inserted_unlinked_record_is_located() {
    let (_dir, report) = tampered(|lines| {
        let forged = reseal(&lines[5], &[9; 32], |v| v["path"] = "/etc/shadow".into());
        lines.insert(5, forged);
    });
    assert_problem(&report, ProblemClass::InsertedRecord, 6, 5);
}

#[test]
fn reordered_records_are_located() {
    let (_dir, report) = tampered(|lines| {
        lines.swap(5, 6);
    });
    assert_problem(&report, ProblemClass::ReorderedRecords, 6, 5);
}

#[test]
fn duplicated_record_is_located() {
    let (_dir, report) = tampered(|lines| {
        lines.insert(6, lines[5].clone());
    });
    assert_problem(&report, ProblemClass::SeqGapOrDuplicate, 7, 6);
}

#[test]
fn seq_gap_in_a_linked_chain_is_located() {
    let (_dir, report) = tampered(|lines| {
        let prev = line_hash(&lines[4]);
        lines[5] = reseal(&lines[5], &prev, |v| v["seq"] = 9.into());
        rechain(lines, 6);
    });
    assert_problem(&report, ProblemClass::SeqGapOrDuplicate, 6, 5);
}

#[test]
fn malformed_line_is_located() {
    let (_dir, report) = tampered(|lines| {
        lines[5] = b"not a record\n".to_vec();
    });
    assert_problem(&report, ProblemClass::MalformedLine, 6, 5);
}

#[test]
fn torn_tail_is_a_warning() {
    let (_dir, report) = tampered(|lines| {
        lines.push(b"{\"v\":1,\"seq\":26,\"ki".to_vec());
    });
    assert_problem(&report, ProblemClass::TornTail, 27, 26);
    assert_eq!(report.exit_code(), 3);
}

#[test]
fn forged_checkpoint_signature_is_bad() {
    let (_dir, report) = tampered(|lines| {
        let last = lines.len() - 1;
        let prev = line_hash(&lines[last - 1]);
        lines[last] = reseal(&lines[last], &prev, |v| {
            let note = v["note"].as_str().unwrap().to_owned();
            let (body, blob) = note.trim_end().rsplit_once(' ').unwrap();
            // Characters 0..5 of the base64 carry the key hash; flip one of the signature's.
            let flipped = if &blob[8..9] == "A" { "B" } else { "A" };
            v["note"] = format!("{body} {}{flipped}{}\n", &blob[..8], &blob[9..]).into();
        });
    });
    assert_problem(&report, ProblemClass::BadSignature, 26, 25);
}

/// A key the log does not name is a mix-up, not tampering: the log cannot be verified with it.
#[test]
fn a_key_the_log_does_not_name_cannot_verify_it() {
    let (_dir, path, _key) = fixture();
    let other = signer().verifier();
    let report = verify_with(&path, Some(&other), None);
    assert_problem(&report, ProblemClass::WrongKey, 7, 6);
    assert!(report.problem.as_ref().unwrap().detail.contains(&other.key_id()));
    assert_eq!(report.exit_code(), 2);
}

#[test]
fn truncation_below_a_trusted_checkpoint_is_detected() {
    let (_dir, path, key) = fixture();
    let mut lines = support::lines(&path);
    let note: serde_json::Value = serde_json::from_slice(lines.last().unwrap()).unwrap();
    let trusted = note["note"].as_str().unwrap().to_owned();
    lines.truncate(lines.len() - 4);
    write_lines(&path, &lines);
    let untrusted = verify_with(&path, Some(&key.verifier()), None);
    assert!(untrusted.problem.is_none(), "a cut at a record boundary needs the trusted checkpoint");
    let report = verify_with(&path, Some(&key.verifier()), Some(trusted));
    assert_problem(&report, ProblemClass::Truncated, lines.len() as u64 + 1, 22);
}

#[test]
fn rewritten_history_is_a_fork() {
    let (_dir, report) = tampered(|lines| {
        let prev = line_hash(&lines[1]);
        lines[2] = reseal(&lines[2], &prev, |v| v["decision"] = "deny".into());
        rechain(lines, 3);
    });
    assert_problem(&report, ProblemClass::Fork, 7, 6);
}

#[test]
fn trusted_checkpoint_of_another_history_is_a_fork() {
    let (_dir, path, key) = fixture();
    let lines = support::lines(&path);
    let record: serde_json::Value = serde_json::from_slice(&lines[6]).unwrap();
    let origin = record["note"].as_str().unwrap().lines().next().unwrap().to_owned();
    let other = key.sign_checkpoint(&origin, 6, &[1; 32]);
    let report = verify_with(&path, Some(&key.verifier()), Some(other));
    assert_eq!(report.problem.unwrap().class, ProblemClass::Fork);
}

#[test]
fn log_rotated_three_times_verifies_as_a_whole() {
    let dir = tempfile::tempdir().unwrap();
    let key = signer();
    let path = dir.path().join("audit.log");
    let mut config: WriterConfig = config(&path, &key);
    config.rotate_bytes = 4096;
    let mut log = LogWriter::open(config).unwrap();
    let mut rotations = 0;
    let mut i = 0;
    while rotations < 3 {
        log.append(decision(i));
        i += 1;
        log.flush(false).unwrap();
        if log.rotation_due() {
            log.rotate().unwrap();
            rotations += 1;
        }
    }
    log.close().unwrap();
    let report = verify_with(&path, Some(&key.verifier()), None);
    assert_eq!(report.segments.len(), 4);
    assert!(report.problem.is_none(), "{report:#?}");
    assert_eq!(report.exit_code(), 0, "{report:#?}");
    // Verifying from a later segment on is possible, with a warning.
    let later = fp_agent::audit::verify::verify(
        &report.segments[2..].iter().map(|s| s.path.clone()).collect::<Vec<_>>(),
        &fp_agent::audit::verify::VerifyOptions { key: Some(key.verifier()), ..Default::default() },
        &mut |_| {},
    )
    .unwrap();
    assert!(later.problem.is_none(), "{later:#?}");
    assert_eq!(later.exit_code(), 3);
    // A missing middle segment is a deletion at the start of the next one.
    let second = &report.segments[1].path;
    std::fs::remove_file(second).unwrap();
    let report = verify_with(&path, Some(&key.verifier()), None);
    let problem = report.problem.unwrap();
    assert_eq!((problem.class, problem.line), (ProblemClass::DeletedRecord, 1));
}

#[test]
fn checkpoint_sink_catches_a_truncated_log() {
    let dir = tempfile::tempdir().unwrap();
    let key = signer();
    let path = dir.path().join("audit.log");
    let sink = dir.path().join("sink.checkpoint");
    let mut config = config(&path, &key);
    config.checkpoint_sink = Some(CheckpointSink::File(sink.clone()));
    let (handle, writer) = start(config).unwrap();
    for i in 0..50 {
        assert!(handle.record(decision(i)));
    }
    writer.shutdown().unwrap();
    let trusted = std::fs::read_to_string(&sink).unwrap();
    let report = verify_with(&path, Some(&key.verifier()), Some(trusted.clone()));
    assert_eq!(report.exit_code(), 0, "{report:#?}");
    let mut lines = support::lines(&path);
    lines.truncate(lines.len() - 10);
    write_lines(&path, &lines);
    let report = verify_with(&path, Some(&key.verifier()), Some(trusted));
    assert_eq!(report.problem.unwrap().class, ProblemClass::Truncated);
}
