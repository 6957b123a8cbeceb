//! The host agent for real: `fp daemon` runs concurrent sessions with different policies started
//! by `fp run`, lists them, refuses its socket to session processes and to a second daemon, and
//! closes a verifiable audit log on SIGTERM.
use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    time::Duration,
};

use fp_common::kernel::{
    ABI_VERSION, SESSION_SLOT_COUNT, SLOT_SHARED, SessionInfo, SessionSlot, session_slot,
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

/// The pinned programs know each session by its own cgroup id: a daemon restarted after the
/// sessions' parent cgroup was removed and made again (a new id) confines its new sessions.
#[test]
fn daemon_restarted_after_its_cgroup_parent_was_made_again_still_confines() {
    let _g = exclusive();
    let (d, mut daemon) = DenyingDaemon::start("reparent");
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    // Its programs stay pinned; the parent goes (with the dead daemon's hold) and comes back.
    let parent = Path::new("/sys/fs/cgroup/fp");
    for hold in std::fs::read_dir(parent).unwrap().flatten().filter(|e| e.path().is_dir()) {
        std::fs::remove_dir(hold.path()).unwrap();
    }
    std::fs::remove_dir(parent).unwrap();
    std::fs::create_dir(parent).unwrap();
    let mut daemon = start_daemon(&d.config);
    wait_for_socket(&d.socket, &mut daemon);
    d.assert_confines(daemon);
}

/// The cgroup parent is every agent's: an embedded `fp run` that ends while the daemon hosts no
/// session leaves it to the daemon, whose next session starts and is confined.
#[test]
fn an_embedded_run_ending_leaves_the_daemon_its_cgroup_parent() {
    let _g = exclusive();
    let (d, daemon) = DenyingDaemon::start("shared-parent");
    let embedded = fp()
        .args(["run", "--embedded", "--policy"])
        .arg(&d.deny)
        .arg("--workspace")
        .arg(&d.ws)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(embedded.status.success(), "{}", stderr(&embedded));
    d.assert_confines(daemon);
}

/// A daemon, and a policy that denies the workspace's file `f`.
struct DenyingDaemon {
    t: TempTree,
    f: PathBuf,
    ws: PathBuf,
    socket: PathBuf,
    config: PathBuf,
    deny: PathBuf,
}

impl DenyingDaemon {
    fn start(name: &str) -> (Self, fp_tests::Daemon) {
        let t = TempTree::new(name);
        let f = t.file("ws/f", "data\n");
        let (ws, socket) = (t.join("ws"), t.join("fp.sock"));
        let config = fp_tests::daemon_config(&t, "");
        let deny = t.file("deny.toml", &denying(&f));
        let mut daemon = start_daemon(&config);
        wait_for_socket(&socket, &mut daemon);
        (Self { t, f, ws, socket, config, deny }, daemon)
    }

    /// A session of `daemon` cannot read `f` and is told what the floors remove; then the daemon
    /// stops, its log verifies, and nothing is left behind.
    fn assert_confines(&self, daemon: fp_tests::Daemon) {
        let script = format!("cat {}", self.f.display());
        let out = fp_tests::run_with_daemon(&self.socket, &self.deny, &self.ws, &script)
            .wait_with_output()
            .unwrap();
        fp_tests::stop_daemon(daemon);
        assert!(!out.status.success(), "read a denied file: {}", stdout(&out));
        assert!(stderr(&out).contains("Permission denied"), "{}", stderr(&out));
        // What the floors take from the runtime base, said from the policy the daemon compiled.
        let note = "fp: note: running as root (home /root): ~/.gitconfig, ~/.config/git are";
        assert!(stderr(&out).contains(note), "{}", stderr(&out));
        fp_tests::assert_log_verifies(&self.t);
    }
}

/// The programs tell a session's cgroup from others by a slot table (the low 12 bits of its id
/// pick a slot, which names the one session in it or says several share it): two sessions whose
/// ids share a slot are both confined, and the one left after the other ends.
#[test]
fn sessions_sharing_a_slot_of_the_programs_table_are_each_confined() {
    let _g = exclusive();
    let (d, daemon) = DenyingDaemon::start("slots");
    let denied = |go: &str, then: &str| {
        let (go, f) = (d.t.join(go), d.f.display().to_string());
        let wait = |go: &Path| format!("while [ ! -e {} ]; do sleep 0.1; done", go.display());
        format!("{}; cat {f}; echo first=$?; {then}", wait(&go))
    };
    let a = fp_tests::run_with_daemon(&d.socket, &d.deny, &d.ws, &denied("go-a", ""));
    let a_id = new_session_cgroups(&[]).remove(0);
    steer_next_cgroup_id(a_id);
    let b_then = format!(
        "while [ ! -e {} ]; do sleep 0.1; done; cat {}; echo second=$?",
        d.t.join("go-b2").display(),
        d.f.display()
    );
    let b = fp_tests::run_with_daemon(&d.socket, &d.deny, &d.ws, &denied("go-b", &b_then));
    let b_id = new_session_cgroups(&[a_id]).remove(0);
    assert_eq!(session_slot(b_id), session_slot(a_id), "cgroups {a_id:#x}, {b_id:#x}: two slots");
    assert_eq!(slot(a_id), SLOT_SHARED, "the slot says both sessions share it");
    for go in ["go-a", "go-b"] {
        std::fs::write(d.t.join(go), "").unwrap();
    }
    let a = a.wait_with_output().unwrap();
    assert!(stdout(&a).contains("first=1"), "a read its denied file: {}", stdout(&a));
    assert_eq!(slot(a_id), b_id, "the slot names the session left");
    std::fs::write(d.t.join("go-b2"), "").unwrap();
    let b = b.wait_with_output().unwrap();
    let out = stdout(&b);
    assert!(out.contains("first=1") && out.contains("second=1"), "b read its denied file: {out}");
    assert!(stderr(&b).contains("Permission denied"), "{}", stderr(&b));
    fp_tests::stop_daemon(daemon);
    fp_tests::assert_log_verifies(&d.t);
}

/// The ids of the session cgroups in the sessions' parent other than `known`, once there is one.
fn new_session_cgroups(known: &[u64]) -> Vec<u64> {
    use std::os::unix::fs::MetadataExt as _;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let found: Vec<u64> = std::fs::read_dir("/sys/fs/cgroup/fp")
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| !e.file_name().to_string_lossy().starts_with("agent-"))
                    .filter_map(|e| e.metadata().ok().filter(|m| m.is_dir()).map(|m| m.ino()))
                    .filter(|id| !known.contains(id))
                    .collect()
            })
            .unwrap_or_default();
        if !found.is_empty() {
            return found;
        }
        assert!(std::time::Instant::now() < deadline, "no new session cgroup");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Makes and removes cgroups until the next one made gets an id in the slot of `id`: the kernel
