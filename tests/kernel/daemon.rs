//! The host agent for real: `fp daemon` runs concurrent sessions with different policies started
//! by `fp run`, lists them, refuses its socket to session processes and to a second daemon, and
//! closes a verifiable audit log on SIGTERM.
use std::{
    path::Path,
    process::{Command, Output},
    time::Duration,
};

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
    let deny_a = t.file("deny-a.toml", &denying(&a));
    let deny_b = t.file("deny-b.toml", &denying(&b));

    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);
    let second = fp().args(["daemon", "--config"]).arg(&config).output().unwrap();
    assert_eq!(second.status.code(), Some(125), "a second daemon must refuse to start");
    let err = stderr(&second);
    let pid = daemon.id();
    assert!(err.contains(&format!("another fp daemon is running (pid {pid}, holding")), "{err}");
    // Another socket and log, the same (host-wide) pins: refused before it opens its log or
    // takes the live daemon's sessions over.
    let other = t.file(
        "other.toml",
        &format!(
            "[daemon]\nsocket = \"{}\"\n[audit]\nlog = \"{}\"\nkey = \"{}\"\n",
            t.join("other/fp.sock").display(),
            t.join("other/audit.log").display(),
            t.join("audit.key").display()
        ),
    );
    let third = fp().args(["daemon", "--config"]).arg(&other).output().unwrap();
    let err = stderr(&third);
    assert_eq!(third.status.code(), Some(125), "{err}");
    assert!(
        err.contains(&format!("another fp daemon is running (pid {pid}, holding /sys/fs/bpf/fp)")),
        "{err}"
    );
    assert!(!t.join("other").exists(), "refused before it touched its log or socket");

    // Each session waits for `go` (made once the test has listed both), then reports, and exits
    // with its own code.
    let go = t.join("go");
    let script = |marker: &str, code: u8| {
        format!(
            "while [ ! -e {go} ]; do sleep 0.1; done; {}; fp_sessions=$({fp} sessions --socket {s} 2>&1); echo \"inside=$? $fp_sessions\"; echo {marker}; exit {code}",
            statuses(&format!("a: cat {}\nb: cat {}", a.display(), b.display()))
                .trim_end()
                .replace('\n', "; "),
            go = go.display(),
            fp = fp_tests::fp_bin(),
            s = socket.display()
        )
    };
    let first = fp_tests::run_with_daemon(&socket, &deny_a, &ws, &script("first", 0));
    let other = fp_tests::run_with_daemon(&socket, &deny_b, &ws, &script("second", 7));
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
    assert_eq!(other.status.code(), Some(7), "{two}{}", stderr(&other));
    // Each `fp run` printed its own session's refusals, as the embedded agent does, no other's.
    let (err_one, err_two) = (stderr(&first), stderr(&other));
    assert!(err_one.contains(&format!("fp: denied file_open {} by cat", a.display())), "{err_one}");
    assert!(!err_one.contains(&b.display().to_string()), "{err_one}");
    assert!(err_two.contains(&format!("fp: denied file_open {} by cat", b.display())), "{err_two}");
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
    fp_tests::stop_daemon(daemon);
    fp_tests::assert_log_verifies(&t);
    let raw = std::fs::read_to_string(&log).unwrap();
    assert_eq!(raw.matches("\"kind\":\"session-start\"").count(), 2, "{raw}");
    assert!(raw.contains(&a.display().to_string()), "the denial of a is in the log");
    // Each session-start says what the session ran: the argv given to `fp run`.
    for line in raw.lines().filter(|l| l.contains("\"kind\":\"session-start\"")) {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        let command = record["command"].as_array().unwrap_or_else(|| panic!("{line}"));
        assert_eq!(command.len(), 3, "{line}");
        assert_eq!((&command[0], &command[1]), (&"sh".into(), &"-c".into()), "{line}");
    }
    // Each session-end carries its command's exit code, which its `fp run` told the daemon.
    let mut exits: Vec<i64> = raw
        .lines()
        .filter(|l| l.contains("\"kind\":\"session-end\""))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["exit_code"].as_i64())
        .map(|code| code.unwrap_or(-1))
        .collect();
    exits.sort();
    assert_eq!(exits, [0, 7], "{raw}");
}

/// A policy that writes everywhere but `path`, which it denies.
fn denying(path: &Path) -> String {
    format!("[file_policy]\ndefault = \"write\"\ndeny_paths = [\"{}\"]\n", path.display())
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
    let deny = t.file("deny.toml", &denying(&f));
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
    fp_tests::stop_daemon(daemon);

    fp_tests::assert_log_verifies(&t);
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
    // Every denial is recorded or counted as lost; one may be recorded twice, if the kill landed
    // between its record reaching the log file and its release from the ring buffer.
    let no = count(&d, "no");
    assert!(
        denials + lost >= no && denials <= no + 1,
        "{denials} recorded, {lost} lost, {no} made"
    );
    assert!(denials > 0);
}

