//! The maps of the decisions (userspace finds every map by name: fp_common::kernel::maps; a
//! module with maps of its own keeps them beside its programs, as crate::sigio) and the per-CPU
//! scratch value.
use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, LpmTrie, LruHashMap, PerCpuArray, RingBuf, lpm_trie::Key},
};
use fp_common::{
    kernel::{CgroupSession, GrantValue, PATH_MAX, SessionCounters, SessionInfo},
    policy::{
        Evaluation, InodeKey, InodeValue, NameKey, NameValue, PrefixKeyData, PrefixValue, ScopeKey,
        ScopeValue, TableHeader,
    },
    refer::MoveSide,
};

use crate::{
    cache::{Cached, OWNER_BITS, Owner},
    created::Created,
    decide::Outcome,
    dirs::{DirCached, Name},
    moves::MoveNames,
    walk::Walk,
};

#[map]
pub(crate) static SESSIONS: HashMap<u64, SessionInfo> = HashMap::with_max_entries(1024, 0);

/// The session each session cgroup's attachment of the `#[lsm_cgroup]` programs serves, in the
/// cgroup's own storage. Its successor, `BPF_MAP_TYPE_CGRP_STORAGE`, needs Linux 6.2.
#[expect(deprecated, reason = "the storage lsm_cgroup programs can read on Linux 6.1")]
#[map]
pub(crate) static CGROUP_SESSION: aya_ebpf::maps::CgroupStorage<CgroupSession> =
    aya_ebpf::maps::CgroupStorage::new();

#[map]
pub(crate) static COUNTERS: HashMap<u64, SessionCounters> = HashMap::with_max_entries(1024, 0);

/// The compiled tables (fp_common::policy), keyed by tables id: two sets per session while a
/// reload swaps them.
#[map]
pub(crate) static HEADERS: HashMap<u64, TableHeader> = HashMap::with_max_entries(2048, 0);

#[map]
pub(crate) static PREFIXES: LpmTrie<PrefixKeyData, PrefixValue> =
    LpmTrie::with_max_entries(65536, 1); // BPF_F_NO_PREALLOC

#[map]
pub(crate) static NAMES: HashMap<NameKey, NameValue> = HashMap::with_max_entries(16384, 0);

#[map]
pub(crate) static SCOPES: HashMap<ScopeKey, ScopeValue> = HashMap::with_max_entries(4096, 0);

#[map]
pub(crate) static INODES: HashMap<InodeKey, InodeValue> = HashMap::with_max_entries(65536, 0);

/// Directories with a rule anchored at or below them, as exact `dir\0` keys by tables id: a
/// directory moved from or to one is refused (fp_common::refer).
#[map]
pub(crate) static INTERIOR: LpmTrie<PrefixKeyData, u8> = LpmTrie::with_max_entries(65536, 1); // BPF_F_NO_PREALLOC

#[map]
pub(crate) static EVENTS: RingBuf = RingBuf::with_byte_size(1 << 22, 0);

/// The prompt broker's last heartbeat, CLOCK_BOOTTIME ns (0: no broker).
#[map]
pub(crate) static BROKER: Array<u64> = Array::with_max_entries(1, 0);

/// Files a session opened with a prompt or defer verdict, by (session cgroup id, inode), until
/// the broker has answered: reads, writes and mmaps of them are denied meanwhile, so a broker
/// that dies mid-prompt (fanotify then lets the open through) gives no data away.
#[map]
pub(crate) static PENDING: HashMap<InodeKey, u64> = HashMap::with_max_entries(4096, 0);

/// Remembered prompt grants, by session cgroup id and `GrantScope::key` pattern: a prompt
/// verdict of an open or exec that a live grant covers is allowed here (`after_grant`), without a
/// pending entry. Grants whose pattern is longer than a key stay with the broker.
#[map]
pub(crate) static GRANTS: LpmTrie<PrefixKeyData, GrantValue> = LpmTrie::with_max_entries(4096, 1); // BPF_F_NO_PREALLOC

/// fp's own processes (the daemon, `fp run`), by tgid: sessions may not signal or trace them.
#[map]
pub(crate) static PROTECTED: HashMap<u32, u8> = HashMap::with_max_entries(256, 0);

