//! The ABI between the BPF programs and userspace: map keys and values, ring-buffer events, and the
//! names of the read-only globals that carry kernel struct offsets (resolved from BTF at load time).
//!
//! Bump [`ABI_VERSION`] whenever a layout here changes, or which programs are attached per
//! cgroup: pins live under a directory named after it, so an agent never reuses maps written with
//! another layout, nor takes over programs it would attach otherwise.

/// Version of the map/event layouts; part of the bpffs pin directory name.
pub const ABI_VERSION: u32 = 22;

/// The broker's heartbeat (`BROKER` map): prompt and defer verdicts of opens are left to the
/// broker only while its last beat (CLOCK_BOOTTIME ns) is at most this old.
pub const BROKER_HEARTBEAT_TIMEOUT_NS: u64 = 2_000_000_000;

/// Longest path the programs resolve (bytes, without NUL). Longer paths are denied for session
/// processes, never matched on a truncated string.
pub const PATH_MAX: usize = 4096;

/// Steps of the dentry/mount walk (components plus mount crossings). Every component takes at
/// least two bytes ("/x"), so this covers any path shorter than PATH_MAX plus 64 mount crossings;
/// a walk that has not reached the root by then is denied for sessions.
pub const MAX_WALK: usize = PATH_MAX / 2 + 64;

macro_rules! hooks {
    ($($variant:ident = $value:literal, $name:literal;)*) => {
        /// LSM hook that produced an event. Its BPF LSM program is `fp_<name>`, attached to
        /// `lsm/<name>` (or `lsm_cgroup/<name>`), its fmod_ret program `fp_fmod_ret_<name>`
        /// ([`Hook::program`]; see docs/hooks.md for the hook -> op table).
        #[repr(u8)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Hook {
            $($variant = $value,)*
        }

        impl Hook {
            pub const ALL: &[Hook] = &[$(Self::$variant,)*];

            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }

            fn default_program(self, backend: Backend) -> &'static str {
                match (self, backend) {
                    $(
                        (Self::$variant, Backend::BpfLsm) => concat!("fp_", $name),
                        (Self::$variant, Backend::FModRet) => concat!("fp_fmod_ret_", $name),
                    )*
                }
            }
        }
    };
}

hooks! {
    FileOpen = 1, "file_open";
    PathUnlink = 2, "path_unlink";
    PathMknod = 3, "path_mknod";
    PathRmdir = 4, "path_rmdir";
    PathMkdir = 5, "path_mkdir";
    PathSymlink = 6, "path_symlink";
    PathLink = 7, "path_link";
    PathRename = 8, "path_rename";
    PathTruncate = 9, "path_truncate";
    FileTruncate = 10, "file_truncate";
    PathChmod = 11, "path_chmod";
    PathChown = 12, "path_chown";
    InodeSetattr = 13, "inode_setattr";
    InodeSetxattr = 14, "inode_setxattr";
    InodeRemovexattr = 15, "inode_removexattr";
    InodeSetAcl = 16, "inode_set_acl";
    InodeRemoveAcl = 17, "inode_remove_acl";
    BprmCheckSecurity = 18, "bprm_check_security";
    FilePermission = 19, "file_permission";
    MmapFile = 20, "mmap_file";
    Bpf = 21, "bpf";
    TaskKill = 22, "task_kill";
    PtraceAccessCheck = 23, "ptrace_access_check";
    SbMount = 24, "sb_mount";
    SbUmount = 25, "sb_umount";
    SbRemount = 26, "sb_remount";
    SbKernMount = 27, "sb_kern_mount";
    SbPivotroot = 28, "sb_pivotroot";
    MoveMount = 29, "move_mount";
    DInstantiate = 30, "d_instantiate";
    TaskAlloc = 31, "task_alloc";
    FileSetFowner = 32, "file_set_fowner";
    FileSendSigiotask = 33, "file_send_sigiotask";
    LockedDown = 34, "locked_down";
    KernelLoadData = 35, "kernel_load_data";
    KernelReadFile = 36, "kernel_read_file";
    PerfEventOpen = 37, "perf_event_open";
    KernelModuleRequest = 38, "kernel_module_request";
    FileIoctl = 39, "file_ioctl";
    FileIoctlCompat = 40, "file_ioctl_compat";
    UnixStreamConnect = 41, "unix_stream_connect";
    UnixMaySend = 42, "unix_may_send";
}

impl Hook {
    pub fn from_u8(v: u8) -> Option<Self> {
        Self::ALL.iter().copied().find(|h| *h as u8 == v)
    }

    /// Hooks that only some supported kernels have, because the operation they guard goes through
    /// another hook there: ftruncate and O_TRUNC reach path_truncate before 6.2, and POSIX ACLs
    /// reach inode_setxattr/inode_removexattr before 6.2; a 32-bit caller's ioctl reaches
    /// file_ioctl on the 6.1 releases from before file_ioctl_compat was backported (2024).
    pub fn is_optional(self) -> bool {
        matches!(
            self,
            Self::FileTruncate | Self::InodeSetAcl | Self::InodeRemoveAcl | Self::FileIoctlCompat
        )
    }

    /// BPF program for this hook on `backend`, on a kernel whose function where it enters
    /// (`bpf_lsm_<hook>`, or the `security_*` function) takes `params`: hooks whose arguments
    /// moved between kernels have one program per layout (a program reads its arguments at
    /// constant offsets).
    pub fn program(self, backend: Backend, params: &[&[u8]]) -> &'static str {
        use programs::*;
        let lsm = backend == Backend::BpfLsm;
        let pick = |on_lsm, on_function| if lsm { on_lsm } else { on_function };
        match self {
            // A leading `idmap` (the hook since 6.3) or `mnt_userns` (security_inode_setattr on
            // 6.1).
            Self::InodeSetattr if params.len() == 3 => {
                pick(INODE_SETATTR_IDMAP, FMOD_RET_INODE_SETATTR_IDMAP)
            }
            // bpf(cmd, attr, size) until 6.13, then a fourth argument, `kernel`.
            Self::Bpf if params.len() > 3 => pick(BPF_KERNEL, FMOD_RET_BPF_KERNEL),
            // perf_event_open(attr, type) until 6.11, then the check's type alone.
            Self::PerfEventOpen if params.len() == 1 => {
                pick(PERF_EVENT_OPEN_TYPE, FMOD_RET_PERF_EVENT_OPEN_TYPE)
            }
            // Their functions return nothing: no fmod_ret program attaches there.
            Self::DInstantiate if !lsm => FENTRY_D_INSTANTIATE,
            Self::FileSetFowner if !lsm => FENTRY_FILE_SET_FOWNER,
            _ => self.default_program(backend),
        }
    }
}

