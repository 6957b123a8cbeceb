//! Helpers shared by fp's privileged system tests (tests/kernel). They run as root inside the
//! kernel test VM (`cargo xtask test-kernel`), or natively where `fp kernel probe` proved BPF LSM
//! works; anywhere else they refuse to run.
use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::{Mutex, MutexGuard},
    time::{Duration, Instant},
};

mod agent_user;
pub mod model;
pub use agent_user::AgentUser;

pub enum Place {
    Vm,
    Native,
}

/// Where the test runs; panics outside the VM unless native support was proven.
pub fn place() -> Place {
    let set = |var: &str| std::env::var(var).as_deref() == Ok("1");
    if set("FP_TEST_VM") {
        let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap();
        assert!(
            cmdline.split_whitespace().any(|a| a == "fp.vm=1"),
            "FP_TEST_VM=1 but not fp's test VM: {cmdline}"
        );
        Place::Vm
    } else if set("FP_TEST_NATIVE") {
        Place::Native
    } else {
        panic!("privileged test: run it through `cargo xtask test-kernel`");
    }
}

/// The path of the `fp` binary under test.
pub fn fp_bin() -> String {
    std::env::var("FP_BIN").expect("FP_BIN names the fp binary under test")
}

/// Cargo's target directory (test executables live in <target>/<profile>/deps), which holds the
/// test kernels' packages (`fp-vm/kernels/<version>/root`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_owned()
}

/// Loads kernel module `name` (and what it needs) from the running test kernel's package: the
/// VM's initramfs loads only what mounting the host root needs.
pub fn load_module(name: &str) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let kernels = target_dir().join("fp-vm/kernels");
    let root = std::fs::read_dir(&kernels)
        .unwrap()
        .map(|k| k.unwrap().path().join("root"))
        .find(|root| root.join("lib/modules").join(release.trim()).is_dir())
        .unwrap_or_else(|| {
            panic!("no package of kernel {} in {}", release.trim(), kernels.display())
        });
    let loaded = Command::new("modprobe").arg("-d").arg(&root).arg(name).output().unwrap();
    assert!(loaded.status.success(), "modprobe {name}: {}", stderr(&loaded));
}

/// The `fp` binary under test.
pub fn fp() -> Command {
    Command::new(fp_bin())
}

static SESSIONS: Mutex<()> = Mutex::new(());

/// Serializes tests that start sessions, so each can check that its session left nothing behind.
/// Also refuses to run outside the VM (see [`place`]).
pub fn exclusive() -> MutexGuard<'static, ()> {
    place();
    SESSIONS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Brings the VM's loopback interface up (its init does not): a scripted model server listens
/// there.
pub fn loopback_up() {
    assert!(matches!(place(), Place::Vm), "the loopback is set up in the test VM only");
    let out = Command::new("ip").args(["link", "set", "lo", "up"]).output().unwrap();
    assert!(out.status.success(), "ip link set lo up: {}", stderr(&out));
}

/// The pinned agent CLI `name` (`claude-code`) as `cargo xtask setup` installed it: an npm prefix
/// in the test VM's cache.
pub fn agent_cli(name: &str) -> PathBuf {
    let cache = target_dir().join("fp-vm/agents");
    let entries = std::fs::read_dir(&cache).into_iter().flatten().flatten();
    entries
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{name}-")))
                && p.join("installed").is_file()
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} is not installed in {}: `cargo xtask setup` installs it",
                cache.display()
            )
        })
}

/// A fresh directory under /tmp, removed when dropped.
pub struct TempTree(pub PathBuf);

