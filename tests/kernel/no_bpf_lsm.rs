//! Commands that need BPF LSM check for it before they change anything on the host. The test
//! needs a VM booted without `bpf` in its LSM list: `cargo xtask test-kernel` runs this executable
//! alone in a boot of its own with `lsm=capability,yama` on each kernel.
use std::path::Path;

use fp_tests::{Place, TempTree, exclusive, fp, stderr};

fn bpffs_mounted() -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts.lines().any(|l| l.split_whitespace().nth(1) == Some("/sys/fs/bpf"))
}

fn bpf_lsm_listed() -> bool {
    let lsm = std::fs::read_to_string("/sys/kernel/security/lsm").unwrap_or_default();
    lsm.trim().split(',').any(|l| l == "bpf")
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

#[test]
fn without_bpf_lsm_fp_run_and_the_daemon_refuse_before_changing_anything() {
    let _g = exclusive();
    assert!(
        matches!(fp_tests::place(), Place::Vm) && !bpf_lsm_listed(),
        "needs the VM booted without BPF LSM (cargo xtask test-kernel boots one for this test)"
    );
    let t = TempTree::new("no-bpf-lsm");
    let _unmounted = BpffsUnmounted::new();
    let log = t.join("run.log");
    let (out, ran) = fp_tests::run_refused(&t, &["--audit-log".as_ref(), log.as_os_str()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("BPF LSM is not usable") && err.contains("lsm="), "{err}");
    assert!(
        !err.contains("Verifier output"),
        "the probe's explanation, not a raw load error: {err}"
    );
    assert!(!ran, "the command must not run unconfined");
    assert!(!log.exists(), "no audit log");
    assert!(!bpffs_mounted(), "fp run mounted bpffs and left it");
    assert!(!Path::new("/sys/fs/cgroup/fp").exists(), "fp run made a cgroup");

    let config = fp_tests::daemon_config(&t, "");
    let out = fp().args(["daemon", "--config"]).arg(&config).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("BPF LSM is not usable") && err.contains("lsm="), "{err}");
    assert!(!t.join("fp.sock").exists() && !t.join("log").exists(), "the daemon changed things");
    assert!(!bpffs_mounted(), "the daemon mounted bpffs and left it");
}

/// Without the BPF LSM the probe refuses (exit 1) and says what fmod_ret programs could do:
/// on the test kernels they attach (issue 54's route).
#[test]
fn without_bpf_lsm_the_probe_refuses_and_reports_fmod_ret() {
    let _g = exclusive();
    assert!(
        matches!(fp_tests::place(), Place::Vm) && !bpf_lsm_listed(),
        "needs the VM booted without BPF LSM"
    );
    let out = fp().args(["kernel", "probe", "--json"]).output().unwrap();
    let json = fp_tests::stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{json}{}", stderr(&out));
    assert!(json.contains("\"bpf_lsm\":false"), "{json}");
    fp_tests::assert_fmod_ret_attaches(&json);
    eprintln!("{json}");
}
