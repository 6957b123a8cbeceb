//! The verdict cache: which ops a session's tables allow on a (mount, dentry), so that repeated
//! decisions on one file skip the walk and the evaluation. An entry is used only while nothing
//! that decided it can have changed, checked the way the kernel checks its own lockless walks:
//!
//! - names and parents: `rename_lock`'s sequence is the one read before the walk (every
//!   `d_move`/`d_exchange` bumps it; LSM hooks run before the operation, so a fill that raced a
//!   rename stored the old sequence and never matches again);
//! - the mount tree: `mount_lock`'s sequence, likewise (mount, umount, propagation, namespace
//!   teardown, automounts);
//! - the dentry itself: it must still point to the inode it had. A freed dentry's memory can come
//!   back as another file's dentry without any rename; it gets its inode through `d_instantiate`,
//!   whose program ([`forget`]) retires the address's entries first (see [`Owner`]: one array
//!   read, no hash lookup, on every dentry of the host). Negative dentries (no inode) are never
//!   cached, since they can come back as other negative dentries without that hook;
//! - the tables: the entry names its tables id (random, never reused; a reload installs a new one);
//! - `/proc/self`: a walk that met a procfs directory that may be some task's own `/proc/<tgid>`
//!   is named after the task, so it is not cached;
//! - time: entries live [`TTL_JIFFIES`], so a 32-bit sequence cannot wrap back to a stored value;
//! - torn reads: a map value can be rewritten while another CPU reads it, so every entry carries
//!   a check word over all its fields, and one that does not match is a miss.
//!
//! Only allows are cached: a refusal is reported with its path, so it always takes the walk.
//! An entry also says which ops the inode hooks (no mount: `inode_setattr`, xattrs) allow on the
//! dentry, when the walk that filled it crossed the file's filesystem root as its first mount
//! root: up to there it offered exactly the dentries an inode hook's walk offers. Inode hooks
//! only read entries (the same checks apply; the mount does not matter to them), so an
//! `open` followed by `fchown`, `fchmod` and `utimensat` walks once.
//! Grants, pending prompts and the broker are applied after the cache, as after a walk.
use aya_ebpf::{macros::map, maps::Array};
use fp_common::policy::{Op, TableVerdict};

use crate::{
    kernel::{MOUNT_SEQ, OFF_DENTRY_D_INODE, RENAME_SEQ, global, load, off, read_sequence},
    outcome::by_identity,
    state::{
        SCRATCH, Scratch,
        entry::{Cache, Cached, OWNER_BITS, Stamp, retire, slot},
        outcome_of,
        walk::{LOCAL_KNOWN, NO_MOUNT},
    },
};

/// The verdict cache (crate::cache): one entry per dentry address slot, the slot's latest fill
/// (a fill is plain stores: no allocation, lock or eviction list, as an LRU hash's update takes).
#[map]
pub(crate) static VERDICTS: Array<Cached> = Array::with_max_entries(1 << OWNER_BITS, 0);

/// Both sequences, read before a walk; None while either is odd (a writer is inside) or when
/// userspace found no counters (the cache is off).
#[inline(always)]
pub(crate) fn sequences() -> Option<u64> {
    Some((sequence(&RENAME_SEQ)? as u64) << 32 | sequence(&MOUNT_SEQ)? as u64)
}

/// Whether `rename_lock`'s sequence still reads as in `seqs` (from [`sequences`]): no dentry was
/// moved or renamed since, so a name read after `seqs` is the one the dentry had then (mounts do
/// not change names).
#[inline(always)]
pub(crate) fn unrenamed(seqs: u64) -> bool {
    sequence(&RENAME_SEQ) == Some((seqs >> 32) as u32)
}

/// The sequence at the address in `counter` (one of the globals [`sequences`] reads); None while
/// it is odd or when userspace found no counter.
#[inline(always)]
fn sequence(counter: &u64) -> Option<u32> {
    let at = global(counter);
    if at == 0 {
        return None;
    }
    let value = read_sequence(at)?;
    (value & 1 == 0).then_some(value)
}

/// `pointer` as a plain number: the verifier refuses arithmetic (the check word) on typed kernel
/// pointers such as a hook's dentry argument, but what comes back from map memory is a number
/// (about which the compiler knows nothing either: see `dirs::resolve`).
#[inline(always)]
pub(crate) fn number(s: *mut Scratch, pointer: u64) -> u64 {
    // SAFETY: this CPU's scratch value; volatile so that the round trip through memory stays.
    unsafe {
        core::ptr::write_volatile(&raw mut (*s).number, pointer);
        core::ptr::read_volatile(&raw const (*s).number)
    }
}

/// The ops (bits) the cache allows for (`tables`, `vfsmount`, `dentry`) now, or for an inode
/// hook's `dentry` if `vfsmount` is [`NO_MOUNT`]; 0 on a miss. `typed`: the dentry as the hook
/// holds it (BTF-typed, see [`load`]).
#[inline(always)]
pub(crate) fn allowed(s: *mut Scratch, tables: u64, vfsmount: u64, typed: u64) -> u64 {
    let (vfsmount, dentry) = (number(s, vfsmount), number(s, typed));
    let Some(entry) = copied(s, &VERDICTS, dentry) else {
        return 0;
    };
    // Inode hooks take the entry of whatever mount the open was through, and only renames
    // change what it says for them: `local` comes from the dentries up to the filesystem's root
    // and their inode-table entries, which no mount, umount or propagation changes. So they
    // compare `rename_lock`'s sequence only, and take the entry's own `mount_lock` half.
    let ((allowed, local), stamp) = (entry.ops(), entry.stamp());
    let (ops, vfsmount, seqs) = match vfsmount {
        NO_MOUNT => (
            local,
            stamp.vfsmount(),
            sequence(&RENAME_SEQ).map(|r| (r as u64) << 32 | stamp.seqs() & 0xffff_ffff),
        ),
        _ => (allowed, vfsmount, sequences()),
    };
    let Some(seqs) = seqs else {
        return 0;
    };
    match ops != 0
        && stamp.holds(Cache::Verdicts, (tables, vfsmount, dentry), seqs, || {
            Ok(load(typed, off(&OFF_DENTRY_D_INODE)))
        }) {
        true => ops,
        false => 0,
    }
}

