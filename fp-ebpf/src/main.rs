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
        bpf_get_current_uid_gid, bpf_ktime_get_boot_ns,
        generated::{bpf_loop, bpf_probe_read_kernel, bpf_probe_read_kernel_str},
    },
    macros::{lsm, map},
    maps::{Array, HashMap, LpmTrie, PerCpuArray, RingBuf, lpm_trie::Key},
    programs::LsmContext,
};
use core::{
    ffi::c_void,
    intrinsics::{AtomicOrdering, atomic_xadd},
};
use fp_common::{
    kernel::{
        BROKER_HEARTBEAT_TIMEOUT_NS, DecisionEvent, EVENT_DENIED, EVENT_EXCHANGE, EVENT_MOVE_DIR,
        EVENT_PATH_FS_RELATIVE, EVENT_TARGET_EXISTS, GrantValue, Hook, MAX_WALK, Op, PATH_MAX,
        Reason, SESSION_AUDIT_ONLY, SESSION_FULL_AUDIT, SessionCounters, SessionInfo, after_grant,
    },
    policy::{
        Evaluation, InodeKey, InodeValue, MAX_NAME, MAX_PREFIX, MAX_STEPS, NO_RULE, NameKey,
        NameKind, NameValue, Op as PolicyOp, OpEntry, PathBytes, PrefixKeyData, PrefixValue,
        RuleTables, ScopeKey, ScopeValue, TableHeader, TableVerdict,
    },
    refer::{self, Below, MoveKind, MoveSide, MoveVerdict},
};

const EACCES: i32 = 13;
/// A rename or link the REFER rule refuses (fp_common::refer): as Landlock, so `mv` copies.
const EXDEV: i32 = 18;
/// `fmode_t` bits of `file.f_mode`, and `__FMODE_EXEC` as it stays in `file.f_flags`.
const FMODE_READ: u32 = 0x1;
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
    OFF_FILE_F_INODE,
    OFF_PATH_MNT,
    OFF_PATH_DENTRY,
    OFF_DENTRY_D_PARENT,
    OFF_DENTRY_D_NAME,
    OFF_DENTRY_D_INODE,
    OFF_QSTR_LEN,
    OFF_QSTR_NAME,
    OFF_INODE_I_INO,
    OFF_INODE_I_MODE,
    OFF_INODE_I_SB,
    OFF_SUPER_BLOCK_S_DEV,
    OFF_SUPER_BLOCK_S_MAGIC,
    OFF_VFSMOUNT_MNT_ROOT,
    OFF_MOUNT_MNT,
    OFF_MOUNT_MNT_PARENT,
    OFF_MOUNT_MNT_MOUNTPOINT,
    OFF_MOUNT_MNT_NS,
    OFF_MNT_NAMESPACE_NS,
    OFF_NS_COMMON_INUM,
    OFF_FILE_F_MODE,
    OFF_FILE_F_FLAGS,
    OFF_LINUX_BINPRM_FILE,
    OFF_TASK_STRUCT_TGID,
);

/// cgroup v2 level of session cgroups (depth of the configured parent + 1): the session of a task
/// is its ancestor at this level, so non-session tasks cost one helper call and one lookup.
#[unsafe(no_mangle)]
static SESSION_CGROUP_LEVEL: u32 = 0;

#[map]
static SESSIONS: HashMap<u64, SessionInfo> = HashMap::with_max_entries(1024, 0);

#[map]
static COUNTERS: HashMap<u64, SessionCounters> = HashMap::with_max_entries(1024, 0);

/// The compiled tables (fp_common::policy), keyed by tables id: two sets per session while a
/// reload swaps them.
#[map]
static HEADERS: HashMap<u64, TableHeader> = HashMap::with_max_entries(2048, 0);

#[map]
static PREFIXES: LpmTrie<PrefixKeyData, PrefixValue> = LpmTrie::with_max_entries(65536, 1); // BPF_F_NO_PREALLOC

#[map]
static NAMES: HashMap<NameKey, NameValue> = HashMap::with_max_entries(16384, 0);

#[map]
static SCOPES: HashMap<ScopeKey, ScopeValue> = HashMap::with_max_entries(4096, 0);

#[map]
static INODES: HashMap<InodeKey, InodeValue> = HashMap::with_max_entries(65536, 0);

/// Directories with a rule anchored at or below them, as exact `dir\0` keys by tables id: a
/// directory moved from or to one is refused (fp_common::refer).
#[map]
static INTERIOR: LpmTrie<PrefixKeyData, u8> = LpmTrie::with_max_entries(65536, 1); // BPF_F_NO_PREALLOC

#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(1 << 22, 0);

/// The prompt broker's last heartbeat, CLOCK_BOOTTIME ns (0: no broker).
#[map]
static BROKER: Array<u64> = Array::with_max_entries(1, 0);

/// Files a session opened with a prompt or defer verdict, by (session cgroup id, inode), until
/// the broker has answered: reads, writes and mmaps of them are denied meanwhile, so a broker
/// that dies mid-prompt (fanotify then lets the open through) gives no data away.
#[map]
static PENDING: HashMap<InodeKey, u64> = HashMap::with_max_entries(4096, 0);

/// Remembered prompt grants, by session cgroup id and `GrantScope::key` pattern: a prompt
/// verdict of an open or exec that a live grant covers is allowed here (`after_grant`), without a
/// pending entry. Grants whose pattern is longer than a key stay with the broker.
#[map]
static GRANTS: LpmTrie<PrefixKeyData, GrantValue> = LpmTrie::with_max_entries(4096, 1); // BPF_F_NO_PREALLOC

/// fp's own processes (the daemon, `fp run`), by tgid: sessions may not signal or trace them.
#[map]
static PROTECTED: HashMap<u32, u8> = HashMap::with_max_entries(256, 0);

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
    eval: Evaluation,
    /// The resolved path is written backwards so that it ends at `PATH_MAX` (where a NUL sits);
    /// twice PATH_MAX so that bounded writes never leave the buffer.
    path: [u8; 2 * PATH_MAX],
    /// A move's source path (`other[..other_len]`) while its target is walked.
    other: [u8; PATH_MAX],
    other_len: u64,
    /// What [`check`] decided per op.
    outcomes: [Outcome; 3],
    /// The names of a move, for [`move_side_step`].
    mv: MoveNames,
    /// A move's source and target as the REFER rule reads them, and their outcomes per op.
    sides: [MoveSide; 2],
    side_outcomes: [[Outcome; 3]; 2],
    /// [`below`]'s answer: a rule is anchored at or below the directory.
    anchored: u64,
    prefix_key: Key<PrefixKeyData>,
    name_key: NameKey,
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

/// The session of the current task: its cgroup id (the ancestor at the session level) and its
/// settings, copied (userspace replaces the value on reload).
struct Session {
    id: u64,
    info: SessionInfo,
}

#[inline(always)]
fn session_cgroup() -> u64 {
    // SAFETY: a helper call with a plain integer argument.
    unsafe { bpf_get_current_ancestor_cgroup_id(off(&SESSION_CGROUP_LEVEL) as i32) }
}

#[inline(always)]
fn session_info(id: u64) -> Option<SessionInfo> {
    // SAFETY: a copy out of the map value.
    unsafe { SESSIONS.get(&id) }.copied()
}

