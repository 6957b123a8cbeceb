//! Escape suite, per-op (schema v2) policies: every route by which an operation that combines
//! accesses (an open for reading and writing, a rename, an exchange, a link) could give content an
//! access its policy withholds (docs/threat-model.md "Moves and combined opens"). The workspace
//! is readable, writable and deletable, except `*.secret` files, `draft-*` and `*.draft` right in
//! it, what lies in its `cache-*` directories and in `*.vault` directories anywhere in it, and
//! `private/` (not readable), `frozen/` (not writable) and `keep/` (not deletable).
//! Positive controls: ordinary renames, saves, builds and git in the same session.
use fp_tests::{Expect::Allowed, Suite, denied, escape_suite, exchange, perl};

const POLICY: &str = r#"
[file_policy.defaults]
read = "deny"
write = "deny"
delete = "deny"
[file_policy.read]
silent = ["<workspace>/**", "$TARGET/**"]
deny = ["<workspace>/**/*.secret", "<workspace>/private/**", "<workspace>/draft-*", "<workspace>/*.draft",
        "<workspace>/cache-*/**", "<workspace>/**/*.vault/**"]
[file_policy.write]
silent = ["<workspace>/**"]
deny = ["<workspace>/frozen/**"]
[file_policy.delete]
silent = ["<workspace>/**"]
deny = ["<workspace>/keep/**"]
"#;

const SUITE: Suite = Suite {
    name: "escape-per-op",
    setup: r#"
mkdir -p $B/sec $B/keys $B/private/sub $B/frozen/sub $B/keep $B/work/d1/sub $B/work/tmp
for f in rdwr rdwr_append py_rdwr mv ex ln cp_link install sed_i uring_rename uring_link; do
  echo "TOPSECRET $f" > $B/sec/$f.secret
done
echo "TOPSECRET b" > $B/keys/b.secret
echo "TOPSECRET p" > $B/private/p.txt; echo "TOPSECRET q" > $B/private/q.txt
echo "TOPSECRET s" > $B/private/sub/s.txt; echo "TOPSECRET r" > $B/private/r.txt
echo frozen > $B/frozen/f.txt; echo frozen > $B/frozen/sub/g.txt; echo frozen > $B/frozen/sed.txt
echo frozen > $B/frozen/u.txt
echo keep > $B/keep/k.txt
echo "TOPSECRET d" > $B/draft-1; echo "TOPSECRET n" > $B/notes.draft
echo d > $B/work/draft-1; echo n > $B/work/notes.draft
mkdir -p $B/cache-1/sub $B/cache-2 $B/work/x.vault $B/work/cache-3
echo "TOPSECRET c" > $B/cache-1/sub/c.txt; echo "TOPSECRET m" > $B/cache-1/m.txt
echo "TOPSECRET e" > $B/cache-2/e.txt; echo "TOPSECRET v" > $B/work/x.vault/v.txt
echo c3 > $B/work/cache-3/c.txt
echo other > $B/work/other.txt; echo swap > $B/work/x.txt; echo one > $B/work/s1.secret
"#,
    deny: &[],
    before_fp: "",
    keep_fds: &[],
    after: "",
    policy: Some(POLICY),
    watch: &["sec", "keys", "private", "frozen", "keep"],
    never_read: Some("TOPSECRET"),
    user: None,
};

