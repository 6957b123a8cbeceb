//! `fp status`, `fp sessions` and `fp daemon --check` as a user runs them: output, JSON and exit
//! codes (0 ok, 1 the daemon said no, 3 no daemon, 78 bad config), against a canned daemon that
//! answers each request with a fixed line of docs/api.md's protocol.
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

fn fp(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fp")).args(args).output().unwrap();
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.code().unwrap_or(-1), text(out.stdout), text(out.stderr))
}

const STATUS: &str = r#"{"v":1,"type":"status","daemon":{"pid":812,"version":"0.1.0","protocol":1,"uptime_secs":61,"kernel_release":"6.12.48"},"bpf_lsm":true,"attached_hooks":["file_open"],"maps":[],"sessions":1,"counters":{"events":5,"losses":0}}"#;
const SESSIONS: &str = r#"{"v":1,"type":"sessions","sessions":[{"id":"s1","agent":"claude","cgroup_id":8812,"pids":3,"mode":"enforce","denials":2,"started_at":"2026-11-21T14:00:00Z","policy_hash":"9c1f0e4b7a2d5c3e8f6a"}]}"#;
const NOT_FOUND: &str =
    r#"{"v":1,"type":"error","error":{"code":"not_found","message":"no session s9"}}"#;
const RELOADED: &str =
    r#"{"v":1,"type":"reloaded","id":"s1","previous_policy_hash":"aa","policy_hash":"bb"}"#;

/// A daemon that answers every request by its op, and keeps the request lines.
struct CannedDaemon {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    requests: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl CannedDaemon {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("fp.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().map_while(Result::ok) {
                let mut line = String::new();
                BufReader::new(&stream).read_line(&mut line).unwrap();
                let request: serde_json::Value = serde_json::from_str(&line).unwrap();
                let reply = match request["op"].as_str().unwrap() {
                    "status" => STATUS,
                    "list_sessions" => SESSIONS,
                    "reload_session" => RELOADED,
                    _ => NOT_FOUND,
                };
                seen.lock().unwrap().push(request);
                stream.write_all(format!("{reply}\n").as_bytes()).unwrap();
            }
        });
        CannedDaemon { _dir: dir, socket, requests }
    }

    fn socket(&self) -> &str {
        self.socket.to_str().unwrap()
    }
}

#[test]
fn no_daemon_is_exit_3() {
    for command in [&["status"][..], &["sessions"], &["sessions", "end", "s1"]] {
        let mut args = command.to_vec();
        args.extend(["--socket", "/nonexistent/fp.sock"]);
        let (code, out, err) = fp(&args);
        assert_eq!(code, 3, "{command:?}: {err}");
        assert!(out.is_empty());
        assert!(err.contains("no fp daemon is running on /nonexistent/fp.sock"), "{err}");
    }
}

#[test]
fn status_prints_text_and_json() {
    let daemon = CannedDaemon::start();
    let (code, out, err) = fp(&["status", "--socket", daemon.socket()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("daemon    pid 812, fp 0.1.0 (protocol v1), up 0h 01m 01s\n"), "{out}");
    assert!(out.contains("kernel    6.12.48, BPF LSM active\n"), "{out}");

    let (code, out, _) = fp(&["status", "--json", "--socket", daemon.socket()]);
    assert_eq!(code, 0);
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["daemon"]["pid"], 812);
    assert_eq!(status["counters"]["events"], 5);
    assert_eq!(daemon.requests.lock().unwrap()[0], serde_json::json!({"v": 1, "op": "status"}));
}