#[inline(always)]
fn current_session() -> Option<Session> {
    let id = session_cgroup();
    if id == 0 {
        return None;
    }
    session_info(id).map(|info| Session { id, info })
}

#[inline(always)]
fn count(session: u64, counter: impl FnOnce(*mut SessionCounters) -> *mut u64) {
    if let Some(c) = COUNTERS.get_ptr_mut(&session) {
        // SAFETY: `c` points into a map value that lives as long as the program runs.
        unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(counter(c), 1) };
    }
}

/// The outcome of one decision, for the event.
#[derive(Clone, Copy)]
struct Outcome {
    verdict: TableVerdict,
    reason: Reason,
    rule_id: u32,
}

impl Outcome {
    const UNRESOLVED: Outcome =
        Outcome { verdict: TableVerdict::Deny, reason: Reason::Unresolved, rule_id: NO_RULE };
    const REFER: Outcome =
        Outcome { verdict: TableVerdict::Deny, reason: Reason::Refer, rule_id: NO_RULE };
    const ALLOWED: Outcome =
        Outcome { verdict: TableVerdict::Allow, reason: Reason::Default, rule_id: NO_RULE };
    const RELOADED: Outcome =
        Outcome { verdict: TableVerdict::Deny, reason: Reason::Reloaded, rule_id: NO_RULE };
}

