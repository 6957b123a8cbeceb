//! The prompt tier end to end: a session's open of a prompt-tier file waits in the kernel until
//! `fp approve` / `fp deny`, and a broker killed mid-prompt gives no data away.
use std::{
    path::{Path, PathBuf},
    process::Child,
    time::{Duration, Instant},
};

use fp_tests::{TempTree, exclusive, fp, start_daemon, stdout, wait_for_socket};

/// `cat` of `file` in a session of the daemon at `socket` under `policy`.
fn cat_in_session(socket: &Path, policy: &Path, ws: &Path, file: &Path) -> Child {
    fp_tests::run_with_daemon(socket, policy, ws, &format!("cat {}; echo rc=$?", file.display()))
}

/// The pending approvals.
fn approvals(socket: &Path) -> Vec<serde_json::Value> {
    let out = fp().args(["approvals", "--json", "--socket"]).arg(socket).output().unwrap();
    serde_json::from_str(&stdout(&out)).unwrap_or_default()
}

/// The first pending approval, once there is one.
fn first_approval(socket: &Path) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(first) = approvals(socket).into_iter().next() {
            return first;
        }
        assert!(Instant::now() < deadline, "no approval appeared");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The id of the one pending approval, once it is there.
fn pending_approval(socket: &Path) -> u64 {
    first_approval(socket)["id"].as_u64().unwrap()
}

fn decide(socket: &Path, verb: &str, id: u64) {
    decide_with(socket, &[verb, &id.to_string()]);
}

fn decide_with(socket: &Path, args: &[&str]) {
    let out = fp().args(args).arg("--socket").arg(socket).output().unwrap();
    assert!(out.status.success(), "fp {args:?}: {}", fp_tests::stderr(&out));
}

