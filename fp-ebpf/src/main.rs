//! fp's BPF LSM programs. Kept thin: each hook names the file(s) it touches and the op, and calls
//! [`decide`], which finds the session of the current task, resolves the path from the system root,
//! looks it up in the session's tables and reports denials. docs/hooks.md has the hook -> op table.
//!
//! Kernel struct offsets are read-only globals written by userspace from the running kernel's BTF
//! (see fp_common::kernel::KERNEL_FIELDS); the verifier sees them as constants.
#![no_std]
#![no_main]
// The BPF target has no `AtomicU64::fetch_add`; the intrinsic lowers to BPF_ATOMIC_ADD.
#![allow(internal_features)]
#![feature(core_intrinsics)]

use aya_ebpf::{
    helpers::{
        bpf_get_current_ancestor_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
        bpf_get_current_uid_gid,
        generated::{bpf_loop, bpf_probe_read_kernel, bpf_probe_read_kernel_str},
    },
    macros::{lsm, map},
    maps::{HashMap, LpmTrie, PerCpuArray, RingBuf, lpm_trie::Key},
    programs::LsmContext,
};
use core::{
    ffi::c_void,
    intrinsics::{AtomicOrdering, atomic_xadd},
};
use fp_common::kernel::{
    DenyEvent, DenyReason, EVENT_PATH_FS_RELATIVE, Hook, InodeKey, LPM_PATH_BYTES, MAX_WALK, Op,
    PATH_MAX, PathKey, SessionInfo,
};

const EACCES: i32 = 13;
/// `fmode_t` bits of `file.f_mode`, and `__FMODE_EXEC` as it stays in `file.f_flags`.
const FMODE_WRITE: u32 = 0x2;
const FMODE_EXEC: u32 = 0x20;
const F_FLAGS_EXEC: u32 = 0x20;
/// `path_rename` flag: both names stay and swap places.
const RENAME_EXCHANGE: u32 = 1 << 1;

macro_rules! offsets {
    ($($name:ident),* $(,)?) => {
        $(
            #[unsafe(no_mangle)]
            static $name: u32 = 0;
        )*
    };
}
offsets!(
    OFF_FILE_F_PATH,
    OFF_PATH_MNT,
    OFF_PATH_DENTRY,
    OFF_DENTRY_D_PARENT,
    OFF_DENTRY_D_NAME,
    OFF_DENTRY_D_INODE,
    OFF_QSTR_LEN,
    OFF_QSTR_NAME,
    OFF_INODE_I_INO,
    OFF_INODE_I_SB,
    OFF_SUPER_BLOCK_S_DEV,
    OFF_VFSMOUNT_MNT_ROOT,
    OFF_MOUNT_MNT,
    OFF_MOUNT_MNT_PARENT,
    OFF_MOUNT_MNT_MOUNTPOINT,
    OFF_FILE_F_MODE,
    OFF_FILE_F_FLAGS,
    OFF_LINUX_BINPRM_FILE,
);

/// cgroup v2 level of session cgroups (depth of the configured parent + 1): the session of a task
/// is its ancestor at this level, so non-session tasks cost one helper call and one lookup.
#[unsafe(no_mangle)]
static SESSION_CGROUP_LEVEL: u32 = 0;

#[map]
static SESSIONS: HashMap<u64, SessionInfo> = HashMap::with_max_entries(1024, 0);

#[map]
static DENY_PATHS: LpmTrie<PathKey, u32> = LpmTrie::with_max_entries(65536, 1); // BPF_F_NO_PREALLOC

#[map]
static DENY_INODES: HashMap<InodeKey, u32> = HashMap::with_max_entries(65536, 0);

#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(1 << 22, 0);

/// Per-CPU scratch space: too large for the 512-byte BPF stack.
///
/// BPF programs run with migration disabled but may be preempted, so on a fully preemptible
/// kernel another task can run one of these programs on this CPU in the middle of a decision and
/// overwrite the scratch. `generation` is bumped by every decision; one that finds it changed
/// when it is done was interleaved with another and fails closed.
#[repr(C)]
struct Scratch {
    generation: u64,
    walk: Walk,
    /// The resolved path is written backwards so that it ends at `PATH_MAX` (where a NUL sits);
    /// twice PATH_MAX so that bounded writes never leave the buffer.
    path: [u8; 2 * PATH_MAX],
    key: Key<PathKey>,
}