/// State of the dentry/mount walk. It lives in the per-CPU scratch map value, not on the stack:
/// the verifier tracks stack values precisely, so loop-carried state there never converges when
/// newer kernels (6.7+) re-verify bpf_loop callbacks. Plain integers only: LLVM may spill the
/// undefined payload of an enum, which the verifier rejects as an uninitialised read.
#[repr(C)]
struct Walk {
    tables: u64,
    vfsmount: u64,
    mount: u64,
    dentry: u64,
    /// Dentries visited; 0 while at the file itself.
    depth: u64,
    /// Start of the path in `Scratch::path`.
    pos: u64,
    /// End of the path: PATH_MAX, or PATH_MAX + 1 while a directory's trailing '/' is appended
    /// for its context (fp_common::policy::Evaluation::start).
    end: u64,
    /// Identity of the file itself (the first positive dentry; 0 until then).
    ino: u64,
    dev: u64,
    /// The best inode-table hit per op on the way, for the file itself (rank 0: none).
    hit: [OpEntry; 3],
    /// The same for what lies below the file as a directory (its own subtree entries count).
    below: [OpEntry; 3],
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

/// Offers the inode-table entry of (`ino`, `dev`) for every op: the file's own entries at depth
/// 0, the subtree entries above it (and, for the context below a directory, its own).
#[inline(always)]
fn offer_inode(w: &mut Walk, ino: u64, dev: u32) {
    let key = InodeKey { session_id: w.tables, ino, dev, _pad: 0 };
    // SAFETY: a read of the map value.
    let Some(value) = (unsafe { INODES.get(&key) }) else {
        return;
    };
    let own = if w.depth == 0 { &value.this } else { &value.below };
    for op in PolicyOp::ALL {
        let (own, below) = (op.of(own), op.of(&value.below));
        if own.outranks(&op.of(&w.hit)) {
            *op.of_mut(&mut w.hit) = own;
        }
        if below.outranks(&op.of(&w.below)) {
            *op.of_mut(&mut w.below) = below;
        }
    }
}

#[inline(always)]
fn step(w: &mut Walk, path: &mut [u8; 2 * PATH_MAX]) -> Result<bool, ()> {
    let parent: u64 = read(w.dentry, off(&OFF_DENTRY_D_PARENT))?;
    // Identity first, also of mount roots: a bind mount of a rule's directory has it as root.
    let inode: u64 = read(w.dentry, off(&OFF_DENTRY_D_INODE))?;
    let mut sb = 0u64;
    if inode != 0 {
        let ino: u64 = read(inode, off(&OFF_INODE_I_INO))?;
        sb = read(inode, off(&OFF_INODE_I_SB))?;
        let dev: u32 = read(sb, off(&OFF_SUPER_BLOCK_S_DEV))?;
        if w.ino == 0 {
            (w.ino, w.dev) = (ino, dev as u64);
        }
        offer_inode(w, ino, dev);
    }
    let mut own_proc_dir = false;
    if w.vfsmount == NO_MOUNT {
        // Inode hooks: the walk ends at the root of the file's filesystem.
        if w.dentry == parent {
            w.state = RESOLVED;
            return Ok(false);
        }
    } else {
        let mnt_root: u64 = read(w.vfsmount, off(&OFF_VFSMOUNT_MNT_ROOT))?;
        // A directory at the root of a procfs mount: maybe the task's own /proc/<tgid>.
        own_proc_dir = sb != 0
            && parent == mnt_root
            && w.dentry != mnt_root
            && read::<u64>(sb, off(&OFF_SUPER_BLOCK_S_MAGIC))? == PROC_SUPER_MAGIC;
        if w.dentry != mnt_root && w.dentry == parent {
            // Its own parent but not its mount's root: disconnected from the mount tree (e.g.
            // reached through open_by_handle_at), so it has no path from the root.
            w.state = UNRESOLVED;
            return Ok(false);
        }
        if w.dentry == mnt_root {
            let parent_mount: u64 = read(w.mount, off(&OFF_MOUNT_MNT_PARENT))?;
            if parent_mount == w.mount {
                // The top of the file's mount tree, where its path starts: the root of a mount
                // namespace, or a kernel-internal mount (pipes, sockets, memfd). A detached
                // tree — lazily unmounted (no namespace), or a clone from open_tree(2) or
                // fsmount(2) in an anonymous namespace (one without an nsfs inode number) —
                // gives paths relative to some directory, which rules on real paths would miss.
                let ns: u64 = read(w.mount, off(&OFF_MOUNT_MNT_NS))?;
                let inum = off(&OFF_MNT_NAMESPACE_NS) + off(&OFF_NS_COMMON_INUM);
                if ns == 0 || (ns != MNT_NS_INTERNAL && read::<u32>(ns, inum)? == 0) {
                    return Err(());
                }
                w.state = RESOLVED;
                return Ok(false);
            }
            // The mountpoint is the same name as the mount's root: still the same depth.
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
    // The task's own /proc/<tgid> is named as the task reached it, /proc/self, so that rules
    // on /proc/self (the runtime base) match. Other processes' directories keep their number.
    if own_proc_dir && is_current_tgid(path, at, name_len as usize) {
        if end < 6 {
            return Err(());
        }
        w.pos = (end - 4) as u64;
        for (i, b) in b"self".iter().enumerate() {
            // SAFETY: in bounds by the mask.
            unsafe { *path.get_unchecked_mut((w.pos as usize + i) & (PATH_MAX - 1)) = *b };
        }
    }
    let restored = if end == PATH_MAX { 0 } else { b'/' };
    // SAFETY: indices in bounds by the masks.
    unsafe {
        *path.get_unchecked_mut(end & (2 * PATH_MAX - 1)) = restored;
        w.pos -= 1;
        *path.get_unchecked_mut((w.pos as usize) & (PATH_MAX - 1)) = b'/';
    }
    w.dentry = parent;
    w.depth += 1;
    Ok(true)
}

const PROC_SUPER_MAGIC: u64 = 0x9fa0;
/// `mount.mnt_ns` of kernel-internal mounts: `ERR_PTR(-EINVAL)`.
const MNT_NS_INTERNAL: u64 = -22i64 as u64;

/// Whether the `len` bytes at `at` in the path buffer are the current task's tgid in decimal.
#[inline(always)]
fn is_current_tgid(path: &[u8; 2 * PATH_MAX], at: usize, len: usize) -> bool {
    let mut tgid = bpf_get_current_pid_tgid() >> 32;
    if len == 0 || len > 10 {
        return false;
    }
    for k in 0..10 {
        if k >= len {
            break;
        }
        // SAFETY: in bounds by the mask.
        let digit = unsafe { *path.get_unchecked((at + len - 1 - k) & (2 * PATH_MAX - 1)) };
        if digit != b'0' + (tgid % 10) as u8 {
            return false;
        }
        tgid /= 10;
    }
    tgid == 0
}

/// `vfsmount` of hooks that get a dentry but no mount (inode_setattr, xattrs): their walk stops at
/// the root of the file's filesystem and only inode identity decides (docs/hooks.md).
const NO_MOUNT: u64 = 0;

/// The resolved path in the scratch buffer, `path[pos..end]`, read with masked indexes.
struct ScratchPath {
    buf: *const u8,
    start: usize,
    len: usize,
}

impl ScratchPath {
    #[inline(always)]
    fn of(s: *const Scratch) -> Self {
        // `len` unmasked from a second volatile read: were it provably at most PATH_MAX, LLVM
        // would drop the masks in `at` as redundant after `i < len`, and older verifiers learn no
        // bound from comparing two unknown registers. The masks alone keep every read in bounds.
        // SAFETY: this CPU's scratch value.
        let (start, pos, end) = unsafe {
            (
                core::ptr::read_volatile(&(*s).walk.pos),
                core::ptr::read_volatile(&(*s).walk.pos),
                core::ptr::read_volatile(&(*s).walk.end),
            )
        };
        let start = start as usize & (PATH_MAX - 1);
        let len = end.wrapping_sub(pos) as usize;
        // SAFETY: as above.
        let buf = unsafe { (*s).path.as_ptr() };
        ScratchPath { buf, start, len }
    }
}

impl PathBytes for ScratchPath {
    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn at(&self, i: usize) -> u8 {
        // SAFETY: the mask keeps the index inside the 2 * PATH_MAX buffer.
        unsafe { *self.buf.add((self.start + i) & (2 * PATH_MAX - 1)) }
    }
}

/// The LPM key of `path` (its first [`MAX_PREFIX`] bytes) under `id`, in the scratch value.
/// Exact entries are stored with their NUL, so the key covers the path's NUL too.
#[inline(always)]
fn prefix_key<'a>(s: *mut Scratch, id: u64, path: &ScratchPath) -> Option<&'a Key<PrefixKeyData>> {
    let bytes = core::cmp::min(path.len + 1, MAX_PREFIX);
    // SAFETY: this CPU's scratch value; the helper checks the source range.
    unsafe {
        let key = &mut (*s).prefix_key;
        key.prefix_len = ((8 + bytes) * 8) as u32;
        key.data.session_id = id;
        let src = path.buf.add(path.start) as *const c_void;
        let dst = key.data.path.as_mut_ptr() as *mut c_void;
        if bpf_probe_read_kernel(dst, MAX_PREFIX as u32, src) != 0 {
            return None;
        }
        Some(&*key)
    }
}

/// The session's grant covering the path `check` resolved, if any (the longest: a shorter one
/// it shadows is left to the broker).
#[inline(always)]
fn grant(session: u64, s: *mut Scratch) -> Option<GrantValue> {
    GRANTS.get(prefix_key(s, session, &ScratchPath::of(s))?).copied()
}

/// One session's tables in the maps, as the decision core reads them.
struct MapTables {
    id: u64,
    s: *mut Scratch,
}

impl RuleTables for MapTables {
    type Path = ScratchPath;

    #[inline(always)]
    fn header(&self) -> Option<&TableHeader> {
        // SAFETY: a read of the map value.
        unsafe { HEADERS.get(&self.id) }
    }

    #[inline(always)]
    fn longest_prefix(&self, path: &ScratchPath) -> Option<&PrefixValue> {
        prefix_key(self.s, self.id, path).and_then(|key| PREFIXES.get(key))
    }

    #[inline(always)]
    fn name(
        &self,
        kind: NameKind,
        path: &ScratchPath,
        start: usize,
        len: usize,
    ) -> Option<&NameValue> {
        // SAFETY: this CPU's scratch value.
        let key = unsafe { &mut (*self.s).name_key };
        key.session_id = self.id;
        key.kind = kind as u8;
        key.len = len as u8;
        key._pad = [0; 6];
        for i in 0..MAX_NAME {
            // 0xff while i < len, then 0: arithmetic, not a branch per byte, which would give the
            // verifier a state per possible `len` to follow through the rest of the step.
            let keep = (((i as u64).wrapping_sub(len as u64) >> 63) as u8).wrapping_neg();
            // SAFETY: i < MAX_NAME.
            unsafe { *key.name.get_unchecked_mut(i) = path.at(start + i) & keep };
        }
        // SAFETY: a read of the map value.
        unsafe { NAMES.get(&*key) }
    }

    #[inline(always)]
    fn scope(&self, scope_id: u16) -> Option<&ScopeValue> {
        let key = ScopeKey { session_id: self.id, scope_id, _pad: [0; 6] };
        // SAFETY: a read of the map value.
        unsafe { SCOPES.get(&key) }
    }
}

/// bpf_loop callback: one step of the policy evaluation (fp_common::policy::Evaluation) on the
/// resolved path; 1 once it is done.
extern "C" fn eval_step(_index: u64, _ctx: *mut c_void) -> i64 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return 1;
    };
    // SAFETY: this CPU's scratch value; the tables only write the key fields, not `eval`.
    unsafe {
        let tables = MapTables { id: core::ptr::read_volatile(&(*s).walk.tables), s };
        let path = ScratchPath::of(s);
        if (*s).eval.step(&tables, &path) { 1 } else { 0 }
    }
}

/// Resolves (`vfsmount`, `dentry`) to its path from the root of the mount tree (not the task's
/// root: chroot does not change it), offering every dentry's inode-table entry on the way, then
/// evaluates the path against the session's tables with the decision core, for all three ops at
/// once. Leaves the walk's results in `s.walk` for the event. With [`NO_MOUNT`] only inode
/// identity decides: a path relative to a filesystem root must never be matched against rules
/// written from the system root.
///
/// `s` is a raw pointer, not `&mut`: bpf_loop's callback writes the scratch value behind the
/// compiler's back, so a `&mut` (noalias) would let it reuse values from before the loop.
#[inline(always)]
fn check(s: *mut Scratch, tables: u64, vfsmount: u64, dentry: u64) {
    // SAFETY: `s` is this CPU's scratch value; every access goes through the raw pointer.
    unsafe {
        // Field by field: a struct literal is built on the stack first, and the BPF stack is
        // small (512 bytes for a program and the subprograms it calls).
        let w = &raw mut (*s).walk;
        (*w).tables = tables;
        (*w).vfsmount = vfsmount;
        (*w).mount = vfsmount.wrapping_sub(off(&OFF_MOUNT_MNT) as u64); // unused for NO_MOUNT
        (*w).dentry = dentry;
        (*w).depth = 0;
        (*w).pos = PATH_MAX as u64;
        (*w).end = PATH_MAX as u64;
        (*w).ino = 0;
        (*w).dev = 0;
        (*w).hit = [OpEntry::default(); 3];
        (*w).below = [OpEntry::default(); 3];
        (*w).state = WALKING;
        (*s).path[PATH_MAX] = 0;
        // The callback finds its state in the scratch map itself.
        bpf_loop(MAX_WALK as u32, walk_step as *mut c_void, core::ptr::null_mut(), 0);
        let out = &raw mut (*s).outcomes;
        let state = core::ptr::read_volatile(&(*s).walk.state);
        if state != RESOLVED {
            *out = [Outcome::UNRESOLVED; 3];
            return;
        }
        let pos = core::ptr::read_volatile(&(*s).walk.pos) as usize;
        if pos == PATH_MAX {
            (*s).path[PATH_MAX - 1] = b'/'; // the root itself
            (*s).walk.pos = (PATH_MAX - 1) as u64;
        }
        let hit = &raw const (*s).walk.hit;
        if vfsmount == NO_MOUNT {
            for op in PolicyOp::ALL {
                let hit = op.of(&*hit);
                *op.of_mut(&mut *out) = match hit.rank {
                    0 => Outcome {
                        verdict: TableVerdict::Allow,
                        reason: Reason::Default,
                        rule_id: NO_RULE,
                    },
                    _ => Outcome {
                        verdict: TableVerdict::from_u8(hit.verdict),
                        reason: Reason::InodeRule,
                        rule_id: hit.rule_id,
                    },
                };
            }
            return;
        }
        evaluate(s, tables, &*hit);
        let eval = &(*s).eval;
        for op in PolicyOp::ALL {
            let (decision, hit) = (eval.decision(op), op.of(&*hit));
            let reason = if hit.rank != 0 && op.of(&eval.best) == hit {
                Reason::InodeRule
            } else if decision.rule_id == NO_RULE {
                Reason::Default
            } else {
                Reason::PathRule
            };
            *op.of_mut(&mut *out) =
                Outcome { verdict: decision.verdict, reason, rule_id: decision.rule_id };
        }
    }
}

/// The outcome of `op` that [`check`] left in the scratch value, read back as the verifier
/// sees map memory: unknown values, so the paths that computed them merge (the stack would keep
/// each combination of constants apart and verify everything after it once per combination).
#[inline(always)]
fn outcome_of(s: *const Scratch, op: PolicyOp) -> Outcome {
    // SAFETY: this CPU's scratch value, written by `check` with valid values.
    unsafe { core::ptr::read_volatile(op.at(&(*s).outcomes)) }
}

/// Runs the decision core on the path in the scratch buffer, seeded with inode-table hits; the
/// result is `s.eval` (read in place: an Evaluation is too large to copy onto the BPF stack).
#[inline(always)]
fn evaluate(s: *mut Scratch, tables: u64, seed: &[OpEntry; 3]) {
    // SAFETY: this CPU's scratch value, through the raw pointer (see `check`).
    unsafe {
        let map_tables = MapTables { id: tables, s };
        (*s).eval.restart(&map_tables, &ScratchPath::of(s), seed);
        bpf_loop(MAX_STEPS as u32, eval_step as *mut c_void, core::ptr::null_mut(), 0);
    }
}

/// What the event of a rename or link carries besides the one of a file.
#[derive(Clone, Copy)]
struct MoveEvent {
    /// `EVENT_MOVE_DIR`, `EVENT_TARGET_EXISTS`, `EVENT_EXCHANGE`.
    flags: u8,
    /// The source's identity (the walk's is the target's by then).
    ino: u64,
    dev: u64,
}

/// What an event says besides the outcome (one argument: BPF functions take at most five).
#[derive(Clone, Copy)]
struct Report {
    hook: Hook,
    op: Op,
    /// The kernel refused the operation.
    denied: bool,
    /// A rename's or link's.
    mv: Option<MoveEvent>,
}

/// Reports a decision. For a move, `path` is the source saved in `other` and `target` the
/// target's path the walk left in the buffer.
fn report(session: &Session, outcome: &Outcome, what: &Report) {
    let Report { hook, op, denied, mv } = *what;
    let Some(s) = SCRATCH.get_ptr(0) else {
        return;
    };
    // SAFETY: this CPU's scratch value, filled by `check`.
    let (w, path, other) = unsafe { (&(*s).walk, &(*s).path, &(*s).other) };
    if denied {
        count(session.id, |c| unsafe { &raw mut (*c).denied });
    }
    if outcome.reason == Reason::Unresolved {
        count(session.id, |c| unsafe { &raw mut (*c).unresolved });
    }
    let Some(mut entry) = EVENTS.reserve::<DecisionEvent>(0) else {
        count(session.id, |c| unsafe { &raw mut (*c).dropped });
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
        (*ev).rule_id = outcome.rule_id;
        (*ev).hook = hook as u8;
        (*ev).reason = outcome.reason as u8;
        (*ev).op = op as u8;
        (*ev).flags = if w.vfsmount == NO_MOUNT { EVENT_PATH_FS_RELATIVE } else { 0 }
            | if denied { EVENT_DENIED } else { 0 };
        (*ev).verdict = outcome.verdict as u8;
        (*ev)._pad = [0; 3];
        (*ev).comm = bpf_get_current_comm().unwrap_or([0; 16]);
        // An unresolved path is never reported as a (truncated) string.
        let start = w.pos as usize & (PATH_MAX - 1);
        let len = if w.state == RESOLVED { (PATH_MAX - start) & (PATH_MAX - 1) } else { 0 };
        let src = (path.as_ptr() as usize + start) as *const c_void;
        let (first, second) = match mv {
            Some(_) => ((*ev).target.as_mut_ptr(), (*ev).path.as_mut_ptr()),
            None => ((*ev).path.as_mut_ptr(), (*ev).target.as_mut_ptr()),
        };
        let mut first_len = len as u32;
        if bpf_probe_read_kernel(first as *mut c_void, len as u32, src) != 0 {
            first_len = 0;
        }
        let mut second_len = 0u32;
        if let Some(mv) = mv {
            (*ev).flags |= mv.flags;
            (*ev).ino = mv.ino;
            (*ev).dev = mv.dev as u32;
            second_len = ((*s).other_len as usize & (PATH_MAX - 1)) as u32;
            let from = other.as_ptr() as *const c_void;
            if bpf_probe_read_kernel(second as *mut c_void, second_len, from) != 0 {
                second_len = 0;
            }
        }
        (*ev).path_len = if mv.is_some() { second_len } else { first_len };
        (*ev).target_len = if mv.is_some() { first_len } else { 0 };
    }
    entry.submit(0);
}

/// Starts a decision: bumps this CPU's scratch generation (see [`Scratch`]).
#[inline(always)]
fn begin(s: *mut Scratch) -> u64 {
    // SAFETY: this CPU's scratch value; accessed through the raw pointer (see `check`).
    unsafe {
        let g = core::ptr::read_volatile(&(*s).generation).wrapping_add(1);
        core::ptr::write_volatile(&mut (*s).generation, g);
        g
    }
}

/// Ends a decision: the outcome, unless the session's tables were replaced meanwhile or another
/// decision reused the scratch (both fail closed).
#[inline(always)]
fn settle(session: &Session, s: *mut Scratch, generation: u64, outcome: Outcome) -> Outcome {
    // A reload replaces the session's tables id and then deletes the old tables: a decision that
    // ran while the id changed may have seen them half deleted, so it fails closed (redoing it
    // would double the code the verifier walks in every program).
    if session_info(session.id).map_or(0, |i| i.tables) != session.info.tables {
        count(session.id, |c| unsafe { &raw mut (*c).raced_reload });
        return Outcome::RELOADED;
    }
    // SAFETY: as above.
    if unsafe { core::ptr::read_volatile(&(*s).generation) } != generation {
        return Outcome::UNRESOLVED;
    }
    outcome
}

/// An op's outcome after a remembered grant of the session (opens and execs only).
#[inline(always)]
fn granted(outcome: Outcome, grant: Option<&GrantValue>, op: PolicyOp, now: u64) -> Outcome {
    let verdict = after_grant(outcome.verdict, grant, op, now);
    if verdict == outcome.verdict {
        return outcome;
    }
    Outcome { verdict, reason: Reason::Granted, rule_id: outcome.rule_id }
}

/// The one decision of every hook but renames and links: may the current task do `op` (and, if
/// `and_write`, also write: an open for reading and writing) to (`vfsmount`, `dentry`)? Returns
/// 0 or -EACCES. The strictest verdict of the ops decides. Prompt and Defer verdicts deny (with
/// their verdict in the event) until a userspace broker answers them; a prompt of an open a
/// remembered grant covers is allowed.
#[inline(always)]
fn decide(hook: Hook, op: Op, and_write: bool, vfsmount: u64, dentry: u64) -> i32 {
    let Some(session) = current_session() else {
        return 0;
    };
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return -EACCES; // fail closed: no scratch space means no check
    };
    let generation = begin(s);
    check(s, session.info.tables, vfsmount, dentry);
    let (first, second) = (op.policy_op(), PolicyOp::Write);
    let mut outcome = outcome_of(s, first);
    let mut other = outcome_of(s, second);
    // A remembered grant answers a prompt of an open or exec here, per op: no pending entry, and
    // no broker needed (fanotify still asks the broker, which answers from its own grants).
    // Looked up before the generation check, which also covers this use of the scratch.
    let held_by_broker = matches!(hook, Hook::FileOpen | Hook::BprmCheckSecurity);
    let prompts = outcome.verdict == TableVerdict::Prompt
        || (and_write && other.verdict == TableVerdict::Prompt);
    if held_by_broker && prompts {
        // SAFETY: a helper call without arguments.
        let now = unsafe { bpf_ktime_get_boot_ns() };
        let grant = grant(session.id, s);
        outcome = granted(outcome, grant.as_ref(), first, now);
        other = granted(other, grant.as_ref(), second, now);
    }
    let mut reported = op;
    if and_write && other.verdict.strictness() > outcome.verdict.strictness() {
        (outcome, reported) = (other, Op::Write);
    }
    let outcome = settle(&session, s, generation, outcome);
    // Opens (and execs) with a prompt or defer verdict are the broker's to answer while it lives:
    // fanotify holds them. The open's file is marked pending until the broker answers.
    let brokered = matches!(outcome.verdict, TableVerdict::Prompt | TableVerdict::Defer)
        && held_by_broker
        && broker_alive();
    if brokered && (hook != Hook::FileOpen || mark_pending(session.id, s)) {
        return 0;
    }
    let refused = outcome.verdict != TableVerdict::Allow;
    let enforced = refused && session.info.flags & SESSION_AUDIT_ONLY == 0;
    let full_audit = session.info.flags & SESSION_FULL_AUDIT != 0 && !matches!(reported, Op::Read);
    if refused || full_audit {
        report(&session, &outcome, &Report { hook, op: reported, denied: enforced, mv: None });
    }
    if enforced { -EACCES } else { 0 }
}