#[test]
fn sessions_list_end_and_reload() {
    let daemon = CannedDaemon::start();
    let (code, out, err) = fp(&["sessions", "--socket", daemon.socket()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "ID  AGENT   MODE     PIDS  DENIALS  BOUNDARY  STARTED               POLICY\n\
         s1  claude  enforce  3     2        0         2026-11-21T14:00:00Z  9c1f0e4b7a2d5c3e8f6\n"
    );
    let (code, out, _) = fp(&["sessions", "--json", "--socket", daemon.socket()]);
    assert_eq!(code, 0);
    let sessions: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(sessions[0]["denials"], 2);

    // The daemon says no: exit 1 and its reason.
    let (code, out, err) = fp(&["sessions", "end", "s9", "--socket", daemon.socket()]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert!(err.contains("no session s9 (not_found)"), "{err}");

    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/coding-agent.toml");
    let policy = policy.to_str().unwrap();
    let (code, out, err) =
        fp(&["sessions", "reload", "s1", "--policy", policy, "--socket", daemon.socket()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "session s1: policy aa -> bb\n");
    let requests = daemon.requests.lock().unwrap();
    let reload = requests.iter().find(|r| r["op"] == "reload_session").unwrap();
    assert_eq!(reload["id"], "s1");
    // Root names the file (made absolute); anyone else sends its text.
    if reload.get("policy").is_some() {
        assert!(Path::new(reload["policy"].as_str().unwrap()).is_absolute());
    } else {
        assert!(reload["policy_text"].as_str().unwrap().contains("[file_policy]"));
    }
}

#[test]
fn daemon_check_reports_config_errors_at_their_position() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for config in ["packaging/config.toml", "examples/config.toml"] {
        let path = root.join(config);
        let (code, out, err) = fp(&["daemon", "--config", path.to_str().unwrap(), "--check"]);
        assert_eq!(code, 0, "{config}: {err}");
        assert!(out.ends_with(": ok\n"), "{out}");
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("config.toml");
    std::fs::write(&bad, "[daemon]\nsocket = \"/run/fp/fp.sock\"\npin_dir = 7\n").unwrap();
    let (code, _, err) = fp(&["daemon", "--config", bad.to_str().unwrap(), "--check"]);
    assert_eq!(code, 78);
    assert!(err.starts_with(&format!("{}:3:11: error: invalid type", bad.display())), "{err}");
    // Mistakes in [file_policy] that only building the policy finds (docs/configuration.md).
    for (policy, expected) in [
        ("deny_paths = [\"src/**\"]", ":2:"),
        ("deny_paths = [\"[\"]", ":2:"),
        ("floor_exceptions = [\"nosuchfloor\"]", ":2:"),
    ] {
        std::fs::write(&bad, format!("[file_policy]\n{policy}\n")).unwrap();
        let (code, out, err) = fp(&["daemon", "--config", bad.to_str().unwrap(), "--check"]);
        assert_eq!(code, 78, "{policy}: {out}{err}");
        assert!(err.starts_with(&format!("{}{expected}", bad.display())), "{policy}: {err}");
    }
}

/// Where BPF LSM programs cannot load (this project's build host), the daemon refuses to start and
/// says how to enable BPF LSM; where they can, this is the kernel tests' business.
#[test]
#[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
fn daemon_without_bpf_lsm_says_how_to_enable_it() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to probe BPF LSM");
        return;
    }
    let (probe, _, _) = fp(&["kernel", "probe"]);
    if probe == 0 {
        eprintln!("BPF LSM works here: the kernel tests cover the daemon");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[daemon]\nsocket = \"{}\"\n", dir.path().join("fp.sock").display()),
    )
    .unwrap();
    let (code, _, err) = fp(&["daemon", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 125, "{err}");
    assert!(err.contains("fp cannot enforce on this kernel") && err.contains("lsm="), "{err}");
    assert!(!dir.path().join("fp.sock").exists(), "no socket without a kernel to enforce");
}

/// The bpffs and cgroup2 mounts, as `/proc/self/mountinfo` lists them.
fn bpf_and_cgroup_mounts() -> Vec<String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mut mounts: Vec<String> = mountinfo
        .lines()
        .filter(|l| l.contains(" - bpf ") || l.contains(" - cgroup2 "))
        .map(|l| l.split_whitespace().nth(4).unwrap().to_owned())
        .collect();
    mounts.sort();
    mounts
}

