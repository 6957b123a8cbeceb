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
use aya_ebpf::{
    helpers::{bpf_get_smp_processor_id, bpf_jiffies64},
    macros::map,
    maps::Array,
};
use fp_common::policy::{Op as PolicyOp, TableVerdict};

use crate::{
    decide::{by_identity, outcome_of},
    kernel::{MOUNT_SEQ, OFF_DENTRY_D_INODE, RENAME_SEQ, global, load, off, read_sequence},
    maps::{SCRATCH, Scratch},
    walk::{LOCAL_KNOWN, NO_MOUNT},
};

/// The verdict cache (crate::cache): one entry per dentry address slot, the slot's latest fill
/// (a fill is plain stores: no allocation, lock or eviction list, as an LRU hash's update takes).
#[map]
pub(crate) static VERDICTS: Array<Cached> = Array::with_max_entries(1 << OWNER_BITS, 0);

/// Which entry of both caches is live for each dentry address slot (crate::cache::Owner): the
/// verdict cache's and the directory cache's owner of a slot side by side.
#[map]
pub(crate) static OWNERS: Array<[Owner; 2]> = Array::with_max_entries(1 << OWNER_BITS, 0);

/// How long an entry may be used: far below the time 2^31 renames or mounts take. In jiffies,
/// which the verifier inlines as one load (`bpf_ktime_get_boot_ns` is a helper call, and every
/// cache hit reads the clock): 2.5 s at HZ=1000, 10 s at Debian's 250, 25 s at 100.
const TTL_JIFFIES: u64 = 2_500;

/// The two caches whose entries a [`Stamp`] stands for; each has its own [`Owner`] slots.
#[derive(Clone, Copy)]
pub(crate) enum Cache {
    Verdicts = 0,
    Dirs = 1,
}

/// log2 of the [`Owner`] slots per cache, and of the verdict cache's entries: a fill of another
/// dentry in the slot retires the entry (a miss, never a hit). 4,096: `OWNERS` takes 128 KiB and
/// each verdict array 320 KiB, where 65,536 took 2 MiB and 5 MiB each, and every file a program
/// met landed on pages of its own. Measured: `d_instantiate` 0.63x, `tar -x` 0.95x
/// (docs/performance.md, "Smaller cache arrays").
pub(crate) const OWNER_BITS: u32 = 12;

/// Which fill of each dentry address is live, per cache: the ticket of the latest fill of a
/// dentry that hashes to this slot, and that dentry. Both caches' owners of a slot lie side by
/// side in one [`OWNERS`] element, so `d_instantiate`, on every dentry of the host, touches one
/// element rather than two. An entry is
/// used only while the slot of its dentry still holds its ticket; `d_instantiate` ([`forget`])
/// clears the slot when it names its dentry, and any fill of another dentry there writes its own
/// ticket first. So a freed dentry's
/// entries can never be used once its memory is instantiated again, and `d_instantiate` on the
/// host's every dentry reads one array slot per cache instead of looking up both hash maps.
///
/// Why nothing slips past: an entry of dentry address A is filled by a decision that holds A
/// (or a child of it, which holds its parent) until the fill is done, so A's memory is freed, and
/// instantiated again, only after the fill wrote the slot (ticket, then dentry; x86 keeps stores
/// in order) and the entry. When `forget` then reads the slot, either it names A, and is cleared,
/// or another dentry's fill wrote it since, ticket first. A ticket is this CPU's count of fills
/// with the CPU's number, mixed with the dentry ([`ticket`]): a fill that another one on this CPU
/// preempted mid-count may repeat its count, but that fill holds its own dentry, which is then not
/// A, so the word differs (but for a 2^-64 chance, as the check words).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Owner {
    ticket: u64,
    dentry: u64,
}

/// The slot of `dentry` (a plain number): its index in [`OWNERS`], in [`VERDICTS`] and in
/// [`crate::dirs::DIR_VERDICTS`].
#[inline(always)]
pub(crate) fn slot(dentry: u64) -> u32 {
    // Dentries are slab objects of 192 bytes: the low bits say little.
    ((dentry >> 6).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - OWNER_BITS)) as u32
}