/// hands out the ids of the cgroup hierarchy's directories and files in turn, so each made and
/// removed takes as many ids as it has files, plus one.
fn steer_next_cgroup_id(id: u64) {
    use std::os::unix::fs::MetadataExt as _;
    let base = Path::new("/sys/fs/cgroup/fp-test-slots");
    std::fs::create_dir(base).unwrap();
    // The last id handed out: the highest of a directory made just now and of its files.
    let make = || {
        let d = base.join("d");
        std::fs::create_dir(&d).unwrap();
        let files = std::fs::read_dir(&d).unwrap().flatten().map(|e| e.metadata().unwrap().ino());
        let last = files.chain([std::fs::metadata(&d).unwrap().ino()]).max().unwrap();
        std::fs::remove_dir(&d).unwrap();
        last
    };
    let first = make();
    let last = make();
    let step = last - first;
    // The next id, last + 1 + n * step, in the slot of `id`: some n < 4096 where `step` is odd.
    let n = (0..u64::from(SESSION_SLOT_COUNT))
        .find(|n| session_slot(last + 1 + n * step) == session_slot(id))
        .unwrap_or_else(|| panic!("cgroups of {step} ids cannot reach slot {}", session_slot(id)));
    for _ in 0..n {
        make();
    }
    std::fs::remove_dir(base).unwrap();
}