/// The entry of `dentry` (a plain number) in `map` (the verdict cache, or the directory cache's
/// verdicts: [`crate::dirs`]), copied into the scratch value (an 80-byte copy on the stack would
/// count against the 512 bytes every call chain shares), if its check word matches: what it
/// stands for is the caller's to check ([`Stamp::holds`]).
#[inline(always)]
pub(crate) fn copied<'a>(s: *mut Scratch, map: &Array<Cached>, dentry: u64) -> Option<&'a Cached> {
    // SAFETY: a copy out of the map value into this CPU's scratch value.
    let entry = unsafe {
        // Another dentry's entry (or none) in the slot: a miss without the copy (a torn read
        // here only fails the check word below).
        let found = map.get(slot(dentry)).filter(|e| e.is_of(dentry))?;
        (*s).entry = *found;
        &(*s).entry
    };
    entry.intact().then_some(entry)
}

/// What a decision can leave in the cache: the allows [`crate::decide::check`] left in `s`, and
/// the file's inode. Read before the caller checks that the decision is intact (no reload, no
/// interleaved decision on this CPU), so that nothing read after that check can be another's.
#[derive(Clone, Copy)]
pub(crate) struct Fill {
    pub(crate) inode: u64,
    pub(crate) allowed: u64,
    pub(crate) local: u64,
}

/// The [`Fill`] of the decision in `s`, which allows `(allowed, local)` ([`allowed_ops`]), if it
/// may be cached: a positive dentry, a path that does not depend on the task, at least one op
/// allowed.
#[inline(always)]
pub(crate) fn cacheable(s: *const Scratch, (allowed, local): (u64, u64)) -> Option<Fill> {
    // SAFETY: this CPU's scratch value, written by `check`.
    let inode = unsafe { core::ptr::read_volatile(&(*s).walk.inode) };
    (inode != 0 && (allowed | local) != 0).then_some(Fill { inode, allowed, local })
}

/// The ops ([`Op::bit`]s) the decision in `s` allows, and those it allows the inode hooks
/// (see the module's notes); none for a path that depends on the task. Computed once, in
/// `fp_check`, which leaves it in `s.allowed` for the decision.
#[inline(always)]
pub(crate) fn allowed_ops(s: *const Scratch) -> (u64, u64) {
    // SAFETY: this CPU's scratch value, written by the walk and evaluation.
    let (per_task, local_state) = unsafe {
        (
            core::ptr::read_volatile(&(*s).walk.per_task),
            core::ptr::read_volatile(&(*s).walk.local_state),
        )
    };
    let (mut allowed, mut local) = (0u64, 0u64);
    for op in Op::ALL {
        if outcome_of(s, op).verdict == TableVerdict::Allow {
            allowed |= op.bit() as u64;
        }
        // SAFETY: as above.
        let hit = unsafe { core::ptr::read_volatile(op.at(&(*s).walk.local)) };
        if local_state == LOCAL_KNOWN && by_identity(&hit).verdict == TableVerdict::Allow {
            local |= op.bit() as u64;
        }
    }
    match per_task {
        0 => (allowed, local),
        _ => (0, 0),
    }
}

/// Remembers `fill` for (`tables`, `vfsmount`, `dentry`), decided under `seqs` (read before the
/// walk); false if it could not.
#[inline(always)]
pub(crate) fn fill(
    s: *mut Scratch,
    fill: Fill,
    tables: u64,
    vfsmount: u64,
    dentry: u64,
    seqs: u64,
) -> bool {
    let (vfsmount, dentry) = (number(s, vfsmount), number(s, dentry));
    let Fill { inode, allowed, local } = fill;
    let Some(at) = VERDICTS.get_ptr_mut(slot(dentry)) else {
        return false;
    };
    // SAFETY: this CPU's scratch value.
    let fills = unsafe { &raw mut (*s).fills };
    let Some(stamp) = Stamp::new(fills, Cache::Verdicts, tables, vfsmount, dentry, inode, seqs)
    else {
        return false;
    };
    // Built in the scratch value, not on the stack (see `allowed`), then copied into the slot:
    // a reader that copies it meanwhile gets a torn entry, whose check word does not match.
    // SAFETY: this CPU's scratch value; a map value, which lives as long as the program runs.
    unsafe {
        let entry = &mut (*s).entry;
        *entry = Cached::sealed(stamp, allowed, local);
        *at = *entry;
    }
    true
}

/// A dentry is about to get an inode (a new file, a lookup, a reused dentry's memory): whatever
/// was cached under its address, here or in the directory cache ([`crate::dirs`]), belongs to
/// another file. Retired through the [`Owner`] slots: an array read per cache, and a store only
/// when the slot names this address.
#[inline(always)]
pub(crate) fn forget(dentry: u64) {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return; // nothing can be cached either: every fill takes its entry in the scratch value
    };
    let dentry = number(s, dentry);
    for cache in [Cache::Verdicts, Cache::Dirs] {
        retire(cache, dentry);
    }
}
