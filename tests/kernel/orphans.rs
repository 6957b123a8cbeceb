//! An `fp run` killed with SIGKILL leaves its programs pinned and its session running, confined.
//! The next `fp run` finds it and keeps it so while its process lives, as does a daemon, which
//! lists it; once the process has exited, the daemon removes the cgroup and the pins; each agent
//! records what it did.
use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use fp_tests::{TempTree, exclusive, fp, start_daemon, stderr, wait_for_socket};

/// Asks the session's loop (see the test) to read the secret: `denied` or `read`.
fn ask(t: &TempTree) -> String {
    let answer = t.join("answer");
    let _ = std::fs::remove_file(&answer);
    std::fs::write(t.join("ask"), "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if let Ok(text) = std::fs::read_to_string(&answer)
            && text.ends_with('\n')
        {
            return text.trim().to_owned();
        }
        assert!(Instant::now() < deadline, "the session's loop never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The records of kind `kind` in the audit log `log`.
fn records(log: &Path, kind: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["kind"] == kind)
        .collect()
}

fn cleanups(log: &Path) -> Vec<serde_json::Value> {
    records(log, "orphan-cleanup")
}

/// Kills what still runs in the session if the test fails before it ends it (a later agent
/// then removes its pins).
struct KillOnDrop(PathBuf);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("cgroup.kill"), "1");
    }
}

#[test]
fn a_killed_fp_run_stays_confined_and_the_next_agents_clean_up_after_it() {
    let _g = exclusive();
    let t = TempTree::new("orphans");
    let secret = t.file("secret", "s\n");
    let dir = t.0.display();
    let script = format!(
        "while [ ! -e {dir}/stop ]; do if [ -e {dir}/ask ]; then rm {dir}/ask; \
         if cat {dir}/secret >/dev/null 2>&1; then r=read; else r=denied; fi; \
         echo $r > {dir}/answer; fi; sleep 0.1; done"
    );
    let mut run = fp()
        .args(["run", "--user", "root", "--deny"])
        .arg(&secret)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(t.join("first.err")).unwrap())
        .spawn()
        .unwrap();
    assert_eq!(ask(&t), "denied");
    // Its pins and session are named after it: pid and start time.
    let pid = run.id();
    let prefix = format!("run-{pid}-");
    let name = std::fs::read_dir(fp_agent::kernel::pin_root())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find(|n| n.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no pin directory {prefix}*"));
    let pins = fp_agent::kernel::pin_root().join(&name);
    let cgroup = fp_agent::session::Cgroup2::find().unwrap().mount.join("fp").join(&name);
    let _kill = KillOnDrop(cgroup.clone());
    run.kill().unwrap();
    run.wait().unwrap();
    assert_eq!(ask(&t), "denied", "no agent runs: the pinned programs still confine it");

    // The next fp run says it found it and leaves it confined.
    let log = t.join("second.log");
    let second = fp()
        .args(["run", "--user", "root", "--deny"])
        .arg(t.file("other", "o\n"))
        .arg("--audit-log")
        .arg(&log)
        .args(["--", "true"])
        .output()
        .unwrap();
    let err = stderr(&second);
    assert!(second.status.success(), "{err}");
    let found = format!("session {name} of an fp run killed (pid {pid})");
    assert!(err.contains(&found) && err.contains("still run in it"), "{err}");
    let [kept] = cleanups(&log).try_into().unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!((kept["session"].as_str(), kept["outcome"].as_str()), (Some(&*name), Some("kept")));
    assert!(kept["pids"].as_u64() >= Some(1) && kept["cgroup"].is_u64(), "{kept}");
    let verify = fp()
        .args(["audit", "verify", "--pubkey"])
        .arg(t.join("second.log.pub"))
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
    assert!(pins.exists() && cgroup.exists());
    assert_eq!(ask(&t), "denied");

    // A daemon started meanwhile lists it as kept; once its process has exited, the daemon
    // removes its cgroup and its pins within its next periodic check.
    let config = fp_tests::daemon_config(&t, "");
    let socket = t.join("fp.sock");
    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);
    let status = || {
        let out = fp().args(["status", "--json", "--socket"]).arg(&socket).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_str::<serde_json::Value>(&fp_tests::stdout(&out)).unwrap()
    };
    let listed = status();
    assert_eq!(listed["orphans"][0]["session"].as_str(), Some(&*name), "{listed}");
    assert!(listed["orphans"][0]["pids"].as_u64() >= Some(1), "{listed}");
    assert_eq!(ask(&t), "denied");
    std::fs::write(t.join("stop"), "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while pins.exists() || cgroup.exists() {
        assert!(Instant::now() < deadline, "the daemon did not clean up after its process exited");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(status().get("orphans").is_none(), "no longer listed");
    fp_tests::stop_daemon(daemon);
    fp_tests::assert_log_verifies(&t);
    let log = t.join("log/audit.log");
    // The daemon, which had no state to take over, left the fp run's session alone.
    assert_eq!(records(&log, "session-end"), Vec::<serde_json::Value>::new());
    let [found, removed] = cleanups(&log).try_into().unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!(found["outcome"].as_str(), Some("kept"), "{found}");
    assert_eq!(removed["session"].as_str(), Some(&*name), "{removed}");
    assert_eq!((removed["outcome"].as_str(), removed["pids"].as_u64()), (Some("removed"), Some(0)));
    assert_eq!(removed["cgroup"], kept["cgroup"], "{removed}");
}
