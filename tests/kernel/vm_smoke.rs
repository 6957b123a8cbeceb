//! Proves the kernel test VM is what the privileged tests expect: root, fp's VM, BPF LSM active,
//! bpffs and cgroup2 mounted.
use std::path::Path;

fn in_vm() {
    assert_eq!(
        std::env::var("FP_TEST_VM").as_deref(),
        Ok("1"),
        "run through `cargo xtask test-kernel`"
    );
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap();
    assert!(cmdline.split_whitespace().any(|a| a == "fp.vm=1"), "not fp's test VM: {cmdline}");
}

fn mount_type(target: &str) -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(1) == Some(&target)).then(|| fields[2].to_owned())
    })
}

#[test]
fn runs_as_root_in_the_test_vm() {
    in_vm();
    assert_eq!(nix::unistd::geteuid().as_raw(), 0);
}

#[test]
fn bpf_lsm_is_active() {
    in_vm();
    let lsm = std::fs::read_to_string("/sys/kernel/security/lsm").unwrap();
    assert!(lsm.trim().split(',').any(|l| l == "bpf"), "lsm list: {lsm}");
}

#[test]
fn bpffs_and_cgroup2_are_mounted() {
    in_vm();
    assert_eq!(mount_type("/sys/fs/bpf").as_deref(), Some("bpf"));
    assert_eq!(mount_type("/sys/fs/cgroup").as_deref(), Some("cgroup2"));
    assert!(Path::new("/sys/fs/cgroup/cgroup.controllers").exists());
}

#[test]
fn fp_binary_is_shared_from_the_host() {
    in_vm();
    let fp = std::env::var("FP_BIN").expect("FP_BIN");
    assert!(Path::new(&fp).is_file(), "{fp}");
}
