//! Crash safety, ENOSPC and loss accounting, each against a real writer.
//!
//! Writers that get killed or need a small filesystem run as children: this test binary
//! re-executes itself to run one of the `#[ignore]`d `child_*` tests.
#[path = "audit_support.rs"]
mod support;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fp_agent::audit::checkpoint::SignerKey;
use fp_agent::audit::verify::ProblemClass;
use fp_agent::audit::writer::CHANNEL_LOSS;
use fp_agent::audit::{Body, Event, Health, LogWriter, Verdict, replay, segments, start};
use support::*;

const LOG_ENV: &str = "FP_AUDIT_TEST_LOG";
const KEY_ENV: &str = "FP_AUDIT_TEST_KEY";

fn child(test: &str, log: &Path, key: &SignerKey) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--ignored", "--nocapture", "--test-threads=1"])
        .env(LOG_ENV, log)
        .env(KEY_ENV, key.encode());
    cmd
}

fn child_env() -> (std::path::PathBuf, SignerKey) {
    let log = std::env::var_os(LOG_ENV).expect("run by a parent test").into();
    let key = SignerKey::parse(&std::env::var(KEY_ENV).unwrap()).unwrap();
    (log, key)
}

/// All records of a log, in order.
fn records(path: &Path) -> Vec<fp_agent::audit::Record> {
    replay::read_records(&segments::expand(&[path.to_path_buf()]).unwrap()).unwrap()
}

#[test]
#[ignore = "child of kill_9_mid_stream_always_recovers"]
fn child_writer_forever() {
    let (log, key) = child_env();
    let mut config = config(&log, &key);
    config.sync_interval = Duration::from_millis(1);
    config.checkpoint_every_records = 300;
    config.rotate_bytes = 256 << 10;
    let (handle, _writer) = start(config).unwrap();
    // The parent kills us mid-stream, so it waits for this line: the log is open and durable.
    println!("{STARTED}");
    for i in 0.. {
        handle.record(decision(i));
        if i % 64 == 0 {
            std::thread::yield_now();
        }
    }
}

const STARTED: &str = "fp-audit-test: writer started";

/// Reads a child's stdout until a line ends with `line` (the harness writes around it).
fn wait_for_line(stdout: std::process::ChildStdout, line: &str) {
    use std::io::BufRead as _;
    let found =
        std::io::BufReader::new(stdout).lines().map_while(Result::ok).any(|l| l.ends_with(line));
    assert!(found, "the child exited before printing {line:?}");
}