/// Where fp's programs enter the kernel's security checks (fp-agent's `kernel::backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// BPF LSM programs on each hook's `bpf_lsm_<hook>` stub, for every task (`lsm/<hook>`) or
    /// per session cgroup (`lsm_cgroup/<hook>`): kernels whose active LSM list has `bpf`.
    BpfLsm,
    /// fmod_ret programs on the kernel function that calls each hook's LSM chain
    /// (`security_<hook>`), for every task; fentry where it returns nothing. Any kernel with
    /// BPF trampolines, the BPF LSM active or not.
    FModRet,
}

impl Backend {
    pub const ALL: [Backend; 2] = [Backend::BpfLsm, Backend::FModRet];

    /// Its name in `fp kernel probe`, `fp status`, the audit log and `FP_BACKEND`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::BpfLsm => "bpf_lsm",
            Self::FModRet => "fmod_ret",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }
}

/// The BPF programs userspace names besides each hook's `fp_<hook>` and `fp_fmod_ret_<hook>`
/// ([`Hook::program`]).
pub mod programs {
    /// inode_setattr with its leading `idmap` argument (6.12).
    pub const INODE_SETATTR_IDMAP: &str = "fp_inode_setattr_idmap";
    /// Its fmod_ret twin, the one program on security_inode_setattr (`mnt_userns` first on 6.1).
    pub const FMOD_RET_INODE_SETATTR_IDMAP: &str = "fp_fmod_ret_inode_setattr_idmap";
    /// bpf with its trailing `kernel` argument (6.14+).
    pub const BPF_KERNEL: &str = "fp_bpf_kernel";
    pub const FMOD_RET_BPF_KERNEL: &str = "fp_fmod_ret_bpf_kernel";
    /// perf_event_open with the check's type alone (6.12; `attr` before).
    pub const PERF_EVENT_OPEN_TYPE: &str = "fp_perf_event_open_type";
    pub const FMOD_RET_PERF_EVENT_OPEN_TYPE: &str = "fp_fmod_ret_perf_event_open_type";
    /// The fentry programs of the hooks whose `security_*` function returns nothing.
    pub const FENTRY_D_INSTANTIATE: &str = "fp_fentry_d_instantiate";
    pub const FENTRY_FILE_SET_FOWNER: &str = "fp_fentry_file_set_fowner";
    /// The pass-through program `fp kernel probe` attaches to lsm/file_open; it cannot deny.
    pub const PROBE: &str = "fp_probe";
    /// Its per-cgroup twin, attached to lsm_cgroup/file_open of an empty cgroup; it allows.
    pub const PROBE_CGROUP: &str = "fp_probe_cgroup";
    /// The pass-through fmod_ret program `fp kernel probe` attaches to security_file_open.
    pub const PROBE_FMOD_RET: &str = "fp_probe_fmod_ret";
}

/// The names of the programs' maps, the one place userspace takes them from. Each is the name of
/// a `#[map]` static in fp-ebpf (aya-ebpf 0.2's `#[map(name = ...)]` takes only a literal, so the
/// statics cannot use these): fp-agent's `object_maps_are_the_named_ones` checks that the built
/// object's maps are exactly [`PINNED`](maps::PINNED) and [`UNPINNED`](maps::UNPINNED).
pub mod maps {
    pub const SESSIONS: &str = "SESSIONS";
    pub const CGROUP_SESSION: &str = "CGROUP_SESSION";
    pub const COUNTERS: &str = "COUNTERS";
    pub const HEADERS: &str = "HEADERS";
    pub const PREFIXES: &str = "PREFIXES";
    pub const INTERIOR: &str = "INTERIOR";
    pub const NAMES: &str = "NAMES";
    pub const SCOPES: &str = "SCOPES";
    pub const INODES: &str = "INODES";
    pub const EVENTS: &str = "EVENTS";
    pub const BROKER: &str = "BROKER";
    pub const PENDING: &str = "PENDING";
    pub const PROTECTED: &str = "PROTECTED";
    pub const GRANTS: &str = "GRANTS";
    /// The session whose process set each file's owner (F_SETOWN), by file address.
    pub const FOWNERS: &str = "FOWNERS";
    /// Owners set by session processes that `FOWNERS` had no room for.
    pub const FOWNERS_LOST: &str = "FOWNERS_LOST";
    /// The unix sockets served from outside each session that its policy names (`sockets`).
    pub const UNIX_PEERS: &str = "UNIX_PEERS";
    /// The block devices each session's policy names (`block_devices`).
    pub const BLOCK_DEVICES: &str = "BLOCK_DEVICES";
    /// The per-CPU scratch value of a decision: never read by userspace, nor pinned.
    pub const SCRATCH: &str = "SCRATCH";
    /// The programs' verdict cache (docs/performance.md, The verdict cache): never read by
    /// userspace, nor pinned (a new load starts with an empty one).
    pub const VERDICTS: &str = "VERDICTS";
    /// The programs' directory cache (docs/performance.md, The directory cache): likewise.
    pub const DIRS: &str = "DIRS";
    /// The directory cache's verdicts for names no name entry matches: likewise.
    pub const DIR_VERDICTS: &str = "DIR_VERDICTS";
    /// The programs' creation slot (docs/performance.md, The creation slot): likewise.
    pub const CREATED: &str = "CREATED";
    /// Which entry of the two caches is live per dentry address (docs/performance.md, The
    /// verdict cache): likewise.
    pub const OWNERS: &str = "OWNERS";

    /// The sessions' slot table ([`super::SessionSlot`]), written before each session's
    /// `SESSIONS` entry and after its removal.
    pub const SESSION_SLOTS: &str = "SESSION_SLOTS";

    /// The maps userspace pins (enforcement outlives the loader) and keeps: all but [`UNPINNED`].
    pub const PINNED: [&str; 19] = [
        SESSIONS,
        SESSION_SLOTS,
        CGROUP_SESSION,
        COUNTERS,
        HEADERS,
        PREFIXES,
        INTERIOR,
        NAMES,
        SCOPES,
        INODES,
        EVENTS,
        BROKER,
        PENDING,
        PROTECTED,
        GRANTS,
        FOWNERS,
        FOWNERS_LOST,
        UNIX_PEERS,
        BLOCK_DEVICES,
    ];