/// The inode of a dentry (0 for a negative one) and whether it is a directory.
#[inline(always)]
fn dentry_kind(dentry: u64) -> Result<(u64, bool), ()> {
    let inode: u64 = read(dentry, off(&OFF_DENTRY_D_INODE))?;
    if inode == 0 {
        return Ok((0, false));
    }
    let mode: u16 = read(inode, off(&OFF_INODE_I_MODE))?;
    Ok((inode, mode & S_IFMT == S_IFDIR))
}

const S_IFMT: u16 = 0o170000;
const S_IFDIR: u16 = 0o040000;

/// Both names of a move (index 0 the source, 1 the target), filled in by [`decide_move`] and
/// walked by [`move_side_step`]. Plain integers only (see [`Walk`]).
#[repr(C)]
struct MoveNames {
    tables: u64,
    /// A directory moves: both names need the context below them.
    dirs: u64,
    mnt: [u64; 2],
    dentry: [u64; 2],
    exists: [u64; 2],
    dir: [u64; 2],
    /// Set by the walk: the name was resolved.
    resolved: [u64; 2],
    /// The source's identity, for the event (the walk's is the target's by then).
    ino: u64,
    dev: u64,
}

/// bpf_loop callback over the two names of a move: the code that walks and evaluates one name is
/// then verified once, not once per name (it is most of the load time of path_rename and
/// path_link).
extern "C" fn move_side_step(index: u64, _ctx: *mut c_void) -> i64 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return 1;
    };
    let side = (index & 1) as usize;
    // SAFETY: this CPU's scratch value, through the raw pointer (see `check`).
    unsafe {
        let names = &raw mut (*s).mv;
        let at = ((*names).tables, (*names).mnt[side], (*names).dentry[side]);
        let how = ((*names).exists[side] != 0, (*names).dir[side] != 0, (*names).dirs != 0);
        (*names).resolved[side] = move_side(s, side, at, how) as u64;
        if side == 0 {
            save_source(s);
            (*names).ino = core::ptr::read_volatile(&(*s).walk.ino);
            (*names).dev = core::ptr::read_volatile(&(*s).walk.dev);
        }
    }
    0
}