#[map]
static SCRATCH: PerCpuArray<Scratch> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn off(global: &u32) -> usize {
    // SAFETY: a read of our own read-only global; volatile so the compiler keeps the load that the
    // loader's value replaces.
    unsafe { core::ptr::read_volatile(global) as usize }
}

#[inline(always)]
fn read<T: Copy>(base: u64, offset: usize) -> Result<T, ()> {
    // SAFETY: bpf_probe_read_kernel checks the address; failures surface as Err.
    unsafe { aya_ebpf::helpers::bpf_probe_read_kernel((base as usize + offset) as *const T) }
        .map_err(|_| ())
}

struct Session {
    id: u64,
    info: *mut SessionInfo,
}

#[inline(always)]
fn current_session() -> Option<Session> {
    // SAFETY: a helper call with a plain integer argument.
    let id = unsafe { bpf_get_current_ancestor_cgroup_id(off(&SESSION_CGROUP_LEVEL) as i32) };
    if id == 0 {
        return None;
    }
    SESSIONS.get_ptr_mut(&id).map(|info| Session { id, info })
}

#[inline(always)]
fn count(counter: *mut u64) {
    // SAFETY: `counter` points into a map value that lives as long as the program runs.
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(counter, 1) };
}

/// Outcome of resolving and checking one path.
enum Verdict {
    Allow,
    Deny(DenyReason),
}

/// State of the dentry/mount walk. It lives in the per-CPU scratch map value, not on the stack:
/// the verifier tracks stack values precisely, so loop-carried state there never converges when
/// newer kernels (6.7+) re-verify bpf_loop callbacks. Plain integers only: LLVM may spill the
/// undefined payload of an enum, which the verifier rejects as an uninitialised read.
#[repr(C)]
struct Walk {
    session: u64,
    vfsmount: u64,
    mount: u64,
    dentry: u64,
    /// Start of the path in `Scratch::path`; the path ends at PATH_MAX.
    pos: u64,
    /// Identity of the file itself (the first positive dentry; 0 until then).
    ino: u64,
    dev: u64,
    /// Set when a dentry on the way is a denied inode; the walk goes on so the event carries the
    /// full path.
    inode_denied: u64,
    state: u64,
}

const WALKING: u64 = 0;
const RESOLVED: u64 = 1;
const UNRESOLVED: u64 = 2;

/// One step of the walk towards the root of the mount tree: either cross from a mount's root to
/// its mountpoint, or check the current dentry's inode and prepend its name. bpf_loop callback:
/// returns 0 to continue, 1 to stop.
extern "C" fn walk_step(_index: u64, _ctx: *mut c_void) -> i64 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return 1;
    };
    // SAFETY: per-CPU scratch, used by one program invocation at a time on this CPU.
    let s = unsafe { &mut *s };
    match step(&mut s.walk, &mut s.path) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(()) => {
            s.walk.state = UNRESOLVED;
            1
        }
    }
}

