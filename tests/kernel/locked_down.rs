//! A kernel locked down for confidentiality refuses BPF programs' reads of kernel memory
//! (`LOCKDOWN_BPF_READ_KERNEL`), which fp's programs make to resolve paths: fp says so before it
//! changes anything. `cargo xtask test-kernel` runs this executable alone in a boot of its own
//! with `lockdown=confidentiality` on each kernel.
use std::path::Path;

use fp_tests::{Place, TempTree, exclusive, fp, stderr};

#[test]
fn locked_down_for_confidentiality_fp_refuses_and_says_why() {
    let _g = exclusive();
    let lockdown = std::fs::read_to_string("/sys/kernel/security/lockdown").unwrap_or_default();
    assert!(
        matches!(fp_tests::place(), Place::Vm) && lockdown.contains("[confidentiality]"),
        "needs the VM booted with lockdown=confidentiality (cargo xtask test-kernel boots one \
         for this test): {lockdown}"
    );
    let said = "locked down for confidentiality";
    let probe = fp().args(["kernel", "probe"]).output().unwrap();
    assert_eq!(probe.status.code(), Some(1), "{}", stderr(&probe));
    assert!(stderr(&probe).contains(said), "{}", stderr(&probe));
    let t = TempTree::new("locked-down");
    let (out, ran) = fp_tests::run_refused(&t, &[], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains(said) && !err.contains("Verifier output"), "{err}");
    assert!(!ran, "the command must not run unconfined");
    assert!(!Path::new("/sys/fs/cgroup/fp").exists(), "fp run made a cgroup");
}