/// One name of a move (`side` 0 the source, 1 the target), walked and evaluated once for all
/// ops (plus the context below it when a directory moves), into `s.sides[side]` and
/// `s.side_outcomes[side]`; leaves its path in the scratch buffer. False: it cannot be resolved.
#[inline(always)]
fn move_side(
    s: *mut Scratch,
    side: usize,
    (tables, vfsmount, dentry): (u64, u64, u64),
    (exists, dir, dirs): (bool, bool, bool),
) -> bool {
    check(s, tables, vfsmount, dentry);
    let outcomes = [
        outcome_of(s, PolicyOp::Read),
        outcome_of(s, PolicyOp::Write),
        outcome_of(s, PolicyOp::Delete),
    ];
    if outcomes[0].reason == Reason::Unresolved || side > 1 {
        return false;
    }
    let node = [outcomes[0].verdict, outcomes[1].verdict, outcomes[2].verdict];
    // SAFETY: this CPU's scratch value; side < 2.
    unsafe {
        (*s).side_outcomes[side] = outcomes;
        (*s).sides[side] = MoveSide { node, exists, dir, below: Below::UNKNOWN };
        if dirs {
            below(s, tables);
            let eval = &(*s).eval;
            let mut context = [(0u32, TableVerdict::Deny); 3];
            for op in PolicyOp::ALL {
                let best = op.of(&eval.best);
                *op.of_mut(&mut context) = (best.rank, TableVerdict::from_u8(best.verdict));
            }
            let anchored = (*s).anchored != 0 || !eval.done();
            (*s).sides[side].below = Below { context, prefix_id: eval.prefix_id, anchored };
        }
    }
    true
}