#[inline(always)]
fn step(w: &mut Walk, path: &mut [u8; 2 * PATH_MAX]) -> Result<bool, ()> {
    let parent: u64 = read(w.dentry, off(&OFF_DENTRY_D_PARENT))?;
    // Identity first, also of mount roots: a bind mount of a denied directory has it as root.
    let inode: u64 = read(w.dentry, off(&OFF_DENTRY_D_INODE))?;
    if inode != 0 && (w.inode_denied == 0 || w.ino == 0) {
        let ino: u64 = read(inode, off(&OFF_INODE_I_INO))?;
        let sb: u64 = read(inode, off(&OFF_INODE_I_SB))?;
        let dev: u32 = read(sb, off(&OFF_SUPER_BLOCK_S_DEV))?;
        if w.ino == 0 {
            (w.ino, w.dev) = (ino, dev as u64);
        }
        let key = InodeKey { session: w.session, ino, dev, _pad: 0 };
        // SAFETY: the value is only tested for presence.
        if unsafe { DENY_INODES.get(&key) }.is_some() {
            w.inode_denied = 1;
        }
    }
    if w.vfsmount == NO_MOUNT {
        // Inode hooks: the walk ends at the root of the file's filesystem.
        if w.dentry == parent {
            w.state = RESOLVED;
            return Ok(false);
        }
    } else {
        let mnt_root: u64 = read(w.vfsmount, off(&OFF_VFSMOUNT_MNT_ROOT))?;
        if w.dentry != mnt_root && w.dentry == parent {
            // Its own parent but not its mount's root: disconnected from the mount tree (e.g.
            // reached through open_by_handle_at), so it has no path from the root.
            w.state = UNRESOLVED;
            return Ok(false);
        }
        if w.dentry == mnt_root {
            let parent_mount: u64 = read(w.mount, off(&OFF_MOUNT_MNT_PARENT))?;
            if parent_mount == w.mount {
                w.state = RESOLVED; // the root of the mount tree
                return Ok(false);
            }
            w.dentry = read(w.mount, off(&OFF_MOUNT_MNT_MOUNTPOINT))?;
            w.mount = parent_mount;
            w.vfsmount = parent_mount + off(&OFF_MOUNT_MNT) as u64;
            return Ok(true);
        }
    }
    let name_len: u32 = read(w.dentry, off(&OFF_DENTRY_D_NAME) + off(&OFF_QSTR_LEN))?;
    let name: u64 = read(w.dentry, off(&OFF_DENTRY_D_NAME) + off(&OFF_QSTR_NAME))?;
    let name_len = name_len as u64;
    // Keep at least one byte for the leading '/' of the whole path.
    if name_len > 255 || w.pos < name_len + 2 {
        return Err(());
    }
    let end = w.pos as usize;
    w.pos -= name_len;
    let at = (w.pos as usize) & (PATH_MAX - 1);
    // The _str variant takes a constant bound (a variable size loses its bounds on some
    // verifiers) and stops after the name's NUL, which lands on `end`: restored below.
    // SAFETY: at + 256 < 2 * PATH_MAX; the helper checks `name`.
    let copied = unsafe {
        bpf_probe_read_kernel_str(
            (path.as_mut_ptr() as usize + at) as *mut c_void,
            256,
            name as *const c_void,
        )
    };
    // A name that changed under us (concurrent rename) has another length: fail closed.
    if copied != name_len as i64 + 1 {
        return Err(());
    }
    let restored = if end == PATH_MAX { 0 } else { b'/' };
    // SAFETY: indices in bounds by the masks.
    unsafe {
        *path.get_unchecked_mut(end & (2 * PATH_MAX - 1)) = restored;
        w.pos -= 1;
        *path.get_unchecked_mut((w.pos as usize) & (PATH_MAX - 1)) = b'/';
    }
    w.dentry = parent;
    Ok(true)
}

/// `vfsmount` of hooks that get a dentry but no mount (inode_setattr, xattrs): their walk stops at
/// the root of the file's filesystem and only checks inode identity (docs/hooks.md).
const NO_MOUNT: u64 = 0;