    /// The maps only the programs use, never pinned: the scratch value and the caches.
    pub const UNPINNED: [&str; 6] = [SCRATCH, VERDICTS, DIRS, DIR_VERDICTS, CREATED, OWNERS];
}

/// What an operation does to the file it touches, as hooks report it.
pub use crate::op::KernelOp;

/// `DecisionEvent::flags`: the hook had no mount (inode hooks get only a dentry), so `path` is
/// relative to the root of the file's filesystem, not to the system root.
pub const EVENT_PATH_FS_RELATIVE: u8 = 1;
/// `DecisionEvent::flags`: the kernel refused the operation (EACCES). Without it the event reports
/// an allowed operation (full audit) or a verdict an audit-mode session did not enforce.
pub const EVENT_DENIED: u8 = 2;
/// `DecisionEvent::flags` of a rename or link: what moved is a directory.
pub const EVENT_MOVE_DIR: u8 = 4;
/// `DecisionEvent::flags` of a rename: the target name existed (its file is replaced).
pub const EVENT_TARGET_EXISTS: u8 = 8;
/// `DecisionEvent::flags` of a rename: RENAME_EXCHANGE (both names stay, their content swaps).
pub const EVENT_EXCHANGE: u8 = 16;
/// `DecisionEvent::flags` of a refusal of the session boundary's floor: `ino` holds the number
/// of the device it names (the kernel's encoding, major << 20 | minor), a block device opened or
/// a device node made, rather than a file's identity.
pub const EVENT_DEVICE: u8 = 32;
/// `DecisionEvent::flags` of a refusal of the session boundary's floor: an open for writing of a
/// kernel setting (`fs_magic` names its filesystem; `ino`, `dev` the file).
pub const EVENT_KERNEL_SETTING: u8 = 64;

/// What decided an event's verdict.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A rule matched the path (an LPM or name-table entry).
    PathRule = 1,
    /// A rule matched by inode identity (the file, or a directory above it, is a rule's target).
    InodeRule = 2,
    /// The path could not be resolved completely: denied, never matched on a partial path.
    Unresolved = 3,
    /// No rule matched: the session's default for the op.
    Default = 4,
    /// The session's tables were replaced while the decision was made: its verdict under the
    /// replaced tables if they were still whole, else denied (fail closed).
    Reloaded = 5,
    /// A read, write or mmap of a file whose prompt-tier open the broker has not answered (it
    /// may have died mid-prompt, which lets the open through): denied.
    PromptPending = 6,
    /// fp protecting itself: bpf(), a signal or ptrace aimed at fp's own processes, or a change
    /// of the mount table (mount, umount, pivot_root).
    SelfProtection = 7,
    /// A prompt verdict a remembered grant of the session allowed ([`after_grant`]).
    Granted = 8,
    /// A rename or link refused because the content would gain an access under its new name, or
    /// because a prompt or defer verdict is involved ([`crate::refer`]): EXDEV.
    Refer = 9,
    /// The session boundary: ptrace, a memory or environ read, pidfd_getfd or a signal aimed at
    /// a process outside the session (the event names it: `target_pid`, `target_cgroup`), a
    /// file's signal (SIGIO) to one when a session process set the file's owner, or a child
    /// started in another cgroup (`clone3(CLONE_INTO_CGROUP)`).
    Boundary = 10,
    /// A write to a file with more than one link while the session's hardlinks are still being
    /// recorded ([`SESSION_LINKS_PENDING`]): another of its names may lie in a tree the policy
    /// keeps read-only.
    LinksPending = 11,
}

impl Reason {
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::PathRule),
            2 => Some(Self::InodeRule),
            3 => Some(Self::Unresolved),
            4 => Some(Self::Default),
            5 => Some(Self::Reloaded),
            6 => Some(Self::PromptPending),
            7 => Some(Self::SelfProtection),
            8 => Some(Self::Granted),
            9 => Some(Self::Refer),
            10 => Some(Self::Boundary),
            11 => Some(Self::LinksPending),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::PathRule => "path-rule",
            Self::InodeRule => "inode-rule",
            Self::Unresolved => "unresolved-path",
            Self::Default => "default",
            Self::Reloaded => "tables-reloaded",
            Self::PromptPending => "prompt-pending",
            Self::SelfProtection => "self-protection",
            Self::Granted => "granted",
            Self::Refer => "refer",
            Self::Boundary => "session-boundary",
            Self::LinksPending => "hardlinks-pending",
        }
    }
}

/// `SessionInfo::flags`: decide and report, but deny nothing (audit mode).
pub const SESSION_AUDIT_ONLY: u64 = 1;
/// `SessionInfo::flags`: also report allowed writes, deletes and execs (full audit).
pub const SESSION_FULL_AUDIT: u64 = 2;
/// `SessionInfo::flags`: perf events beyond the counters of processes (CPU-wide, of the kernel,
/// tracepoints) pass the session boundary's floor: the policy's `kernel_interfaces` has `perf`.
pub const SESSION_PERF: u64 = 4;
/// `SessionInfo::flags`: the files hardlinked below the trees the policy keeps read-only (writes
/// withheld, reads not) are still being looked for, after the session started: until they are in
/// the inode table, a write to any non-directory with more than one link is refused
/// ([`Reason::LinksPending`]) and no cached allow answers a decision (a cached write would
/// outlive the wait). Cleared when the complete tables replace the session's.
pub const SESSION_LINKS_PENDING: u64 = 8;
/// The `SessionInfo::flags` a session's policy sets (the others are its mode's): written anew
/// with every installation of its tables.
pub const SESSION_POLICY_FLAGS: u64 = SESSION_PERF;

/// Value of the `SESSIONS` map, keyed by the session's cgroup id; written by userspace only.
/// Replacing it switches the session to other tables in one map update (atomic reload).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionInfo {
    /// Id of the session's tables: the first field of every table key.
    pub tables: u64,
    /// `SESSION_*` flags.
    pub flags: u64,
    /// The devices of the tables' inode-table entries, a bit each
    /// ([`crate::policy::device_bit`]): a clear bit proves an `INODES` lookup on that device
    /// would find nothing, so the programs skip it (most files lie on devices no rule's target
    /// does). Written with `tables`, in the same update.
    pub inode_devices: u64,
}

