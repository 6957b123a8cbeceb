//! Escape suite, the session boundary: a session process reaches no process outside its session.
//! The outsiders are started by the setup, outside the session, as the session's own user; the
//! suite asserts from outside that each is still there, unstopped. Every technique runs twice:
//! as root, and as an ordinary user (`as_nobody::`).
use fp_tests::{Expect::Allowed, Suite, denied, escape_suite};

/// The setup's outer terminal: a pty that an outsider holds open (the user's shell's terminal,
/// which the session may share), its name in `$B/open/tty`, writable by every user.
macro_rules! outer_terminal {
    () => {
        r#"
python3 -c 'import os, sys, time; m, s = os.openpty(); n = os.ttyname(s); os.chmod(n, 0o666); open(sys.argv[1] + ".new", "w").write(n); os.rename(sys.argv[1] + ".new", sys.argv[1]); time.sleep(600)' $B/open/tty < /dev/null > /dev/null 2>&1 & echo $! > $B/open/tty.pid
for i in $(seq 600); do [ -s $B/open/tty ] && break; sleep 0.1; done
[ -s $B/open/tty ]
"#
    };
}

/// The setup's socket helpers, outside the session: one process serving a stream socket in the
/// denied tree (`secret/helper.sock`), an abstract one (`@$B/abstract-helper`) and a datagram one
/// (`secret/helper.dgram`), which the policy does not name: any connection or datagram there
/// leaves a mark (`open/helper-ran`) the after-script checks; and the sockets the policy names
/// (`open/allowed.sock`, `@$B/allowed`, `open/log.sock` as a syslog socket), which answer.
macro_rules! socket_helpers {
    () => {
        r#"
cat > $B/open/helper.py <<'PY'
import os, selectors, socket, sys
b = sys.argv[1]
def serve(address, kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_UNIX, kind)
    s.bind(address)
    if not address.startswith("\0"):
        os.chmod(address, 0o666)
    if kind == socket.SOCK_STREAM:
        s.listen(8)
    return s
forbidden = [serve(b + "/secret/helper.sock"), serve("\0" + b + "/abstract-helper"), serve(b + "/secret/helper.dgram", socket.SOCK_DGRAM)]
allowed = [serve(b + "/open/allowed.sock"), serve("\0" + b + "/allowed"), serve(b + "/open/log.sock", socket.SOCK_DGRAM)]
sel = selectors.DefaultSelector()
for s in forbidden + allowed:
    sel.register(s, selectors.EVENT_READ)
open(b + "/open/helper.ready", "w").close()
while True:
    for key, _ in sel.select():
        s = key.fileobj
        if s.type == socket.SOCK_STREAM:
            c, _ = s.accept()
            data = c.recv(64)
            c.sendall(b"ok")
            c.close()
        else:
            data = s.recv(4096)
        if s in forbidden:
            with open(b + "/open/helper-ran", "a") as f:
                f.write(repr(data) + "\n")
PY
python3 $B/open/helper.py $B < /dev/null > /dev/null 2>&1 & echo $! > $B/open/helper.pid
for i in $(seq 600); do [ -e $B/open/helper.ready ] && break; sleep 0.1; done
[ -e $B/open/helper.ready ]
mkdir -m 777 $B/open/shared
"#
    };
}

/// The policy: everything writable but the secret tree (as `--deny` of it), and the sockets the
/// setup serves that the session may use.
const POLICY: &str = r#"[file_policy]
default = "write"
deny_paths = ["$B/secret", "$B/secret/**"]
sockets = ["$B/open/allowed.sock", "@$B/allowed", "$B/open/log.sock", "$B/open/shared/*.sock"]
"#;