escape_suite! {
    setup = SUITE;
    // Opens for reading and writing need read too.
    o_rdwr_secret: denied("file_open", "read", "sec/rdwr.secret") => r#"perl -e 'open(my $f, "+<", $ARGV[0]) or die "$!\n"; print <$f>' $B/sec/rdwr.secret"#;
    o_rdwr_private: denied("file_open", "read", "private/p.txt") => r#"perl -e 'open(my $f, "+<", $ARGV[0]) or die "$!\n"; print <$f>' $B/private/p.txt"#;
    o_rdwr_append: denied("file_open", "read", "sec/rdwr_append.secret") => r#"perl -e 'open(my $f, "+>>", $ARGV[0]) or die "$!\n"; seek($f, 0, 0); print <$f>' $B/sec/rdwr_append.secret"#;
    python_o_rdwr: denied("file_open", "read", "sec/py_rdwr.secret") => "/usr/bin/python3 -c 'import os, sys; print(os.read(os.open(sys.argv[1], os.O_RDWR), 99))' $B/sec/py_rdwr.secret";
    // Renames that would make read-denied content readable under a new name.
    mv_secret_to_txt: denied("path_rename|file_open", "read", "sec/mv.secret") => "mv $B/sec/mv.secret $B/sec/mv.txt && cat $B/sec/mv.txt";
    mv_out_of_keys: denied("path_rename|file_open", "read", "keys/b.secret") => "mv $B/keys/b.secret $B/work/b.txt && cat $B/work/b.txt";
    mv_out_of_private: denied("path_rename|file_open", "read", "private/q.txt") => "mv $B/private/q.txt $B/work/q.txt && cat $B/work/q.txt";
    rename_syscall_out_of_private: denied("path_rename", "read", "private/r.txt") => perl!("rename($ARGV[0], $ARGV[1])", "private/r.txt", "work/r.txt");
    exchange_secret: denied("path_rename", "read", "sec/ex.secret") => concat!(exchange!("sec/ex.secret", "work/x.txt"), " && cat $B/work/x.txt");
    uring_rename_secret: denied("path_rename", "read", "sec/uring_rename.secret") => concat!(env!("CARGO_BIN_EXE_fp-escape-helper"), " uring-rename $B/sec/uring_rename.secret $B/work/ur.txt && cat $B/work/ur.txt");
    // Links.
    ln_secret: denied("path_link", "read", "sec/ln.secret") => "ln $B/sec/ln.secret $B/work/ln.txt && cat $B/work/ln.txt";
    cp_link_secret: denied("path_link", "read", "sec/cp_link.secret") => "cp --link $B/sec/cp_link.secret $B/work/cpl.txt && cat $B/work/cpl.txt";
    uring_link_secret: denied("path_link", "read", "sec/uring_link.secret") => concat!(env!("CARGO_BIN_EXE_fp-escape-helper"), " uring-link $B/sec/uring_link.secret $B/work/ul.txt && cat $B/work/ul.txt");
    // Copies are decided step by step: the read is denied.
    install_secret: denied("file_open", "read", "sec/install.secret") => "install $B/sec/install.secret $B/work/inst.txt";
    sed_in_place_secret: denied("file_open", "read", "sec/sed_i.secret") => "sed -i s/TOP/top/ $B/sec/sed_i.secret";
    // A new file's open takes its creation's decision (fp-ebpf/src/created.rs): a name the
    // session may write but not read is created and opened for writing only.
    create_rdwr_secret: denied("file_open", "read", "work/rdwr_new.secret") => "(exec 3<>$B/work/rdwr_new.secret)";
    create_then_read_secret: denied("file_open", "read", "work/created.secret") => "echo TOPSECRET c > $B/work/created.secret && cat $B/work/created.secret";
    create_in_frozen: denied("path_mknod", "write", "frozen/new.txt") => "echo x > $B/frozen/new.txt";
    // Delete- and write-denied content.
    mv_over_keep: denied("path_rename", "delete", "keep/k.txt") => "mv $B/work/other.txt $B/keep/k.txt";
    rename_frozen_out: denied("path_rename", "write", "frozen/f.txt") => perl!("rename($ARGV[0], $ARGV[1])", "frozen/f.txt", "work/f.txt");
    uring_rename_frozen_out: denied("path_rename", "write", "frozen/u.txt") => concat!(env!("CARGO_BIN_EXE_fp-escape-helper"), " uring-rename $B/frozen/u.txt $B/work/u.txt");
    sed_in_place_frozen: denied("path_mknod|file_open", "write", "frozen/") => "sed -i s/frozen/thawed/ $B/frozen/sed.txt";
    // Directories moved out of a protected tree, or the tree itself renamed.
    dir_out_of_private: denied("path_rename|file_open", "read", "private/sub") => "mv $B/private/sub $B/work/sub && cat $B/work/sub/s.txt";
    private_tree_renamed: denied("path_rename", "read", "private") => perl!("rename($ARGV[0], $ARGV[1])", "private", "public");
    dir_out_of_frozen: denied("path_rename", "write", "frozen/sub") => perl!("rename($ARGV[0], $ARGV[1])", "frozen/sub", "work/fsub");
    // `dir/prefix*` and `dir/*suffix` name the directory's own entries, decided in the kernel.
    name_prefix_in_directory: denied("file_open", "read", "draft-1") => "cat $B/draft-1";
    name_suffix_in_directory: denied("file_open", "read", "notes.draft") => "cat $B/notes.draft";
    glob_star_stays_in_its_directory: Allowed => "cat $B/work/draft-1 $B/work/notes.draft";
    // `dir/prefix*/**` and `**/*suffix/**`: what lies below such directories, also decided in
    // the kernel, with no route out by a move.
    below_a_prefix_directory: denied("file_open", "read", "cache-1/sub/c.txt") => "cat $B/cache-1/sub/c.txt";
    below_a_suffix_directory: denied("file_open", "read", "work/x.vault/v.txt") => "cat $B/work/x.vault/v.txt";
    mv_out_of_a_prefix_directory: denied("path_rename|file_open", "read", "cache-1/m.txt") => "mv $B/cache-1/m.txt $B/work/m.txt && cat $B/work/m.txt";
    prefix_directory_renamed: denied("path_rename", "read", "cache-2") => perl!("rename($ARGV[0], $ARGV[1])", "cache-2", "plain");
    prefix_star_stays_in_its_directory: Allowed => "cat $B/work/cache-3/c.txt && mkdir $B/cache-4 && ls $B/cache-1";
    // Positive controls: ordinary work in the workspace.
    plain_rename: Allowed => "cd $B/work && echo a > a.txt && mv a.txt b.txt && cat b.txt";
    create_and_reopen: Allowed => "cd $B/work && (exec 3<>n1.txt) && echo a > n2.txt && cat n1.txt n2.txt && touch n2.txt && chmod 600 n2.txt";
    save_by_rename: Allowed => "cd $B/work && echo new > .f.swp && mv .f.swp f.txt && /usr/bin/python3 -c \"import os; open('t.tmp', 'w').write('x'); os.replace('t.tmp', 't.txt')\"";
    secret_to_secret: Allowed => "cd $B/work && mv s1.secret s2.secret";
    directory_renames: Allowed => "cd $B/work && mv d1 d2 && mkdir -p inc/s-1-working && mv inc/s-1-working inc/s-1-done && mv d2/sub d2/sub2";
    exchange_and_link: Allowed => concat!("cd $B/work && echo 1 > e1 && echo 2 > e2 && ", exchange!("work/e1", "work/e2"), " && ln e1 l1");
    git_and_a_build: Allowed => "cd $B/work && export HOME=$B/work TMPDIR=$B/work/tmp && git init -q g && cd g && echo x > f && git add f && git -c user.email=a@b -c user.name=n commit -qm m && git status --short && printf 'int main(void) { return 0; }\\n' > m.c && cc -o m m.c && ./m";
}