#[test]
fn kill_9_mid_stream_always_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let key = signer();
    let log = dir.path().join("audit.log");
    let mut torn_seen = 0;
    for round in 0..30u64 {
        let mut writer =
            child("child_writer_forever", &log, &key).stdout(Stdio::piped()).spawn().unwrap();
        wait_for_line(writer.stdout.take().unwrap(), STARTED);
        std::thread::sleep(Duration::from_millis(30 + (round * 37) % 120));
        writer.kill().unwrap();
        writer.wait().unwrap();
        let report = verify_with(&log, Some(&key.verifier()), None);
        match &report.problem {
            None => {}
            Some(p) if p.class == ProblemClass::TornTail => torn_seen += 1,
            Some(p) => panic!("round {round}: {p:#?}"),
        }
    }
    LogWriter::open(config(&log, &key)).unwrap().close().unwrap();
    let report = verify_with(&log, Some(&key.verifier()), None);
    assert!(report.problem.is_none(), "{report:#?}");
    let all = records(&log);
    let restarts = all.iter().filter(|r| matches!(r.body, Body::DaemonRestart(_))).count();
    assert_eq!(restarts, 30, "every start after the first resumed the chain, plus the final one");
    let recoveries: Vec<_> = all
        .iter()
        .filter_map(|r| match &r.body {
            Body::Recovery(rec) => Some(rec.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(recoveries.len(), torn_seen, "each torn tail was moved aside and recorded");
    for recovery in &recoveries {
        let torn = std::fs::read(dir.path().join(&recovery.torn_file)).unwrap();
        assert_eq!(torn.len() as u64, recovery.torn_size);
    }
    eprintln!("{} records, {torn_seen} torn tails recovered", all.len());
}

#[test]
fn a_crash_between_rotating_and_the_next_segment_verifies_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let key = signer();
    let log = write_log(dir.path(), &key, 10, 5);
    // What `rotate` leaves when killed after its rename: no active segment yet.
    std::fs::rename(&log, segments::rotated_path(&log, 0)).unwrap();
    let report = verify_with(&log, Some(&key.verifier()), None);
    assert!(report.problem.is_none(), "{report:#?}");
    assert_eq!(report.exit_code(), 3);
    assert!(report.warnings.iter().any(|w| w.contains("no active segment")), "{report:#?}");
    // log-open, 10 decisions, 2 checkpoints and the one `close` adds.
    assert_eq!(records(&log).len(), 14, "replay reads the rotated segment");
    LogWriter::open(config(&log, &key)).unwrap().close().unwrap();
    let report = verify_with(&log, Some(&key.verifier()), None);
    assert_eq!((report.segments.len(), report.exit_code()), (2, 0), "{report:#?}");
}

#[test]
#[ignore = "child of enospc_refuses_sessions_and_resumes; needs its private tmpfs"]
fn child_enospc() {
    let (log, key) = child_env();
    let dir = log.parent().unwrap();
    let mut config = config(&log, &key);
    config.enospc_retry = Duration::from_millis(50);
    config.sync_interval = Duration::from_millis(5);
    config.space_left = fp_agent::audit::SpaceLeft::Percent(50);
    let (handle, writer) = start(config).unwrap();
    // `space_left` as the writer sees it (it looks every second).
    let low_space_becomes = |want: bool| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while handle.space_left().1 != want || handle.space_left().0 == 0 {
            assert!(Instant::now() < deadline, "low space stayed {:?}", handle.space_left());
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    low_space_becomes(false);
    let filler = dir.join("filler");
    {
        use std::io::Write as _;
        let mut file = std::fs::File::create(&filler).unwrap();
        while file.write_all(&[0x55; 4096]).is_ok() {}
        let _ = file.sync_all();
    }
    let wait_for = |want: Health| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while handle.health() != want {
            assert!(Instant::now() < deadline, "health stayed {:?}", handle.health());
            handle.record(decision(0));
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let mut sent = 0u64;
    let mut record = |n: u64| {
        for i in 0..n {
            handle.record(decision(i));
        }
        sent += n;
    };
    record(100);
    wait_for(Health::NoSpace);
    low_space_becomes(true);
    assert!(!handle.accepting_sessions());
    let refused = handle.refuse_new_session().unwrap_err().to_string();
    assert!(refused.contains("no space is left") && refused.contains("audit.log"), "{refused}");
    record(300);
    std::fs::remove_file(&filler).unwrap();
    wait_for(Health::Ok);
    low_space_becomes(false);
    assert!(handle.accepting_sessions());
    handle.refuse_new_session().unwrap();
    record(100);
    writer.shutdown().unwrap();
    let report = verify_with(&log, Some(&key.verifier()), None);
    assert!(report.problem.is_none(), "{report:#?}");
    let decisions = records(&log).iter().filter(|r| matches!(r.body, Body::Decision(_))).count();
    assert!(decisions as u64 >= sent, "{decisions} decisions for {sent} events sent");
}

#[test]
fn enospc_refuses_sessions_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let key = signer();
    let mut cmd = child("child_enospc", &dir.path().join("audit.log"), &key);
    let status = on_private_tmpfs(&mut cmd, dir.path()).status().unwrap();
    assert!(status.success(), "the ENOSPC child failed: {status}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the tmpfs held the log");
}

/// `cmd` runs with a 2 MiB tmpfs on `dir`, in a private mount namespace of its own (its
/// children share it), which dies with it.
fn on_private_tmpfs<'a>(cmd: &'a mut Command, dir: &Path) -> &'a mut Command {
    let target = CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: between fork and exec only async-signal-safe syscalls run; the strings were built
    // before the fork. The mounts live and die with the child's private mount namespace.
    unsafe {
        cmd.pre_exec(move || {
            let check = |rc: libc::c_int| {
                if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
            };
            check(libc::unshare(libc::CLONE_NEWNS))?;
            check(libc::mount(
                c"none".as_ptr(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            check(libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                c"size=2m,mode=0700".as_ptr().cast(),
            ))
        })
    }
}

/// Decision records in the log at `log`.
fn decisions_in(log: &Path) -> u64 {
    records(log).iter().filter(|r| matches!(r.body, Body::Decision(_))).count() as u64
}

const FULL: &str = "fp-audit-test: records held, the disk full";

#[test]
#[ignore = "child of child_crash_while_full: a writer killed while its disk is full"]
fn child_full_writer() {
    let (log, key) = child_env();
    let mut config = config(&log, &key);
    config.enospc_retry = Duration::from_millis(50);
    let (handle, _writer) = start(config).unwrap();
    {
        use std::io::Write as _;
        let mut file = std::fs::File::create(log.with_file_name("filler")).unwrap();
        while file.write_all(&[0x55; 4096]).is_ok() {}
    }
    for i in 0..50 {
        handle.record(decision(i));
    }
    let note = log.with_file_name("audit.log.queued");
    let deadline = Instant::now() + Duration::from_secs(60);
    // Every record written or held and noted: the writer found no space and wrote down how many
    // it holds (the log's last page may have taken a few before the wall).
    while handle.health() != Health::NoSpace
        || std::fs::read_to_string(&note).unwrap().trim().parse::<u64>().unwrap()
            + decisions_in(&log)
            != 50
    {
        assert!(Instant::now() < deadline, "the writer did not note its records");
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("{FULL}");
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
#[ignore = "child of a_crash_while_the_disk_is_full_is_a_recorded_loss; needs its private tmpfs"]
fn child_crash_while_full() {
    let (log, key) = child_env();
    let mut full = child("child_full_writer", &log, &key).stdout(Stdio::piped()).spawn().unwrap();
    wait_for_line(full.stdout.take().unwrap(), FULL);
    full.kill().unwrap();
    full.wait().unwrap();
    std::fs::remove_file(log.with_file_name("filler")).unwrap();
    // The next writer chains how many the dead one held, and why.
    LogWriter::open(config(&log, &key)).unwrap().close().unwrap();
    let report = verify_with(&log, Some(&key.verifier()), None);
    assert!(report.problem.is_none(), "{report:#?}");
    let losses: Vec<_> = records(&log)
        .into_iter()
        .filter_map(|r| match r.body {
            Body::Loss(loss) => Some(loss),
            _ => None,
        })
        .collect();
    assert_eq!(losses.len(), 1, "{losses:?}");
    assert_eq!(losses[0].at, fp_agent::audit::writer::UNWRITTEN_LOSS);
    assert_eq!(losses[0].count + decisions_in(&log), 50, "{losses:?}");
    let note = std::fs::read_to_string(log.with_file_name("audit.log.queued")).unwrap();
    assert_eq!(note.trim(), "0", "the note was not cleared once the loss was written");
}

#[test]
fn a_crash_while_the_disk_is_full_is_a_recorded_loss() {
    let dir = tempfile::tempdir().unwrap();
    let key = signer();
    let mut cmd = child("child_crash_while_full", &dir.path().join("audit.log"), &key);
    let status = on_private_tmpfs(&mut cmd, dir.path()).status().unwrap();
    assert!(status.success(), "the crash-while-full child failed: {status}");
}

#[test]
fn records_plus_counted_losses_equal_events() {
    let dir = tempfile::tempdir().unwrap();
    let key = signer();
    let log = dir.path().join("audit.log");
    let mut config = config(&log, &key);
    config.channel_capacity = 64;
    config.sync_on_deny = true;
    let (handle, writer) = start(config).unwrap();
    const PRODUCERS: u64 = 4;
    const EACH: u64 = 25_000;
    let handle = Arc::new(handle);
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let handle = Arc::clone(&handle);
            std::thread::spawn(move || {
                for i in 0..EACH {
                    let mut event = decision(p * EACH + i);
                    if let Event::Decision(d) = &mut event {
                        d.decision = Verdict::Deny;
                    }
                    handle.record(event);
                }
            })
        })
        .collect();
    for producer in producers {
        producer.join().unwrap();
    }
    writer.shutdown().unwrap();
    let all = records(&log);
    let decisions = all.iter().filter(|r| matches!(r.body, Body::Decision(_))).count() as u64;
    let lost: u64 = all
        .iter()
        .filter_map(|r| match &r.body {
            Body::Loss(loss) if loss.at == CHANNEL_LOSS => Some(loss.count),
            _ => None,
        })
        .sum();
    assert_eq!(decisions + lost, PRODUCERS * EACH);
    assert!(lost > 0, "the producers should outrun a writer that syncs every deny");
    let report = verify_with(&log, Some(&key.verifier()), None);
    assert!(report.problem.is_none(), "{report:#?}");
    eprintln!("{decisions} written, {lost} counted as lost");
}

#[test]
fn writer_thread_checkpoints_by_time_and_rotates_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let key = signer();
    let log = dir.path().join("audit.log");
    let mut config = config(&log, &key);
    config.checkpoint_every = Duration::from_millis(100);
    config.rotate_age = Duration::from_millis(400);
    let (handle, writer) = start(config).unwrap();
    handle.record(session_start());
    let deadline = Instant::now() + Duration::from_secs(10);
    while segments::expand(std::slice::from_ref(&log)).unwrap().len() < 2 {
        assert!(Instant::now() < deadline, "no rotation by age");
        handle.record(decision(1));
        std::thread::sleep(Duration::from_millis(50));
    }
    writer.shutdown().unwrap();
    let all = records(&log);
    let checkpoints = all.iter().filter(|r| matches!(r.body, Body::Checkpoint(_))).count();
    assert!(checkpoints >= 3, "timed checkpoints, the rotation's and the final one: {checkpoints}");
    let report = verify_with(&log, Some(&key.verifier()), None);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

/// An event handed over with `record_written` is in the log file when the call returns (before
/// any shutdown), so an agent killed right after loses nothing it let go of.
#[test]
fn record_written_returns_once_the_event_is_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let (handle, writer) = start(config(&log, &signer())).unwrap();
    for i in 0..50 {
        assert!(handle.record_written(decision(i), Duration::from_secs(10)));
        let in_file =
            records(&log).iter().filter(|r| matches!(r.body, Body::Decision(_))).count() as u64;
        assert_eq!(in_file, i + 1, "event {i} not yet in the file");
    }
    writer.shutdown().unwrap();
}

/// A session's end seals its records at once: a checkpoint follows its `session-end` record
/// without waiting for `checkpoint_every`, so its log verifies without warnings as it ends.
#[test]
fn a_session_end_is_sealed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (log, key) = (dir.path().join("audit.log"), signer());
    let (handle, writer) = start(config(&log, &key)).unwrap();
    handle.record(session_start());
    handle.record(decision(1));
    let end = fp_agent::audit::SessionEnd {
        session: "s0".into(),
        agent: "coder".into(),
        exit_code: Some(0),
        reason: "command exited".into(),
    };
    handle.record(Event::SessionEnd(end));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !records(&log).last().is_some_and(|r| matches!(r.body, Body::Checkpoint(_))) {
        assert!(Instant::now() < deadline, "no checkpoint after the session's end");
        std::thread::sleep(Duration::from_millis(10));
    }
    let report = verify_with(&log, Some(&key.verifier()), None);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
    writer.shutdown().unwrap();
}
