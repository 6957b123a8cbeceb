//! A directory cache entry (crate::dirs) and the name a decision reads for it.
use fp_common::policy::{DirContext, MAX_PREFIX, OpEntry, PrefixValue};

use fp_common::check::{SEED, mix};

use crate::state::entry::Stamp;

/// One directory's share of its names' decisions; plain integers, as every map value.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct DirCached {
    pub(crate) check: u64,
    pub(crate) stamp: Stamp,
    pub(crate) local_state: u64,
    /// The longest LPM match of every name in the directory (`crate::tables::LPM_NONE`, or
    /// `LPM_FOUND` and `lpm`), or `crate::tables::LPM_UNKNOWN` when a key lies at or below the directory.
    pub(crate) lpm_state: u64,
    /// The walk's `up` and `local_up` for a name in the directory.
    pub(crate) up: [OpEntry; 3],
    pub(crate) local_up: [OpEntry; 3],
    pub(crate) context: DirContext,
    pub(crate) lpm: PrefixValue,
    /// The directory's path, `context.cursor - 1` bytes.
    pub(crate) path: [u8; MAX_PREFIX],
}

const WORDS: usize = core::mem::size_of::<DirCached>() / 8;

impl DirCached {
    /// A hash of every word after `check`.
    #[inline(always)]
    pub(crate) fn check_word(&self) -> u64 {
        let words = self as *const DirCached as *const u64;
        (1..WORDS).fold(SEED, |h, i| {
            // SAFETY: i < WORDS words of the value.
            mix(h, unsafe { core::ptr::read_volatile(words.add(i)) })
        })
    }
}

/// What a decision in a directory reads of its name for [`crate::dirs::fp_dir_resolve`] (which, a global
/// function, gets plain numbers only): read by the program with plain loads from the hook's typed
/// pointers ([`crate::kernel::load`]), after the sequences the decision runs under.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Name {
    pub(crate) seqs: u64,
    pub(crate) parent: u64,
    /// The parent's inode, which the directory's entry must still name.
    pub(crate) parent_inode: u64,
    /// The name's own inode (0: a name not created yet).
    pub(crate) inode: u64,
    /// The identity events report: the name's inode's, or its directory's for a name not created
    /// yet (the walk's first positive dentry).
    pub(crate) ino: u64,
    pub(crate) dev: u64,
    pub(crate) len: u64,
    pub(crate) name: u64,
}
