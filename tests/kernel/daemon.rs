//! The host agent for real: `fp daemon` runs concurrent sessions with different policies started
//! by `fp run`, lists them, refuses its socket to session processes and to a second daemon, and
//! closes a verifiable audit log on SIGTERM.
use std::{path::Path, process::Output, time::Duration};

use fp_tests::{TempTree, exclusive, fp, start_daemon, statuses, stderr, stdout, wait_for_socket};

#[test]
fn daemon_hosts_concurrent_sessions_and_guards_its_socket() {
    let _g = exclusive();
    let t = TempTree::new("daemon");
    let a = t.file("ws/a", "a\n");
    let b = t.file("ws/b", "b\n");
    let ws = t.join("ws");
    let socket = t.join("fp.sock");
    let log = t.join("log/audit.log");
    let config = fp_tests::daemon_config(&t, "");
    let policy = |deny: &Path| {
        format!("[file_policy]\ndefault = \"write\"\ndeny_paths = [\"{}\"]\n", deny.display())
    };
    let deny_a = t.file("deny-a.toml", &policy(&a));
    let deny_b = t.file("deny-b.toml", &policy(&b));

    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);
    let second = fp().args(["daemon", "--config"]).arg(&config).output().unwrap();
    assert_eq!(second.status.code(), Some(125), "a second daemon must refuse to start");

    // Each session waits for `go` (made once the test has listed both), then reports.
    let go = t.join("go");
    let script = |marker: &str| {
        format!(
            "while [ ! -e {go} ]; do sleep 0.1; done; {}; fp_sessions=$({fp} sessions --socket {s} 2>&1); echo \"inside=$? $fp_sessions\"; echo {marker}",
            statuses(&format!("a: cat {}\nb: cat {}", a.display(), b.display()))
                .trim_end()
                .replace('\n', "; "),
            go = go.display(),
            fp = std::env::var("FP_BIN").unwrap(),
            s = socket.display()
        )
    };
    let first = fp_tests::run_with_daemon(&socket, &deny_a, &ws, &script("first"));
    let other = fp_tests::run_with_daemon(&socket, &deny_b, &ws, &script("second"));
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let hashes = loop {
        let listed = fp().args(["sessions", "--json", "--socket"]).arg(&socket).output().unwrap();
        let sessions: serde_json::Value =
            serde_json::from_str(&stdout(&listed)).unwrap_or_default();
        let hashes: std::collections::HashSet<String> = sessions
            .as_array()
            .map(|s| s.iter().map(|s| s["policy_hash"].to_string()).collect())
            .unwrap_or_default();
        if hashes.len() == 2 || std::time::Instant::now() > deadline {
            break hashes;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    std::fs::write(&go, "").unwrap();
    let (first, other): (Output, Output) =
        (first.wait_with_output().unwrap(), other.wait_with_output().unwrap());
    assert_eq!(hashes.len(), 2, "two sessions with different policies while both ran");
    let (one, two) = (stdout(&first), stdout(&other));
    assert!(first.status.success() && one.contains("first"), "{one}{}", stderr(&first));
    assert!(one.contains("a=denied") && one.contains("b=ok"), "{one}");
    assert!(two.contains("a=ok") && two.contains("b=denied"), "{two}");
    for out in [&one, &two] {
        assert!(
            out.contains("inside=1") && out.contains("inside fp sessions"),
            "session processes must be refused: {out}"
        );
    }
    let status = fp().args(["status", "--json", "--socket"]).arg(&socket).output().unwrap();
    assert!(status.status.success(), "{}", stderr(&status));
    assert!(stdout(&status).contains("file_open"), "{}", stdout(&status));

    // SIGTERM: a clean stop, a final checkpoint, nothing left behind.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let stopped = daemon.wait_with_output().unwrap();
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    fp_tests::assert_nothing_left_behind();
    let verify = fp()
        .args(["audit", "verify", "--pubkey"])
        .arg(t.join("audit.pub"))
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(0), "{}{}", stdout(&verify), stderr(&verify));
    let raw = std::fs::read_to_string(&log).unwrap();
    assert_eq!(raw.matches("\"kind\":\"session-start\"").count(), 2, "{raw}");
    assert!(raw.contains(&a.display().to_string()), "the denial of a is in the log");
}