/// Bytes of a unix socket's `sun_path`: an abstract name is at most one less (its leading NUL).
pub const UNIX_NAME_MAX: usize = 108;

/// Bytes of [`UnixPeerKey::name`]: [`UNIX_NAME_MAX`] rounded up to a power of two, so that a
/// program can bound a copy's length with a mask the verifier of every kernel keeps.
pub const UNIX_KEY_NAME: usize = 128;

/// Key of the `UNIX_PEERS` map: a unix socket served from outside a session that the session's
/// policy names, by the identity of its file (a socket bound to a path: `ino`, `dev`, the
/// kernel's encoding) or by its abstract name (`len` bytes of `name`, without the leading NUL,
/// the rest zero). The value is unused (1).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UnixPeerKey {
    /// The session's cgroup id.
    pub session: u64,
    pub ino: u64,
    pub dev: u32,
    pub len: u32,
    pub name: [u8; UNIX_KEY_NAME],
}

impl UnixPeerKey {
    /// The key of no socket, in `session`.
    pub const fn new(session: u64) -> Self {
        UnixPeerKey { session, ino: 0, dev: 0, len: 0, name: [0; UNIX_KEY_NAME] }
    }

    /// The key of the socket file `(ino, dev)`.
    pub const fn file(session: u64, ino: u64, dev: u32) -> Self {
        UnixPeerKey { ino, dev, ..Self::new(session) }
    }

    /// The key of the abstract name `name` (without its leading NUL); None when longer than a
    /// `sun_path` holds.
    pub fn abstract_name(session: u64, name: &[u8]) -> Option<Self> {
        if name.len() >= UNIX_NAME_MAX {
            return None;
        }
        let mut key = Self::new(session);
        key.name.get_mut(..name.len())?.copy_from_slice(name);
        key.len = name.len() as u32;
        Some(key)
    }

    /// Whether the key names a socket: an unbound one (a `socketpair` end) has no name.
    pub const fn names_a_socket(&self) -> bool {
        self.ino != 0 || self.len != 0
    }
}

/// Key of the `BLOCK_DEVICES` map: a block device a session's policy names (`block_devices`),
/// which the session boundary's floor then lets it open, by its device number (the kernel's
/// encoding, major << 20 | minor), whatever node names it. The value is unused (1).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockDeviceKey {
    /// The session's cgroup id.
    pub session: u64,
    pub rdev: u64,
}

/// Value of the `CGROUP_SESSION` cgroup storage: the session a session cgroup's attachment of the
/// per-cgroup programs serves, which those programs read without a lookup. The kernel allocates it
/// (zeroed) when the programs are attached to the cgroup; userspace writes it before any task joins
/// the cgroup, and again on every reload, as it writes `SESSIONS`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupSession {
    /// The session's cgroup id (0: not written yet).
    pub cgroup: u64,
    pub info: SessionInfo,
}

/// Value of the `COUNTERS` map, keyed by the session's cgroup id; updated atomically by the
/// programs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionCounters {
    pub denied: u64,
    /// Events that did not fit in the ring buffer (surfaced as loss records).
    pub dropped: u64,
    pub unresolved: u64,
    /// Decisions that raced with a reload of the session's tables (decided under the replaced
    /// tables while they were whole, else denied).
    pub raced_reload: u64,
    /// Opens held for the prompt broker (files marked pending). While it is 0 no file of the
    /// session is pending, and reads and writes skip the `PENDING` lookup.
    pub held: u64,
    /// Refusals at the session boundary ([`Reason::Boundary`]): outsiders reached for, kernel
    /// interfaces (a share of `denied`).
    pub boundary: u64,
}

/// A decision reported through the `EVENTS` ring buffer: every denial, and allowed writes,
/// deletes and execs of full-audit sessions.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DecisionEvent {
    pub session: u64,
    pub ino: u64,
    pub dev: u32,
    pub pid: u32,
    pub tgid: u32,
    pub uid: u32,
    pub gid: u32,
    /// Valid bytes of `path` (0 when the path was not resolved).
    pub path_len: u32,
    /// The deciding rule (`policy::NO_RULE` for the default or an unresolved path).
    pub rule_id: u32,
    /// Valid bytes of `target` (0 unless the event is a rename's or link's).
    pub target_len: u32,
    pub hook: u8,
    /// A [`Reason`] byte.
    pub reason: u8,
    /// A [`KernelOp`] byte.
    pub op: u8,
    /// `EVENT_*` flags.
    pub flags: u8,
    /// The tables' verdict, a `policy::TableVerdict` byte (Deny for an unresolved path).
    pub verdict: u8,
    pub _pad: [u8; 3],
    pub comm: [u8; 16],
    /// Of a refusal at the session boundary ([`Reason::Boundary`], or [`Reason::SelfProtection`]
    /// for a process of fp's own): the cgroup id and tgid of the process it aimed at; 0 otherwise.
    pub target_cgroup: u64,
    pub target_pid: u32,
    /// Of a refusal of a kernel setting (`EVENT_KERNEL_SETTING`): its filesystem's `s_magic`
    /// (`crate::floor::filesystem_name`); 0 otherwise.
    pub fs_magic: u32,
    /// The file the operation touches; of a rename or link, the existing name (the source).
    pub path: [u8; PATH_MAX],
    /// Of a rename or link: the new name.
    pub target: [u8; PATH_MAX],
}

/// What a remembered prompt grant covers, in the session it was made in.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GrantScope {
    /// The granted path exactly.
    Path = 1,
    /// Everything below the granted directory (not the directory itself).
    Dir = 2,
    /// Every path.
    Session = 3,
}

impl GrantScope {
    /// The grant on `path` as the bytes it matches: a grant covers an opened path when these are
    /// a prefix of the path followed by NUL. `path` grants end with the NUL, so they match
    /// exactly; `dir` grants with '/', so "/a/b" never covers "/a/bc"; `session` grants are
    /// empty. This is also the grant's key in the kernel's LPM trie, where the longest-prefix
    /// lookup of "<path>\0" finds exactly the grants that cover it.
    pub fn pattern(self, path: &[u8]) -> (&[u8], Option<u8>) {
        match self {
            Self::Path => (path, Some(0)),
            Self::Dir if path.last() == Some(&b'/') => (path, None),
            Self::Dir => (path, Some(b'/')),
            Self::Session => (&[], None),
        }
    }