/// The verdict cache (crate::cache): one entry per dentry address slot, the slot's latest fill
/// (a fill is plain stores: no allocation, lock or eviction list, as an LRU hash's update takes).
#[map]
pub(crate) static VERDICTS: Array<Cached> = Array::with_max_entries(1 << OWNER_BITS, 0);

/// The directory cache (crate::dirs), by directory dentry address.
#[map]
pub(crate) static DIRS: LruHashMap<u64, DirCached> = LruHashMap::with_max_entries(8192, 0);

/// The directory cache's verdicts for names no name entry can match (crate::dirs), by the
/// directory's slot (as [`VERDICTS`]), each under its directory entry's stamp.
#[map]
pub(crate) static DIR_VERDICTS: Array<Cached> = Array::with_max_entries(1 << OWNER_BITS, 0);

/// Which entry of both caches is live for each dentry address slot (crate::cache::Owner): the
/// verdict cache's and the directory cache's owner of a slot side by side.
#[map]
pub(crate) static OWNERS: Array<[Owner; 2]> = Array::with_max_entries(1 << OWNER_BITS, 0);

/// The creation slot (crate::created), per CPU.
#[map]
pub(crate) static CREATED: PerCpuArray<Created> = PerCpuArray::with_max_entries(1, 0);

/// Per-CPU scratch space: too large for the 512-byte BPF stack.
///
/// BPF programs run with migration disabled but may be preempted, so on a fully preemptible
/// kernel another task can run one of these programs on this CPU in the middle of a decision and
/// overwrite the scratch. `generation` is bumped by every decision; one that finds it changed
/// when it is done was interleaved with another and fails closed.
#[repr(C)]
pub(crate) struct Scratch {
    pub(crate) generation: u64,
    pub(crate) walk: Walk,
    pub(crate) eval: Evaluation,
    /// The resolved path is written backwards so that it ends at `PATH_MAX` (where a NUL sits);
    /// twice PATH_MAX so that bounded writes never leave the buffer.
    pub(crate) path: [u8; 2 * PATH_MAX],
    /// A move's source path (`other[..other_len]`) while its target is walked.
    pub(crate) other: [u8; PATH_MAX],
    pub(crate) other_len: u64,
    /// What [`check`] decided per op.
    pub(crate) outcomes: [Outcome; 3],
    /// The names of a move (crate::moves).
    pub(crate) mv: MoveNames,
    /// A move's source and target as the REFER rule reads them, and their outcomes per op.
    pub(crate) sides: [MoveSide; 2],
    pub(crate) side_outcomes: [[Outcome; 3]; 2],
    /// [`below`]'s answer: a rule is anchored at or below the directory.
    pub(crate) anchored: u64,
    pub(crate) prefix_key: Key<PrefixKeyData>,
    /// What the last evaluation's LPM lookup found (crate::tables::LPM_UNKNOWN and the like),
    /// for the directory cache's fill.
    pub(crate) lpm_state: u64,
    pub(crate) lpm: PrefixValue,
    pub(crate) name_key: NameKey,
    /// A verdict cache entry being checked or filled (crate::cache).
    pub(crate) entry: Cached,
    /// Where [`crate::cache`] turns kernel pointers into plain numbers (see `cache::number`).
    pub(crate) number: u64,
    /// The caches' fills on this CPU, for their tickets (crate::cache::Owner).
    pub(crate) fills: u64,
    /// A directory cache entry being used or filled (crate::dirs).
    pub(crate) dir: DirCached,
    /// The name a decision looks up in the directory cache, as the program read it.
    pub(crate) name: Name,
    /// The check that no name entry matches the name (crate::dirs): the next lookup, and where
    /// the check stands (here, not on the stack: the verifier would follow every value).
    pub(crate) name_from: u64,
    pub(crate) name_state: u64,
    /// This CPU's copy of the header of the tables `header_tables` (crate::tables::header).
    pub(crate) header_tables: u64,
    pub(crate) header: TableHeader,
}

#[map]
pub(crate) static SCRATCH: PerCpuArray<Scratch> = PerCpuArray::with_max_entries(1, 0);