/// Waits (at most a minute) for `file` to exist, while no approval is pending.
fn wait_without_approval(socket: &Path, file: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !file.exists() {
        let pending = approvals(socket);
        assert!(pending.is_empty(), "waiting for {}: asked again: {pending:?}", file.display());
        assert!(Instant::now() < deadline, "{} never appeared", file.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A running daemon (approvals time out after 120 s) and a policy prompting for
/// `<workspace>/secret/**`, in `t`.
struct Daemon {
    ws: PathBuf,
    config: PathBuf,
    socket: PathBuf,
    policy: PathBuf,
    daemon: Child,
}

impl Daemon {
    fn start(t: &TempTree) -> Self {
        let config = fp_tests::daemon_config(t, "[approval]\ntimeout_secs = 120\n");
        let socket = t.join("fp.sock");
        let policy = t.file(
            "policy.toml",
            "[file_policy]\ndefault = \"write\"\nprompt_paths = [\"<workspace>/secret/**\"]\n",
        );
        let mut daemon = start_daemon(&config);
        wait_for_socket(&socket, &mut daemon);
        Daemon { ws: t.join("ws"), config, socket, policy, daemon }
    }
}

/// After a daemon was killed: a new one takes its sessions over and stops cleanly, leaving
/// nothing behind. Returns the audit log.
fn restart_and_stop(t: &TempTree, config: &Path, socket: &Path) -> String {
    let mut daemon = start_daemon(config);
    wait_for_socket(socket, &mut daemon);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let stopped = daemon.wait_with_output().unwrap();
    assert!(stopped.status.success(), "{}", fp_tests::stderr(&stopped));
    fp_tests::assert_nothing_left_behind();
    std::fs::read_to_string(t.join("log/audit.log")).unwrap()
}

#[test]
fn prompt_tier_opens_wait_for_a_decision_and_fail_closed_when_the_broker_dies() {
    let _g = exclusive();
    let t = TempTree::new("prompt");
    let secret = t.file("ws/secret/f", "the secret\n");
    let Daemon { ws, config, socket, policy, mut daemon } = Daemon::start(&t);

    // Approved: the held read gets the data.
    let reader = cat_in_session(&socket, &policy, &ws, &secret);
    decide(&socket, "approve", pending_approval(&socket));
    let out = stdout(&reader.wait_with_output().unwrap());
    assert!(out.contains("the secret") && out.contains("rc=0"), "{out}");

    // Denied: the open fails.
    let reader = cat_in_session(&socket, &policy, &ws, &secret);
    decide(&socket, "deny", pending_approval(&socket));
    let out = stdout(&reader.wait_with_output().unwrap());
    assert!(!out.contains("the secret") && out.contains("rc=1"), "{out}");

    // The broker dies while the open waits: fanotify lets the open through, the kernel refuses
    // the read of a file whose open was never answered.
    let reader = cat_in_session(&socket, &policy, &ws, &secret);
    pending_approval(&socket);
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    let done = reader.wait_with_output().unwrap();
    let out = stdout(&done);
    assert!(!out.contains("the secret"), "data leaked after the broker died: {out}");
    assert!(out.contains("rc=1"), "{out}{}", fp_tests::stderr(&done));

    let log = restart_and_stop(&t, &config, &socket);
    assert!(log.contains("prompt-approved") || log.contains("prompt_approved"), "{log}");
    assert!(log.contains("\"kind\":\"session-adopt\""), "{log}");
    assert!(log.contains("the prompt broker died before answering"), "{log}");
}

#[test]
fn a_remembered_dir_grant_lets_later_opens_through_until_it_expires_also_without_a_broker() {
    let _g = exclusive();
    let t = TempTree::new("grants");
    for name in ["a", "b", "c", "d", "e", "f"] {
        t.file(&format!("ws/secret/{name}"), &format!("secret {name}\n"));
    }
    let Daemon { ws, config, socket, policy, mut daemon } = Daemon::start(&t);
    // One session: each step waits for the test's marker file, and leaves one when done.
    let (w, m) = (ws.display(), t.join("").display().to_string());
    let step = |file: &str, done: &str| {
        format!("cat {w}/secret/{file}; echo rc_{file}=$?; touch {m}{done}; ")
    };
    let wait = |marker: &str| format!("while [ ! -e {m}{marker} ]; do sleep 0.1; done; ");
    let script = [
        step("a", "a_done"),
        step("b", "b_done"),
        wait("go_c"),
        step("c", "c_done"),
        step("d", "d_done"),
        wait("go_e"),
        step("e", "e_done"),
        wait("go_f"),
        step("f", "f_done"),
    ]
    .concat();
    let session = fp_tests::run_with_daemon(&socket, &policy, &ws, &script);

    // Approved with a 4 s directory grant: b, in the same directory, is not asked for.
    let approval = first_approval(&socket);
    assert!(approval["path"].as_str().unwrap().ends_with("secret/a"), "{approval}");
    let id = approval["id"].as_u64().unwrap().to_string();
    decide_with(&socket, &["approve", &id, "--remember", "dir", "--for", "4s"]);
    let approved = Instant::now();
    wait_without_approval(&socket, &t.join("b_done"));

    // Expired: c is asked for again (and denied).
    std::thread::sleep(Duration::from_secs(5).saturating_sub(approved.elapsed()));
    std::fs::write(t.join("go_c"), "").unwrap();
    let approval = first_approval(&socket);
    assert!(approval["path"].as_str().unwrap().ends_with("secret/c"), "{approval}");
    decide(&socket, "deny", approval["id"].as_u64().unwrap());

    // d: approved with a 10 s grant, then the broker dies. With no broker the kernel denies
    // prompts, so e gets through on the kernel's copy of the grant alone, until it expires.
    let approval = first_approval(&socket);
    assert!(approval["path"].as_str().unwrap().ends_with("secret/d"), "{approval}");
    let id = approval["id"].as_u64().unwrap().to_string();
    decide_with(&socket, &["approve", &id, "--remember", "dir", "--for", "10s"]);
    let approved = Instant::now();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    // The heartbeat goes stale after 2 s.
    std::thread::sleep(Duration::from_secs(3));
    assert!(approved.elapsed() < Duration::from_secs(8), "too slow to test before expiry");
    std::fs::write(t.join("go_e"), "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !t.join("e_done").exists() {
        assert!(Instant::now() < deadline, "e was never read");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(11).saturating_sub(approved.elapsed()));
    std::fs::write(t.join("go_f"), "").unwrap();
    let done = session.wait_with_output().unwrap();
    let out = stdout(&done);
    for (file, read) in
        [("a", true), ("b", true), ("c", false), ("d", true), ("e", true), ("f", false)]
    {
        let rc = if read { 0 } else { 1 };
        assert!(
            out.contains(&format!("rc_{file}={rc}")),
            "{file}: {out}{}",
            fp_tests::stderr(&done)
        );
        assert_eq!(out.contains(&format!("secret {file}")), read, "{file}: {out}");
    }

    let log = restart_and_stop(&t, &config, &socket);
    assert!(log.contains("granted"), "no granted open in the audit log: {log}");
}