/// The value of the slot of cgroup id `id` in the programs' slot table.
fn slot(id: u64) -> u64 {
    let pins = format!("/sys/fs/bpf/fp/v{ABI_VERSION}/SESSION_SLOTS");
    let key = session_slot(id).to_le_bytes().map(|b| b.to_string());
    let out = Command::new("bpftool")
        .args(["map", "lookup", "pinned", &pins, "key"])
        .args(&key)
        .arg("--json")
        .output()
        .unwrap();
    let value: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap_or_default();
    let bytes: Vec<u8> = value["value"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter_map(|b| b.as_str())
                .filter_map(|b| u8::from_str_radix(b.trim_start_matches("0x"), 16).ok())
                .collect()
        })
        .unwrap_or_default();
    let size = std::mem::size_of::<SessionSlot>();
    assert_eq!(bytes.len(), size, "bpftool map lookup: {} {}", stdout(&out), stderr(&out));
    let word = |at: usize| u64::from_le_bytes(bytes[at * 8..at * 8 + 8].try_into().unwrap());
    let info = SessionInfo { tables: word(1), flags: word(2), inode_devices: word(3) };
    let slot = SessionSlot { value: word(0), info, check: word(4) };
    assert!(slot.intact(), "{slot:?}");
    slot.value
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
    let rounds = Rounds::start(&socket, &deny, &ws, &f);
    // Fill the log's filesystem to the last byte.
    let filler = logdir.join("filler");
    {
        use std::io::Write as _;
        let mut file = std::fs::File::create(&filler).unwrap();
        while file.write_all(&[0x55u8; 4096]).is_ok() {}
    }
    // Frozen: the count stops (give the writer its retry and the freeze a moment).
    std::thread::sleep(Duration::from_secs(3));
    let frozen_at = rounds.count();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(rounds.count(), frozen_at, "the session went on while the log was full");
    let status = fp_tests::fp().args(["status", "--socket"]).arg(&socket).output().unwrap();
    let shown = stdout(&status);
    assert!(shown.contains("NO SPACE") && shown.contains("sessions frozen"), "{shown}");
    // Space again: thawed, it goes on and ends when told.
    std::fs::remove_file(&filler).unwrap();
    fp_tests::wait_until("the thaw", Duration::from_secs(20), || rounds.count() > frozen_at);
    let total = rounds.finish();
    fp_tests::stop_daemon(daemon);
    fp_tests::assert_log_verifies(&t);
    let log = std::fs::read_to_string(logdir.join("audit.log")).unwrap();
    assert_eq!(denials_of(&log, &f), total, "a round of the session has no record");
    let frozen = log.find("\"state\":\"frozen\"").expect("no freeze record");
    let thawed = log.find("\"state\":\"thawed\"").expect("no thaw record");
    assert!(frozen < thawed, "the thaw is recorded before the freeze");
    let _ = Command::new("umount").arg(&logdir).status();
}

/// The log's filesystem remounted read-only under the writer (by the kernel's emergency remount,
/// SysRq `u`, which forces it: a plain `mount -o remount,ro` is refused while the log is open for
/// writing): new sessions are refused with the cause, `fp status` says it, the running session
/// stays enforced, and once the filesystem is writable again every one of its denials is in the
/// log, which verifies. Only filesystems on block devices are remounted: the VM has none but this
/// one.
#[test]
fn a_log_remounted_read_only_refuses_new_sessions_and_keeps_every_record() {
    let _g = exclusive();
    let t = TempTree::new("auditro");
    let f = t.file("ws/secret", "data\n");
    let ws = t.join("ws");
    let deny = t.file("deny.toml", &denying(&f));
    let (logdir, image) = (t.join("log"), t.join("log.img"));
    std::fs::create_dir_all(&logdir).unwrap();
    let run = |program: &str, args: &[&str]| {
        let done = Command::new(program).args(args).status().unwrap();
        assert!(done.success(), "{program} {args:?}");
    };
    let (logdir_text, image_text) = (logdir.to_str().unwrap(), image.to_str().unwrap());
    fp_tests::load_module("ext4");
    run("truncate", &["-s", "32M", image_text]);
    run("mkfs.ext4", &["-q", "-F", image_text]);
    run("mount", &["-o", "loop", image_text, logdir_text]);
    let config = fp_tests::daemon_config(&t, "");
    let socket = t.join("fp.sock");
    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);
    let rounds = Rounds::start(&socket, &deny, &ws, &f);
    std::fs::write("/proc/sysrq-trigger", "u").unwrap();
    let status = || {
        let out = fp_tests::fp().args(["status", "--socket"]).arg(&socket).output().unwrap();
        stdout(&out)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut shown = status();
    while !shown.contains("READ-ONLY FILESYSTEM") {
        assert!(std::time::Instant::now() < deadline, "fp status never said it:\n{shown}");
        std::thread::sleep(Duration::from_millis(200));
        shown = status();
    }
    let refused = fp_tests::run_with_daemon(&socket, &deny, &ws, "echo ran").wait_with_output();
    let refused = refused.unwrap();
    assert_eq!(refused.status.code(), Some(125), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("read-only"), "{}", stderr(&refused));
    assert!(!stdout(&refused).contains("ran"));
    // The running session goes on, enforced, meanwhile.
    let before = rounds.count();
    fp_tests::wait_until("more rounds", Duration::from_secs(20), || rounds.count() > before + 3);
    run("mount", &["-o", "remount,rw", logdir_text]);
    fp_tests::wait_until("the log writable again", Duration::from_secs(20), || {
        status().contains("audit.log: ok")
    });
    let total = rounds.finish();
    fp_tests::stop_daemon(daemon);
    fp_tests::assert_log_verifies(&t);
    let log = std::fs::read_to_string(logdir.join("audit.log")).unwrap();
    assert_eq!(denials_of(&log, &f), total, "a round of the session has no record");
    let _ = Command::new("umount").arg(&logdir).status();
}

