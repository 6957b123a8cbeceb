//! Escape suite, operations: every way of changing or removing a protected file, or creating one
//! in a protected tree, through each LSM hook fp attaches (docs/hooks.md).
use fp_tests::{Expect::Allowed, Suite, denied, escape_suite, exchange, perl};

const SUITE: Suite = Suite {
    name: "escape-ops",
    setup: r#"
mkdir -p $B/open $B/secret/empty-dir $B/secret/dir-to-move
echo open > $B/open/f; echo move > $B/open/move_in; echo swap > $B/open/swap
cp /bin/true $B/secret/exec_denied_binary; chmod 755 $B/secret/exec_denied_binary
perl -e 'my ($n, $v) = ("trusted.fp", "1"); syscall(188, $ARGV[0], $n, $v, 1, 0) == 0 or die "$!\n"' $B/secret/removexattr
"#,
    deny: &[],
    // A file opened for writing before the session, inherited as fd 4.
    before_fp: "exec 4<>$B/secret/ftruncate_inherited_fd",
    keep_fds: &[4],
    after: "",
    policy: None,
    watch: &[],
    never_read: None,
    user: None,
};

escape_suite! {
    setup = SUITE;
    open_for_write: denied("file_open", "write", "secret/open_for_write") => "echo x >> $B/secret/open_for_write";
    open_with_o_trunc: denied("file_open", "write", "secret/open_with_o_trunc") => ": > $B/secret/open_with_o_trunc";
    truncate_syscall: denied("path_truncate", "write", "secret/truncate_syscall") => perl!("truncate($ARGV[0], 0)", "secret/truncate_syscall");
    ftruncate_inherited_fd: denied("file_truncate|path_truncate", "write", "secret/ftruncate_inherited_fd") => r#"perl -e 'open(my $f, "+<&=4") or die "$!\n"; truncate($f, 0) or die "$!\n"'"#;
    chmod: denied("path_chmod", "write", "secret/chmod") => "chmod 777 $B/secret/chmod";
    chown: denied("path_chown", "write", "secret/chown") => "chown 1:1 $B/secret/chown";
    utimes: denied("inode_setattr", "write", "secret/utimes") => perl!("utime(0, 0, $ARGV[0])", "secret/utimes");
    touch_no_dereference: denied("inode_setattr", "write", "secret/touch_no_dereference") => "touch -h -d @0 $B/secret/touch_no_dereference";
    setxattr: denied("inode_setxattr", "write", "secret/setxattr") => perl!("my ($n, $v) = (\"trusted.fp\", \"1\"); syscall(188, $ARGV[0], $n, $v, 1, 0) == 0", "secret/setxattr");
    removexattr: denied("inode_removexattr", "write", "secret/removexattr") => perl!("my $n = \"trusted.fp\"; syscall(197, $ARGV[0], $n) == 0", "secret/removexattr");
    posix_acl: denied("inode_set_acl|inode_setxattr", "write", "secret/posix_acl") => perl!("my $n = \"system.posix_acl_access\"; my $v = pack(\"L<(S<S<L<)3\", 2, 1, 7, 0xffffffff, 4, 4, 0xffffffff, 0x20, 4, 0xffffffff); syscall(188, $ARGV[0], $n, $v, length($v), 0) == 0", "secret/posix_acl");
    create_file: denied("path_mknod", "write", "secret/new-file") => "echo x > $B/secret/new-file";
    mknod_fifo: denied("path_mknod", "write", "secret/new-fifo") => "mkfifo $B/secret/new-fifo";
    mkdir: denied("path_mkdir", "write", "secret/new-dir") => "mkdir $B/secret/new-dir";
    symlink: denied("path_symlink", "write", "secret/new-symlink") => "ln -s /etc/hostname $B/secret/new-symlink";
    hardlink_into: denied("path_link", "write", "secret/new-hardlink") => "ln $B/open/f $B/secret/new-hardlink";
    unlink: denied("path_unlink", "delete", "secret/unlink") => "rm -f $B/secret/unlink";
    rmdir: denied("path_rmdir", "delete", "secret/empty-dir") => "rmdir $B/secret/empty-dir";
    rename_into: denied("path_rename", "write", "secret/move_in") => "mv $B/open/move_in $B/secret/move_in";
    rename_over: denied("path_rename", "write", "secret/rename_over") => "mv $B/open/f $B/secret/rename_over";
    rename_exchange: denied("path_rename", "delete", "secret/rename_exchange") => exchange!("open/swap", "secret/rename_exchange");
    rename_directory_out: denied("path_rename", "delete", "secret/dir-to-move") => "mv $B/secret/dir-to-move $B/open/dir";
    exec_denied_binary: denied("file_open", "exec", "secret/exec_denied_binary") => "$B/secret/exec_denied_binary";
    every_operation_outside: Allowed => "cd $B/open && echo y >> f && chmod 600 f && chown 1:1 f && touch -h f && mkdir d && mv d d2 && rmdir d2 && ln -s f s && ln f h && rm s h && mkfifo p && rm p && perl -e 'truncate(\"f\", 0) or die' && cp /bin/true t && ./t";
}
