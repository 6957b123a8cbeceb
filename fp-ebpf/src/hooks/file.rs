//! Hooks on open files and executables.
use aya_ebpf::{
    macros::{fmod_ret, lsm, lsm_cgroup},
    programs::{FEntryContext, LsmContext},
};
use fp_common::kernel::{Hook, KernelOp};

use crate::{
    cgroups::{self, Change},
    created,
    decide::{answered, decide_file},
    floor::{refuse_block_device, refuse_kernel_setting},
    kernel::{
        F_FLAGS_EXEC, F_FLAGS_TMPFILE, FMODE_CREATED, FMODE_EXEC, FMODE_READ, FMODE_WRITE,
        OFF_FILE_F_FLAGS, OFF_FILE_F_INODE, OFF_FILE_F_MODE, OFF_LINUX_BINPRM_FILE, file_path,
        load, off, path_parts, pseudo_file,
    },
    prompt::check_pending,
    session::{Session, unreadable},
};

hook! {
    /// Every open, including the open of an executable and of a file created by O_CREAT. An open
    /// decides every access it grants: read and write both for O_RDWR (the stricter verdict wins),
    /// write for O_WRONLY, exec for execve/uselib, read otherwise. O_TRUNC is checked as a write by
    /// path_truncate (6.1) or file_truncate (6.2+). The open of a file it just created takes
    /// path_mknod's decision on its name (crate::created).
    /// A pseudo filesystem's file (a pidfd on 6.9+) is no path object ([`pseudo_file`]). A block
    /// device is refused by any name, and so is writing a kernel setting (crate::floor). The
    /// session's own cgroups are written past the floor of cgroupfs (crate::cgroups).
    lsm("file_open", ret = 1) fp_file_open;
    fmod_ret("security_file_open") fp_fmod_ret_file_open;
    // file_open(struct file *file, int ret)
    |session, ctx| file_open(session, ctx.arg(0))
}

#[inline(always)]
fn file_open(session: &Session, file: u64) -> i32 {
    // The inode is read once and passed to each check: on the fmod_ret backend the verifier
    // trusts no argument, so each read of the file's fields is a probing load (about 6 more
    // instructions), where a BPF LSM program's is a plain load (docs/performance.md).
    let inode: u64 = load(file, off(&OFF_FILE_F_INODE));
    if pseudo_file(inode) {
        return 0;
    }
    let (mode, flags): (u32, u32) =
        (load(file, off(&OFF_FILE_F_MODE)), load(file, off(&OFF_FILE_F_FLAGS)));
    let claimed = match mode & FMODE_CREATED != 0 && flags & F_FLAGS_TMPFILE == 0 {
        true => created::claim(&session.info, file),
        false => 0,
    };
    let writes = mode & FMODE_WRITE != 0;
    let (op, and_write) = if writes && mode & FMODE_READ != 0 {
        (KernelOp::Read, true)
    } else if writes {
        (KernelOp::Write, false)
    } else if mode & FMODE_EXEC != 0 || flags & F_FLAGS_EXEC != 0 {
        (KernelOp::Exec, false)
    } else {
        (KernelOp::Read, false)
    };
    if let Some(refused) = refuse_block_device(session, inode, op) {
        return refused;
    }
    if writes && let Some(refused) = refuse_kernel_setting(session, inode) {
        return refused;
    }
    if writes && own_cgroup_file(session, file, inode) {
        return 0;
    }
    // What the verdict cache would answer right away, without looking it up.
    if answered(session, op, and_write, claimed) {
        return 0;
    }
    decide_file(session, Hook::FileOpen, op, and_write, file)
}

/// Whether the BTF-typed `file` (its `f_inode`: `inode`) is a control file of one of the
/// session's own cgroups, which its task may write (crate::cgroups).
#[inline(always)]
fn own_cgroup_file(session: &Session, file: u64, inode: u64) -> bool {
    cgroups::on_cgroupfs(inode)
        && cgroups::delegated(session, path_parts(file_path(file)).1, Change::File)
}

hook! {
    /// ftruncate(2) and open(O_TRUNC) since 6.2.
    lsm("file_truncate", ret = 1) fp_file_truncate;
    fmod_ret("security_file_truncate") fp_fmod_ret_file_truncate;
    // file_truncate(struct file *file, int ret)
    |session, ctx| {
        let file: u64 = ctx.arg(0);
        match own_cgroup_file(session, file, load(file, off(&OFF_FILE_F_INODE))) {
            true => 0,
            false => decide_file(session, Hook::FileTruncate, KernelOp::Write, false, file),
        }
    }
}

hook! {
    /// The file execve is about to run, once per binary and interpreter (file_open saw it opened
    /// for exec already; this also covers binfmt interpreters).
    lsm("bprm_check_security", ret = 1) fp_bprm_check_security;
    fmod_ret("security_bprm_check") fp_fmod_ret_bprm_check_security;
    // bprm_check_security(struct linux_binprm *bprm, int ret)
    |session, ctx| match load::<u64>(ctx.arg(0), off(&OFF_LINUX_BINPRM_FILE)) {
        0 => unreadable(session),
        file => decide_file(session, Hook::BprmCheckSecurity, KernelOp::Exec, false, file),
    }
}

hook! {
    /// Every read and write (also the kernel's own reads of an executable): refused only for a
    /// file whose prompt-tier open the broker has not answered.
    lsm_cgroup("file_permission", ret = 2) fp_file_permission;
    fmod_ret("security_file_permission") fp_fmod_ret_file_permission;
    // file_permission(struct file *file, int mask, int ret)
    |session, ctx| check_pending(session, Hook::FilePermission, ctx.arg(0))
}

hook! {
    /// Mapping a file: as file_permission.
    lsm_cgroup("mmap_file", ret = 4) fp_mmap_file;
    // security_mmap_file(struct file *file, unsigned long prot, unsigned long flags): no reqprot.
    fmod_ret("security_mmap_file", ret = 3) fp_fmod_ret_mmap_file;
    // mmap_file(struct file *file, unsigned long reqprot, unsigned long prot,
    //           unsigned long flags, int ret)
    |session, ctx| match ctx.arg::<u64>(0) {
        0 => 0,
        file => check_pending(session, Hook::MmapFile, file),
    }
}

/// Pass-through program attached by `fp kernel probe` to prove BPF LSM works; it cannot deny.
#[lsm(hook = "file_open")]
pub fn fp_probe(ctx: LsmContext) -> i32 {
    // file_open(struct file *file, int ret)
    ctx.arg(1)
}

/// Its per-cgroup counterpart (`BPF_LSM_CGROUP`), on one of the hooks fp attaches per cgroup,
/// attached to an empty cgroup of the probe's own: 1 allows, and no task runs it.
#[lsm_cgroup(hook = "mmap_file")]
pub fn fp_probe_cgroup(_ctx: LsmContext) -> i32 {
    1
}

/// The pass-through fmod_ret program `fp kernel probe` attaches to security_file_open, to tell
/// whether fmod_ret programs on the `security_*` functions work here (the route for kernels
/// without the BPF LSM): 0 lets the function run.
#[fmod_ret(function = "security_file_open")]
pub fn fp_probe_fmod_ret(_ctx: FEntryContext) -> i32 {
    0
}
