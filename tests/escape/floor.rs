//! Escape suite, the floor: the devices and kernel interfaces no session process reaches,
//! whatever its policy says (`--deny` of the secret tree only: everything else is writable here).
//! Root only: an ordinary user meets the kernel's own checks (CAP_MKNOD, CAP_SYS_MODULE,
//! CAP_SYS_BOOT, CAP_SYS_RAWIO) before fp's. Every attack runs inside the test VM only.
//! `exceptions::` runs under a policy that lifts what a policy can: a block device it names,
//! perf (`kernel_interfaces`); the rest of the floor stays.
use fp_tests::{Expect::Allowed, Suite, denied, escape_suite};

const SUITE: Suite = Suite {
    name: "escape-floor",
    setup: r#"
mkdir -p $B/open
# Nodes made outside the session, under names no rule denies: a loop block device and /dev/mem.
mknod $B/open/blk b 7 0
mknod $B/open/mem c 1 1
cat /sys/kernel/mm/transparent_hugepage/enabled > $B/open/thp
# An unregistered character device (major 240, for local use), whose open asks for a module, and
# a modprobe that leaves a mark if the kernel ran it.
mknod $B/open/nodev c 240 0
cat /proc/sys/kernel/modprobe > $B/open/modprobe.was
printf '#!/bin/sh\ntouch %s/open/modprobe-ran\n' $B > $B/open/modprobe
chmod +x $B/open/modprobe
echo $B/open/modprobe > /proc/sys/kernel/modprobe
"#,
    after: r#"
cat $B/open/modprobe.was > /proc/sys/kernel/modprobe
[ ! -e $B/open/modprobe-ran ] || { echo "the kernel ran modprobe for the session" >&2; exit 1; }
[ "$(cat /proc/sys/kernel/core_pattern)" != "|/bin/true" ] || { echo "core_pattern was written" >&2; exit 1; }
[ "$(cat /proc/sys/kernel/modprobe)" != /bin/true ] || { echo "modprobe was written" >&2; exit 1; }
[ "$(cat /sys/kernel/mm/transparent_hugepage/enabled)" = "$(cat $B/open/thp)" ] || { echo "sysfs was written" >&2; exit 1; }
"#,
    ..Suite::PLAIN
};