/// Resolves (`vfsmount`, `dentry`) to its path from the root of the mount tree (not the task's
/// root: chroot does not change it), checking every dentry's inode against DENY_INODES on the way,
/// then looks the path up in DENY_PATHS. Leaves the walk's results in `s.walk` for the event.
/// With [`NO_MOUNT`] only inode identity decides: a path relative to a filesystem root must never
/// be matched against rules written from the system root.
///
/// `s` is a raw pointer, not `&mut`: bpf_loop's callback writes the scratch value behind the
/// compiler's back, so a `&mut` (noalias) would let it reuse values from before the loop.
#[inline(always)]
fn check(s: *mut Scratch, session: u64, vfsmount: u64, dentry: u64) -> Verdict {
    // SAFETY: `s` is this CPU's scratch value; every access goes through the raw pointer.
    unsafe {
        (*s).walk = Walk {
            session,
            vfsmount,
            mount: vfsmount.wrapping_sub(off(&OFF_MOUNT_MNT) as u64), // unused for NO_MOUNT
            dentry,
            pos: PATH_MAX as u64,
            ino: 0,
            dev: 0,
            inode_denied: 0,
            state: WALKING,
        };
        (*s).path[PATH_MAX] = 0;
        // The callback finds its state in the scratch map itself.
        bpf_loop(MAX_WALK as u32, walk_step as *mut c_void, core::ptr::null_mut(), 0);
        let state = core::ptr::read_volatile(&(*s).walk.state);
        let mut pos = core::ptr::read_volatile(&(*s).walk.pos) as usize;
        if state == RESOLVED && pos == PATH_MAX {
            pos -= 1; // the root itself
            (*s).path[PATH_MAX - 1] = b'/';
            (*s).walk.pos = pos as u64;
        }
        if core::ptr::read_volatile(&(*s).walk.inode_denied) != 0 {
            return Verdict::Deny(DenyReason::InodeRule);
        }
        if state != RESOLVED {
            return Verdict::Deny(DenyReason::Unresolved);
        }
        if vfsmount == NO_MOUNT {
            return Verdict::Allow;
        }
        // Exact rules are stored with their NUL, so short lookups cover the NUL too.
        let start = pos & (PATH_MAX - 1);
        let bytes = core::cmp::min(PATH_MAX - start + 1, LPM_PATH_BYTES);
        (*s).key.prefix_len = ((8 + bytes) * 8) as u32;
        (*s).key.data.session = session;
        let rc = bpf_probe_read_kernel(
            (*s).key.data.path.as_mut_ptr() as *mut c_void,
            LPM_PATH_BYTES as u32,
            ((*s).path.as_ptr() as usize + start) as *const c_void,
        );
        if rc != 0 {
            return Verdict::Deny(DenyReason::Unresolved);
        }
        match DENY_PATHS.get(&(*s).key) {
            Some(_) => Verdict::Deny(DenyReason::PathRule),
            None => Verdict::Allow,
        }
    }
}

fn report(session: &Session, hook: Hook, op: Op, reason: DenyReason, s: *const Scratch) {
    // SAFETY: this CPU's scratch value, filled by `check`.
    let (w, path) = unsafe { (&(*s).walk, &(*s).path) };
    // SAFETY: `info` points into the SESSIONS map value found for this task.
    let info = unsafe { &mut *session.info };
    count(&mut info.denied);
    if reason == DenyReason::Unresolved {
        count(&mut info.unresolved);
    }
    let Some(mut entry) = EVENTS.reserve::<DenyEvent>(0) else {
        count(&mut info.dropped);
        return;
    };
    let ev = entry.as_mut_ptr();
    let pid_tgid = bpf_get_current_pid_tgid();
    let uid_gid = bpf_get_current_uid_gid();
    // SAFETY: `ev` is a reserved, exclusively owned ring buffer record of the right size.
    unsafe {
        (*ev).session = session.id;
        (*ev).ino = w.ino;
        (*ev).dev = w.dev as u32;
        (*ev).pid = pid_tgid as u32;
        (*ev).tgid = (pid_tgid >> 32) as u32;
        (*ev).uid = uid_gid as u32;
        (*ev).gid = (uid_gid >> 32) as u32;
        (*ev).hook = hook as u8;
        (*ev).reason = reason as u8;
        (*ev).op = op as u8;
        (*ev).flags = if w.vfsmount == NO_MOUNT { EVENT_PATH_FS_RELATIVE } else { 0 };
        (*ev)._pad = [0; 4];
        (*ev).comm = bpf_get_current_comm().unwrap_or([0; 16]);
        // An unresolved path is never reported as a (truncated) string.
        let start = w.pos as usize & (PATH_MAX - 1);
        let len = if w.state == RESOLVED { (PATH_MAX - start) & (PATH_MAX - 1) } else { 0 };
        (*ev).path_len = len as u32;
        let src = (path.as_ptr() as usize + start) as *const c_void;
        if bpf_probe_read_kernel((*ev).path.as_mut_ptr() as *mut c_void, len as u32, src) != 0 {
            (*ev).path_len = 0;
        }
    }
    entry.submit(0);
}