    /// Whether a grant of this scope on `granted` covers `path`.
    pub fn covers(self, granted: &[u8], path: &[u8]) -> bool {
        let (prefix, end) = self.pattern(granted);
        let Some(rest) = path.strip_prefix(prefix) else {
            return false;
        };
        match end {
            None => true,
            Some(0) => rest.is_empty(),
            Some(byte) => rest.first() == Some(&byte),
        }
    }

    /// The `GRANTS` key of a grant of this scope on `path` in the session of cgroup `session`,
    /// with its prefix length in bits; None when the pattern is longer than an LPM key (such
    /// grants stay with the broker, which still answers the opens they cover).
    pub fn key(self, session: u64, path: &[u8]) -> Option<(u32, crate::policy::PrefixKeyData)> {
        let (prefix, end) = self.pattern(path);
        let len = prefix.len() + end.map_or(0, |_| 1);
        let mut key = crate::policy::PrefixKeyData::new(session, prefix)?;
        if let Some(byte) = end {
            *key.1.path.get_mut(prefix.len())? = byte;
        }
        Some((64 + 8 * len as u32, key.1))
    }
}

/// Key of the `PENDING` map: a file a session opened with a prompt or defer verdict, until the
/// broker answers (the layout of [`crate::policy::InodeKey`], by the session's cgroup id).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PendingKey {
    /// The session's cgroup id.
    pub session: u64,
    pub ino: u64,
    /// The kernel's `s_dev` encoding.
    pub dev: u32,
    pub _pad: u32,
}

/// Value of the `GRANTS` LPM trie, keyed by [`GrantScope::key`]; written by userspace only.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrantValue {
    /// CLOCK_BOOTTIME ns at which the grant ends; 0: when the session ends.
    pub expires_at: u64,
    /// A [`GrantScope`] byte.
    pub scope: u8,
    /// [`crate::policy::Op::bit`] mask of the ops the grant answers: an approval of a read does
    /// not answer the prompt of an open for reading and writing.
    pub ops: u8,
    pub _pad: [u8; 6],
}

impl GrantValue {
    pub fn new(scope: GrantScope, ops: u8, expires_at: u64) -> Self {
        GrantValue { expires_at, scope: scope as u8, ops, _pad: [0; 6] }
    }

    /// Whether the grant still applies at `now` (CLOCK_BOOTTIME ns).
    pub fn live(&self, now: u64) -> bool {
        self.expires_at == 0 || now < self.expires_at
    }

    /// The grant that lasts longer of two with the same key. The other's ops are not merged in
    /// (they may last shorter): the broker, which keeps every grant, still answers them.
    pub fn longer(self, other: GrantValue) -> GrantValue {
        if self.expires_at == 0 || (other.expires_at != 0 && self.expires_at >= other.expires_at) {
            self
        } else {
            other
        }
    }
}

/// The verdict of `op` after grants, for the BPF programs and the broker alike: a live grant
/// covering the path that answers `op` turns a prompt into allow. Nothing else changes: a deny
/// is never granted, and a defer stays with the exact evaluator (the broker), whose prompt then
/// counts as a prompt.
pub fn after_grant(
    verdict: crate::policy::TableVerdict,
    grant: Option<&GrantValue>,
    op: crate::policy::Op,
    now: u64,
) -> crate::policy::TableVerdict {
    use crate::policy::TableVerdict;
    match grant {
        Some(grant)
            if verdict == TableVerdict::Prompt && grant.live(now) && grant.ops & op.bit() != 0 =>
        {
            TableVerdict::Allow
        }
        _ => verdict,
    }
}

/// Kernel struct fields the programs read. Each becomes a read-only global `u32` in the BPF
/// object named `global`, holding the byte offset of `field` in `struct strukt`, resolved from the
/// running kernel's BTF. A dotted field walks nested members (anonymous unions included).
pub struct KernelField {
    pub global: &'static str,
    pub strukt: &'static str,
    pub field: &'static str,
}

/// The read-only global `u32` in the BPF object that holds the cgroup v2 level of session cgroups
/// (set by userspace at load time, as the [`KERNEL_FIELDS`] globals).
pub const SESSION_CGROUP_LEVEL: &str = "SESSION_CGROUP_LEVEL";

/// How many slots the sessions' slot table (`SESSION_SLOTS`) has: a power of two, four per
/// session `SESSIONS` can hold.
pub const SESSION_SLOT_COUNT: u32 = 4096;

/// The value of a slot several sessions fall in: their tasks look their session up.
pub const SLOT_SHARED: u64 = u64::MAX;

/// The slot of the sessions' slot table a cgroup id falls in: the low bits of its inode number,
/// which the kernel hands out in turn, so sessions started one after another take distinct slots.
pub const fn session_slot(cgroup: u64) -> u32 {
    (cgroup as u32) & (SESSION_SLOT_COUNT - 1)
}

/// A slot of the sessions' slot table as the programs read it: the one session whose cgroup id
/// falls in it and that session's settings, 0 when none does, or [`SLOT_SHARED`] when several
/// do (their tasks look their session up in `SESSIONS`); and a check word over it all. A task
/// whose slot names its cgroup reads its session from there with no lookup; one whose slot
/// names another id, or none, is in no session.
///
/// fp-agent rewrites a slot while programs read it, and the kernel copies a map value in
/// whatever pieces its `memcpy` takes: a slot whose check word does not match was read
/// half-written, and the task looks its session up rather than conclude anything from it. A
/// value of 0 needs no check word: the agent writes 0 into a slot only once `SESSIONS` has no
/// session in it, and an id over 0 only before the `SESSIONS` entry of the session it names,
/// so a 0 read, whole or half-written, is what the lookup would answer (and a slot going
/// between an id and [`SLOT_SHARED`], which has no zero byte, never reads 0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionSlot {
    pub value: u64,
    /// The named session's settings, as in its `SESSIONS` entry; zeros otherwise.
    pub info: SessionInfo,
    pub check: u64,
}

