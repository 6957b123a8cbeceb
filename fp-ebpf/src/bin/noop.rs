//! `fp-noop`: pass-through BPF LSM programs, one on each hook fp attaches (and one per prototype
//! where fp has two), each returning the verdict of the earlier programs (`ret`) and nothing
//! else. `cargo xtask bench kernel` attaches them in its `noop` phase (`fp-bench-load noop`,
//! through `fp_agent::kernel::attach_noop`), so its figures separate what any BPF LSM program
//! costs (the trampoline) from what fp's programs do. Its `noop-cgroup` phase attaches the
//! `noop_cgroup_<hook>` twins instead on the hooks fp attaches per cgroup (the LSM cgroup shim:
//! what fp's design pays inside a session before any of its own work). Its `noop-fmod-ret`
//! phase attaches the `noop_fmod_ret_<hook>` twins to the kernel's `security_<hook>` functions
//! instead (`noop_fentry_<hook>` where the function returns nothing): the floor of the backend
//! for kernels without the BPF LSM. Never attached by fp itself.
#![no_std]
#![no_main]

use aya_ebpf::{
    macros::{fentry, fmod_ret, lsm, lsm_cgroup},
    programs::{FEntryContext, LsmContext},
};

#[path = "../runtime.rs"]
mod runtime;

/// `noop_<hook>` on `lsm/<hook>`, returning argument `ret` (the hook's argument count).
macro_rules! noop {
    ($($name:ident = $hook:literal, $ret:literal;)*) => {
        $(
            #[lsm(hook = $hook)]
            pub fn $name(ctx: LsmContext) -> i32 {
                ctx.arg($ret)
            }
        )*
    };
}

// The argument counts are those of the matching programs in fp-ebpf/src/hooks.
noop! {
    noop_file_open = "file_open", 1;
    noop_file_truncate = "file_truncate", 1;
    noop_bprm_check_security = "bprm_check_security", 1;
    noop_file_permission = "file_permission", 2;
    noop_mmap_file = "mmap_file", 4;
    noop_inode_setattr = "inode_setattr", 2;
    noop_inode_setattr_idmap = "inode_setattr", 3;
    noop_inode_setxattr = "inode_setxattr", 6;
    noop_inode_removexattr = "inode_removexattr", 3;
    noop_inode_set_acl = "inode_set_acl", 4;
    noop_inode_remove_acl = "inode_remove_acl", 3;
    noop_path_unlink = "path_unlink", 2;
    noop_path_rmdir = "path_rmdir", 2;
    noop_path_mknod = "path_mknod", 4;
    noop_path_mkdir = "path_mkdir", 3;
    noop_path_symlink = "path_symlink", 3;
    noop_path_link = "path_link", 3;
    noop_path_rename = "path_rename", 5;
    noop_path_truncate = "path_truncate", 1;
    noop_path_chmod = "path_chmod", 2;
    noop_path_chown = "path_chown", 3;
    noop_bpf = "bpf", 3;
    noop_bpf_kernel = "bpf", 4;
    noop_task_kill = "task_kill", 4;
    noop_ptrace_access_check = "ptrace_access_check", 2;
    noop_sb_mount = "sb_mount", 5;
    noop_sb_umount = "sb_umount", 2;
    noop_sb_remount = "sb_remount", 2;
    noop_sb_kern_mount = "sb_kern_mount", 1;
    noop_sb_pivotroot = "sb_pivotroot", 2;
    noop_move_mount = "move_mount", 2;
    noop_task_alloc = "task_alloc", 2;
    noop_file_send_sigiotask = "file_send_sigiotask", 3;
    noop_locked_down = "locked_down", 1;
    noop_kernel_load_data = "kernel_load_data", 2;
    noop_kernel_read_file = "kernel_read_file", 3;
    noop_perf_event_open = "perf_event_open", 2;
    noop_perf_event_open_type = "perf_event_open", 1;
    noop_kernel_module_request = "kernel_module_request", 1;
    noop_file_ioctl = "file_ioctl", 3;
    noop_file_ioctl_compat = "file_ioctl_compat", 3;
    noop_unix_stream_connect = "unix_stream_connect", 3;
    noop_unix_may_send = "unix_may_send", 2;
}

/// d_instantiate returns nothing.
#[lsm(hook = "d_instantiate")]
pub fn noop_d_instantiate(_ctx: LsmContext) -> i32 {
    0
}

/// file_set_fowner returns nothing.
#[lsm(hook = "file_set_fowner")]
pub fn noop_file_set_fowner(_ctx: LsmContext) -> i32 {
    0
}