/// A session of the daemon at `socket` (policy `deny`, workspace `ws`) that counts its rounds
/// in `ws/counter`, reading the denied `secret` once in each (a denial, a record), until
/// `ws/stop` exists.
struct Rounds {
    counter: PathBuf,
    stop: PathBuf,
    session: std::process::Child,
}

impl Rounds {
    /// Starts it and waits for its first rounds.
    fn start(socket: &Path, deny: &Path, ws: &Path, secret: &Path) -> Rounds {
        let (counter, stop) = (ws.join("counter"), ws.join("stop"));
        let script = format!(
            "i=0; while [ ! -e {stop} ]; do i=$((i+1)); echo $i > {counter}; \
             cat {secret} 2>/dev/null && echo LEAKED; sleep 0.1; done; echo finished",
            stop = stop.display(),
            counter = counter.display(),
            secret = secret.display()
        );
        let session = fp_tests::run_with_daemon(socket, deny, ws, &script);
        let rounds = Rounds { counter, stop, session };
        fp_tests::wait_until("the session's first rounds", Duration::from_secs(30), || {
            rounds.count() > 3
        });
        rounds
    }

    /// The rounds so far.
    fn count(&self) -> u64 {
        rounds_in(&self.counter)
    }

    /// Stops the session: it must end well, the secret never read. The rounds it ran.
    fn finish(self) -> u64 {
        std::fs::write(&self.stop, "").unwrap();
        let out = self.session.wait_with_output().unwrap();
        assert!(out.status.success() && stdout(&out).contains("finished"), "{}", stderr(&out));
        assert!(!stdout(&out).contains("LEAKED"), "{}", stdout(&out));
        rounds_in(&self.counter)
    }
}