/// Where BPF LSM programs cannot load (this project's build host), every command that needs them
/// gives the probe's explanation and exits 125 before it changes anything on the host: no bpffs
/// mounted, no log written, no cgroup made, no socket, and the command never runs.
#[test]
#[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
fn commands_without_bpf_lsm_say_how_to_enable_it_and_change_nothing() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to probe BPF LSM");
        return;
    }
    let (probe, _, _) = fp(&["kernel", "probe"]);
    if probe == 0 {
        eprintln!("BPF LSM works here: the kernel tests cover fp run and the daemon");
        return;
    }
    let mounts = bpf_and_cgroup_mounts();
    let cgroup_parent_existed = Path::new("/sys/fs/cgroup/fp").exists();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let log = dir.path().join("run.log");
    let deny = dir.path().join("secret");
    let (code, out, err) = fp(&[
        "run",
        "--deny",
        deny.to_str().unwrap(),
        "--audit-log",
        log.to_str().unwrap(),
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(code, 125, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("fp cannot enforce on this kernel") && err.contains("lsm="), "{err}");
    assert!(!marker.exists(), "the command must not run unconfined");
    assert!(!log.exists() && !Path::new(&format!("{}.pub", log.display())).exists());

    let (code, _, err) = fp(&["run", "--embedded", "--deny", "/nonexistent", "--", "true"]);
    assert_eq!(code, 125, "{err}");
    assert!(err.contains("fp cannot enforce on this kernel"), "{err}");

    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\nsocket = \"{}\"\n[audit]\nlog = \"{}\"\n",
            dir.path().join("fp.sock").display(),
            dir.path().join("log/audit.log").display()
        ),
    )
    .unwrap();
    let (code, _, err) = fp(&["daemon", "--config", config.to_str().unwrap()]);
    assert_eq!(code, 125, "{err}");
    assert!(err.contains("fp cannot enforce on this kernel") && err.contains("lsm="), "{err}");
    assert!(!dir.path().join("log").exists(), "no audit log without a kernel to enforce");
    assert!(!dir.path().join("fp.sock.lock").exists(), "no lock taken");

    assert_eq!(bpf_and_cgroup_mounts(), mounts, "nothing mounted");
    assert_eq!(Path::new("/sys/fs/cgroup/fp").exists(), cgroup_parent_existed, "no cgroup made");
}

/// A `--workspace` that is no directory is refused before anything runs: a typo would give a
/// session whose `<workspace>` rules match nothing.
#[test]
fn a_workspace_that_is_no_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let policy = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/coding-agent.toml");
    let missing = dir.path().join("missing");
    for (ws, expected) in [(&missing, "No such file or directory"), (&file, "not a directory")] {
        let ws = ws.to_str().unwrap();
        let args = ["run", "--embedded", "--policy", policy, "--workspace", ws, "--", "true"];
        let (code, _, err) = fp(&args);
        assert_eq!(code, 125, "{err}");
        assert!(err.contains(&format!("--workspace {ws}: {expected}")), "{err}");
    }
}

/// A mistyped `--workspace` is the first thing `fp run` says, before it looks for a daemon or
/// loads anything (a nonexistent path, a file).
#[test]
fn fp_run_names_a_mistyped_workspace_first() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let socket = dir.path().join("no.sock");
    for (ws, said) in
        [(dir.path().join("nosuch"), "No such file or directory"), (file, "not a directory")]
    {
        let args = ["run", "--socket", socket.to_str().unwrap(), "--workspace"];
        let rest = [ws.to_str().unwrap(), "--policy", "p.toml", "--", "true"];
        let (code, _, err) = fp(&[&args[..], &rest[..]].concat());
        assert_eq!(code, 125, "{err}");
        assert!(err.contains(&format!("--workspace {}: {said}", ws.display())), "{err}");
    }
}
