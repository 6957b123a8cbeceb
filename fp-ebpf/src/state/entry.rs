//! The entries of the verdict cache (crate::cache) and of the directory cache (crate::dirs): what
//! each stands for ([`Stamp`]), its check word, and the [`Owner`] slots that retire them
//! (crate::cache's notes say why each check is there).
use aya_ebpf::{
    helpers::{bpf_get_smp_processor_id, bpf_jiffies64},
    macros::map,
    maps::Array,
};
use fp_common::check::{SEED, mix};

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
/// used only while the slot of its dentry still holds its ticket; `d_instantiate` ([`crate::cache::forget`])
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

/// The slot of `dentry` (a plain number): its index in [`OWNERS`], in [`crate::cache::VERDICTS`] and in
/// [`crate::dirs::unmatched::DIR_VERDICTS`].
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
fn ticket(fills: *mut u64, dentry: u64) -> u64 {
    // SAFETY: this CPU's count of fills (in its scratch value); a helper call without arguments.
    let (count, cpu) = unsafe {
        let count = core::ptr::read_volatile(fills).wrapping_add(1);
        core::ptr::write_volatile(fills, count);
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
        fills: *mut u64,
        cache: Cache,
        tables: u64,
        vfsmount: u64,
        dentry: u64,
        inode: u64,
        seqs: u64,
    ) -> Option<Stamp> {
        let owner = owner(cache, dentry)?;
        let ticket = ticket(fills, dentry);
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

    /// The mount the entry was filled through.
    #[inline(always)]
    pub(crate) fn vfsmount(&self) -> u64 {
        self.vfsmount
    }

    /// The sequences the entry was filled under (`rename_lock`'s high, `mount_lock`'s low).
    #[inline(always)]
    pub(crate) fn seqs(&self) -> u64 {
        self.seqs
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
    /// `fp_common::policy::Op::bit`s of the ops the tables allow.
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

    /// What the entry allows (`fp_common::policy::Op::bit`s), and allows the inode hooks.
    #[inline(always)]
    pub(crate) fn ops(&self) -> (u64, u64) {
        (self.allowed, self.local)
    }

    pub(crate) fn stamp(&self) -> &Stamp {
        &self.stamp
    }

    /// Whether the entry is `dentry`'s (a plain number).
    #[inline(always)]
    pub(crate) fn is_of(&self, dentry: u64) -> bool {
        self.stamp.dentry == dentry
    }

    /// Whether the check word matches (no torn read).
    #[inline(always)]
    pub(crate) fn intact(&self) -> bool {
        self.check == self.check_word()
    }

    fn check_word(&self) -> u64 {
        let [a, b, c, d, e, f, g] = self.stamp.words();
        [a, b, c, d, e, f, g, self.allowed, self.local].into_iter().fold(SEED, mix)
    }
}

/// Clears `dentry`'s (a plain number) [`Owner`] slot in `cache` if the slot names it: the
/// entries filled for it are retired (crate::cache::forget).
#[inline(always)]
pub(crate) fn retire(cache: Cache, dentry: u64) {
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