/// The [`Owner`] slot of `dentry` (a plain number) for `cache`.
#[inline(always)]
fn owner(cache: Cache, dentry: u64) -> Option<*mut Owner> {
    let both = OWNERS.get_ptr_mut(slot(dentry))?;
    // SAFETY: a map value, which lives as long as the program runs; a constant index below 2.
    Some(unsafe { (&raw mut (*both)[cache as usize]) })
}

/// A new fill's ticket for `dentry`: never 0 (a cleared slot), unique per CPU and fill (see
/// [`Owner`]).
#[inline(always)]
fn ticket(s: *mut Scratch, dentry: u64) -> u64 {
    // SAFETY: this CPU's scratch value; a helper call without arguments.
    let (count, cpu) = unsafe {
        let count = core::ptr::read_volatile(&raw const (*s).fills).wrapping_add(1);
        core::ptr::write_volatile(&raw mut (*s).fills, count);
        (count, bpf_get_smp_processor_id() as u64)
    };
    mix(cpu << 48 ^ count, dentry) | 1
}

/// What an entry of either cache (this one and [`crate::dirs`]) stands for and is checked
/// against before use (the hazards above); plain integers, as every map value.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Stamp {
    dentry: u64,
    vfsmount: u64,
    tables: u64,
    inode: u64,
    /// `rename_lock`'s sequence in the high half, `mount_lock`'s in the low half.
    seqs: u64,
    expires: u64,
    /// The entry's ticket in its dentry's [`Owner`] slot.
    ticket: u64,
}

impl Stamp {
    /// For (`tables`, `vfsmount`, `dentry`) pointing to `inode`, decided under `seqs` (read
    /// before the walk), as the entry `cache` is about to store: takes the dentry's [`Owner`]
    /// slot, which retires whatever the slot stood for. None: no slot (nothing may be stored).
    #[inline(always)]
    pub(crate) fn new(
        s: *mut Scratch,
        cache: Cache,
        tables: u64,
        vfsmount: u64,
        dentry: u64,
        inode: u64,
        seqs: u64,
    ) -> Option<Stamp> {
        let owner = owner(cache, dentry)?;
        let ticket = ticket(s, dentry);
        // SAFETY: a map value, which lives as long as the program runs: the ticket first, then
        // the dentry (see Owner), one store each.
        unsafe {
            core::ptr::write_volatile(&raw mut (*owner).ticket, ticket);
            core::ptr::write_volatile(&raw mut (*owner).dentry, dentry);
        }
        // SAFETY: a helper call without arguments.
        let expires = unsafe { bpf_jiffies64() } + TTL_JIFFIES;
        Some(Stamp { dentry, vfsmount, tables, inode, seqs, expires, ticket })
    }

    /// Whether the entry still stands for (`tables`, `vfsmount`, `dentry`) (plain numbers) now
    /// that the sequences read `seqs` and the dentry points to `inode()`'s answer.
    #[inline(always)]
    pub(crate) fn holds(
        &self,
        cache: Cache,
        (tables, vfsmount, dentry): (u64, u64, u64),
        seqs: u64,
        inode: impl FnOnce() -> Result<u64, ()>,
    ) -> bool {
        self.dentry == dentry
            && self.vfsmount == vfsmount
            && self.tables == tables
            && self.seqs == seqs
            && self.owns(cache)
            // SAFETY: a helper call without arguments.
            && unsafe { bpf_jiffies64() } < self.expires
            && inode() == Ok(self.inode)
    }

    /// Whether the entry's dentry slot still holds its ticket.
    #[inline(always)]
    fn owns(&self, cache: Cache) -> bool {
        // SAFETY: a read of a map value.
        owner(cache, self.dentry).is_some_and(|o| unsafe {
            core::ptr::read_volatile(&raw const (*o).ticket) == self.ticket
        })
    }

