//! On a kernel whose active LSM list lacks `bpf` (the stock boot of Ubuntu, Flatcar, SLES, WSL2)
//! fp enforces through its fmod_ret backend; asked for the BPF LSM there, it refuses before it
//! changes anything. The tests need a VM booted without `bpf` in its LSM list: `cargo xtask
//! test-kernel` runs this executable alone in a boot of its own with `lsm=capability,yama` on
//! each kernel.
use std::path::Path;

use fp_agent::kernel::{NoopEntry, debugfs_mode};
use fp_common::kernel::Hook;
use fp_tests::{Place, TempTree, exclusive, fp, stderr, stdout};

fn bpffs_mounted() -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts.lines().any(|l| l.split_whitespace().nth(1) == Some("/sys/fs/bpf"))
}

fn assert_booted_without_bpf_lsm() {
    let lsm = std::fs::read_to_string("/sys/kernel/security/lsm").unwrap_or_default();
    assert!(
        matches!(fp_tests::place(), Place::Vm) && !lsm.trim().split(',').any(|l| l == "bpf"),
        "needs the VM booted without BPF LSM (cargo xtask test-kernel boots one for this test)"
    );
}

/// In the VM only: /sys/fs/bpf unmounted for the test, mounted again after it.
struct BpffsUnmounted;

impl BpffsUnmounted {
    fn new() -> Self {
        assert!(matches!(fp_tests::place(), Place::Vm), "unmounts bpffs: VM only");
        // EBUSY while an earlier test's process still exits with a pin open: wait for it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while bpffs_mounted() {
            match nix::mount::umount("/sys/fs/bpf") {
                Err(nix::errno::Errno::EBUSY) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(200))
                }
                done => done.unwrap(),
            }
        }
        assert!(!bpffs_mounted());
        BpffsUnmounted
    }
}

impl Drop for BpffsUnmounted {
    fn drop(&mut self) {
        if !bpffs_mounted() {
            let flags = nix::mount::MsFlags::empty();
            nix::mount::mount(Some("bpf"), "/sys/fs/bpf", Some("bpf"), flags, None::<&str>)
                .unwrap();
        }
    }
}

/// The probe chooses fmod_ret, says why, and exits 0; a session's denied file is denied to it,
/// its allowed files are not.
#[test]
fn without_bpf_lsm_fp_enforces_through_fmod_ret() {
    let _g = exclusive();
    assert_booted_without_bpf_lsm();
    let out = fp().args(["kernel", "probe", "--json"]).output().unwrap();
    let json = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{json}{}", stderr(&out));
    let probe: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(probe["backend"], "fmod_ret", "{json}");
    assert_eq!((&probe["enforces"], &probe["bpf_lsm"]), (&true.into(), &false.into()), "{json}");
    assert!(probe["why"].as_str().unwrap().contains("not in the active LSM list"), "{json}");
    fp_tests::assert_fmod_ret_attaches(&json);
    let text = fp().args(["kernel", "probe"]).output().unwrap();
    assert!(stdout(&text).contains("fp enforces through the fmod_ret backend"), "{text:?}");

    fp_tests::assert_session_denies_its_secret(&[], "fmod_ret");
}

/// Asked for the BPF LSM (`FP_BACKEND=bpf_lsm`) where it is not active, `fp run` and the daemon
/// say how to enable it and exit 125 before they change anything.
#[test]
fn asked_for_the_bpf_lsm_without_it_fp_run_and_the_daemon_refuse_before_changing_anything() {
    let _g = exclusive();
    assert_booted_without_bpf_lsm();
    let t = TempTree::new("no-bpf-lsm");
    let _unmounted = BpffsUnmounted::new();
    let log = t.join("run.log");
    let bpf_lsm = [("FP_BACKEND", "bpf_lsm")];
    let (out, ran) =
        fp_tests::run_refused(&t, &bpf_lsm, &["--audit-log".as_ref(), log.as_os_str()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("the BPF LSM is not usable") && err.contains("lsm="), "{err}");
    assert!(
        !err.contains("Verifier output"),
        "the probe's explanation, not a raw load error: {err}"
    );
    assert!(!ran, "the command must not run unconfined");
    assert!(!log.exists(), "no audit log");
    assert!(!bpffs_mounted(), "fp run mounted bpffs and left it");
    assert!(!Path::new("/sys/fs/cgroup/fp").exists(), "fp run made a cgroup");

    let config = fp_tests::daemon_config(&t, "");
    let out = fp().envs(bpf_lsm).args(["daemon", "--config"]).arg(&config).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("the BPF LSM is not usable") && err.contains("lsm="), "{err}");
    assert!(!t.join("fp.sock").exists() && !t.join("log").exists(), "the daemon changed things");
    assert!(!bpffs_mounted(), "the daemon mounted bpffs and left it");

    let probe = fp().envs(bpf_lsm).args(["kernel", "probe"]).output().unwrap();
    assert_eq!(probe.status.code(), Some(1), "{}", stderr(&probe));
    let wrong = fp().env("FP_BACKEND", "kprobe").args(["kernel", "probe"]).output().unwrap();
    assert_eq!(wrong.status.code(), Some(1), "{}", stderr(&wrong));
    assert!(stderr(&wrong).contains("FP_BACKEND=kprobe: expected"), "{}", stderr(&wrong));
}

