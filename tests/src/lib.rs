//! Helpers shared by fp's privileged system tests (tests/kernel). They run as root inside the
//! kernel test VM (`cargo xtask test-kernel`), or natively where `fp kernel probe` proved BPF LSM
//! works; anywhere else they refuse to run.
use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::{Mutex, MutexGuard},
    time::{Duration, Instant},
};

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

/// The `fp` binary under test.
pub fn fp() -> Command {
    Command::new(std::env::var("FP_BIN").expect("FP_BIN names the fp binary under test"))
}

static SESSIONS: Mutex<()> = Mutex::new(());

/// Serializes tests that start sessions, so each can check that its session left nothing behind.
/// Also refuses to run outside the VM (see [`place`]).
pub fn exclusive() -> MutexGuard<'static, ()> {
    place();
    SESSIONS.lock().unwrap_or_else(|e| e.into_inner())
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

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Polls until no fp pins, fp cgroups or fp programs remain (unpinned links detach
/// asynchronously), failing after 5 s.
pub fn assert_nothing_left_behind() {
    let deadline = Instant::now() + Duration::from_secs(5);
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
    let progs = Command::new("bpftool").args(["prog", "show"]).output().expect("bpftool");
    for line in String::from_utf8_lossy(&progs.stdout).lines() {
        if line.contains("name fp_") {
            left.push(line.trim().to_owned());
        }
    }
    left
}