/// The one decision of every hook: may the current task do `op` to (`vfsmount`, `dentry`)?
/// Returns 0 or -EACCES. The verdict does not depend on `op` yet (a deny rule denies every op);
/// the per-op policy tables will, so every hook already says what it does.
#[inline(always)]
fn decide(hook: Hook, op: Op, vfsmount: u64, dentry: u64) -> i32 {
    let Some(session) = current_session() else {
        return 0;
    };
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return -EACCES; // fail closed: no scratch space means no check
    };
    // SAFETY: this CPU's scratch value; accessed through the raw pointer (see `check`).
    let generation = unsafe {
        let g = core::ptr::read_volatile(&(*s).generation).wrapping_add(1);
        core::ptr::write_volatile(&mut (*s).generation, g);
        g
    };
    let mut verdict = check(s, session.id, vfsmount, dentry);
    // SAFETY: as above.
    if unsafe { core::ptr::read_volatile(&(*s).generation) } != generation {
        verdict = Verdict::Deny(DenyReason::Unresolved);
    }
    match verdict {
        Verdict::Allow => 0,
        Verdict::Deny(reason) => {
            report(&session, hook, op, reason, s);
            -EACCES
        }
    }
}

/// Keeps the denial of an earlier BPF LSM program on the same hook (`ret`), else decides: fp never
/// turns another program's denial into an allow.
#[inline(always)]
fn unless_denied(ret: i32, decision: impl FnOnce() -> i32) -> i32 {
    if ret != 0 { ret } else { decision() }
}

/// `decide` for the inode hooks, which get a dentry but no mount: a write decided by identity.
#[inline(always)]
fn decide_inode(hook: Hook, dentry: u64) -> i32 {
    decide(hook, Op::Write, NO_MOUNT, dentry)
}

/// Fail closed for session tasks when a hook's own arguments cannot be read.
#[inline(always)]
fn unreadable() -> i32 {
    if current_session().is_some() { -EACCES } else { 0 }
}

/// `decide` for a `struct path *`.
#[inline(always)]
fn decide_path(hook: Hook, op: Op, path: u64) -> i32 {
    match (read::<u64>(path, off(&OFF_PATH_MNT)), read::<u64>(path, off(&OFF_PATH_DENTRY))) {
        (Ok(mnt), Ok(dentry)) => decide(hook, op, mnt, dentry),
        _ => unreadable(),
    }
}

/// `decide` for a dentry in the directory `dir` (a `struct path *`): the name being created,
/// removed or linked.
#[inline(always)]
fn decide_in_dir(hook: Hook, op: Op, dir: u64, dentry: u64) -> i32 {
    match read::<u64>(dir, off(&OFF_PATH_MNT)) {
        Ok(mnt) => decide(hook, op, mnt, dentry),
        Err(()) => unreadable(),
    }
}

/// `decide` for a `struct file *`.
#[inline(always)]
fn decide_file(hook: Hook, op: Op, file: u64) -> i32 {
    decide_path(hook, op, file + off(&OFF_FILE_F_PATH) as u64)
}

/// Every open, including the open of an executable and of a file created by O_CREAT. Write when
/// opened for writing, exec for execve/uselib, read otherwise. O_TRUNC is checked as a write by
/// path_truncate (6.1) or file_truncate (6.2+).
#[lsm(hook = "file_open")]
pub fn fp_file_open(ctx: LsmContext) -> i32 {
    // file_open(struct file *file, int ret)
    unless_denied(ctx.arg(1), || {
        let file: u64 = ctx.arg(0);
        let (Ok(mode), Ok(flags)) =
            (read::<u32>(file, off(&OFF_FILE_F_MODE)), read::<u32>(file, off(&OFF_FILE_F_FLAGS)))
        else {
            return unreadable();
        };
        let op = if mode & FMODE_WRITE != 0 {
            Op::Write
        } else if mode & FMODE_EXEC != 0 || flags & F_FLAGS_EXEC != 0 {
            Op::Exec
        } else {
            Op::Read
        };
        decide_file(Hook::FileOpen, op, file)
    })
}

#[lsm(hook = "path_unlink")]
pub fn fp_path_unlink(ctx: LsmContext) -> i32 {
    // path_unlink(const struct path *dir, struct dentry *dentry, int ret)
    unless_denied(ctx.arg(2), || {
        decide_in_dir(Hook::PathUnlink, Op::Delete, ctx.arg(0), ctx.arg(1))
    })
}

#[lsm(hook = "path_rmdir")]
pub fn fp_path_rmdir(ctx: LsmContext) -> i32 {
    // path_rmdir(const struct path *dir, struct dentry *dentry, int ret)
    unless_denied(ctx.arg(2), || decide_in_dir(Hook::PathRmdir, Op::Delete, ctx.arg(0), ctx.arg(1)))
}