    /// Whether the entry is for `tables` and `vfsmount` under `seqs` and still owns its slot (not
    /// its dentry's inode, nor its age): a fill can skip it.
    #[inline(always)]
    pub(crate) fn same(&self, cache: Cache, tables: u64, vfsmount: u64, seqs: u64) -> bool {
        self.tables == tables && self.vfsmount == vfsmount && self.seqs == seqs && self.owns(cache)
    }

    #[inline(always)]
    fn words(&self) -> [u64; 7] {
        [self.dentry, self.vfsmount, self.tables, self.inode, self.seqs, self.expires, self.ticket]
    }
}

/// One cached decision.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Cached {
    stamp: Stamp,
    /// [`PolicyOp::bit`]s of the ops the tables allow.
    allowed: u64,
    /// The same for the inode hooks (0 when the walk could not tell).
    local: u64,
    check: u64,
}

impl Cached {
    /// The entry for `stamp` that allows `allowed` and `local`, with its check word.
    #[inline(always)]
    pub(crate) fn sealed(stamp: Stamp, allowed: u64, local: u64) -> Cached {
        let mut entry = Cached { stamp, allowed, local, check: 0 };
        entry.check = entry.check_word();
        entry
    }

    /// What the entry allows ([`PolicyOp::bit`]s), and allows the inode hooks.
    #[inline(always)]
    pub(crate) fn ops(&self) -> (u64, u64) {
        (self.allowed, self.local)
    }

    pub(crate) fn stamp(&self) -> &Stamp {
        &self.stamp
    }

    fn check_word(&self) -> u64 {
        let [a, b, c, d, e, f, g] = self.stamp.words();
        [a, b, c, d, e, f, g, self.allowed, self.local]
            .into_iter()
            .fold(0x243f_6a88_85a3_08d3u64, mix)
    }
}

/// One step of an entry's check word.
#[inline(always)]
pub(crate) fn mix(h: u64, word: u64) -> u64 {
    let h = (h ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 29)
}

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
    let (ops, vfsmount, seqs) = match vfsmount {
        NO_MOUNT => (
            entry.local,
            entry.stamp.vfsmount,
            sequence(&RENAME_SEQ).map(|r| (r as u64) << 32 | entry.stamp.seqs & 0xffff_ffff),
        ),
        _ => (entry.allowed, vfsmount, sequences()),
    };
    let Some(seqs) = seqs else {
        return 0;
    };
    match ops != 0
        && entry.stamp.holds(Cache::Verdicts, (tables, vfsmount, dentry), seqs, || {
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
        let found = map.get(slot(dentry)).filter(|e| e.stamp.dentry == dentry)?;
        (*s).entry = *found;
        &(*s).entry
    };
    (entry.check == entry.check_word()).then_some(entry)
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

/// The ops ([`PolicyOp::bit`]s) the decision in `s` allows, and those it allows the inode hooks
/// (see the module's notes); none for a path that depends on the task.
#[inline(always)]
pub(crate) fn allowed_ops(s: *const Scratch) -> (u64, u64) {
    // SAFETY: this CPU's scratch value, written by `check`.
    let (per_task, local_state) = unsafe {
        (
            core::ptr::read_volatile(&(*s).walk.per_task),
            core::ptr::read_volatile(&(*s).walk.local_state),
        )
    };
    let (mut allowed, mut local) = (0u64, 0u64);
    for op in PolicyOp::ALL {
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
    let Some(stamp) = Stamp::new(s, Cache::Verdicts, tables, vfsmount, dentry, inode, seqs) else {
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
        if let Some(o) = owner(cache, dentry) {
            // SAFETY: a map value, which lives as long as the program runs.
            unsafe {
                if core::ptr::read_volatile(&raw const (*o).dentry) == dentry {
                    core::ptr::write_volatile(&raw mut (*o).ticket, 0);
                    core::ptr::write_volatile(&raw mut (*o).dentry, 0);
                }
            }
        }
    }
}
