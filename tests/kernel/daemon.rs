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

/// The ids and policy hashes of the daemon's sessions, once there are `n`.
fn sessions_listed(socket: &Path, n: usize) -> Vec<(String, String)> {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let listed = fp().args(["sessions", "--json", "--socket"]).arg(socket).output().unwrap();
        let sessions: serde_json::Value =
            serde_json::from_str(&stdout(&listed)).unwrap_or_default();
        let mut found: Vec<(String, String)> = sessions
            .as_array()
            .map(|s| {
                s.iter().map(|s| (s["id"].to_string(), s["policy_hash"].to_string())).collect()
            })
            .unwrap_or_default();
        found.sort();
        if found.len() == n {
            return found;
        }
        assert!(std::time::Instant::now() < deadline, "{n} sessions never listed: {found:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn count(out: &str, key: &str) -> u64 {
    out.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {out:?}"))
}

/// kill -9 of the daemon while two sessions with different policies open a file in a tight loop:
/// the pinned programs keep deciding while no daemon runs, a restarted daemon takes both sessions
/// over (same ids, same policies), every denial — those made while it was down included —
/// reaches the audit log or a loss record, and the chain verifies across the restart.
#[test]
fn daemon_killed_under_load_keeps_enforcing_and_takes_its_sessions_over() {
    let _g = exclusive();
    let t = TempTree::new("restart");
    let f = t.file("ws/f", "data\n");
    let ws = t.join("ws");
    let socket = t.join("fp.sock");
    let log = t.join("log/audit.log");
    let config = fp_tests::daemon_config(&t, "");
    let deny = t.file(
        "deny.toml",
        &format!("[file_policy]\ndefault = \"write\"\ndeny_paths = [\"{}\"]\n", f.display()),
    );
    let allow = t.file("allow.toml", "[file_policy]\ndefault = \"write\"\n");
    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);

    let stop = t.join("stop");
    let script = format!(
        "ok=0; no=0; while [ ! -e {stop} ]; do if cat {f} >/dev/null 2>&1; then ok=$((ok+1)); \
         else no=$((no+1)); fi; done; echo ok=$ok no=$no",
        stop = stop.display(),
        f = f.display()
    );
    let denied = fp_tests::run_with_daemon(&socket, &deny, &ws, &script);
    let allowed = fp_tests::run_with_daemon(&socket, &allow, &ws, &script);
    let before = sessions_listed(&socket, 2);
    std::thread::sleep(Duration::from_secs(1));
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    // No daemon: the sessions go on, still confined.
    std::thread::sleep(Duration::from_secs(3));
    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);
    assert_eq!(sessions_listed(&socket, 2), before, "the same sessions, with the same policies");
    let status = fp().args(["status", "--json", "--socket"]).arg(&socket).output().unwrap();
    let status: serde_json::Value = serde_json::from_str(&stdout(&status)).unwrap();
    let sessions_map = status["maps"].as_array().unwrap().iter().find(|m| m["name"] == "SESSIONS");
    assert_eq!(sessions_map.unwrap()["used"], 2, "map usage: {status}");
    std::thread::sleep(Duration::from_secs(1));
    std::fs::write(&stop, "").unwrap();
    let (denied, allowed) =
        (denied.wait_with_output().unwrap(), allowed.wait_with_output().unwrap());
    let (d, a) = (stdout(&denied), stdout(&allowed));
    assert!(count(&d, "ok") == 0 && count(&d, "no") > 0, "{d}{}", stderr(&denied));
    assert!(count(&a, "ok") > 0 && count(&a, "no") == 0, "{a}{}", stderr(&allowed));
    // Both end once their last process has exited.
    sessions_listed(&socket, 0);
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
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kind = |r: &serde_json::Value, k: &str| r["kind"] == k;
    assert_eq!(records.iter().filter(|r| kind(r, "session-adopt")).count(), 2);
    let denials = records
        .iter()
        .filter(|r| kind(r, "decision") && r["path"] == f.display().to_string())
        .count() as u64;
    let lost: u64 =
        records.iter().filter(|r| kind(r, "loss")).filter_map(|r| r["count"].as_u64()).sum();
    assert_eq!(denials + lost, count(&d, "no"), "every denial recorded or counted as lost");
    assert!(denials > 0);
}

/// Pins of another ABI version belong to an fp this one cannot read: the daemon refuses to
/// start beside them and says what to do.
#[test]
fn daemon_refuses_pins_of_another_abi_version() {
    let _g = exclusive();
    let t = TempTree::new("abi");
    let config = fp_tests::daemon_config(&t, "");
    let other = Path::new("/sys/fs/bpf/fp/v1/left-behind");
    std::fs::create_dir_all(other).unwrap();
    let out = fp().args(["daemon", "--config"]).arg(&config).output().unwrap();
    std::fs::remove_dir(other).unwrap();
    std::fs::remove_dir("/sys/fs/bpf/fp/v1").unwrap();
    std::fs::remove_dir("/sys/fs/bpf/fp").unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("another fp version") && err.contains("/sys/fs/bpf/fp/v1"), "{err}");
    fp_tests::assert_nothing_left_behind();
}