/// Evaluates what decides everything below the directory whose path `check` left in the buffer
/// (`path/`, seeded with the subtree identities on the way) into `s.eval`, and whether a rule is
/// anchored at or below it into `s.anchored`.
#[inline(always)]
fn below(s: *mut Scratch, tables: u64) {
    // SAFETY: this CPU's scratch value, through the raw pointer (see `check`).
    unsafe {
        let len = PATH_MAX as u64 - core::ptr::read_volatile(&(*s).walk.pos);
        // The root never moves; a key too long cannot be looked up: both count as anchored.
        let anchored = len <= 1
            || len as usize + 1 > MAX_PREFIX
            || prefix_key(s, tables, &ScratchPath::of(s)).is_none_or(|k| INTERIOR.get(k).is_some());
        (*s).anchored = anchored as u64;
        (*s).path[PATH_MAX] = b'/';
        (*s).path[PATH_MAX + 1] = 0;
        (*s).walk.end = PATH_MAX as u64 + 1;
        let seed = core::ptr::read_volatile(&(*s).walk.below);
        evaluate(s, tables, &seed);
        (*s).path[PATH_MAX] = 0;
        (*s).walk.end = PATH_MAX as u64;
    }
}

/// Saves the path `check` left in the buffer as a move's source, for the event.
#[inline(always)]
fn save_source(s: *mut Scratch) {
    // SAFETY: this CPU's scratch value; the copy reads `path[start..start + PATH_MAX]`, inside
    // the 2 * PATH_MAX buffer.
    unsafe {
        let start = core::ptr::read_volatile(&(*s).walk.pos) as usize & (PATH_MAX - 1);
        let src = ((*s).path.as_ptr() as usize + start) as *const c_void;
        let dst = (*s).other.as_mut_ptr() as *mut c_void;
        let ok = bpf_probe_read_kernel(dst, PATH_MAX as u32, src) == 0;
        let resolved = core::ptr::read_volatile(&(*s).walk.state) == RESOLVED;
        (*s).other_len = if ok && resolved { (PATH_MAX - start) as u64 } else { 0 };
    }
}

/// A rename or link: the REFER rule of fp_common::refer on both names, each walked once.
/// Returns 0, -EACCES (an access the move needs is denied, or a name cannot be resolved) or
/// -EXDEV (the content would gain access under its new name).
#[inline(always)]
fn decide_move(hook: Hook, kind: MoveKind, src: (u64, u64), dst: (u64, u64)) -> i32 {
    let Some(session) = current_session() else {
        return 0;
    };
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return -EACCES;
    };
    let generation = begin(s);
    let tables = session.info.tables;
    let (Ok((_, src_dir)), Ok((dst_inode, dst_dir))) = (dentry_kind(src.1), dentry_kind(dst.1))
    else {
        return unreadable();
    };
    let dirs = src_dir || (kind == MoveKind::Exchange && dst_dir);
    let exists = dst_inode != 0;
    // SAFETY: this CPU's scratch value, through the raw pointer (see `check`).
    let (source, target, ino, dev) = unsafe {
        let names = &raw mut (*s).mv;
        (*names).tables = tables;
        (*names).dirs = dirs as u64;
        (*names).mnt = [src.0, dst.0];
        (*names).dentry = [src.1, dst.1];
        (*names).exists = [1, exists as u64];
        (*names).dir = [src_dir as u64, dst_dir as u64];
        (*names).resolved = [0, 0];
        bpf_loop(2, move_side_step as *mut c_void, core::ptr::null_mut(), 0);
        let resolved = core::ptr::read_volatile(&(*names).resolved);
        let identity =
            (core::ptr::read_volatile(&(*names).ino), core::ptr::read_volatile(&(*names).dev));
        (resolved[0] != 0, resolved[1] != 0, identity.0, identity.1)
    };
    let (errno, op, outcome) = if source && target {
        // SAFETY: this CPU's scratch value, filled by move_side.
        let (a, b) = unsafe { (&(*s).sides[0], &(*s).sides[1]) };
        match refer::decide(kind, a, b) {
            MoveVerdict::Allow => (0, Op::Write, Outcome::ALLOWED),
            MoveVerdict::Denied { op, target } => {
                // SAFETY: as above.
                let outcome = op.of(unsafe { &(*s).side_outcomes[target as usize] });
                (EACCES, Op::of_policy(op), outcome)
            }
            MoveVerdict::Refused { op } => (EXDEV, Op::of_policy(op), Outcome::REFER),
        }
    } else {
        (EACCES, Op::Write, Outcome::UNRESOLVED)
    };
    let outcome = settle(&session, s, generation, outcome);
    let errno = match outcome.reason {
        Reason::Reloaded | Reason::Unresolved => EACCES,
        _ => errno,
    };
    let refused = outcome.verdict != TableVerdict::Allow;
    let enforced = refused && session.info.flags & SESSION_AUDIT_ONLY == 0;
    if refused || session.info.flags & SESSION_FULL_AUDIT != 0 {
        let flags = if dirs { EVENT_MOVE_DIR } else { 0 }
            | if exists { EVENT_TARGET_EXISTS } else { 0 }
            | if kind == MoveKind::Exchange { EVENT_EXCHANGE } else { 0 };
        let mv = Some(MoveEvent { flags, ino, dev });
        report(&session, &outcome, &Report { hook, op, denied: enforced, mv });
    }
    if enforced { -errno } else { 0 }
}

#[inline(always)]
fn broker_alive() -> bool {
    // SAFETY: a copy out of the map value.
    let beat = BROKER.get(0).copied().unwrap_or(0);
    // SAFETY: a helper call without arguments.
    let now = unsafe { bpf_ktime_get_boot_ns() };
    beat != 0 && now.wrapping_sub(beat) <= BROKER_HEARTBEAT_TIMEOUT_NS
}

/// Records the file `check` resolved as pending for `session`; false (deny) if it cannot.
#[inline(always)]
fn mark_pending(session: u64, s: *const Scratch) -> bool {
    // SAFETY: this CPU's scratch value, filled by `check`.
    let (ino, dev) = unsafe { ((*s).walk.ino, (*s).walk.dev) };
    let key = InodeKey { session_id: session, ino, dev: dev as u32, _pad: 0 };
    ino != 0 && PENDING.insert(&key, &1, 0).is_ok()
}

/// Denies reads, writes and mmaps of a file whose prompt-tier open is still pending.
#[inline(always)]
fn check_pending(hook: Hook, file: u64) -> i32 {
    let Some(session) = current_session() else {
        return 0;
    };
    let identity = read::<u64>(file, off(&OFF_FILE_F_INODE)).and_then(|inode| {
        let ino: u64 = read(inode, off(&OFF_INODE_I_INO))?;
        let sb: u64 = read(inode, off(&OFF_INODE_I_SB))?;
        let dev: u32 = read(sb, off(&OFF_SUPER_BLOCK_S_DEV))?;
        Ok((ino, dev))
    });
    let Ok((ino, dev)) = identity else {
        return -EACCES;
    };
    let key = InodeKey { session_id: session.id, ino, dev, _pad: 0 };
    // SAFETY: only tested for presence.
    if unsafe { PENDING.get(&key) }.is_none() {
        return 0;
    }
    refuse_without_path(&session, hook, Op::Read, Reason::PromptPending, (ino, dev))
}

