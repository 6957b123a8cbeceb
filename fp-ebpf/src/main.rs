//! fp's BPF LSM programs. Kept thin: find the session of the current task, resolve the path of the
//! file being touched from the system root, look it up in the session's tables, report denials.
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
    DenyEvent, DenyReason, Hook, InodeKey, LPM_PATH_BYTES, MAX_WALK, PATH_MAX, PathKey, SessionInfo,
};

const EACCES: i32 = 13;

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
#[repr(C)]
struct Scratch {
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
    /// Identity of the file itself (the first dentry).
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
    let mnt_root: u64 = read(w.vfsmount, off(&OFF_VFSMOUNT_MNT_ROOT))?;
    let parent: u64 = read(w.dentry, off(&OFF_DENTRY_D_PARENT))?;
    if w.dentry == mnt_root || w.dentry == parent {
        let parent_mount: u64 = read(w.mount, off(&OFF_MOUNT_MNT_PARENT))?;
        if parent_mount == w.mount {
            // The root of the mount tree; a dentry that is its own parent anywhere else is
            // disconnected from it, and has no path from the root.
            w.state = if w.dentry == mnt_root { RESOLVED } else { UNRESOLVED };
            return Ok(false);
        }
        w.dentry = read(w.mount, off(&OFF_MOUNT_MNT_MOUNTPOINT))?;
        w.mount = parent_mount;
        w.vfsmount = parent_mount + off(&OFF_MOUNT_MNT) as u64;
        return Ok(true);
    }
    let inode: u64 = read(w.dentry, off(&OFF_DENTRY_D_INODE))?;
    if inode != 0 && (w.inode_denied == 0 || w.pos == PATH_MAX as u64) {
        let ino: u64 = read(inode, off(&OFF_INODE_I_INO))?;
        let sb: u64 = read(inode, off(&OFF_INODE_I_SB))?;
        let dev: u32 = read(sb, off(&OFF_SUPER_BLOCK_S_DEV))?;
        if w.pos == PATH_MAX as u64 {
            (w.ino, w.dev) = (ino, dev as u64);
        }
        let key = InodeKey { session: w.session, ino, dev, _pad: 0 };
        // SAFETY: the value is only tested for presence.
        if unsafe { DENY_INODES.get(&key) }.is_some() {
            w.inode_denied = 1;
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

/// Resolves (`vfsmount`, `dentry`) to its path from the root of the mount tree (not the task's
/// root: chroot does not change it), checking every dentry's inode against DENY_INODES on the way,
/// then looks the path up in DENY_PATHS. Leaves the walk's results in `s.walk` for the event.
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
            mount: vfsmount - off(&OFF_MOUNT_MNT) as u64,
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

fn report(session: &Session, hook: Hook, reason: DenyReason, s: *const Scratch) {
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
        (*ev)._pad = [0; 6];
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

/// Checks (`vfsmount`, `dentry`) for the current task; returns 0 or -EACCES.
#[inline(always)]
fn decide(hook: Hook, vfsmount: u64, dentry: u64) -> i32 {
    let Some(session) = current_session() else {
        return 0;
    };
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return -EACCES; // fail closed: no scratch space means no check
    };
    match check(s, session.id, vfsmount, dentry) {
        Verdict::Allow => 0,
        Verdict::Deny(reason) => {
            report(&session, hook, reason, s);
            -EACCES
        }
    }
}

#[lsm(hook = "file_open")]
pub fn fp_file_open(ctx: LsmContext) -> i32 {
    // file_open(struct file *file, int ret)
    let (file, ret): (u64, i32) = (ctx.arg(0), ctx.arg(1));
    if ret != 0 {
        return ret;
    }
    let path = file + off(&OFF_FILE_F_PATH) as u64;
    let (Ok(mnt), Ok(dentry)) =
        (read::<u64>(path, off(&OFF_PATH_MNT)), read::<u64>(path, off(&OFF_PATH_DENTRY)))
    else {
        return if current_session().is_some() { -EACCES } else { 0 };
    };
    decide(Hook::FileOpen, mnt, dentry)
}

#[lsm(hook = "path_unlink")]
pub fn fp_path_unlink(ctx: LsmContext) -> i32 {
    // path_unlink(const struct path *dir, struct dentry *dentry, int ret).
    let (dir, dentry, ret): (u64, u64, i32) = (ctx.arg(0), ctx.arg(1), ctx.arg(2));
    if ret != 0 {
        return ret;
    }
    let Ok(mnt) = read::<u64>(dir, off(&OFF_PATH_MNT)) else {
        return if current_session().is_some() { -EACCES } else { 0 };
    };
    decide(Hook::PathUnlink, mnt, dentry)
}

/// Creation of a regular file, FIFO or device node: `open(O_CREAT)` calls it before creating, so a
/// denied path is never created.
#[lsm(hook = "path_mknod")]
pub fn fp_path_mknod(ctx: LsmContext) -> i32 {
    // path_mknod(const struct path *dir, struct dentry *dentry, umode_t mode, unsigned int dev, int ret)
    let (dir, dentry, ret): (u64, u64, i32) = (ctx.arg(0), ctx.arg(1), ctx.arg(4));
    if ret != 0 {
        return ret;
    }
    let Ok(mnt) = read::<u64>(dir, off(&OFF_PATH_MNT)) else {
        return if current_session().is_some() { -EACCES } else { 0 };
    };
    decide(Hook::PathMknod, mnt, dentry)
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
