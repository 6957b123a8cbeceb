//! Escape suite, routes to a protected file: every alias of `$B/secret/<technique>` that a path
//! checker in userspace could miss must reach the same kernel decision as the plain path.
use fp_tests::{Expect::Allowed, Suite, denied, escape_suite};

const SUITE: Suite = Suite {
    name: "escape-paths",
    setup: r#"
mkdir -p $B/open/mnt $B/open/tmpfs $B/parent/inner $B/secret/deep
echo open > $B/open/f
ln -s $B/secret/symlink_to_file $B/open/link-file
ln -s $B/secret $B/open/link-dir
ln -s $B/secret/symlink_chain $B/open/chain1
ln -s chain1 $B/open/chain2
ln -s $B/open/chain2 $B/open/chain3
ln $B/secret/hardlink_made_before $B/open/hardlink-before
echo inner > $B/parent/inner/f
cp /bin/busybox $B/open/busybox
# 64 levels deep, under the protected tree and outside it.
d=$B/secret/deep; o=$B/open; for i in $(seq 64); do d=$d/l; o=$o/l; done
mkdir -p $d $o; echo deep > $d/f; echo deep > $o/f
# Names with a newline and with a byte that is not UTF-8.
printf 'x' > "$B/secret/$(printf 'new\nline')"; printf 'x' > "$B/secret/$(printf 'bad\377name')"
# A file 17 components of 250 bytes deep: its path is longer than PATH_MAX.
n=$(printf '%0250d' 0); cd $B/open; for i in $(seq 17); do mkdir $n; cd -P $n; done; echo long > f
# overlayfs: the protected file lives in the merged view. The test VM's initramfs does not load
# the module: take it from the test kernel's package.
grep -qw overlay /proc/filesystems || insmod $(ls $FP_TARGET_DIR/fp-vm/kernels/*/root/lib/modules/$(uname -r)/kernel/fs/overlayfs/overlay.ko*)
mkdir -p $B/ovl/lower $B/ovl/upper $B/ovl/work $B/ovl/merged
echo lower > $B/ovl/lower/f
mount -t overlay overlay -o lowerdir=$B/ovl/lower,upperdir=$B/ovl/upper,workdir=$B/ovl/work $B/ovl/merged
"#,
    deny: &["parent/inner/f", "ovl/merged/f"],
    before_fp: "exec 3<$B/secret",
    keep_fds: &[3],
    after: "umount $B/ovl/merged",
    policy: None,
    watch: &[],
    never_read: None,
    user: None,
};

escape_suite! {
    setup = SUITE;
    direct: denied("file_open", "read", "secret/direct") => "cat $B/secret/direct";
    allowed_file: Allowed => "cat $B/open/f";
    symlink_to_file: denied("file_open", "read", "secret/symlink_to_file") => "cat $B/open/link-file";
    symlink_to_dir: denied("file_open", "read", "secret/symlink_to_dir") => "cat $B/open/link-dir/symlink_to_dir";
    symlink_chain: denied("file_open", "read", "secret/symlink_chain") => "cat $B/open/chain3";
    relative_from_cwd_inside: denied("file_open", "read", "secret/relative_from_cwd_inside") => "cd $B/secret && cat ./relative_from_cwd_inside";
    dotdot: denied("file_open", "read", "secret/dotdot") => "cat $B/open/../open/../secret/dotdot";
    double_slash_and_dot: denied("file_open", "read", "secret/double_slash_and_dot") => "cat $B//secret/.//./double_slash_and_dot";
    proc_self_root: denied("file_open", "read", "secret/proc_self_root") => "cat /proc/self/root$B/secret/proc_self_root";
    proc_self_cwd: denied("file_open", "read", "secret/proc_self_cwd") => "cd $B/secret && cat /proc/self/cwd/proc_self_cwd";
    opath_fd_reopen: denied("file_open", "read", "secret/opath_fd_reopen") => concat!(env!("CARGO_BIN_EXE_fp-escape-helper"), " opath-reopen $B/secret/opath_fd_reopen");
    openat2_resolve_beneath: denied("file_open", "read", "secret/openat2_resolve_beneath") => concat!(env!("CARGO_BIN_EXE_fp-escape-helper"), " openat2 $B secret/openat2_resolve_beneath beneath");
    openat2_resolve_in_root: denied("file_open", "read", "secret/openat2_resolve_in_root") => concat!(env!("CARGO_BIN_EXE_fp-escape-helper"), " openat2 $B /secret/openat2_resolve_in_root in-root");
    io_uring_openat_inline: denied("file_open", "read", "secret/io_uring_openat_inline") => concat!(env!("CARGO_BIN_EXE_fp-escape-helper"), " uring $B secret/io_uring_openat_inline inline");
    io_uring_openat_async_worker: denied("file_open", "read", "secret/io_uring_openat_async_worker") => concat!(env!("CARGO_BIN_EXE_fp-escape-helper"), " uring $B secret/io_uring_openat_async_worker async");
    dirfd_inherited_from_before_the_session: denied("file_open", "read", "secret/dirfd_inherited_from_before_the_session") => concat!(env!("CARGO_BIN_EXE_fp-escape-helper"), " fd-open 3 dirfd_inherited_from_before_the_session");
    hardlink_made_before: denied("file_open", "read", "open/hardlink-before") => "cat $B/open/hardlink-before";
    hardlink_made_during: denied("path_link", "read", "secret/hardlink_made_during") => "ln $B/secret/hardlink_made_during $B/open/hl && cat $B/open/hl";
    rename_out_then_read: denied("path_rename", "delete", "secret/rename_out_then_read") => "mv $B/secret/rename_out_then_read $B/open/ro && cat $B/open/ro";
    // The directory holds a rule's target: moving it is refused (EXDEV), mv's copy is denied.
    rename_of_the_parent: denied("path_rename|file_open", "read", "parent/inner") => "mv $B/parent/inner $B/open/moved && cat $B/open/moved/f";
    // Mounts are refused to sessions (self-protection): here already the private propagation
    // that `unshare -m` sets up for its namespace. tests/kernel/slice.rs refuses each kind of
    // mount itself, in a namespace where a regression cannot leak a mount to the host.
    bind_mount_in_new_namespace: denied("sb_mount", "write", "") => "unshare -m sh -c 'mount --bind $B/secret $B/open/mnt && cat $B/open/mnt/bind_mount_in_new_namespace'";
    unshare_mount_namespace: denied("sb_mount", "write", "") => "unshare -m sh -c 'mount -t tmpfs none $B/open/tmpfs && cat $B/secret/unshare_mount_namespace'";
    chroot: denied("file_open", "read", "secret/chroot") => "chroot $B /open/busybox cat /secret/chroot";
    path_longer_than_path_max: denied("file_open", "read", "unresolved-path") => "cd $B/open && for i in $(seq 17); do cd -P 0*; done && cat f";
    levels_64_deep: denied("file_open", "read", "/l/l/l/f") => "cat $B/secret/deep$(printf '/l%.0s' $(seq 64))/f";
    levels_64_deep_allowed: Allowed => "cat $B/open$(printf '/l%.0s' $(seq 64))/f";
    name_with_newline: denied("file_open", "read", "secret/new\\nline") => "cat \"$B/secret/$(printf 'new\\nline')\"";
    name_not_utf8: denied("file_open", "read", "secret/bad\\xffname") => "cat \"$B/secret/$(printf 'bad\\377name')\"";
    overlayfs_read: denied("file_open", "read", "ovl/merged/f") => "cat $B/ovl/merged/f";
    overlayfs_write: denied("file_open", "write", "ovl/merged/f") => "echo x >> $B/ovl/merged/f";
}