/// A kernel function takes at most 38 BPF LSM, fmod_ret and fentry programs, shared with every
/// tool that attaches there. With 38 pass-through programs of another "tool" on one of the
/// functions fp needs, `fp run` refuses before it runs the command, names the limit and the
/// function, and leaves nothing behind; on `security_file_open`, where the probe attaches its
/// program, the probe says the same.
#[test]
fn with_a_functions_38_programs_taken_by_other_tools_fp_refuses_and_says_why() {
    let _g = exclusive();
    assert_booted_without_bpf_lsm();
    let t = TempTree::new("trampoline-full");
    let fill = |hook| -> Vec<_> {
        (0..38)
            .map(|_| fp_agent::kernel::attach_noop(NoopEntry::FModRet, Some(hook)).unwrap())
            .collect()
    };
    let full = fill(Hook::PathUnlink);
    let (out, ran) = fp_tests::run_refused(&t, &[], &[]);
    drop(full);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("fmod_ret/security_path_unlink") && err.contains("at most 38"), "{err}");
    assert!(!ran, "the command must not run unconfined");
    fp_tests::assert_nothing_left_behind();

    let full = fill(Hook::FileOpen);
    let probe = fp().args(["kernel", "probe"]).output().unwrap();
    drop(full);
    let err = stderr(&probe);
    assert_eq!(probe.status.code(), Some(1), "{err}");
    assert!(err.contains("fmod_ret/security_file_open") && err.contains("at most 38"), "{err}");
    assert!(!err.contains("CONFIG_"), "the limit, not a kernel without trampolines: {err}");
}

/// In the VM only: a kernel setting written for the test (`kernel.ftrace_enabled`, or the
/// preemption mode in debugfs), its old value again after it.
struct Setting {
    path: &'static str,
    old: String,
}

impl Setting {
    fn new(path: &'static str, value: &str) -> Self {
        assert!(matches!(fp_tests::place(), Place::Vm), "a kernel setting: VM only");
        let old = std::fs::read_to_string(path).unwrap();
        let old = debugfs_mode(&old).unwrap_or(old.trim()).to_owned();
        std::fs::write(path, value).unwrap();
        Setting { path, old }
    }
}

impl Drop for Setting {
    fn drop(&mut self) {
        std::fs::write(self.path, &self.old).unwrap();
    }
}

/// At `kernel.ftrace_enabled` = 0 the kernel runs no fmod_ret program, and where it preempts
/// tasks anywhere in kernel code (`preempt=full`, switched at run time through debugfs) it skips
/// a program entered while another task sits preempted inside it: the probe and `fp run` refuse,
/// and a running daemon refuses new sessions and records it, until the setting is back.
#[test]
fn with_ftrace_disabled_or_full_preemption_the_fmod_ret_backend_starts_no_session() {
    let _g = exclusive();
    assert_booted_without_bpf_lsm();
    let t = TempTree::new("fmod-ret-off");
    let socket = t.join("fp.sock");
    let mut daemon = fp_tests::start_daemon(&fp_tests::daemon_config(&t, ""));
    fp_tests::wait_for_socket(&socket, &mut daemon);
    let policy = t.file("policy.toml", "[file_policy]\ndefault = \"write\"\n");
    let through_daemon = || {
        let args = ["run".as_ref(), "--socket".as_ref(), socket.as_os_str()];
        let policy = ["--policy".as_ref(), policy.as_os_str()];
        fp().args(args).args(policy).args(["--user", "root", "--", "true"]).output().unwrap()
    };
    let log = t.join("log/audit.log");
    let records = |state: &str| {
        let raw = std::fs::read_to_string(&log).unwrap_or_default();
        let kind =
            format!("\"kind\":\"enforcement\",\"backend\":\"fmod_ret\",\"state\":\"{state}\"");
        raw.matches(&kind).count()
    };
    let within = std::time::Duration::from_secs(30);
    let settings = [
        ("/proc/sys/kernel/ftrace_enabled", "0", "kernel.ftrace_enabled is 0"),
        ("/sys/kernel/debug/sched/preempt", "full", "preemption mode `full`"),
    ];
    for (n, (path, value, said)) in settings.into_iter().enumerate() {
        {
            let _set = Setting::new(path, value);
            let probe = fp().args(["kernel", "probe"]).output().unwrap();
            assert_eq!(probe.status.code(), Some(1), "{}", stderr(&probe));
            assert!(stderr(&probe).contains(said), "{}", stderr(&probe));
            let (out, ran) = fp_tests::run_refused(&t, &[], &["--embedded".as_ref()]);
            assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
            assert!(stderr(&out).contains(said) && !ran, "{}", stderr(&out));
            let out = through_daemon();
            assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
            assert!(stderr(&out).contains(said), "{}", stderr(&out));
            // The daemon's watch (every second) says so in its log.
            fp_tests::wait_until("the enforcement-off record", within, || records("off") == n + 1);
        }
        fp_tests::wait_until("the enforcement-on record", within, || records("on") == n + 1);
        let out = through_daemon();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    fp_tests::stop_daemon(daemon);
    let verified = fp()
        .args(["audit", "verify"])
        .arg(&log)
        .arg("--pubkey")
        .arg(t.join("audit.pub"))
        .output()
        .unwrap();
    assert_eq!(verified.status.code(), Some(3), "warnings: {}", stdout(&verified));
    assert!(
        stdout(&verified).contains("enforcement off (fmod_ret backend)"),
        "{}",
        stdout(&verified)
    );
}