/// The pinned programs know their sessions' parent cgroup by its id: a daemon restarted after that
/// cgroup was removed and made again (a new id) must not take over programs that would never find
/// its sessions; it loads new ones, and its sessions are confined.
#[test]
fn daemon_restarted_after_its_cgroup_parent_was_made_again_still_confines() {
    let _g = exclusive();
    let t = TempTree::new("reparent");
    let f = t.file("ws/f", "data\n");
    let ws = t.join("ws");
    let socket = t.join("fp.sock");
    let config = fp_tests::daemon_config(&t, "");
    let deny = t.file("deny.toml", &denying(&f));
    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    // Its programs stay pinned; the empty parent goes and comes back.
    let parent = Path::new("/sys/fs/cgroup/fp");
    std::fs::remove_dir(parent).unwrap();
    std::fs::create_dir(parent).unwrap();
    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);
    let out = fp_tests::run_with_daemon(&socket, &deny, &ws, &format!("cat {}", f.display()))
        .wait_with_output()
        .unwrap();
    fp_tests::stop_daemon(daemon);
    assert!(!out.status.success(), "read a denied file: {}", stdout(&out));
    assert!(stderr(&out).contains("Permission denied"), "{}", stderr(&out));
    fp_tests::assert_log_verifies(&t);
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

/// A user who is not root, in the socket's group, runs a confined command through the daemon:
/// the session runs as that user under the policy it sent.
#[test]
fn a_user_in_the_socket_group_runs_confined_sessions_through_the_daemon() {
    let _g = exclusive();
    let t = TempTree::new("nonroot");
    let open = t.file("ws/open", "open\n");
    let secret = t.file("ws/secret", "secret\n");
    let socket = t.join("fp.sock");
    let config = fp_tests::daemon_config_for_nobody(&t, "");
    let policy = t.file("policy.toml", &denying(&secret));
    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);

    let script = format!(
        "{}; echo uid=$(id -u)",
        statuses(&format!("open: cat {}\nsecret: cat {}", open.display(), secret.display()))
            .trim_end()
            .replace('\n', "; ")
    );
    let as_nobody = |policy: &Path| {
        fp_tests::fp_run_as_nobody(&socket, policy, &t.join("ws"), &script).output().unwrap()
    };
    // A policy the daemon refuses: fp run says why and exits, its command never runs.
    let bad = t.file("bad.toml", "[file_policy]\ndefault = \"sometimes\"\n");
    let out = as_nobody(&bad);
    assert_eq!(out.status.code(), Some(125), "{}{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains("<request>:2"), "{}", stderr(&out));
    assert!(!stdout(&out).contains("uid="), "{}", stdout(&out));

    let out = as_nobody(&policy);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(text.contains("open=ok") && text.contains("secret=denied"), "{text}");
    assert!(text.contains("uid=65534"), "{text}");
    sessions_listed(&socket, 0);
    fp_tests::stop_daemon(daemon);
    let log = std::fs::read_to_string(t.join("log/audit.log")).unwrap();
    assert!(log.contains("\"uid\":65534"), "{log}");
}

/// A log that cannot take a session's records refuses new sessions (exit 125, the log named)
/// and `fp status` says so; with space back, sessions start again (docs/audit.md, "Disk full").
/// A daemon of `t` (with `[audit]` keys `extra`) whose log is on a 2 MiB tmpfs at `t/log`
/// (unmount it at the end): the daemon, its socket and the log's directory.
fn daemon_logging_to_a_small_tmpfs(
    t: &TempTree,
    extra: &str,
) -> (fp_tests::Daemon, std::path::PathBuf, std::path::PathBuf) {
    let config = fp_tests::daemon_config(t, extra);
    let logdir = t.join("log");
    std::fs::create_dir_all(&logdir).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
        .arg(&logdir)
        .status()
        .unwrap();
    assert!(mounted.success());
    let socket = t.join("fp.sock");
    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);
    (daemon, socket, logdir)
}

