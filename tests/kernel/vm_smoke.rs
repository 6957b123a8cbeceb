//! Proves the place the privileged tests run in is what they expect: root, and in fp's test VM
//! (`FP_TEST_VM=1`) BPF LSM active with bpffs and cgroup2 mounted. Natively (`FP_TEST_NATIVE=1`)
//! `fp kernel probe` has already proven BPF LSM works, and the host's mounts are its own.
use std::path::Path;

use fp_tests::{Place, place};

fn mount_type(target: &str) -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(1) == Some(&target)).then(|| fields[2].to_owned())
    })
}

#[test]
fn runs_as_root_with_the_fp_binary() {
    place();
    assert_eq!(nix::unistd::geteuid().as_raw(), 0);
    let fp = fp_tests::fp_bin();
    assert!(Path::new(&fp).is_file(), "{fp}");
}

#[test]
fn vm_has_bpf_lsm_active() {
    if let Place::Vm = place() {
        let lsm = std::fs::read_to_string("/sys/kernel/security/lsm").unwrap();
        assert!(lsm.trim().split(',').any(|l| l == "bpf"), "lsm list: {lsm}");
    }
}

#[test]
fn vm_has_bpffs_and_cgroup2_mounted() {
    if let Place::Vm = place() {
        assert_eq!(mount_type("/sys/fs/bpf").as_deref(), Some("bpf"));
        assert_eq!(mount_type("/sys/fs/cgroup").as_deref(), Some("cgroup2"));
        assert!(Path::new("/sys/fs/cgroup/cgroup.controllers").exists());
    }
}

#[test]
fn vm_has_a_fresh_writable_tmp_and_a_read_only_host_root() {
    if let Place::Vm = place() {
        assert_eq!(mount_type("/tmp").as_deref(), Some("tmpfs"));
        std::fs::write("/tmp/fp-vm-smoke", b"x").unwrap();
        let err =
            std::fs::write(std::env::current_dir().unwrap().join("fp-vm-smoke"), b"x").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
    }
}