/// The count in `counter`, which its session rewrites each round: read again until whole.
fn rounds_in(counter: &Path) -> u64 {
    for _ in 0..100 {
        if let Ok(n) = std::fs::read_to_string(counter).unwrap_or_default().trim().parse() {
            return n;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    0
}

/// The decisions on `secret` in the log text `log`.
fn denials_of(log: &str, secret: &Path) -> u64 {
    let secret = secret.to_string_lossy();
    log.lines().filter(|l| l.contains("\"kind\":\"decision\"") && l.contains(&*secret)).count()
        as u64
}

/// The README's quick start, command by command in its order, as a new user runs it on a fresh
/// host: each must exit 0. The VM's `/etc` and `/var` are the host's, read-only, so `/etc/fp` and
/// `/var/log/fp` are a scratch directory's (in the commands and in the installed config); `~/src/app`
/// is the user's project, made first; the build steps ran before the VM booted, and systemd's two
/// steps (there is no systemd in the VM) run the unit's ExecStartPre and ExecStart by hand.
#[test]
fn the_readme_quick_start_works_in_order() {
    let _g = exclusive();
    let t = TempTree::new("readme");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let block = readme
        .split("## Quick start\n")
        .nth(1)
        .and_then(|rest| rest.split("```sh\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("README.md has a quick start block");
    let (etc, log, app) = (t.join("etc/fp"), t.join("var/log/fp"), t.join("src/app"));
    std::fs::create_dir_all(&app).unwrap();
    let scratch = |text: &str| {
        text.replace("/etc/fp", &etc.display().to_string())
            .replace("/var/log/fp", &log.display().to_string())
            .replace("~/src/app", &app.display().to_string())
    };
    // `fp` on the PATH is the binary under test.
    let bin = t.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(fp_tests::fp_bin(), bin.join("fp")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let unit = std::fs::read_to_string(root.join("packaging/fp.service")).unwrap();
    let mut daemon = None;
    for line in block.lines() {
        let command = line.split(" #").next().unwrap().trim().replace("sudo ", "");
        if command.is_empty() || command.starts_with("cargo ") {
            continue; // the build: done before the VM booted
        }
        if command.contains("/etc/systemd/system") {
            assert!(
                unit.contains("ExecStart=/usr/local/bin/fp daemon --config /etc/fp/config.toml\n")
            );
            continue;
        }
        if command.contains("systemctl") {
            let check = Command::new("fp")
                .env("PATH", &path)
                .args(["daemon", "--check", "--config"])
                .arg(etc.join("config.toml"))
                .output()
                .unwrap();
            assert!(check.status.success(), "ExecStartPre: {}", stderr(&check));
            let mut started = start_daemon(&etc.join("config.toml"));
            wait_for_socket(Path::new("/run/fp/fp.sock"), &mut started);
            daemon = Some(started);
            continue;
        }
        if command.ends_with("-- claude") {
            claude_code_in_the_quick_start(&scratch(&command), &path, &app);
            continue;
        }
        let mut run = Command::new("sh");
        run.current_dir(&root).env("PATH", &path).args(["-c", &scratch(&command)]);
        let out = if command.ends_with("-- bash") {
            // The user's confined shell: the project is writable, root's home is not readable.
            run.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
            run.stderr(std::process::Stdio::piped());
            let mut child = run.spawn().unwrap();
            let script = format!("echo edited > {}/f && ls /root; exit 0\n", app.display());
            std::io::Write::write_all(&mut child.stdin.take().unwrap(), script.as_bytes()).unwrap();
            child.wait_with_output().unwrap()
        } else {
            run.output().unwrap()
        };
        assert!(out.status.success(), "`{command}`: {}{}", stdout(&out), stderr(&out));
        if command.starts_with("install -D") {
            // The operator's config, with the scratch directory's paths.
            let config = etc.join("config.toml");
            std::fs::write(&config, scratch(&std::fs::read_to_string(&config).unwrap())).unwrap();
        }
        if command.ends_with("-- bash") {
            assert_eq!(std::fs::read_to_string(app.join("f")).unwrap(), "edited\n");
            assert!(stderr(&out).contains("fp: denied file_open /root by ls"), "{}", stderr(&out));
        }
    }
    let daemon = daemon.expect("the quick start starts the daemon");
    fp_tests::stop_daemon(daemon);
    let _ = std::fs::remove_dir_all(t.join("var"));
}

/// The quick start's Claude Code line, run as the agent user (`$USER`) with Claude Code installed
/// in its home and a scripted model answering it, given one task (`-p`, and no permission
/// prompts, as the quick start's user would answer them): its shell tool writes in the project
/// and is refused the user's key, which `fp run` reports.
fn claude_code_in_the_quick_start(command: &str, path: &str, app: &Path) {
    use fp_tests::model::{ScriptedModel, ToolCall};
    fp_tests::loopback_up();
    let mut agent = fp_tests::AgentUser::new();
    agent.install_claude_code(&fp_tests::agent_cli("claude-code"));
    agent.file(".ssh/id_ed25519", "PRIVATE-KEY-MATERIAL\n");
    agent.own(app);
    let bash = |command: String| ToolCall {
        name: "Bash",
        input: serde_json::json!({ "command": command }),
    };
    let model = ScriptedModel::anthropic(vec![
        bash(format!("echo written-by-claude > {}/claude.txt", app.display())),
        bash("cat ~/.ssh/id_ed25519".to_owned()),
    ]);
    let out = Command::new("sh")
        .args(["-c", &format!("{command} -p 'work on the app' --dangerously-skip-permissions")])
        .env("USER", fp_tests::AgentUser::NAME)
        .env("PATH", format!("{}/.local/bin:{path}", agent.home.display()))
        .env("ANTHROPIC_BASE_URL", &model.url)
        .env("ANTHROPIC_API_KEY", "sk-scripted")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .output()
        .unwrap();
    let context = format!("`{command}`: {}{}", stdout(&out), stderr(&out));
    assert!(out.status.success(), "{context}");
    let written = std::fs::read_to_string(app.join("claude.txt")).unwrap_or_default();
    assert_eq!(written, "written-by-claude\n", "{context}");
    let results = model.tool_results();
    assert_eq!(results.len(), 2, "{context}");
    assert!(results[1].text.contains("Permission denied"), "{context}");
    let sent = model.requests().iter().map(|r| r.to_string()).collect::<String>();
    assert!(!sent.contains("PRIVATE-KEY-MATERIAL"), "the key reached the model");
    let reported = stderr(&out)
        .lines()
        .any(|l| l.starts_with("fp: denied") && l.contains("id_ed25519") && l.contains("by cat"));
    assert!(reported, "{context}");
}