#[test]
fn a_full_audit_disk_refuses_new_sessions_and_status_says_so() {
    let _g = exclusive();
    let t = TempTree::new("auditfull");
    let f = t.file("ws/f", "data\n");
    let ws = t.join("ws");
    let deny = t.file("deny.toml", &denying(&f));
    let (daemon, socket, logdir) = daemon_logging_to_a_small_tmpfs(&t, "");
    let run =
        || fp_tests::run_with_daemon(&socket, &deny, &ws, "echo ran").wait_with_output().unwrap();
    let status = || {
        let out = fp_tests::fp().args(["status", "--socket"]).arg(&socket).output().unwrap();
        stdout(&out)
    };
    assert!(status().contains("audit.log: ok"), "{}", status());
    // Leave less than the 1 MiB a session needs (the log's own records stay writable).
    let filler = logdir.join("filler");
    std::fs::write(&filler, vec![0x55u8; 1536 * 1024]).unwrap();
    let refused = run();
    assert_eq!(refused.status.code(), Some(125), "{}", stderr(&refused));
    assert!(!stdout(&refused).contains("ran"), "the command ran: {}", stdout(&refused));
    assert!(
        stderr(&refused).contains("audit log") && stderr(&refused).contains("cannot be written"),
        "{}",
        stderr(&refused)
    );
    let shown = status();
    assert!(shown.contains("audit.log: ") && shown.contains("MiB free"), "{shown}");
    std::fs::remove_file(&filler).unwrap();
    let again = run();
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(stdout(&again).contains("ran"));
    fp_tests::stop_daemon(daemon);
    fp_tests::assert_log_verifies(&t);
    let _ = Command::new("umount").arg(&logdir).status();
}

/// `on_full = "freeze"`: once the log's filesystem is full, the running session is frozen (its
/// loop stops where it is), and thawed once space returns; every denial of it is in the log,
/// with the freeze and the thaw, and the log verifies.
#[test]
fn a_full_audit_disk_freezes_sessions_with_on_full_freeze() {
    let _g = exclusive();
    let t = TempTree::new("auditfreeze");
    let f = t.file("ws/secret", "data\n");
    let ws = t.join("ws");
    let deny = t.file("deny.toml", &denying(&f));
    let (daemon, socket, logdir) = daemon_logging_to_a_small_tmpfs(&t, "on_full = \"freeze\"\n");
    let (counter, stop) = (ws.join("counter"), ws.join("stop"));
    // Each round is counted, then denied once (a record), until told to stop.
    let script = format!(
        "i=0; while [ ! -e {stop} ]; do i=$((i+1)); echo $i > {counter}; cat {f} 2>/dev/null; \
         sleep 0.1; done; echo finished",
        stop = stop.display(),
        counter = counter.display(),
        f = f.display()
    );
    let session = fp_tests::run_with_daemon(&socket, &deny, &ws, &script);
    let rounds = || std::fs::read_to_string(&counter).unwrap_or_default().trim().parse::<u64>();
    fp_tests::wait_until("the session's first rounds", Duration::from_secs(30), || {
        rounds().is_ok_and(|n| n > 3)
    });
    // Fill the log's filesystem to the last byte.
    let filler = logdir.join("filler");
    {
        use std::io::Write as _;
        let mut file = std::fs::File::create(&filler).unwrap();
        while file.write_all(&[0x55u8; 4096]).is_ok() {}
    }
    // Frozen: the count stops (give the writer its retry and the freeze a moment).
    std::thread::sleep(Duration::from_secs(3));
    let frozen_at = rounds().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(rounds().unwrap(), frozen_at, "the session went on while the log was full");
    let status = fp_tests::fp().args(["status", "--socket"]).arg(&socket).output().unwrap();
    let shown = stdout(&status);
    assert!(shown.contains("NO SPACE") && shown.contains("sessions frozen"), "{shown}");
    // Space again: thawed, it goes on and ends when told.
    std::fs::remove_file(&filler).unwrap();
    fp_tests::wait_until("the thaw", Duration::from_secs(20), || {
        rounds().is_ok_and(|n| n > frozen_at)
    });
    std::fs::write(&stop, "").unwrap();
    let out = session.wait_with_output().unwrap();
    assert!(out.status.success() && stdout(&out).contains("finished"), "{}", stderr(&out));
    let total = rounds().unwrap();
    fp_tests::stop_daemon(daemon);
    fp_tests::assert_log_verifies(&t);
    let log = std::fs::read_to_string(logdir.join("audit.log")).unwrap();
    let denials = log
        .lines()
        .filter(|l| l.contains("\"kind\":\"decision\"") && l.contains(&*f.to_string_lossy()))
        .count() as u64;
    assert_eq!(denials, total, "a round of the session has no record");
    let frozen = log.find("\"state\":\"frozen\"").expect("no freeze record");
    let thawed = log.find("\"state\":\"thawed\"").expect("no thaw record");
    assert!(frozen < thawed, "the thaw is recorded before the freeze");
    let _ = Command::new("umount").arg(&logdir).status();
}