const SUITE: Suite = Suite {
    name: "escape-boundary",
    setup: concat!(
        r#"
mkdir -p $B/open
# An outsider of the session's user, alive for the whole session, with a token in its
# environment.
FP_TOKEN=outsider-token setsid sleep 600 < /dev/null > /dev/null 2>&1 & echo $! > $B/open/outsider.pid
"#,
        outer_terminal!(),
        socket_helpers!(),
        r#"
eval "$(ssh-agent -s -a $B/open/shared/ssh.sock)" > /dev/null; echo $SSH_AGENT_PID > $B/open/agent.pid
"#
    ),
    deny: &[],
    before_fp: "",
    keep_fds: &[],
    after: r#"
pid=$(cat $B/open/outsider.pid)
state=$(sed 's/.*) //' /proc/$pid/stat | cut -c1)
kill -9 $pid
[ "$state" = S ] || { echo "the outsider was signalled: state $state" >&2; exit 1; }
# What the outer terminal's next reader would get: nothing was typed into it.
typed=$(python3 -c 'import os, sys; fd = os.open(open(sys.argv[1]).read(), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
try:
    typed = os.read(fd, 64)
    typed and print(repr(typed))
except BlockingIOError:
    pass' $B/open/tty)
kill $(cat $B/open/tty.pid)
[ -z "$typed" ] || { echo "the session typed into the outer terminal: $typed" >&2; exit 1; }
kill $(cat $B/open/helper.pid) $(cat $B/open/agent.pid)
[ ! -e $B/open/helper-ran ] || { echo "a helper outside the session got: $(cat $B/open/helper-ran)" >&2; exit 1; }
"#,
    policy: Some(POLICY),
    watch: &[],
    never_read: Some("outsider-token"),
    user: None,
};

/// The same, as an ordinary user: the session and its outsider run as `nobody`.
const AS_NOBODY: Suite = Suite {
    name: "escape-boundary-nobody",
    setup: concat!(
        r#"
mkdir -p $B/open
FP_TOKEN=outsider-token setsid setpriv --reuid=65534 --regid=65534 --clear-groups sleep 600 < /dev/null > /dev/null 2>&1 & echo $! > $B/open/outsider.pid
"#,
        outer_terminal!(),
        socket_helpers!(),
        r#"
eval "$(setpriv --reuid=65534 --regid=65534 --clear-groups ssh-agent -s -a $B/open/shared/ssh.sock)" > /dev/null; echo $SSH_AGENT_PID > $B/open/agent.pid
"#
    ),
    user: Some("nobody"),
    ..SUITE
};

escape_suite! {
    setup = SUITE;
    also = as_nobody: AS_NOBODY;
    // clone3(2) (435) with CLONE_INTO_CGROUP (0x200000000) and an O_PATH (0x200000) fd of the
    // cgroup2 root: struct clone_args up to `cgroup` (88 bytes); the child, were it made, would
    // start outside every session. The root's mount differs by host: findmnt finds it.
    clone_into_the_root_cgroup: denied("task_alloc", "write", "") => r#"perl -e 'my $fd = syscall(2, $ARGV[0], 0x200000, 0); die "$!\n" if $fd < 0; my $args = pack("Q11", 0x200000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, $fd); my $pid = syscall(435, $args, 88); die "$!\n" if $pid < 0; syscall(231, 0) if $pid == 0; waitpid($pid, 0)' $(findmnt -n -t cgroup2 -o TARGET | head -n 1)"#;
    // Signals, signal 0 (a probe) included.
    kill_stop_outsider: denied("task_kill", "write", "process ") => "kill -STOP $(cat $B/open/outsider.pid)";
    kill_zero_outsider: denied("task_kill", "write", "process ") => "kill -0 $(cat $B/open/outsider.pid)";
    // pidfd_send_signal(2) (424) through a pidfd of the outsider, which pidfd_open gives.
    pidfd_signal_outsider: denied("task_kill", "write", "process ") => "perl -e 'my $fd = syscall(434, $ARGV[0]+0, 0); die \"$!\\n\" if $fd < 0; syscall(424, $fd, 19, 0, 0) == 0 or die \"$!\\n\"' $(cat $B/open/outsider.pid)";
    // Every ptrace-mode access of the outsider.
    environ_of_outsider: denied("ptrace_access_check", "write", "process ") => "cat /proc/$(cat $B/open/outsider.pid)/environ";
    mem_of_outsider: denied("ptrace_access_check", "write", "process ") => "perl -e 'open(my $f, \"<\", \"/proc/$ARGV[0]/mem\") or die \"$!\\n\"' $(cat $B/open/outsider.pid)";
    fd_of_outsider: denied("ptrace_access_check", "write", "process ") => "ls -l /proc/$(cat $B/open/outsider.pid)/fd/";
    ptrace_attach_outsider: denied("ptrace_access_check", "write", "process ") => "perl -e 'syscall(101, 16, $ARGV[0]+0, 0, 0) == 0 or die \"$!\\n\"' $(cat $B/open/outsider.pid)";
    // process_vm_readv(2) (310) and pidfd_getfd(2) (438): the kernel turns the hook's EACCES into
    // EPERM for these two, which the command reports as the refusal it is.
    process_vm_readv_outsider: denied("ptrace_access_check", "write", "process ") => "perl -e 'my $buf = \"x\" x 8; my $iov = pack(\"QQ\", unpack(\"Q\", pack(\"p\", $buf)), 8); syscall(310, $ARGV[0]+0, $iov, 1, $iov, 1, 0) >= 0 or die($!{EPERM} ? \"Permission denied (EPERM)\\n\" : \"$!\\n\")' $(cat $B/open/outsider.pid)";
    pidfd_getfd_outsider: denied("ptrace_access_check", "write", "process ") => "perl -e 'my $fd = syscall(434, $ARGV[0]+0, 0); die \"$!\\n\" if $fd < 0; syscall(438, $fd, 0, 0) >= 0 or die($!{EPERM} ? \"Permission denied (EPERM)\\n\" : \"$!\\n\")' $(cat $B/open/outsider.pid)";
    // A file's signal: the outsider made the owner of a pipe's read end (F_SETOWN, 8), its
    // signal SIGSTOP (F_SETSIG, 10), O_ASYNC (0x2000) set (F_SETFL, 4); a write sends it. The
    // kernel drops a refused one silently: the command reports the refusal when the outsider
    // is still running.
    sigio_to_outsider: denied("file_send_sigiotask", "write", "process ") => r#"perl -e 'pipe(my $r, my $w) or die "$!\n"; fcntl($r, 8, $ARGV[0]+0) or die "$!\n"; fcntl($r, 10, 19) or die "$!\n"; fcntl($r, 4, 0x2000) or die "$!\n"; syswrite($w, "x"); select(undef, undef, undef, 0.5); open(my $s, "<", "/proc/$ARGV[0]/stat") or die "$!\n"; (<$s> =~ /\) (\S)/ and $1 eq "T") and die "the outsider was stopped\n"; die "Permission denied: no signal reached the outsider\n"' $(cat $B/open/outsider.pid)"#;
    sigio_to_self: Allowed => r#"perl -e 'my $got = 0; $SIG{IO} = sub { $got = 1 }; pipe(my $r, my $w) or die "$!\n"; fcntl($r, 8, $$+0) or die "$!\n"; fcntl($r, 4, 0x2000) or die "$!\n"; syswrite($w, "x"); for (1..40) { last if $got; select(undef, undef, undef, 0.05) } $got or die "no SIGIO\n"'"#;
    // Input queued on the outer terminal (TIOCSTI, one byte a call), which its shell would run
    // after the session; a console's selection pasted as input (TIOCLINUX, subcommand 3): both
    // refused on any file, before the driver.
    tiocsti_into_outer_terminal: denied("file_ioctl", "write", "ioctl TIOCSTI") => r#"python3 -c 'import fcntl, os, sys, termios; fd = os.open(open(sys.argv[1]).read(), os.O_RDWR | os.O_NOCTTY); [fcntl.ioctl(fd, termios.TIOCSTI, bytes([c])) for c in b"id\n"]' $B/open/tty"#;
    tioclinux_paste: denied("file_ioctl", "write", "ioctl TIOCLINUX") => r#"python3 -c 'import fcntl, os, sys; fd = os.open(open(sys.argv[1]).read(), os.O_RDWR | os.O_NOCTTY); fcntl.ioctl(fd, 0x541C, bytes([3]))' $B/open/tty"#;
    // A shell's own use of its terminal keeps working: an interactive bash on a new pty (its
    // controlling terminal) with job control, window size and termios.
    terminal_job_control: Allowed => r#"python3 -c 'import os, pty, sys; pid, fd = pty.fork(); pid == 0 and os.execlp("bash", "bash", "--norc", "--noprofile", "-i", "-c", "case $- in *m*) ;; *) exit 3;; esac; stty rows 30 cols 100 && [ \"$(stty size)\" = \"30 100\" ] && { sleep 0.1 & fg %1; } && stty -echo && exit 7"); st = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]); sys.exit(0 if st == 7 else "job control failed: %d" % st)'"#;
    // A helper outside the session, on a socket in the denied tree, an abstract one and a
    // datagram one: none named by the policy.
    outside_server_on_a_path_socket: denied("unix_stream_connect", "write", "secret/helper.sock served by process ") => r#"python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"id\n")' $B/secret/helper.sock"#;
    outside_server_on_an_abstract_socket: denied("unix_stream_connect", "write", "abstract-helper served by process ") => r#"python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect("\0" + sys.argv[1]); s.sendall(b"id\n")' $B/abstract-helper"#;
    outside_datagram_socket: denied("unix_may_send", "write", "secret/helper.dgram served by cgroup ") => r#"python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto(b"id\n", sys.argv[1])' $B/secret/helper.dgram"#;
    // The helpers the policy names: a stream socket by path and an abstract one, syslog to a
    // datagram socket (logger, as to /dev/log), and git's ssh-agent.
    named_outside_sockets_are_reached: Allowed => r#"python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"x"); assert s.recv(2) == b"ok"; a = socket.socket(socket.AF_UNIX); a.connect("\0" + sys.argv[2]); a.sendall(b"x"); assert a.recv(2) == b"ok"' $B/open/allowed.sock $B/allowed"#;
    logger_to_a_named_syslog_socket: Allowed => "logger --socket-errors=on -u $B/open/log.sock hello";
    ssh_agent_named_is_reached: Allowed => "SSH_AUTH_SOCK=$B/open/shared/ssh.sock ssh-add -l; [ $? -eq 1 ]";
    // The session's own sockets: a stream server and its client, an abstract one, datagrams.
    own_socket_server_is_reached: Allowed => r#"python3 -c 'import socket, sys; l = socket.socket(socket.AF_UNIX); l.bind(sys.argv[1]); l.listen(); c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); a, _ = l.accept(); c.sendall(b"x"); assert a.recv(1) == b"x"; m = socket.socket(socket.AF_UNIX); m.bind("\0" + sys.argv[1]); m.listen(); n = socket.socket(socket.AF_UNIX); n.connect("\0" + sys.argv[1])' $B/open/shared/own.socket"#;
    own_datagram_socket_is_reached: Allowed => r#"python3 -c 'import socket, sys; r = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); r.bind(sys.argv[1]); s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto(b"x", sys.argv[1]); assert r.recv(1) == b"x"; p, q = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); p.send(b"y"); assert q.recv(1) == b"y"' $B/open/shared/own.dgram"#;
    // The session's own processes stay reachable: ps, signals, /proc, memory, fds.
    ps_lists_every_process: Allowed => "ps -e -o pid,stat,comm > /dev/null && ps -p $(cat $B/open/outsider.pid) > /dev/null";
    own_processes_are_reachable: Allowed => "sleep 30 & p=$!; kill -0 $p && cat /proc/$p/environ > /dev/null && ls /proc/$p/fd > /dev/null && perl -e 'my $fd = syscall(434, $ARGV[0]+0, 0); die \"$!\\n\" if $fd < 0; syscall(438, $fd, 0, 0) >= 0 or die \"$!\\n\"' $p && kill -STOP $p && kill -CONT $p && kill $p";
    python_multiprocessing: Allowed => "python3 -c 'import multiprocessing as m; assert m.Pool(2).map(abs, [-1, -2]) == [1, 2]'";
    // pidfd_open(2) (x86_64 434) of the session's own processes: on 6.9+ a pidfd is opened
    // through file_open, with no path (pidfs). (Perl's syscall passes a string as a pointer:
    // `+0` makes a pid a number.)
    pidfd_of_self: Allowed => "perl -e 'syscall(434, $$+0, 0) >= 0 or die \"$!\\n\"'";
    // clone3(2) (435) with CLONE_PIDFD (0x1000): the kernel opens the child's pidfd before the
    // child exists; struct clone_args' first eight u64 (flags, pidfd, child_tid, parent_tid,
    // exit_signal = SIGCHLD, stack, stack_size, tls). The child exits at once (exit_group, 231).
    clone3_with_pidfd: Allowed => r#"perl -e 'my $fd = pack("l", -1); my $args = pack("Q8", 0x1000, unpack("Q", pack("p", $fd)), 0, 0, 17, 0, 0, 0); my $pid = syscall(435, $args, 64); die "$!\n" if $pid < 0; syscall(231, 0) if $pid == 0; waitpid($pid, 0); unpack("l", $fd) >= 0 or die "no pidfd\n"'"#;
    pidfd_of_own_child: Allowed => "sleep 5 & p=$!; perl -e 'syscall(434, $ARGV[0]+0, 0) >= 0 or die \"$!\\n\"' $p; r=$?; kill $p; exit $r";
}

/// What a session makes of cgroupfs, run by `a_session_makes_cgroups_of_its_own` as root; fd 5 is
/// the host's hierarchy, opened before the session (an fd handed over to it), `$SECRET` a denied
/// file, `$OUTSIDER` a process outside the session.
const OWN_CGROUPS: &str = r#"
refused() { if "$@" 2>/dev/null; then echo "not refused: $*"; exit 3; fi; }
# At the root of its cgroup namespace, its own cgroup shown at the mount point.
[ "$(cat /proc/self/cgroup)" = "0::/" ] || { echo "in $(cat /proc/self/cgroup)"; exit 2; }
grep -qx $$ /sys/fs/cgroup/cgroup.procs
# A cgroup of its own, configured, with the shell moved into it: still confined there.
mkdir /sys/fs/cgroup/work
echo 3 > /sys/fs/cgroup/work/cgroup.max.descendants
echo $$ > /sys/fs/cgroup/work/cgroup.procs
[ "$(cat /proc/self/cgroup)" = "0::/work" ] || { echo "moved to $(cat /proc/self/cgroup)"; exit 2; }
refused cat "$SECRET"
# Its own cgroup's limits (the kernel: not delegated), an outsider pulled in (the kernel: outside
# its namespace), the host's hierarchy by the handed-over fd (fp: cgroupfs is read-only there).
refused sh -c 'echo 100 > /sys/fs/cgroup/cgroup.max.descendants'
refused sh -c "echo $OUTSIDER > /sys/fs/cgroup/work/cgroup.procs"
refused sh -c 'echo $$ > /proc/self/fd/5/cgroup.procs'
refused mkdir /proc/self/fd/5/escape
refused rmdir /proc/self/fd/5/fp
# Back, the cgroup removed; one left holding a process, for fp to end with the session.
echo $$ > /sys/fs/cgroup/cgroup.procs
rmdir /sys/fs/cgroup/work
mkdir /sys/fs/cgroup/left
sh -c 'echo $$ > /sys/fs/cgroup/left/cgroup.procs; exec sleep 600' &
sleep 0.5
grep -q sleep /proc/$!/cmdline
echo own-cgroups-done
"#;

/// Sub-cgroups inside the session: a root session, on a hierarchy mounted `nsdelegate` (as
/// systemd mounts it; the test VM too), makes, configures and removes cgroups of its own and
/// moves its processes between them, and stays confined in them; it reaches no cgroup outside
/// and pulls no outsider in; fp ends what it left with the session. Without `nsdelegate` the
/// kernel would not keep the moves inside, and cgroupfs stays read-only to the session.
#[test]
fn a_session_makes_cgroups_of_its_own() {
    use std::process::Command;
    let _g = fp_tests::exclusive();
    let t = fp_tests::TempTree::new("own-cgroups");
    let secret = t.file("secret/f", "secret\n");
    let mut outsider = Command::new("sleep").arg("600").spawn().unwrap();
    let outsider_pid = outsider.id();
    let outsider_cgroup = || std::fs::read_to_string(format!("/proc/{outsider_pid}/cgroup"));
    let before = outsider_cgroup().unwrap();
    let session = |script: &str| {
        Command::new("sh")
            .args(["-c", "exec 5</sys/fs/cgroup; exec \"$@\"", "sh", &fp_tests::fp_bin()])
            .arg("run")
            .arg("--deny")
            .arg(t.join("secret"))
            .args(["--keep-fd", "5", "--", "sh", "-c", script])
            .env("SECRET", &secret)
            .env("OUTSIDER", outsider_pid.to_string())
            .output()
            .unwrap()
    };
    let out = session(OWN_CGROUPS);
    fp_tests::assert_nothing_left_behind();
    let after = outsider_cgroup().unwrap();
    outsider.kill().unwrap();
    let _ = outsider.wait();
    let shown = format!("{}{}", fp_tests::stdout(&out), fp_tests::stderr(&out));
    assert!(out.status.success() && shown.contains("own-cgroups-done"), "{shown}");
    assert_eq!(after, before, "the outsider was moved");
    assert!(shown.contains("fp: denied file_open /sys/fs/cgroup/cgroup.procs"), "{shown}");
    assert!(shown.contains("fp: denied path_mkdir /sys/fs/cgroup/escape"), "{shown}");

    // Without `nsdelegate`: cgroupfs stays read-only to the session.
    // mount(2) itself (165), MS_REMOUNT (32) with exactly these options: mount(8) would keep the
    // mount's current ones.
    let remount = |options: &str| {
        let done = Command::new("perl")
            .args([
                "-e",
                "my ($s, $t, $o) = ('none', '/sys/fs/cgroup', $ARGV[0]); \
                 syscall(165, $s, $t, 0, 32, $o) == 0 or die $!",
            ])
            .arg(options)
            .status();
        assert!(done.unwrap().success(), "remount /sys/fs/cgroup with {options:?}");
    };
    remount("");
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let plain = !mounts.lines().any(|l| l.contains(" /sys/fs/cgroup ") && l.contains("nsdelegate"));
    let out = session("mkdir /sys/fs/cgroup/work && echo made");
    remount("nsdelegate");
    assert!(plain, "the remount kept nsdelegate: {mounts}");
    let shown = format!("{}{}", fp_tests::stdout(&out), fp_tests::stderr(&out));
    assert!(!shown.contains("made"), "{shown}");
    assert!(shown.contains("fp: denied path_mkdir /sys/fs/cgroup/work"), "{shown}");
    fp_tests::assert_nothing_left_behind();
}