/// Creation of a regular file, FIFO, socket or device node: `open(O_CREAT)` calls it before
/// creating, so a denied path is never created.
#[lsm(hook = "path_mknod")]
pub fn fp_path_mknod(ctx: LsmContext) -> i32 {
    // path_mknod(const struct path *dir, struct dentry *dentry, umode_t mode, unsigned int dev, int ret)
    unless_denied(ctx.arg(4), || decide_in_dir(Hook::PathMknod, Op::Write, ctx.arg(0), ctx.arg(1)))
}

#[lsm(hook = "path_mkdir")]
pub fn fp_path_mkdir(ctx: LsmContext) -> i32 {
    // path_mkdir(const struct path *dir, struct dentry *dentry, umode_t mode, int ret)
    unless_denied(ctx.arg(3), || decide_in_dir(Hook::PathMkdir, Op::Write, ctx.arg(0), ctx.arg(1)))
}

/// The new name of a symlink; its target text is not a file access (it is resolved, and checked,
/// when used).
#[lsm(hook = "path_symlink")]
pub fn fp_path_symlink(ctx: LsmContext) -> i32 {
    // path_symlink(const struct path *dir, struct dentry *dentry, const char *old_name, int ret)
    unless_denied(ctx.arg(3), || {
        decide_in_dir(Hook::PathSymlink, Op::Write, ctx.arg(0), ctx.arg(1))
    })
}

/// A hardlink writes the new name and makes the source readable under it: both are checked, so a
/// denied file cannot be linked out of its tree (the kernel refuses links across mounts before
/// this hook, so the source lies on the new name's mount).
#[lsm(hook = "path_link")]
pub fn fp_path_link(ctx: LsmContext) -> i32 {
    // path_link(struct dentry *old_dentry, const struct path *new_dir, struct dentry *new_dentry, int ret)
    unless_denied(ctx.arg(3), || {
        let Ok(mnt) = read::<u64>(ctx.arg(1), off(&OFF_PATH_MNT)) else {
            return unreadable();
        };
        unless_denied(decide(Hook::PathLink, Op::Read, mnt, ctx.arg(0)), || {
            decide(Hook::PathLink, Op::Write, mnt, ctx.arg(2))
        })
    })
}

/// Delete at the source, write at the target, for files and directories. RENAME_EXCHANGE also
/// deletes the target's name, and writes the source's, but the verdict does not depend on the op
/// yet: each side is checked once.
#[lsm(hook = "path_rename")]
pub fn fp_path_rename(ctx: LsmContext) -> i32 {
    // path_rename(const struct path *old_dir, struct dentry *old_dentry,
    //             const struct path *new_dir, struct dentry *new_dentry, unsigned int flags, int ret)
    unless_denied(ctx.arg(5), || {
        let flags: u32 = ctx.arg(4);
        let new_op = if flags & RENAME_EXCHANGE != 0 { Op::Delete } else { Op::Write };
        unless_denied(decide_in_dir(Hook::PathRename, Op::Delete, ctx.arg(0), ctx.arg(1)), || {
            decide_in_dir(Hook::PathRename, new_op, ctx.arg(2), ctx.arg(3))
        })
    })
}

/// truncate(2); before 6.2 also ftruncate(2) and open(O_TRUNC).
#[lsm(hook = "path_truncate")]
pub fn fp_path_truncate(ctx: LsmContext) -> i32 {
    // path_truncate(const struct path *path, int ret)
    unless_denied(ctx.arg(1), || decide_path(Hook::PathTruncate, Op::Write, ctx.arg(0)))
}

/// ftruncate(2) and open(O_TRUNC) since 6.2.
#[lsm(hook = "file_truncate")]
pub fn fp_file_truncate(ctx: LsmContext) -> i32 {
    // file_truncate(struct file *file, int ret)
    unless_denied(ctx.arg(1), || decide_file(Hook::FileTruncate, Op::Write, ctx.arg(0)))
}