escape_suite! {
    setup = SUITE;
    // Device nodes, made in a writable directory.
    mknod_block_device: denied("path_mknod", "write", "device node 7:0") => "mknod $B/open/blk2 b 7 0";
    mknod_char_device: denied("path_mknod", "write", "device node 1:1") => "mknod $B/open/mem2 c 1 1";
    // A block device, by a name the policy allows.
    open_block_device: denied("file_open", "read", "block device 7:0") => "dd if=$B/open/blk of=/dev/null count=1";
    // The kernel's lockdown interfaces: /dev/mem (reason 2), /proc/kcore (22), named as the
    // running kernel's BTF names them.
    dev_mem: denied("locked_down", "write", "lockdown reason 2 (dev-mem)") => "head -c 1 $B/open/mem > /dev/null";
    proc_kcore: denied("locked_down", "write", "lockdown reason 22 (kcore)") => "head -c 1 /proc/kcore > /dev/null";
    // kexec_load(2) (246) with no segments, init_module(2) (175) of garbage, finit_module(2)
    // (313) of a file that is no module: each refused before the kernel looks at it.
    kexec_load: denied("kernel_load_data", "write", "kexec image") => r#"perl -e 'syscall(246, 0, 0, 0, 0) == 0 or die "$!\n"'"#;
    init_module: denied("kernel_load_data", "write", "module") => r#"perl -e 'my ($image, $args) = ("x" x 64, ""); syscall(175, $image, 64, $args) == 0 or die "$!\n"'"#;
    finit_module: denied("kernel_read_file", "write", "module") => r#"perl -e 'open(my $f, "<", "/bin/true") or die "$!\n"; my $args = ""; syscall(313, fileno($f), $args, 0) == 0 or die "$!\n"'"#;
    // Kernel settings, by whatever name: sysctls that name programs the kernel runs outside every
    // session, a sysfs setting, /proc/sysrq-trigger (h: help, harmless were it written).
    sysctl_core_pattern: denied("file_open", "write", "kernel setting on procfs") => "echo '|/bin/true' > /proc/sys/kernel/core_pattern";
    sysctl_modprobe: denied("file_open", "write", "kernel setting on procfs") => "echo /bin/true > /proc/sys/kernel/modprobe";
    // ftrace_enabled = 0 switches every fmod_ret and fentry program off (they stay attached).
    sysctl_ftrace_enabled: denied("file_open", "write", "kernel setting on procfs") => "echo 0 > /proc/sys/kernel/ftrace_enabled";
    sysfs_setting: denied("file_open", "write", "kernel setting on sysfs") => "echo never > /sys/kernel/mm/transparent_hugepage/enabled";
    sysrq_trigger: denied("file_open", "write", "kernel setting on procfs") => "echo h > /proc/sysrq-trigger";
    // perf_event_open(2) (298) of a task clock (a software event: PERF_TYPE_SOFTWARE 1, config
    // 1; struct perf_event_attr's first 64 bytes) counting the kernel too (pid 0, cpu -1), and
    // CPU-wide (pid -1, cpu 0) with exclude_kernel (bit 5 of the flags word).
    perf_kernel_counter: denied("perf_event_open", "write", "perf event: kernel") => r#"perl -e 'my $attr = pack("LLQQQQQLLQ", 1, 64, 1, 0, 0, 0, 0, 0, 0, 0); syscall(298, $attr, 0, -1, -1, 0) >= 0 or die "$!\n"'"#;
    perf_cpu_wide: denied("perf_event_open", "write", "perf event: cpu-wide") => r#"perl -e 'my $attr = pack("LLQQQQQLLQ", 1, 64, 1, 0, 0, 0, 1 << 5, 0, 0, 0); syscall(298, $attr, -1, 0, -1, 0) >= 0 or die "$!\n"'"#;
    // A module asked for by opening an unregistered device: the open fails (ENXIO) either way;
    // the command reports the refusal unless the kernel ran modprobe (the setup's mark).
    module_autoload: denied("kernel_module_request", "write", "module request") => "cat $B/open/nodev 2>/dev/null; [ ! -e $B/open/modprobe-ran ] || { echo 'the kernel ran modprobe'; exit 1; }; echo 'Permission denied: no module was requested'; exit 1";
    // What a shell and common tools need keeps working.
    perf_own_user_counter: Allowed => r#"perl -e 'my $attr = pack("LLQQQQQLLQ", 1, 64, 1, 0, 0, 0, 3 << 5, 0, 0, 0); syscall(298, $attr, 0, -1, -1, 0) >= 0 or die "$!\n"'"#;
    own_proc_files_are_written: Allowed => "echo 500 > /proc/self/oom_score_adj && cat /proc/sys/kernel/ostype > /dev/null";
    whiteout_and_fifo_are_made: Allowed => "mknod $B/open/wh c 0 0 && rm $B/open/wh && mkfifo $B/open/fifo && rm $B/open/fifo";
    character_devices_work: Allowed => "head -c 16 /dev/urandom > /dev/null && head -c 1 /dev/zero > /dev/null && echo x > /dev/null && head -c 1 /dev/random > /dev/null";
    a_pty_opens: Allowed => r#"python3 -c 'import os; m, s = os.openpty(); os.write(s, b"x"); assert os.read(m, 1) == b"x"'"#;
}