/// Reports and refuses an operation decided without resolving a path (the event names the file
/// by identity, if any); audit-mode sessions are only reported.
#[inline(always)]
fn refuse_without_path(
    session: &Session,
    hook: Hook,
    op: Op,
    reason: Reason,
    file: (u64, u32),
) -> i32 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return -EACCES;
    };
    // SAFETY: this CPU's scratch value.
    unsafe {
        (*s).walk.ino = file.0;
        (*s).walk.dev = file.1 as u64;
        (*s).walk.vfsmount = NO_MOUNT;
        (*s).walk.state = UNRESOLVED;
    }
    let verdict =
        if reason == Reason::PromptPending { TableVerdict::Prompt } else { TableVerdict::Deny };
    let outcome = Outcome { verdict, reason, rule_id: NO_RULE };
    let enforced = session.info.flags & SESSION_AUDIT_ONLY == 0;
    report(session, &outcome, &Report { hook, op, denied: enforced, mv: None });
    if enforced { -EACCES } else { 0 }
}

/// Sessions may not use bpf(): with it, root could detach fp's programs or rewrite its maps.
#[inline(always)]
fn refuse_bpf() -> i32 {
    match current_session() {
        Some(session) => {
            refuse_without_path(&session, Hook::Bpf, Op::Write, Reason::SelfProtection, (0, 0))
        }
        None => 0,
    }
}

/// Sessions may not signal or trace fp's own processes.
#[inline(always)]
fn refuse_if_protected(hook: Hook, task: u64) -> i32 {
    let Some(session) = current_session() else {
        return 0;
    };
    let Ok(tgid) = read::<u32>(task, off(&OFF_TASK_STRUCT_TGID)) else {
        return -EACCES;
    };
    // SAFETY: only tested for presence.
    if unsafe { PROTECTED.get(&tgid) }.is_none() {
        return 0;
    }
    refuse_without_path(&session, hook, Op::Write, Reason::SelfProtection, (0, 0))
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
    decide(hook, Op::Write, false, NO_MOUNT, dentry)
}

/// Fail closed for session tasks when a hook's own arguments cannot be read.
#[inline(always)]
fn unreadable() -> i32 {
    match current_session() {
        Some(s) if s.info.flags & SESSION_AUDIT_ONLY == 0 => -EACCES,
        _ => 0,
    }
}

/// `decide` for a `struct path *`; `and_write`: the operation also writes (see [`decide`]).
#[inline(always)]
fn decide_path(hook: Hook, op: Op, and_write: bool, path: u64) -> i32 {
    match (read::<u64>(path, off(&OFF_PATH_MNT)), read::<u64>(path, off(&OFF_PATH_DENTRY))) {
        (Ok(mnt), Ok(dentry)) => decide(hook, op, and_write, mnt, dentry),
        _ => unreadable(),
    }
}

/// `decide` for a dentry in the directory `dir` (a `struct path *`): the name being created,
/// removed or linked.
#[inline(always)]
fn decide_in_dir(hook: Hook, op: Op, dir: u64, dentry: u64) -> i32 {
    match read::<u64>(dir, off(&OFF_PATH_MNT)) {
        Ok(mnt) => decide(hook, op, false, mnt, dentry),
        Err(()) => unreadable(),
    }
}

/// `decide` for a `struct file *`.
#[inline(always)]
fn decide_file(hook: Hook, op: Op, and_write: bool, file: u64) -> i32 {
    decide_path(hook, op, and_write, file + off(&OFF_FILE_F_PATH) as u64)
}

/// Every open, including the open of an executable and of a file created by O_CREAT. An open
/// decides every access it grants: read and write both for O_RDWR (the stricter verdict wins),
/// write for O_WRONLY, exec for execve/uselib, read otherwise. O_TRUNC is checked as a write by
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
        let writes = mode & FMODE_WRITE != 0;
        let (op, and_write) = if writes && mode & FMODE_READ != 0 {
            (Op::Read, true)
        } else if writes {
            (Op::Write, false)
        } else if mode & FMODE_EXEC != 0 || flags & F_FLAGS_EXEC != 0 {
            (Op::Exec, false)
        } else {
            (Op::Read, false)
        };
        decide_file(Hook::FileOpen, op, and_write, file)
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

/// A hardlink makes the file's content reachable under a new name: the new name must be
/// writable and no more permissive than the old one for any op (fp_common::refer). The kernel
/// refuses links across mounts before this hook, so the source lies on the new name's mount.
#[lsm(hook = "path_link")]
pub fn fp_path_link(ctx: LsmContext) -> i32 {
    // path_link(struct dentry *old_dentry, const struct path *new_dir, struct dentry *new_dentry, int ret)
    unless_denied(ctx.arg(3), || {
        let Ok(mnt) = read::<u64>(ctx.arg(1), off(&OFF_PATH_MNT)) else {
            return unreadable();
        };
        decide_move(Hook::PathLink, MoveKind::Link, (mnt, ctx.arg(0)), (mnt, ctx.arg(2)))
    })
}

/// rename(2) and RENAME_EXCHANGE, of files and directories: the accesses the move needs and the
/// REFER rule (fp_common::refer), both names walked once.
#[lsm(hook = "path_rename")]
pub fn fp_path_rename(ctx: LsmContext) -> i32 {
    // path_rename(const struct path *old_dir, struct dentry *old_dentry,
    //             const struct path *new_dir, struct dentry *new_dentry, unsigned int flags, int ret)
    unless_denied(ctx.arg(5), || {
        let flags: u32 = ctx.arg(4);
        let kind = if flags & RENAME_EXCHANGE != 0 { MoveKind::Exchange } else { MoveKind::Rename };
        let (Ok(old_mnt), Ok(new_mnt)) = (
            read::<u64>(ctx.arg(0), off(&OFF_PATH_MNT)),
            read::<u64>(ctx.arg(2), off(&OFF_PATH_MNT)),
        ) else {
            return unreadable();
        };
        decide_move(Hook::PathRename, kind, (old_mnt, ctx.arg(1)), (new_mnt, ctx.arg(3)))
    })
}

/// truncate(2); before 6.2 also ftruncate(2) and open(O_TRUNC).
#[lsm(hook = "path_truncate")]
pub fn fp_path_truncate(ctx: LsmContext) -> i32 {
    // path_truncate(const struct path *path, int ret)
    unless_denied(ctx.arg(1), || decide_path(Hook::PathTruncate, Op::Write, false, ctx.arg(0)))
}

/// ftruncate(2) and open(O_TRUNC) since 6.2.
#[lsm(hook = "file_truncate")]
pub fn fp_file_truncate(ctx: LsmContext) -> i32 {
    // file_truncate(struct file *file, int ret)
    unless_denied(ctx.arg(1), || decide_file(Hook::FileTruncate, Op::Write, false, ctx.arg(0)))
}

#[lsm(hook = "path_chmod")]
pub fn fp_path_chmod(ctx: LsmContext) -> i32 {
    // path_chmod(const struct path *path, umode_t mode, int ret)
    unless_denied(ctx.arg(2), || decide_path(Hook::PathChmod, Op::Write, false, ctx.arg(0)))
}