impl TempTree {
    pub fn new(name: &str) -> Self {
        let dir = PathBuf::from(format!("/tmp/fp-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }

    /// Creates `rel` (and its parents) with `content`.
    pub fn file(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `sh -c script` under `fp run` with each of `deny` denied, then checks nothing was left
/// behind.
pub fn run_confined(deny: &[&Path], extra: &[&str], script: &str) -> Output {
    let mut cmd = fp();
    cmd.arg("run");
    for d in deny {
        cmd.arg("--deny").arg(d);
    }
    let out = cmd.args(extra).args(["--", "sh", "-c", script]).output().unwrap();
    assert_nothing_left_behind();
    out
}

/// Runs `sh -c script` outside any session.
pub fn run_outside(script: &str) -> Output {
    Command::new("sh").args(["-c", script]).output().unwrap()
}

/// The outcome of a confined script that reports each step on stdout (`git=ok`,
/// `ssh=denied`): checks that the session left nothing behind and that every `expected` report is
/// there; returns (stdout, stderr).
pub fn assert_reported(out: &Output, expected: &[&str]) -> (String, String) {
    assert_nothing_left_behind();
    let (got, err) = (stdout(out), stderr(out));
    for e in expected {
        assert!(got.contains(e), "expected {e}:\n{got}\nstderr:\n{err}");
    }
    (got, err)
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Polls until no fp pins, fp cgroups or fp programs remain (unpinned links detach
/// asynchronously; slower on a loaded host), failing after 30 s.
pub fn assert_nothing_left_behind() {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = leftovers();
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "left behind: {left:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn leftovers() -> Vec<String> {
    let mut left = Vec::new();
    if Path::new("/sys/fs/bpf/fp").exists() {
        left.push("/sys/fs/bpf/fp".into());
    }
    for root in ["/sys/fs/cgroup/fp", "/sys/fs/cgroup/unified/fp"] {
        if Path::new(root).exists() {
            left.push(root.into());
        }
    }
    // In-process, not `bpftool prog show`: polled while the kernel detaches a session's links
    // from a workqueue, a process per poll took the CPU the detaching needs.
    // An error (a program freed while listed) counts until a poll lists without one.
    for info in aya::programs::loaded_programs() {
        match info {
            Ok(info) => {
                if let Some(name) = info.name_as_str().filter(|n| n.starts_with("fp_")) {
                    left.push(format!("program {} {name}", info.id()));
                }
            }
            Err(e) => left.push(format!("listing programs: {e}")),
        }
    }
    left
}

/// What a command fails with when the kernel denies it (EACCES), in every tool's error message.
pub const DENIED: &str = "Permission denied";
/// What a rename or link fails with when the REFER rule refuses it (EXDEV).
pub const REFUSED: &str = "Invalid cross-device link";

/// Wraps each `name: command` line of `script` so that it prints `name=ok` when the command
/// succeeds, `name=denied` when it fails with EACCES's message, `name=refused` with EXDEV's (a
/// move the REFER rule refuses), `name=failed: OUTPUT` otherwise.
pub fn statuses(script: &str) -> String {
    script
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(name, cmd)| {
            format!(
                "if out=$( ( {cmd} ) 2>&1); then echo {name}=ok; \
                 elif echo \"$out\" | grep -q '{DENIED}'; then echo {name}=denied; \
                 elif echo \"$out\" | grep -q '{REFUSED}'; then echo {name}=refused; \
                 else echo \"{name}=failed: $out\"; fi\n"
            )
        })
        .collect()
}

/// One way of touching a protected file, run as a session process by the escape suite
/// (tests/escape). `command` is a shell command; `$B` names the suite's base directory.
pub struct Technique {
    pub name: &'static str,
    pub command: &'static str,
    pub expect: Expect,
}

pub enum Expect {
    /// The command fails with EACCES (or, for a rename or link the REFER rule refuses, EXDEV) and
    /// fp reports a denial by one of the `|`-separated `hooks` with `op`, of a path containing
    /// `path` (`unresolved-path` for a path the kernel could not resolve).
    Denied { hooks: &'static str, op: &'static str, path: &'static str },
    /// The command succeeds.
    Allowed,
}

/// Shorthand for [`Expect::Denied`].
pub const fn denied(hooks: &'static str, op: &'static str, path: &'static str) -> Expect {
    Expect::Denied { hooks, op, path }
}

/// An escape suite's files. Its base directory (`$B` in commands) holds the protected tree
/// `$B/secret`, with one file `$B/secret/<technique>` per technique ("secret <technique>\n"),
/// which must come out of the session unchanged (content, mode, owner, times, links).
pub struct Suite {
    /// Names the base directory under /tmp.
    pub name: &'static str,
    /// Shell run outside the session after the files above exist, before fp starts.
    pub setup: &'static str,
    /// Denied besides `$B/secret` (relative to `$B`).
    pub deny: &'static [&'static str],
    /// Shell run in the process that becomes fp, just before it starts (for fds the session
    /// inherits, e.g. `exec 3<$B/secret`; fp passes them on with `--keep-fd`).
    pub before_fp: &'static str,
    /// Fds opened by `before_fp` that cross into the session.
    pub keep_fds: &'static [u32],
    /// Shell run outside the session after it (e.g. to unmount what the setup mounted).
    pub after: &'static str,
    /// A policy file's text (`$B` names the base directory, `$TARGET` the target directory with
    /// the test helpers): the session runs under it with `$B` as its workspace instead of with
    /// `--deny $B/secret` and `deny`.
    pub policy: Option<&'static str>,
    /// Trees (relative to `$B`) that must come out of the session unchanged, besides `secret`.
    pub watch: &'static [&'static str],
    /// Text that must never appear in the session's output: the content of files it may not read.
    pub never_read: Option<&'static str>,
    /// The user the session runs as (`fp run --user`); None: root.
    pub user: Option<&'static str>,
}

impl Suite {
    /// A suite with nothing besides its name and setup: `Suite { name, setup, ..Suite::PLAIN }`.
    pub const PLAIN: Suite = Suite {
        name: "",
        setup: "",
        deny: &[],
        before_fp: "",
        keep_fds: &[],
        after: "",
        policy: None,
        watch: &[],
        never_read: None,
        user: None,
    };
}

/// Every technique of a suite, run in ONE session (starting fp loads and verifies every program,
/// which is slow under TCG), and what the session reported.
pub struct Batch {
    statuses: std::collections::HashMap<String, String>,
    stdout: String,
    stderr: String,
    techniques: &'static [Technique],
    secret_before: Vec<String>,
    secret_after: Vec<String>,
}

impl Batch {
    pub fn run(suite: &Suite, techniques: &'static [Technique]) -> Self {
        let tree = TempTree::new(suite.name);
        let base = tree.0.display().to_string();
        let secret = tree.join("secret");
        for t in techniques {
            tree.file(&format!("secret/{}", t.name), &format!("secret {}\n", t.name));
        }
        let target = target_dir();
        let shell = |script: &str| {
            let st = Command::new("sh")
                .args(["-e", "-c", script])
                .env("B", &base)
                .env("FP_TARGET_DIR", &target)
                .status()
                .unwrap();
            assert!(st.success(), "suite script failed: {script}");
        };
        shell(suite.setup);
        let script: String =
            techniques.iter().map(|t| format!("{}: {}\n", t.name, t.command)).collect();
        let watched = || {
            let mut all = snapshot(&secret);
            all.extend(suite.watch.iter().flat_map(|w| snapshot(&tree.join(w))));
            all
        };
        let secret_before = watched();
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!("{}\nexec \"$@\"", suite.before_fp)).arg("sh");
        cmd.arg(fp_bin()).arg("run");
        let policy_file = tree.0.with_extension("policy.toml");
        match suite.policy {
            Some(policy) => {
                let text =
                    policy.replace("$B", &base).replace("$TARGET", &target.to_string_lossy());
                std::fs::write(&policy_file, text).unwrap();
                cmd.arg("--policy").arg(&policy_file).arg("--workspace").arg(&tree.0);
            }
            None => {
                cmd.arg("--deny").arg(&secret);
                for d in suite.deny {
                    cmd.arg("--deny").arg(tree.join(d));
                }
            }
        }
        for fd in suite.keep_fds {
            cmd.arg("--keep-fd").arg(fd.to_string());
        }
        if let Some(user) = suite.user {
            cmd.arg("--user").arg(user);
        }
        let out =
            cmd.args(["--", "sh", "-c", &statuses(&script)]).env("B", &base).output().unwrap();
        assert_nothing_left_behind();
        let _ = std::fs::remove_file(&policy_file);
        let secret_after = watched();
        shell(suite.after);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Some(marker) = suite.never_read {
            assert!(!stdout.contains(marker), "the session read a protected file:\n{stdout}");
        }
        let statuses = stdout
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Self {
            statuses,
            stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            techniques,
            secret_before,
            secret_after,
        }
    }

    /// Asserts what technique `name` expects: its status and, for a denial, fp's event line.
    pub fn check(&self, name: &str) {
        let t = self.techniques.iter().find(|t| t.name == name).expect("a listed technique");
        let status = self.statuses.get(name).map(String::as_str);
        let context = || {
            format!(
                "{}\n--- session stdout:\n{}\n--- stderr:\n{}",
                t.command, self.stdout, self.stderr
            )
        };
        match t.expect {
            Expect::Allowed => {
                assert_eq!(status, Some("ok"), "{name} was not allowed: {}", context())
            }
            Expect::Denied { hooks, op, path } => {
                assert!(
                    matches!(status, Some("denied" | "refused")),
                    "{name} was not denied: {}",
                    context()
                );
                let reported = self.stderr.lines().any(|l| {
                    hooks.split('|').any(|h| l.starts_with(&format!("fp: denied {h} ")))
                        && l.contains(&format!("{op}, pid "))
                        && l.contains(path)
                });
                assert!(
                    reported,
                    "no event of {hooks} ({op}) for a path with {path:?}: {}",
                    context()
                );
            }
        }
    }

    /// Asserts that the protected tree is exactly as before the session.
    pub fn check_secret_unchanged(&self) {
        assert_eq!(
            self.secret_before, self.secret_after,
            "the protected tree changed:\n{}",
            self.stderr
        );
    }
}

/// Every entry below `dir` with its type, mode, owner, size, mtime and (for files) content.
fn snapshot(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt as _;
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(p) = pending.pop() {
        let md = std::fs::symlink_metadata(&p).unwrap();
        let content = if md.is_file() { std::fs::read(&p).unwrap() } else { Vec::new() };
        out.push(format!(
            "{} mode={:o} uid={} gid={} size={} mtime={}.{} nlink={} {:?}",
            p.display(),
            md.mode(),
            md.uid(),
            md.gid(),
            md.size(),
            md.mtime(),
            md.mtime_nsec(),
            md.nlink(),
            String::from_utf8_lossy(&content)
        ));
        if md.is_dir() {
            pending.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    out.sort();
    out
}

/// A perl one-liner for a syscall or builtin coreutils does not make directly, dying with the
/// error's text; its arguments are files below `$B`.
#[macro_export]
macro_rules! perl {
    ($code:literal, $($file:literal),+) => {
        concat!("perl -e '", $code, " or die \"$!\\n\"'", $(" $B/", $file),+)
    };
}

/// renameat2(2) with RENAME_EXCHANGE (x86_64 syscall 316) of two files below `$B`.
#[macro_export]
macro_rules! exchange {
    ($a:literal, $b:literal) => {
        $crate::perl!("syscall(316, -100, $ARGV[0], -100, $ARGV[1], 2) == 0", $a, $b)
    };
}

/// Declares an escape suite: the techniques, one `#[test]` per technique checking it, and a test
/// that the protected tree is unchanged. All run in one session, started by the first test.
/// `also = MODULE: SETUP;` runs the same techniques again in a second session under SETUP (e.g.
/// as another user), as the tests of `MODULE`.
#[macro_export]
macro_rules! escape_suite {
    (setup = $setup:expr; also = $module:ident: $also:expr; $($name:ident: $expect:expr => $command:expr;)*) => {
        $crate::escape_suite! { setup = $setup; $($name: $expect => $command;)* }

        mod $module {
            use super::*;
            $crate::escape_suite! { setup = $also; $($name: $expect => $command;)* }
        }
    };
    (setup = $setup:expr; $($name:ident: $expect:expr => $command:expr;)*) => {
        const TECHNIQUES: &[$crate::Technique] = &[
            $($crate::Technique { name: stringify!($name), command: $command, expect: $expect },)*
        ];

        /// The session, run once; a failed setup fails every test without running it again.
        fn batch() -> &'static $crate::Batch {
            static BATCH: std::sync::OnceLock<Option<$crate::Batch>> = std::sync::OnceLock::new();
            let batch = BATCH.get_or_init(|| {
                let _g = $crate::exclusive();
                std::panic::catch_unwind(|| $crate::Batch::run(&$setup, TECHNIQUES)).ok()
            });
            batch.as_ref().expect("the suite's session failed (see the first failing test)")
        }

        $(
            #[test]
            fn $name() {
                batch().check(stringify!($name));
            }
        )*

        #[test]
        fn protected_tree_is_unchanged() {
            batch().check_secret_unchanged();
        }
    };
}

/// Starts `fp daemon --config config` (its stderr piped).
pub fn start_daemon(config: &Path) -> Daemon {
    let child = fp()
        .args(["daemon", "--config"])
        .arg(config)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    Daemon(Some(child))
}

/// A daemon started by a test. A test that fails before [`stop_daemon`] must not leave it running
/// (holding bpffs and its sessions for the next test): dropped, it gets SIGTERM, and SIGKILL if it
/// has not exited within 60 s.
pub struct Daemon(Option<std::process::Child>);

impl std::ops::Deref for Daemon {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        self.0.as_ref().expect("a running daemon")
    }
}

impl std::ops::DerefMut for Daemon {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.0.as_mut().expect("a running daemon")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Waits until `done` holds, checking every 100 ms; fails naming `what` after `within`.
pub fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the daemon listens on `socket` (loading the programs takes a while under TCG).
pub fn wait_for_socket(socket: &Path, daemon: &mut std::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(300);
    // Connect, not exists: a daemon killed before may have left its socket file.
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        if let Some(status) = daemon.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(daemon.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("the daemon exited with {status}: {err}");
        }
        assert!(Instant::now() < deadline, "the daemon did not listen within 300 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Stops the daemon with SIGTERM: it must exit 0 and leave nothing behind.
pub fn stop_daemon(mut daemon: Daemon) {
    let daemon = daemon.0.take().expect("a running daemon");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let stopped = daemon.wait_with_output().unwrap();
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    assert_nothing_left_behind();
}

/// `fp audit verify` of the log of a [`daemon_config`] in `t` succeeds.
pub fn assert_log_verifies(t: &TempTree) {
    let verify = fp()
        .args(["audit", "verify", "--pubkey"])
        .arg(t.join("audit.pub"))
        .arg(t.join("log/audit.log"))
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(0), "{}{}", stdout(&verify), stderr(&verify));
}

/// A daemon config in `t` (socket, a fresh key, and the audit log in `log/`, which the daemon
/// creates) with `extra` appended.
pub fn daemon_config(t: &TempTree, extra: &str) -> PathBuf {
    let keygen = fp().args(["audit", "keygen"]).arg(t.join("audit")).output().unwrap();
    assert!(keygen.status.success(), "{}", stderr(&keygen));
    t.file(
        "config.toml",
        &format!(
            "[daemon]\nsocket = \"{}\"\n[audit]\nlog = \"{}\"\nkey = \"{}\"\n{extra}",
            t.join("fp.sock").display(),
            t.join("log/audit.log").display(),
            t.join("audit.key").display()
        ),
    )
}

/// [`daemon_config`] with `socket_group = "nogroup"`: `nobody` may use the daemon's socket.
pub fn daemon_config_for_nobody(t: &TempTree, extra: &str) -> PathBuf {
    let config = daemon_config(t, extra);
    // socket_group belongs in [daemon], which daemon_config writes first.
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text.replacen("[daemon]\n", "[daemon]\nsocket_group = \"nogroup\"\n", 1);
    std::fs::write(&config, text).unwrap();
    config
}

/// `fp run` of `sh -c script` in a session of the daemon at `socket`, under `policy`, run by
/// `nobody` (uid and gid 65534, no other group), not started yet.
pub fn fp_run_as_nobody(socket: &Path, policy: &Path, ws: &Path, script: &str) -> Command {
    let mut command = Command::new("setpriv");
    command
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(fp_bin())
        .arg("run")
        .arg("--socket")
        .arg(socket)
        .arg("--policy")
        .arg(policy)
        .arg("--workspace")
        .arg(ws)
        .args(["--", "sh", "-c", script]);
    command
}

/// `fp run` of `sh -c script` in a session of the daemon at `socket`, under `policy`, as root,
/// with its output piped.
pub fn run_with_daemon(
    socket: &Path,
    policy: &Path,
    ws: &Path,
    script: &str,
) -> std::process::Child {
    fp().args(["run", "--socket"])
        .arg(socket)
        .arg("--policy")
        .arg(policy)
        .arg("--workspace")
        .arg(ws)
        .args(["--user", "root", "--", "sh", "-c", script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// A session of `manager` named `name` under `policy` (enforced, as root, no workspace): its
/// cgroup and id, for tests that drive the session manager directly.
pub fn manager_session(
    manager: &fp_agent::session::Manager,
    name: &str,
    policy: fp_agent::policy::EffectivePolicy,
) -> (PathBuf, u64) {
    let (_, cgroup, id) = manager
        .create(fp_agent::session::SessionSpec {
            name: name.into(),
            agent: "test".into(),
            policy,
            mode: fp_agent::session::Mode::Enforce,
            full_audit: false,
            uid: 0,
            workspace: None,
            pid: std::process::id(),
            command: Vec::new(),
        })
        .unwrap();
    (cgroup, id)
}

/// `sh -c script` inside the session cgroup `cgroup` (it joins before it execs).
pub fn in_cgroup(cgroup: &Path, script: &str) -> Command {
    use std::os::unix::process::CommandExt as _;
    let procs = std::fs::OpenOptions::new().write(true).open(cgroup.join("cgroup.procs")).unwrap();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]);
    // SAFETY: write(2) on an fd opened before fork.
    unsafe {
        cmd.pre_exec(move || {
            use std::io::Write as _;
            (&procs).write_all(b"0")
        });
    }
    cmd
}

/// What `fp kernel probe --json` says of fmod_ret programs on the test kernels (6.1, 6.12): they
/// attach, every hook's `security_*` function is there, and ftrace is on.
pub fn assert_fmod_ret_attaches(json: &str) {
    let probe: serde_json::Value = serde_json::from_str(json).unwrap();
    let facts = &probe["fmod_ret"];
    assert_eq!(facts["attaches"], true, "{json}");
    assert_eq!(facts["missing"], serde_json::json!([]), "{json}");
    assert_eq!(facts["ftrace_enabled"], true, "{json}");
    // security_mmap_file lacks its hook's reqprot.
    let other = facts["other_arguments"].as_array().unwrap();
    assert!(other.iter().any(|o| o["function"] == "security_mmap_file"), "{json}");
}

/// `fp run --deny T/secret ARGS -- touch T/ran` with `env` set, where fp must refuse to start:
/// its output, and whether the command ran anyway.
pub fn run_refused(
    t: &TempTree,
    env: &[(&str, &str)],
    args: &[&std::ffi::OsStr],
) -> (std::process::Output, bool) {
    let marker = t.join("ran");
    let out = fp()
        .envs(env.iter().copied())
        .args(["run", "--deny"])
        .arg(t.join("secret"))
        .args(args)
        .args(["--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    (out, marker.exists())
}

/// `fp run --deny T/secret` (with `env` set) denies the session reading, writing and deleting
/// the secret, and lets it read another file; its audit log says `backend` enforced it.
pub fn assert_session_denies_its_secret(env: &[(&str, &str)], backend: &str) {
    let t = TempTree::new("secret");
    let log = t.join("run.log");
    let secret = t.file("secret", "s3cret\n");
    let open = t.file("open", "fine\n");
    let script = format!(
        "cat {s} >/dev/null 2>&1 && echo read=ok || echo read=denied; \
         echo x 2>/dev/null >> {s} && echo write=ok || echo write=denied; \
         rm -f {s} 2>/dev/null && echo delete=ok || echo delete=denied; \
         cat {o} >/dev/null && echo open=ok || echo open=denied",
        s = secret.display(),
        o = open.display()
    );
    let out = fp()
        .envs(env.iter().copied())
        .args(["run", "--deny"])
        .arg(&secret)
        .arg("--audit-log")
        .arg(&log)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_reported(&out, &["read=denied", "write=denied", "delete=denied", "open=ok"]);
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "s3cret\n");
    let raw = std::fs::read_to_string(&log).unwrap();
    let start = raw.lines().find(|l| l.contains("\"kind\":\"session-start\"")).unwrap();
    assert!(start.contains(&format!("\"backend\":\"{backend}\"")), "{start}");
}
