//! Escape suite, schema v1 tiers: `read_paths` inside a writable tree is content that may be read
//! but not written (nor, in schema v1, deleted); a combined open, a rename, an exchange or a link
//! must not make it writable, nor a hardlink made before the session. `deny_paths` inside the same
//! tree stay unreachable.
use fp_tests::{Expect::Allowed, Suite, denied, escape_suite, exchange, perl};

const POLICY: &str = r#"
[file_policy]
default = "deny"
write_paths = ["<workspace>/**"]
read_paths = ["<workspace>/ro/**", "$TARGET/**"]
deny_paths = ["<workspace>/private/**", "<workspace>/**/*.secret"]
"#;

const SUITE: Suite = Suite {
    name: "escape-tiers",
    setup: r#"
mkdir -p $B/ro/dir $B/private $B/work
for f in rdwr mv ln ex uring; do echo read-only > $B/ro/$f; done
echo "TOPSECRET p" > $B/private/p.txt; echo "TOPSECRET c" > $B/work/c.secret
echo swap > $B/work/x
echo read-only > $B/ro/before; ln $B/ro/before $B/work/before-alias
echo pair > $B/work/pair1; ln $B/work/pair1 $B/work/pair2
"#,
    deny: &[],
    before_fp: "",
    keep_fds: &[],
    after: "",
    policy: Some(POLICY),
    watch: &["ro", "private"],
    never_read: Some("TOPSECRET"),
    user: None,
};

escape_suite! {
    setup = SUITE;
    // First: the session has just started, its read-only trees ($TARGET is large) are still
    // being listed for hardlinks, and a file with two links is refused (`hardlinks-pending`)
    // until they are; then its policy decides.
    linked_file_written_once_listed: Allowed => "for i in $(seq 1200); do { echo x >> $B/work/pair1; } 2>/dev/null && exit 0; sleep 0.1; done; exit 1";
    link_made_before_out_of_read_only: denied("file_open", "write", "work/before-alias") => "echo x >> $B/work/before-alias";
    o_rdwr_read_only: denied("file_open", "write", "ro/rdwr") => r#"perl -e 'open(my $f, "+<", $ARGV[0]) or die "$!\n"; print $f "x"' $B/ro/rdwr"#;
    rename_read_only_out: denied("path_rename", "delete", "ro/mv") => perl!("rename($ARGV[0], $ARGV[1])", "ro/mv", "work/mv");
    link_read_only_out: denied("path_link", "write", "ro/ln") => "ln $B/ro/ln $B/work/ln && echo x >> $B/work/ln";
    exchange_read_only: denied("path_rename", "delete", "ro/ex") => exchange!("work/x", "ro/ex");
    uring_link_read_only: denied("path_link", "write", "ro/uring") => concat!(env!("CARGO_BIN_EXE_fp-escape-helper"), " uring-link $B/ro/uring $B/work/ul");
    directory_out_of_read_only: denied("path_rename", "delete", "ro/dir") => perl!("rename($ARGV[0], $ARGV[1])", "ro/dir", "work/dir");
    secret_renamed: denied("path_rename", "delete", "work/c.secret") => "mv $B/work/c.secret $B/work/c.txt && cat $B/work/c.txt";
    private_linked_out: denied("path_link", "read", "private/p.txt") => "ln $B/private/p.txt $B/work/p && cat $B/work/p";
    // The runtime base reads what node and the agent CLIs probe at start (issue 53's noise).
    runtime_probes: Allowed => "for f in /proc/version /proc/sys/vm/overcommit_memory /etc/machine-id /sys/kernel/mm/transparent_hugepage/enabled; do [ ! -e $f ] || cat $f > /dev/null || exit 1; done";
    ordinary_work: Allowed => "cd $B/work && echo a > a && mv a b && mkdir d && mv d e && ln b c && cp $B/ro/rdwr r && echo x >> r";
}
