//! The prompt tier end to end: a session's open of a prompt-tier file waits in the kernel until
//! `fp approve` / `fp deny`, and a broker killed mid-prompt gives no data away.
use std::{
    path::Path,
    process::Child,
    time::{Duration, Instant},
};

use fp_tests::{TempTree, exclusive, fp, start_daemon, stdout, wait_for_socket};

/// `cat` of `file` in a session of the daemon at `socket` under `policy`.
fn cat_in_session(socket: &Path, policy: &Path, ws: &Path, file: &Path) -> Child {
    fp_tests::run_with_daemon(socket, policy, ws, &format!("cat {}; echo rc=$?", file.display()))
}

/// The id of the one pending approval, once it is there.
fn pending_approval(socket: &Path) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let out = fp().args(["approvals", "--json", "--socket"]).arg(socket).output().unwrap();
        let list: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap_or_default();
        if let Some(id) = list.as_array().and_then(|a| a.first()).and_then(|a| a["id"].as_u64()) {
            return id;
        }
        assert!(Instant::now() < deadline, "no approval appeared: {}", stdout(&out));
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn decide(socket: &Path, verb: &str, id: u64) {
    let out = fp().args([verb, &id.to_string(), "--socket"]).arg(socket).output().unwrap();
    assert!(out.status.success(), "fp {verb}: {}", fp_tests::stderr(&out));
}

#[test]
fn prompt_tier_opens_wait_for_a_decision_and_fail_closed_when_the_broker_dies() {
    let _g = exclusive();
    let t = TempTree::new("prompt");
    let secret = t.file("ws/secret/f", "the secret\n");
    let ws = t.join("ws");
    let config = fp_tests::daemon_config(&t, "[approval]\ntimeout_secs = 120\n");
    let socket = t.join("fp.sock");
    let policy = t.file(
        "policy.toml",
        "[file_policy]\ndefault = \"write\"\nprompt_paths = [\"<workspace>/secret/**\"]\n",
    );
    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);

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

    // A new daemon takes the session over, records the open its predecessor never answered, and
    // stops cleanly.
    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let stopped = daemon.wait_with_output().unwrap();
    assert!(stopped.status.success(), "{}", fp_tests::stderr(&stopped));
    fp_tests::assert_nothing_left_behind();
    let log = std::fs::read_to_string(t.join("log/audit.log")).unwrap();
    assert!(log.contains("prompt-approved") || log.contains("prompt_approved"), "{log}");
    assert!(log.contains("\"kind\":\"session-adopt\""), "{log}");
    assert!(log.contains("the prompt broker died before answering"), "{log}");
}