/// `noop_cgroup_<hook>` on `lsm_cgroup/<hook>`, one per hook (and prototype) fp attaches per
/// cgroup: 1 lets the operation through with the verdict the other LSMs gave.
macro_rules! noop_cgroup {
    ($($name:ident = $hook:literal;)*) => {
        $(
            #[lsm_cgroup(hook = $hook)]
            pub fn $name(_ctx: LsmContext) -> i32 {
                1
            }
        )*
    };
}

// The hooks of fp-ebpf/src/hooks' `#[lsm_cgroup]` programs (fp-agent's
// `noop_object_mirrors_the_per_cgroup_hooks` checks).
noop_cgroup! {
    noop_cgroup_file_permission = "file_permission";
    noop_cgroup_mmap_file = "mmap_file";
}

/// `noop_fmod_ret_<hook>` on `fmod_ret/security_<hook>`, one per program of `noop!`: 0 lets the
/// function run (a non-zero return would skip it and be its result).
macro_rules! noop_fmod_ret {
    ($($name:ident = $function:literal;)*) => {
        $(
            #[fmod_ret(function = $function)]
            pub fn $name(_ctx: FEntryContext) -> i32 {
                0
            }
        )*
    };
}

noop_fmod_ret! {
    noop_fmod_ret_file_open = "security_file_open";
    noop_fmod_ret_file_truncate = "security_file_truncate";
    noop_fmod_ret_bprm_check_security = "security_bprm_check";
    noop_fmod_ret_file_permission = "security_file_permission";
    noop_fmod_ret_mmap_file = "security_mmap_file";
    noop_fmod_ret_inode_setattr = "security_inode_setattr";
    noop_fmod_ret_inode_setattr_idmap = "security_inode_setattr";
    noop_fmod_ret_inode_setxattr = "security_inode_setxattr";
    noop_fmod_ret_inode_removexattr = "security_inode_removexattr";
    noop_fmod_ret_inode_set_acl = "security_inode_set_acl";
    noop_fmod_ret_inode_remove_acl = "security_inode_remove_acl";
    noop_fmod_ret_path_unlink = "security_path_unlink";
    noop_fmod_ret_path_rmdir = "security_path_rmdir";
    noop_fmod_ret_path_mknod = "security_path_mknod";
    noop_fmod_ret_path_mkdir = "security_path_mkdir";
    noop_fmod_ret_path_symlink = "security_path_symlink";
    noop_fmod_ret_path_link = "security_path_link";
    noop_fmod_ret_path_rename = "security_path_rename";
    noop_fmod_ret_path_truncate = "security_path_truncate";
    noop_fmod_ret_path_chmod = "security_path_chmod";
    noop_fmod_ret_path_chown = "security_path_chown";
    noop_fmod_ret_bpf = "security_bpf";
    noop_fmod_ret_bpf_kernel = "security_bpf";
    noop_fmod_ret_task_kill = "security_task_kill";
    noop_fmod_ret_ptrace_access_check = "security_ptrace_access_check";
    noop_fmod_ret_sb_mount = "security_sb_mount";
    noop_fmod_ret_sb_umount = "security_sb_umount";
    noop_fmod_ret_sb_remount = "security_sb_remount";
    noop_fmod_ret_sb_kern_mount = "security_sb_kern_mount";
    noop_fmod_ret_sb_pivotroot = "security_sb_pivotroot";
    noop_fmod_ret_move_mount = "security_move_mount";
    noop_fmod_ret_task_alloc = "security_task_alloc";
    noop_fmod_ret_file_send_sigiotask = "security_file_send_sigiotask";
    noop_fmod_ret_locked_down = "security_locked_down";
    noop_fmod_ret_kernel_load_data = "security_kernel_load_data";
    noop_fmod_ret_kernel_read_file = "security_kernel_read_file";
    noop_fmod_ret_perf_event_open = "security_perf_event_open";
    noop_fmod_ret_perf_event_open_type = "security_perf_event_open";
    noop_fmod_ret_kernel_module_request = "security_kernel_module_request";
    noop_fmod_ret_file_ioctl = "security_file_ioctl";
    noop_fmod_ret_file_ioctl_compat = "security_file_ioctl_compat";
    noop_fmod_ret_unix_stream_connect = "security_unix_stream_connect";
    noop_fmod_ret_unix_may_send = "security_unix_may_send";
}

/// security_d_instantiate returns nothing: an fmod_ret cannot attach there.
#[fentry(function = "security_d_instantiate")]
pub fn noop_fentry_d_instantiate(_ctx: FEntryContext) -> u32 {
    0
}

/// Nor to security_file_set_fowner.
#[fentry(function = "security_file_set_fowner")]
pub fn noop_fentry_file_set_fowner(_ctx: FEntryContext) -> u32 {
    0
}