/// `fp policy explain` answers the floor as the kernel decides it, on this kernel's own files: it
/// never says allow where the suite above sees a refusal.
#[test]
fn explain_answers_the_floor() {
    let tree = fp_tests::TempTree::new("explain-floor");
    let policy = tree.file("policy.toml", "[file_policy]\ndefault = \"write\"\n");
    let explain = |op: &str, paths: &[&str]| {
        let out = fp_tests::fp()
            .args(["policy", "explain", "--policy"])
            .arg(&policy)
            .args(["--workspace", "/tmp", "--op", op])
            .args(paths)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let refused = [
        "/proc/sys/kernel/core_pattern",
        "/proc/sysrq-trigger",
        "/sys/kernel/mm/transparent_hugepage/enabled",
        "/proc/kcore",
        "/dev/mem",
    ];
    let out = explain("write", &refused);
    assert_eq!(out.matches("deny by the session boundary").count(), refused.len(), "{out}");
    let out = explain("read", &["/proc/kcore", "/dev/mem", "/proc/sys/kernel/ostype", "/dev/null"]);
    assert_eq!(out.matches("deny by the session boundary").count(), 2, "{out}");
    assert!(out.contains("/proc/sys/kernel/ostype: read allow"), "{out}");
}

/// A session's refusals at the boundary and its floor, replayed under another policy, are decided
/// as the kernel would decide them there: the perf event allowed by a policy that switches perf
/// on, the signal to an outsider and /proc/kcore refused under every policy.
#[test]
fn refusals_replay_under_another_policy() {
    let _g = fp_tests::exclusive();
    let tree = fp_tests::TempTree::new("replay-floor");
    let mut outsider = std::process::Command::new("sleep").arg("600").spawn().unwrap();
    let log = tree.join("audit.log");
    let perf = r#"perl -e 'my $attr = pack("LLQQQQQLLQ", 1, 64, 1, 0, 0, 0, 0, 0, 0, 0); syscall(298, $attr, 0, -1, -1, 0)'"#;
    let script =
        format!("kill -STOP {}; {perf}; head -c 1 /proc/kcore > /dev/null; true", outsider.id());
    let out = fp_tests::run_confined(
        &[&tree.join("secret")],
        &["--audit-log", log.to_str().unwrap()],
        &script,
    );
    let state = std::fs::read_to_string(format!("/proc/{}/stat", outsider.id())).unwrap();
    outsider.kill().unwrap();
    outsider.wait().unwrap();
    assert!(out.status.success(), "{}", fp_tests::stderr(&out));
    assert!(!state.contains(") T "), "the outsider was stopped: {state}");
    let policy = tree
        .file("perf.toml", "[file_policy]\ndefault = \"write\"\nkernel_interfaces = [\"perf\"]\n");
    let replay = fp_tests::fp()
        .args(["audit", "replay", "--json", "--pubkey"])
        .arg(format!("{}.pub", log.display()))
        .arg("--policy")
        .arg(&policy)
        .arg("--workspace")
        .arg(&tree.0)
        .arg(&log)
        .output()
        .unwrap();
    assert!(replay.status.success(), "{}", fp_tests::stderr(&replay));
    let doc: serde_json::Value = serde_json::from_str(&fp_tests::stdout(&replay)).unwrap();
    let what_if = &doc["what_if"];
    let hooks: Vec<&str> =
        doc["records"].as_array().unwrap().iter().filter_map(|r| r["hook"].as_str()).collect();
    for hook in ["task_kill", "perf_event_open", "locked_down"] {
        assert!(hooks.contains(&hook), "no {hook} refusal recorded: {hooks:?}");
    }
    assert_eq!(what_if["would_now_allow"], 1, "{what_if}");
    assert_eq!(what_if["would_now_deny"], 0, "{what_if}");
    let allowed = &what_if["examples"][0];
    assert!(
        allowed["now"]["rule"].as_str().unwrap().starts_with("perf (kernel_interfaces"),
        "{allowed}"
    );
}

/// Under a policy that names a block device and switches perf on.
mod exceptions {
    use fp_tests::{Expect::Allowed, Suite, denied, escape_suite};

    const POLICY: &str = r#"[file_policy]
default = "write"
deny_paths = ["$B/secret", "$B/secret/**"]
block_devices = ["$B/open/disk"]
kernel_interfaces = ["perf"]
"#;

    const SUITE: Suite = Suite {
        name: "escape-floor-exceptions",
        setup: r#"
mkdir -p $B/open
# A loop device over an image with a mark in it, named by the policy through a symlink; another
# loop device's node that no entry names.
head -c 1048576 /dev/zero > $B/open/image
printf 'disk-mark' | dd of=$B/open/image conv=notrunc status=none
losetup -f --show $B/open/image > $B/open/loop
ln -s "$(cat $B/open/loop)" $B/open/disk
mknod $B/open/other b 7 200
"#,
        after: r#"
losetup -d "$(cat $B/open/loop)"
"#,
        policy: Some(POLICY),
        ..Suite::PLAIN
    };

    escape_suite! {
        setup = SUITE;
        // The named device opens, and then its rules decide (the default here: write).
        named_block_device_opens: Allowed => "head -c 9 $B/open/disk | grep -q disk-mark";
        other_block_device_refused: denied("file_open", "read", "block device 7:200") => "dd if=$B/open/other of=/dev/null count=1";
        // Naming a device lets no node be made, even of the named device.
        mknod_still_refused: denied("path_mknod", "write", "device node 7:") => "mknod $B/open/again b 7 0";
        // perf: counting the kernel and CPU-wide events open (see the floor suite's commands).
        perf_kernel_counter: Allowed => r#"perl -e 'my $attr = pack("LLQQQQQLLQ", 1, 64, 1, 0, 0, 0, 0, 0, 0, 0); syscall(298, $attr, 0, -1, -1, 0) >= 0 or die "$!\n"'"#;
        perf_cpu_wide: Allowed => r#"perl -e 'my $attr = pack("LLQQQQQLLQ", 1, 64, 1, 0, 0, 0, 1 << 5, 0, 0, 0); syscall(298, $attr, -1, 0, -1, 0) >= 0 or die "$!\n"'"#;
        // What no policy lifts.
        proc_kcore: denied("locked_down", "write", "lockdown reason") => "head -c 1 /proc/kcore > /dev/null";
    }
}
