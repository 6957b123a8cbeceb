//! The decisions' state, the floor of fp-ebpf: the per-CPU scratch value and the state of each
//! concept it holds (the walk's, the caches' entries, a move's names). Its types are here, below
//! the logic of each concept, because every decision passes the one scratch value through them
//! all: the walk, the tables, the caches and decide import this, never the other way. Every map
//! lives beside the module that owns it (userspace finds each by name: fp_common::kernel::maps).
use aya_ebpf::{
    macros::map,
    maps::{PerCpuArray, lpm_trie::Key},
};
use fp_common::{
    kernel::{KernelOp, PATH_MAX},
    policy::{Evaluation, NameKey, Op, PrefixKeyData, PrefixValue, TableHeader},
    refer::MoveSide,
};

use crate::outcome::Outcome;

pub(crate) mod dir;
pub(crate) mod entry;
pub(crate) mod moves;
pub(crate) mod walk;

use self::{
    dir::{DirCached, Name},
    entry::Cached,
    moves::MoveNames,
    walk::Walk,
};

/// Per-CPU scratch space: too large for the 512-byte BPF stack.
///
/// BPF programs run with migration disabled but may be preempted, so on a fully preemptible
/// kernel another task can run one of these programs on this CPU in the middle of a decision and
/// overwrite the scratch. `generation` counts its writers, the decisions ([`crate::writers`],
/// [`crate::decide::Decision`]): one that finds it changed when it checks, or found another in
/// progress as it began (which may write again whenever it resumes), fails closed.
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
    /// What [`crate::decide::check`] decided per op.
    pub(crate) outcomes: [Outcome; 3],
    /// What they allow, for the caches ([`crate::cache::allowed_ops`], set by `fp_check`).
    pub(crate) allowed: (u64, u64),
    /// A decision's outcome and the op it reports, once grants and both ops are weighed
    /// (crate::decide::decide).
    pub(crate) decided: (Outcome, KernelOp),
    /// The names of a move (crate::moves).
    pub(crate) mv: MoveNames,
    /// A move's source and target as the REFER rule reads them, and their outcomes per op.
    pub(crate) sides: [MoveSide; 2],
    pub(crate) side_outcomes: [[Outcome; 3]; 2],
    /// `crate::moves::below`'s answer: a rule is anchored at or below the directory.
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

/// The outcome of `op` that [`crate::decide::check`] left in the scratch value, read back as the verifier
/// sees map memory: unknown values, so the paths that computed them merge (the stack would keep
/// each combination of constants apart and verify everything after it once per combination).
#[inline(always)]
pub(crate) fn outcome_of(s: *const Scratch, op: Op) -> Outcome {
    // SAFETY: this CPU's scratch value, written by `check` with valid values.
    unsafe { core::ptr::read_volatile(op.at(&(*s).outcomes)) }
}
