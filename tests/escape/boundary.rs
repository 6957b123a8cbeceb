//! Escape suite, the session boundary: a session process reaches no process outside its session.
//! The outsiders are started by the setup, outside the session, as the session's own user; the
//! suite asserts from outside that each is still there, unstopped.
use fp_tests::{Expect::Allowed, Suite, escape_suite};

const SUITE: Suite = Suite {
    name: "escape-boundary",
    setup: r#"
mkdir -p $B/open
# An outsider of the session's user, alive for the whole session.
setsid sleep 600 < /dev/null > /dev/null 2>&1 & echo $! > $B/open/outsider.pid
"#,
    deny: &[],
    before_fp: "",
    keep_fds: &[],
    after: r#"
pid=$(cat $B/open/outsider.pid)
state=$(sed 's/.*) //' /proc/$pid/stat | cut -c1)
kill -9 $pid
[ "$state" = S ] || { echo "the outsider was signalled: state $state" >&2; exit 1; }
"#,
    policy: None,
    watch: &[],
    never_read: None,
};

escape_suite! {
    setup = SUITE;
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