impl SessionSlot {
    /// What slot `slot` holds while `sessions` (cgroup ids and settings) are the sessions; of
    /// a session listed twice, its last settings.
    pub fn of(slot: u32, sessions: impl IntoIterator<Item = (u64, SessionInfo)>) -> Self {
        let (value, info) = sessions.into_iter().filter(|(id, _)| session_slot(*id) == slot).fold(
            (0, SessionInfo::default()),
            |(value, _), (id, new)| match value == 0 || value == id {
                true => (id, new),
                false => (SLOT_SHARED, SessionInfo::default()),
            },
        );
        Self::new(value, info)
    }

    fn new(value: u64, info: SessionInfo) -> Self {
        let mut slot = Self { value, info, check: 0 };
        slot.check = slot.check_word();
        slot
    }

    /// Whether the check word matches: the slot was read whole.
    #[inline(always)]
    pub fn intact(&self) -> bool {
        self.check == self.check_word()
    }

    /// The hash of the slot's words, made 0 for a slot of zeros (one never written).
    #[inline(always)]
    fn check_word(&self) -> u64 {
        use crate::check::{SEED, mix};
        let hash = |[a, b, c, d]: [u64; 4]| mix(mix(mix(mix(SEED, a), b), c), d);
        let SessionInfo { tables, flags, inode_devices } = self.info;
        hash([self.value, tables, flags, inode_devices]) ^ hash([0; 4])
    }
}

/// A kernel sequence counter the verdict cache validates its entries against: the read-only
/// global `u64` named `global` holds the address of the `sequence` of the `seqlock_t` named
/// `symbol` (from /proc/kallsyms, plus [`SEQCOUNT_SEQUENCE`]'s offset from BTF); 0 turns the
/// cache off.
pub struct SeqCounter {
    pub global: &'static str,
    pub symbol: &'static str,
}

/// `rename_lock` is taken for writing around every change of a dentry's name or parent
/// (`d_move`, `d_exchange`, splicing a disconnected dentry); `mount_lock` around every change of
/// the mount tree (mount, umount, move, propagation, namespace teardown).
pub const SEQ_COUNTERS: [SeqCounter; 2] = [
    SeqCounter { global: "RENAME_SEQ", symbol: "rename_lock" },
    SeqCounter { global: "MOUNT_SEQ", symbol: "mount_lock" },
];

/// The read-only global `u32` that holds the BTF id of `struct seqcount` ([`SEQCOUNT`]) on a
/// kernel with the kfunc [`RDONLY_CAST`] (6.2 and later), once userspace has turned the object's
/// [`RDONLY_CAST_CALL`]s into calls of it: the programs then read the [`SEQ_COUNTERS`] with one
/// load each. 0: with a `bpf_probe_read_kernel` call each (6.1).
pub const SEQCOUNT_BTF_ID: &str = "SEQCOUNT_BTF_ID";

/// The kfunc that turns an address into a read-only BTF-typed pointer: its loads are the probing
/// loads the verifier makes of a hook's typed arguments (a few instructions; a fault reads 0),
/// where `bpf_probe_read_kernel` is a helper call of ~90.
pub const RDONLY_CAST: &str = "bpf_rdonly_cast";

/// The helper number fp-ebpf calls `bpf_rdonly_cast` by: the toolchain cannot emit a kfunc call,
/// so the program calls this (no kernel helper has it) and userspace rewrites each such call
/// into the kfunc's before loading; on a kernel without the kfunc the calls stay, unreachable
/// ([`SEQCOUNT_BTF_ID`] 0), and the verifier drops them.
pub const RDONLY_CAST_CALL: i32 = 0x4650_5243;

/// The struct the [`SEQ_COUNTERS`]' addresses are cast to: its `sequence` must lie first (as
/// their addresses point at it).
pub const SEQCOUNT: (&str, &str) = ("seqcount", "sequence");

/// Where the counter lies in a `seqlock_t` (an anonymous struct whose first member is a
/// `seqcount_spinlock_t`): the offset of `sequence` in `struct seqcount_spinlock`.
pub const SEQCOUNT_SEQUENCE: (&str, &str) = ("seqcount_spinlock", "seqcount.sequence");

macro_rules! kernel_fields {
    ($($global:ident = $strukt:literal . $field:literal;)*) => {
        pub const KERNEL_FIELDS: &[KernelField] = &[
            $(KernelField { global: stringify!($global), strukt: $strukt, field: $field },)*
        ];
    };
}

