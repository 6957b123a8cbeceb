//! The kernel-side decision core: the table types the policy compiler fills and the BPF programs
//! read, and [`evaluate`], the one function that turns table hits into a verdict.
//!
//! Semantics (the compiler in `fp_agent::policy` guarantees them):
//! - every table entry carries, per op, a `rank`; among all entries that match a path the one with
//!   the highest rank decides. The rank encodes layer (floors above user rules above the runtime
//!   base), tier, specificity and strictness, so "strictest tier wins" (schema v1) and "most
//!   specific glob wins, strictest on a tie" (schema v2) are both just "highest rank wins";
//! - an entry whose verdict is [`TableVerdict::Defer`] stands for a rule the kernel cannot match
//!   exactly: if it outranks every decided hit the answer is Defer ("ask userspace");
//! - no hit at all gives the session's default verdict for the op (rank 0).
//!
//! `evaluate` is written for the BPF verifier: constant loop bounds, no recursion, no panicking
//! operations, no allocation and a small stack.
mod evaluation;
mod names;
mod tables;
mod verdict;

pub use evaluation::{
    DirContext, Evaluation, MAX_STEPS, Unmatched, evaluate, evaluate_all, evaluate_seeded,
    unmatched, unmatched_step,
};
pub use names::{NameKey, NameKind, NameSlot, NameValue};
pub use tables::{
    HEADER_BASENAMES, HEADER_DIRNAMES, InodeKey, InodeValue, Lookup, NAME_FILTER_WORDS, PathBytes,
    PrefixKeyData, PrefixValue, RuleTables, ScopeKey, ScopeValue, TableHeader, Unreadable,
    device_bit, may_have_inode,
};
pub use verdict::{Decisions, OpEntry, TableDecision, TableVerdict};

/// Longest path the kernel hands to [`evaluate`] (PATH_MAX, without the NUL).
pub const MAX_PATH: usize = 4096;
/// Bytes of path stored in an LPM key: 256 bytes of key data minus the 8-byte session id.
pub const MAX_PREFIX: usize = 248;
/// Longest single component (NAME_MAX).
pub const MAX_COMPONENT: usize = 255;
/// Longest name, suffix or prefix stored in the name table.
pub const MAX_NAME: usize = 64;
/// Components the component-name lookups inspect: as many as a path of [`MAX_PATH`] bytes can
/// have, so every path the kernel resolves is evaluated in full (the bound exists for the
/// verifier; a deeper path would defer).
pub const MAX_DEPTH: usize = MAX_PATH / 2;
/// Rules sharing one name-table key; more become defer entries on their scope.
pub const NAME_SLOTS: usize = 4;
/// `rule_id` of a decision made by the session default rather than a rule.
pub const NO_RULE: u32 = u32::MAX;
/// Scope id meaning "anywhere" (no prefix check).
pub const ROOT_SCOPE: u16 = 0;

pub use crate::op::Op;

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all of these are repr(C), Copy, contain only integers and byte arrays, and have no
    // implicit padding (asserted below).
    unsafe impl aya::Pod for super::TableHeader {}
    unsafe impl aya::Pod for super::OpEntry {}
    unsafe impl aya::Pod for super::PrefixKeyData {}
    unsafe impl aya::Pod for super::PrefixValue {}
    unsafe impl aya::Pod for super::NameKey {}
    unsafe impl aya::Pod for super::NameSlot {}
    unsafe impl aya::Pod for super::NameValue {}
    unsafe impl aya::Pod for super::ScopeKey {}
    unsafe impl aya::Pod for super::ScopeValue {}
    unsafe impl aya::Pod for super::InodeKey {}
    unsafe impl aya::Pod for super::InodeValue {}
}

// No implicit padding: each size is the sum of its fields.
const _: () = {
    use core::mem::size_of;
    assert!(size_of::<TableHeader>() == 3 + 1 + 4 + 4 * 8 + 8 * NAME_FILTER_WORDS);
    assert!(size_of::<OpEntry>() == 4 + 4 + 1 + 3);
    assert!(size_of::<PrefixKeyData>() == 8 + MAX_PREFIX);
    assert!(size_of::<PrefixKeyData>() == 256);
    assert!(size_of::<PrefixValue>() == 3 * 12 + 4);
    assert!(size_of::<NameKey>() == 8 + 1 + 1 + 6 + MAX_NAME);
    assert!(size_of::<NameSlot>() == 4 + 4 + 2 + 1 + 1);
    assert!(size_of::<NameValue>() == 4 + NAME_SLOTS * 12);
    assert!(size_of::<ScopeKey>() == 8 + 2 + 6);
    assert!(size_of::<ScopeValue>() == 2 + 6 + 2 * MAX_PREFIX);
    assert!(size_of::<InodeKey>() == 8 + 8 + 4 + 4);
    assert!(size_of::<InodeValue>() == 6 * 12);
};
