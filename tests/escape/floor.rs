//! Escape suite, the floor: the devices and kernel interfaces no session process reaches,
//! whatever its policy says (`--deny` of the secret tree only: everything else is writable here).
//! Root only: an ordinary user meets the kernel's own checks (CAP_MKNOD, CAP_SYS_MODULE,
//! CAP_SYS_BOOT, CAP_SYS_RAWIO) before fp's. Every attack runs inside the test VM only.
use fp_tests::{Expect::Allowed, Suite, denied, escape_suite};

const SUITE: Suite = Suite {
    name: "escape-floor",
    setup: r#"
mkdir -p $B/open
# Nodes made outside the session, under names no rule denies: a loop block device and /dev/mem.
mknod $B/open/blk b 7 0
mknod $B/open/mem c 1 1
"#,
    ..Suite::PLAIN
};

escape_suite! {
    setup = SUITE;
    // Device nodes, made in a writable directory.
    mknod_block_device: denied("path_mknod", "write", "") => "mknod $B/open/blk2 b 7 0";
    mknod_char_device: denied("path_mknod", "write", "") => "mknod $B/open/mem2 c 1 1";
    // A block device, by a name the policy allows.
    open_block_device: denied("file_open", "read", "") => "dd if=$B/open/blk of=/dev/null count=1";
    // The kernel's lockdown interfaces: /dev/mem (reason 2), /proc/kcore (22).
    dev_mem: denied("locked_down", "write", "lockdown reason 2") => "head -c 1 $B/open/mem > /dev/null";
    proc_kcore: denied("locked_down", "write", "lockdown reason 22") => "head -c 1 /proc/kcore > /dev/null";
    // kexec_load(2) (246) with no segments, init_module(2) (175) of garbage, finit_module(2)
    // (313) of a file that is no module: each refused before the kernel looks at it.
    kexec_load: denied("kernel_load_data", "write", "kexec image") => r#"perl -e 'syscall(246, 0, 0, 0, 0) == 0 or die "$!\n"'"#;
    init_module: denied("kernel_load_data", "write", "module") => r#"perl -e 'my ($image, $args) = ("x" x 64, ""); syscall(175, $image, 64, $args) == 0 or die "$!\n"'"#;
    finit_module: denied("kernel_read_file", "write", "module") => r#"perl -e 'open(my $f, "<", "/bin/true") or die "$!\n"; my $args = ""; syscall(313, fileno($f), $args, 0) == 0 or die "$!\n"'"#;
    // What a shell and common tools need keeps working.
    whiteout_and_fifo_are_made: Allowed => "mknod $B/open/wh c 0 0 && rm $B/open/wh && mkfifo $B/open/fifo && rm $B/open/fifo";
    character_devices_work: Allowed => "head -c 16 /dev/urandom > /dev/null && head -c 1 /dev/zero > /dev/null && echo x > /dev/null && head -c 1 /dev/random > /dev/null";
    a_pty_opens: Allowed => r#"python3 -c 'import os; m, s = os.openpty(); os.write(s, b"x"); assert os.read(m, 1) == b"x"'"#;
}