#[lsm(hook = "path_chmod")]
pub fn fp_path_chmod(ctx: LsmContext) -> i32 {
    // path_chmod(const struct path *path, umode_t mode, int ret)
    unless_denied(ctx.arg(2), || decide_path(Hook::PathChmod, Op::Write, ctx.arg(0)))
}

#[lsm(hook = "path_chown")]
pub fn fp_path_chown(ctx: LsmContext) -> i32 {
    // path_chown(const struct path *path, kuid_t uid, kgid_t gid, int ret)
    unless_denied(ctx.arg(3), || decide_path(Hook::PathChown, Op::Write, ctx.arg(0)))
}

/// Every attribute change (utimes, and again chmod/chown/truncate after their path hooks). The
/// hook gets no mount, so it decides by inode identity only.
#[inline(always)]
fn inode_setattr(dentry: u64, ret: i32) -> i32 {
    unless_denied(ret, || decide_inode(Hook::InodeSetattr, dentry))
}

/// inode_setattr before its `idmap` argument (6.1). Userspace loads this program or
/// [`fp_inode_setattr_idmap`], after the hook's prototype in the kernel's BTF: the arguments
/// of an LSM context must be read at constant offsets.
#[lsm(hook = "inode_setattr")]
pub fn fp_inode_setattr(ctx: LsmContext) -> i32 {
    // inode_setattr(struct dentry *dentry, struct iattr *attr, int ret)
    inode_setattr(ctx.arg(0), ctx.arg(2))
}

/// inode_setattr with its leading `idmap` argument (6.12).
#[lsm(hook = "inode_setattr")]
pub fn fp_inode_setattr_idmap(ctx: LsmContext) -> i32 {
    // inode_setattr(struct mnt_idmap *idmap, struct dentry *dentry, struct iattr *attr, int ret)
    inode_setattr(ctx.arg(1), ctx.arg(3))
}

#[lsm(hook = "inode_setxattr")]
pub fn fp_inode_setxattr(ctx: LsmContext) -> i32 {
    // inode_setxattr(userns or idmap, struct dentry *dentry, const char *name, const void *value,
    //                size_t size, int flags, int ret)
    unless_denied(ctx.arg(6), || decide_inode(Hook::InodeSetxattr, ctx.arg(1)))
}

#[lsm(hook = "inode_removexattr")]
pub fn fp_inode_removexattr(ctx: LsmContext) -> i32 {
    // inode_removexattr(userns or idmap, struct dentry *dentry, const char *name, int ret)
    unless_denied(ctx.arg(3), || decide_inode(Hook::InodeRemovexattr, ctx.arg(1)))
}

/// POSIX ACLs since 6.2 (before, they are xattrs).
#[lsm(hook = "inode_set_acl")]
pub fn fp_inode_set_acl(ctx: LsmContext) -> i32 {
    // inode_set_acl(struct mnt_idmap *idmap, struct dentry *dentry, const char *acl_name,
    //               struct posix_acl *kacl, int ret)
    unless_denied(ctx.arg(4), || decide_inode(Hook::InodeSetAcl, ctx.arg(1)))
}

#[lsm(hook = "inode_remove_acl")]
pub fn fp_inode_remove_acl(ctx: LsmContext) -> i32 {
    // inode_remove_acl(struct mnt_idmap *idmap, struct dentry *dentry, const char *acl_name, int ret)
    unless_denied(ctx.arg(3), || decide_inode(Hook::InodeRemoveAcl, ctx.arg(1)))
}

/// The file execve is about to run, once per binary and interpreter (file_open saw it opened for
/// exec already; this also covers binfmt interpreters).
#[lsm(hook = "bprm_check_security")]
pub fn fp_bprm_check_security(ctx: LsmContext) -> i32 {
    // bprm_check_security(struct linux_binprm *bprm, int ret)
    unless_denied(ctx.arg(1), || match read::<u64>(ctx.arg(0), off(&OFF_LINUX_BINPRM_FILE)) {
        Ok(file) => decide_file(Hook::BprmCheckSecurity, Op::Exec, file),
        Err(()) => unreadable(),
    })
}

/// Pass-through program attached by `fp kernel probe` to prove BPF LSM works; it cannot deny.
#[lsm(hook = "file_open")]
pub fn fp_probe(ctx: LsmContext) -> i32 {
    // file_open(struct file *file, int ret)
    ctx.arg(1)
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