#[lsm(hook = "path_chown")]
pub fn fp_path_chown(ctx: LsmContext) -> i32 {
    // path_chown(const struct path *path, kuid_t uid, kgid_t gid, int ret)
    unless_denied(ctx.arg(3), || decide_path(Hook::PathChown, Op::Write, false, ctx.arg(0)))
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
        Ok(file) => decide_file(Hook::BprmCheckSecurity, Op::Exec, false, file),
        Err(()) => unreadable(),
    })
}

/// Every read and write (also the kernel's own reads of an executable): refused only for a file
/// whose prompt-tier open the broker has not answered.
#[lsm(hook = "file_permission")]
pub fn fp_file_permission(ctx: LsmContext) -> i32 {
    // file_permission(struct file *file, int mask, int ret)
    unless_denied(ctx.arg(2), || check_pending(Hook::FilePermission, ctx.arg(0)))
}

/// Mapping a file: as file_permission.
#[lsm(hook = "mmap_file")]
pub fn fp_mmap_file(ctx: LsmContext) -> i32 {
    // mmap_file(struct file *file, unsigned long reqprot, unsigned long prot,
    //           unsigned long flags, int ret)
    unless_denied(ctx.arg(4), || {
        let file: u64 = ctx.arg(0);
        if file == 0 { 0 } else { check_pending(Hook::MmapFile, file) }
    })
}

/// bpf(2) before 6.14.
#[lsm(hook = "bpf")]
pub fn fp_bpf(ctx: LsmContext) -> i32 {
    // bpf(int cmd, union bpf_attr *attr, unsigned int size, int ret)
    unless_denied(ctx.arg(3), refuse_bpf)
}

/// bpf(2) with the `kernel` argument (6.14+).
#[lsm(hook = "bpf")]
pub fn fp_bpf_kernel(ctx: LsmContext) -> i32 {
    // bpf(int cmd, union bpf_attr *attr, unsigned int size, bool kernel, int ret)
    unless_denied(ctx.arg(4), refuse_bpf)
}

#[lsm(hook = "task_kill")]
pub fn fp_task_kill(ctx: LsmContext) -> i32 {
    // task_kill(struct task_struct *p, struct kernel_siginfo *info, int sig, const struct cred *cred, int ret)
    unless_denied(ctx.arg(4), || refuse_if_protected(Hook::TaskKill, ctx.arg(0)))
}

#[lsm(hook = "ptrace_access_check")]
pub fn fp_ptrace_access_check(ctx: LsmContext) -> i32 {
    // ptrace_access_check(struct task_struct *child, unsigned int mode, int ret)
    unless_denied(ctx.arg(2), || refuse_if_protected(Hook::PtraceAccessCheck, ctx.arg(0)))
}

/// Pass-through program attached by `fp kernel probe` to prove BPF LSM works; it cannot deny.
#[lsm(hook = "file_open")]
pub fn fp_probe(ctx: LsmContext) -> i32 {
    // file_open(struct file *file, int ret)
    ctx.arg(1)
}

/// Sessions may not change the mount table, in any namespace: a mount, bind mount, move or
/// umount could hide a path behind another tree or show a tree under another name, and the walk
/// would then name what the session sees. The event names the mountpoint (or the filesystem) by
/// identity, `(0, 0)` when it cannot be read: the refusal never depends on it.
#[inline(always)]
fn refuse_mount(hook: Hook, identity: impl FnOnce() -> Result<(u64, u32), ()>) -> i32 {
    match current_session() {
        Some(session) => {
            let file = identity().unwrap_or((0, 0));
            refuse_without_path(&session, hook, Op::Write, Reason::SelfProtection, file)
        }
        None => 0,
    }
}

/// (inode number, device) of a dentry.
#[inline(always)]
fn dentry_identity(dentry: u64) -> Result<(u64, u32), ()> {
    let inode: u64 = read(dentry, off(&OFF_DENTRY_D_INODE))?;
    let ino: u64 = read(inode, off(&OFF_INODE_I_INO))?;
    let sb: u64 = read(inode, off(&OFF_INODE_I_SB))?;
    let dev: u32 = read(sb, off(&OFF_SUPER_BLOCK_S_DEV))?;
    Ok((ino, dev))
}

/// (inode number, device) of a `struct path *`.
#[inline(always)]
fn path_identity(path: u64) -> Result<(u64, u32), ()> {
    dentry_identity(read(path, off(&OFF_PATH_DENTRY))?)
}

/// The device of a `struct super_block *` (inode number 0: the filesystem as a whole).
#[inline(always)]
fn sb_identity(sb: u64) -> Result<(u64, u32), ()> {
    Ok((0, read(sb, off(&OFF_SUPER_BLOCK_S_DEV))?))
}

/// mount(2) in every form: a new filesystem, bind, move, remount and propagation changes (so
/// `unshare -m`, which makes the new namespace's mounts private, is refused too).
#[lsm(hook = "sb_mount")]
pub fn fp_sb_mount(ctx: LsmContext) -> i32 {
    // sb_mount(const char *dev_name, const struct path *path, const char *type,
    //          unsigned long flags, void *data, int ret)
    unless_denied(ctx.arg(5), || refuse_mount(Hook::SbMount, || path_identity(ctx.arg(1))))
}

/// umount(2), lazy (MNT_DETACH) included.
#[lsm(hook = "sb_umount")]
pub fn fp_sb_umount(ctx: LsmContext) -> i32 {
    // sb_umount(struct vfsmount *mnt, int flags, int ret)
    unless_denied(ctx.arg(2), || {
        refuse_mount(Hook::SbUmount, || {
            dentry_identity(read(ctx.arg::<u64>(0), off(&OFF_VFSMOUNT_MNT_ROOT))?)
        })
    })
}

/// A remount through mount(2) (sb_mount has refused it already: defence in depth).
#[lsm(hook = "sb_remount")]
pub fn fp_sb_remount(ctx: LsmContext) -> i32 {
    // sb_remount(struct super_block *sb, void *mnt_opts, int ret)
    unless_denied(ctx.arg(2), || refuse_mount(Hook::SbRemount, || sb_identity(ctx.arg(0))))
}

/// A new filesystem instance for userspace: mount(2) (refused by sb_mount already) and the new
/// mount API's `fsconfig(FSCONFIG_CMD_CREATE)`, so `fsmount` never gets a filesystem to mount.
#[lsm(hook = "sb_kern_mount")]
pub fn fp_sb_kern_mount(ctx: LsmContext) -> i32 {
    // sb_kern_mount(const struct super_block *sb, int ret)
    unless_denied(ctx.arg(1), || refuse_mount(Hook::SbKernMount, || sb_identity(ctx.arg(0))))
}

#[lsm(hook = "sb_pivotroot")]
pub fn fp_sb_pivotroot(ctx: LsmContext) -> i32 {
    // sb_pivotroot(const struct path *old_path, const struct path *new_path, int ret)
    unless_denied(ctx.arg(2), || refuse_mount(Hook::SbPivotroot, || path_identity(ctx.arg(1))))
}

/// move_mount(2): attaching a mount made with the new mount API (fsmount, open_tree) or moving
/// an existing one.
#[lsm(hook = "move_mount")]
pub fn fp_move_mount(ctx: LsmContext) -> i32 {
    // move_mount(const struct path *from_path, const struct path *to_path, int ret)
    unless_denied(ctx.arg(2), || refuse_mount(Hook::MoveMount, || path_identity(ctx.arg(1))))
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