kernel_fields! {
    OFF_FILE_F_PATH = "file"."f_path";
    OFF_FILE_F_INODE = "file"."f_inode";
    OFF_PATH_MNT = "path"."mnt";
    OFF_PATH_DENTRY = "path"."dentry";
    OFF_DENTRY_D_PARENT = "dentry"."d_parent";
    OFF_DENTRY_D_NAME = "dentry"."d_name";
    OFF_DENTRY_D_INODE = "dentry"."d_inode";
    OFF_QSTR_LEN = "qstr"."len";
    OFF_QSTR_NAME = "qstr"."name";
    OFF_INODE_I_INO = "inode"."i_ino";
    OFF_INODE_I_MODE = "inode"."i_mode";
    OFF_INODE_I_NLINK = "inode"."__i_nlink";
    OFF_INODE_I_SB = "inode"."i_sb";
    OFF_INODE_I_RDEV = "inode"."i_rdev";
    OFF_SUPER_BLOCK_S_DEV = "super_block"."s_dev";
    OFF_SUPER_BLOCK_S_MAGIC = "super_block"."s_magic";
    OFF_VFSMOUNT_MNT_ROOT = "vfsmount"."mnt_root";
    OFF_MOUNT_MNT = "mount"."mnt";
    OFF_MOUNT_MNT_PARENT = "mount"."mnt_parent";
    OFF_MOUNT_MNT_MOUNTPOINT = "mount"."mnt_mountpoint";
    OFF_MOUNT_MNT_NS = "mount"."mnt_ns";
    OFF_MNT_NAMESPACE_NS = "mnt_namespace"."ns";
    OFF_NS_COMMON_INUM = "ns_common"."inum";
    OFF_FILE_F_MODE = "file"."f_mode";
    OFF_FILE_F_FLAGS = "file"."f_flags";
    OFF_LINUX_BINPRM_FILE = "linux_binprm"."file";
    OFF_TASK_STRUCT_TGID = "task_struct"."tgid";
    OFF_INODE_I_FLAGS = "inode"."i_flags";
    OFF_SUPER_BLOCK_S_FLAGS = "super_block"."s_flags";
    OFF_TASK_STRUCT_CGROUPS = "task_struct"."cgroups";
    OFF_CSS_SET_DFL_CGRP = "css_set"."dfl_cgrp";
    OFF_CGROUP_LEVEL = "cgroup"."level";
    OFF_CGROUP_ANCESTORS = "cgroup"."ancestors";
    OFF_CGROUP_KN = "cgroup"."kn";
    OFF_KERNFS_NODE_ID = "kernfs_node"."id";
    OFF_FILE_F_OWNER = "file"."f_owner";
    OFF_PROC_INODE_VFS_INODE = "proc_inode"."vfs_inode";
    OFF_PROC_INODE_PDE = "proc_inode"."pde";
    OFF_PROC_INODE_SYSCTL = "proc_inode"."sysctl";
    OFF_SOCKET_SK = "socket"."sk";
    OFF_SOCK_SK_CGRP_DATA = "sock"."sk_cgrp_data";
    OFF_SOCK_CGROUP_DATA_CGROUP = "sock_cgroup_data"."cgroup";
    OFF_SOCK_SK_PEER_PID = "sock"."sk_peer_pid";
    OFF_PID_NUMBERS = "pid"."numbers";
    OFF_UPID_NR = "upid"."nr";
    OFF_UNIX_SOCK_ADDR = "unix_sock"."addr";
    OFF_UNIX_SOCK_PATH = "unix_sock"."path";
    OFF_UNIX_SOCK_PEER = "unix_sock"."peer";
    OFF_UNIX_ADDRESS_LEN = "unix_address"."len";
    OFF_UNIX_ADDRESS_NAME = "unix_address"."name";
    OFF_INODE_I_PRIVATE = "inode"."i_private";
    OFF_KERNFS_NODE_PRIV = "kernfs_node"."priv";
    OFF_CGROUP_ROOT = "cgroup"."root";
    OFF_CGROUP_ROOT_FLAGS = "cgroup_root"."flags";
    OFF_TASK_STRUCT_NSPROXY = "task_struct"."nsproxy";
    OFF_NSPROXY_CGROUP_NS = "nsproxy"."cgroup_ns";
    OFF_CGROUP_NAMESPACE_ROOT_CSET = "cgroup_namespace"."root_cset";
}

/// Kernel struct fields only some supported kernels have: the read-only global holds the byte
/// offset plus one, and 0 where the running kernel lacks the field.
pub const OPTIONAL_FIELDS: &[KernelField] = &[
    // A file's owner (F_SETOWN) lies inside `struct file` at `f_owner` on 6.1; later kernels
    // allocate it apart (`file.f_owner` is a pointer) and point back at the file from it.
    KernelField { global: "OFF_FOWN_STRUCT_FILE", strukt: "fown_struct", field: "file" },
];

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all of these are repr(C), Copy, with explicit padding and no invalid bit patterns.
    unsafe impl aya::Pod for super::SessionInfo {}
    unsafe impl aya::Pod for super::CgroupSession {}
    unsafe impl aya::Pod for super::SessionCounters {}
    unsafe impl aya::Pod for super::DecisionEvent {}
    unsafe impl aya::Pod for super::GrantValue {}
    unsafe impl aya::Pod for super::PendingKey {}
    unsafe impl aya::Pod for super::UnixPeerKey {}
    unsafe impl aya::Pod for super::BlockDeviceKey {}
    unsafe impl aya::Pod for super::SessionSlot {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::size_of;

    #[test]
    fn layouts_have_no_implicit_padding() {
        assert_eq!(size_of::<SessionInfo>(), 24);
        assert_eq!(size_of::<UnixPeerKey>(), 8 + 8 + 4 + 4 + UNIX_KEY_NAME);
        assert_eq!(size_of::<CgroupSession>(), 32);
        assert_eq!(size_of::<SessionSlot>(), 40);
        assert_eq!(size_of::<SessionCounters>(), 48);
        assert_eq!(size_of::<GrantValue>(), 16);
        assert_eq!(size_of::<DecisionEvent>(), 8 + 8 + 8 * 4 + 5 + 3 + 16 + 16 + 2 * PATH_MAX);
    }

    /// A slot names its one session, exactly, with its settings: another id in it finds no
    /// session without a lookup, two sessions in it send both to the lookup, and each session's
    /// end gives the slot back to those left.
    #[test]
    fn each_slot_names_exactly_the_sessions_in_it() {
        let (a, b, c) = (0x1_0000_0007, 0x2_0000_1007, 0x1_0000_0008);
        let info = |tables| SessionInfo { tables, flags: 2, inode_devices: 4 };
        assert_eq!(session_slot(a), 7);
        assert_eq!(session_slot(b), 7, "the same low bits, another id");
        let slot =
            |n, sessions: &[(u64, SessionInfo)]| SessionSlot::of(n, sessions.iter().copied());
        assert_eq!(slot(7, &[]), SessionSlot::default(), "no session: zeros");
        let named = slot(7, &[(a, info(1)), (c, info(2))]);
        assert_eq!((named.value, named.info), (a, info(1)));
        assert_eq!(slot(7, &[(a, info(1)), (a, info(3))]).info, info(3), "a session reloaded");
        let shared = slot(7, &[(c, info(2)), (b, info(1)), (a, info(1))]);
        assert_eq!((shared.value, shared.info), (SLOT_SHARED, SessionInfo::default()));
        assert_eq!(slot(8, &[(c, info(2)), (b, info(1)), (a, info(1))]).value, c);
        assert!(named.intact() && shared.intact() && SessionSlot::default().intact());
        let torn = |f: fn(&mut SessionSlot)| {
            let mut slot = named;
            f(&mut slot);
            !slot.intact()
        };
        assert!(torn(|s| s.value = SLOT_SHARED), "the value of one write, the rest of another");
        assert!(torn(|s| s.value &= 0xffff_ffff), "half a word");
        assert!(torn(|s| s.info.tables = 3), "another session's tables");
        assert!(torn(|s| s.info.inode_devices = 0));
    }

    #[test]
    fn hooks_and_ops_round_trip() {
        for h in Hook::ALL {
            assert_eq!(Hook::from_u8(*h as u8), Some(*h));
        }
        assert_eq!(Hook::from_u8(0), None);
        assert_eq!(KernelOp::from_u8(KernelOp::Exec as u8), Some(KernelOp::Exec));
        assert_eq!(KernelOp::from_u8(4), None);
        for op in [KernelOp::Read, KernelOp::Write, KernelOp::Delete] {
            assert_eq!(op.policy_op() as u8, op as u8, "{op:?} shares the policy's encoding");
            assert_eq!(KernelOp::of_policy(op.policy_op()), op);
        }
        assert_eq!(KernelOp::Exec.policy_op(), crate::policy::Op::Read);
        let (lsm, fmod_ret) = (Backend::BpfLsm, Backend::FModRet);
        let unlink: &[&[u8]] = &[b"dir", b"dentry"];
        assert_eq!(Hook::PathUnlink.program(lsm, unlink), "fp_path_unlink");
        assert_eq!(Hook::PathUnlink.program(fmod_ret, unlink), "fp_fmod_ret_path_unlink");
        let setattr_6_1: &[&[u8]] = &[b"dentry", b"attr"];
        let setattr_6_12: &[&[u8]] = &[b"idmap", b"dentry", b"attr"];
        let security_setattr_6_1: &[&[u8]] = &[b"mnt_userns", b"dentry", b"attr"];
        assert_eq!(Hook::InodeSetattr.program(lsm, setattr_6_1), "fp_inode_setattr");
        assert_eq!(Hook::InodeSetattr.program(lsm, setattr_6_12), "fp_inode_setattr_idmap");
        assert_eq!(
            Hook::InodeSetattr.program(fmod_ret, security_setattr_6_1),
            "fp_fmod_ret_inode_setattr_idmap"
        );
        assert_eq!(Hook::DInstantiate.program(fmod_ret, &[]), "fp_fentry_d_instantiate");
        assert_eq!(
            Hook::BprmCheckSecurity.program(fmod_ret, &[]),
            "fp_fmod_ret_bprm_check_security"
        );
        // The mount hooks have one prototype on every supported kernel, and are mandatory.
        let mount: &[&[u8]] = &[b"dev_name", b"path", b"type", b"flags", b"data"];
        assert_eq!(Hook::SbMount.program(lsm, mount), "fp_sb_mount");
        assert_eq!(Hook::MoveMount.program(lsm, &[b"from_path", b"to_path"]), "fp_move_mount");
        for backend in Backend::ALL {
            assert_eq!(Backend::from_name(backend.name()), Some(backend));
        }
        assert!(!Hook::SbKernMount.is_optional() && !Hook::SbPivotroot.is_optional());
    }

    /// Whether the LPM trie's lookup of `path` (its bytes and a NUL, as the programs look it up)
    /// finds the key of a grant: the stored bits are a prefix of the looked-up bits.
    fn lpm_matches(grant: (u32, crate::policy::PrefixKeyData), session: u64, path: &[u8]) -> bool {
        let mut lookup = path.to_vec();
        lookup.push(0);
        let (bits, key) = grant;
        let bytes = (bits / 8 - 8) as usize;
        key.id == session
            && lookup.len().min(crate::policy::MAX_PREFIX) >= bytes
            && key.path[..bytes] == lookup[..bytes]
    }

    #[test]
    fn grants_cover_their_scope_only_and_their_keys_match_the_same_paths() {
        let cases: &[(GrantScope, &[u8], &[u8], bool)] = &[
            (GrantScope::Path, b"/ws/s/key", b"/ws/s/key", true),
            (GrantScope::Path, b"/ws/s/key", b"/ws/s/key2", false),
            (GrantScope::Path, b"/ws/s/key", b"/ws/s", false),
            (GrantScope::Dir, b"/ws/s", b"/ws/s/other", true),
            (GrantScope::Dir, b"/ws/s", b"/ws/s/sub/deeper", true),
            (GrantScope::Dir, b"/ws/s", b"/ws/sx", false),
            (GrantScope::Dir, b"/ws/s", b"/ws/s", false),
            (GrantScope::Dir, b"/", b"/etc/x", true),
            (GrantScope::Session, b"", b"/anything", true),
        ];
        for &(scope, granted, path, covered) in cases {
            let show = (scope, core::str::from_utf8(granted), core::str::from_utf8(path));
            assert_eq!(scope.covers(granted, path), covered, "{show:?}");
            let key = scope.key(7, granted).unwrap();
            assert_eq!(lpm_matches(key, 7, path), covered, "{show:?}");
            assert!(!lpm_matches(key, 8, path), "another session: {show:?}");
        }
        // Paths longer than a key: a dir grant still matches their first bytes, a path grant's
        // own key cannot be stored.
        let long = [b'/'; 600];
        assert!(lpm_matches(GrantScope::Dir.key(7, b"/").unwrap(), 7, &long));
        assert!(GrantScope::Path.key(7, &long).is_none());
        assert!(GrantScope::Path.key(7, &long[..crate::policy::MAX_PREFIX]).is_none());
        assert!(GrantScope::Path.key(7, &long[..crate::policy::MAX_PREFIX - 1]).is_some());
        assert_eq!(GrantScope::Session.key(7, b"ignored").unwrap().0, 64);
    }

    #[test]
    fn only_live_grants_of_the_op_turn_prompts_into_allows() {
        use crate::policy::{Op, TableVerdict::*};
        let read = Op::Read.bit();
        let until_end = GrantValue::new(GrantScope::Dir, read, 0);
        let until_10 = GrantValue::new(GrantScope::Dir, read, 10);
        assert_eq!(after_grant(Prompt, Some(&until_end), Op::Read, u64::MAX), Allow);
        assert_eq!(after_grant(Prompt, Some(&until_10), Op::Read, 9), Allow);
        assert_eq!(after_grant(Prompt, Some(&until_10), Op::Read, 10), Prompt);
        assert_eq!(after_grant(Prompt, Some(&until_end), Op::Write, 0), Prompt, "a read grant");
        assert_eq!(after_grant(Prompt, None, Op::Read, 0), Prompt);
        for verdict in [Allow, Deny, Defer] {
            assert_eq!(after_grant(verdict, Some(&until_end), Op::Read, 0), verdict);
        }
        assert_eq!(until_10.longer(until_end), until_end);
        assert_eq!(until_end.longer(until_10), until_end);
        assert_eq!(until_10.longer(GrantValue::new(GrantScope::Dir, read, 20)).expires_at, 20);
    }

    #[test]
    fn walk_bounds_are_masks() {
        assert!(PATH_MAX.is_power_of_two());
    }
}
