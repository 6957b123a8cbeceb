//! The writers of a per-CPU value whose programs may be preempted: programs run with migration
//! disabled, but on a fully preemptible kernel another task can run one on the same CPU while a
//! first sits preempted in the middle of a write, and write the value too. A counter beside the
//! value counts the writes that began or ended (high half) and those in progress (low half): a
//! writer that finds another in progress as it begins must not write, and a reader (or the
//! writer itself, later) that finds the counter changed since it read it, or a write in
//! progress, must not trust what it read.
use core::intrinsics::{AtomicOrdering, atomic_xadd};

/// What a write adds to its value's counter as it begins: one event, one write in progress.
const BEGINS: u64 = 1 << 32 | 1;
/// What it adds as it ends: one event, one write fewer in progress.
const ENDS: u64 = (1 << 32) - 1;

/// Begins a write of the value `counter` counts the writers of: its counter afterwards.
///
/// # Safety
/// `counter` points into this CPU's map value.
#[inline(always)]
pub(crate) unsafe fn begin(counter: *mut u64) -> u64 {
    // SAFETY: the caller's pointer; one atomic add, which no preemption splits.
    unsafe {
        atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(counter, BEGINS);
        core::ptr::read_volatile(counter)
    }
}

/// Ends a write [`begin`] began.
///
/// # Safety
/// As for [`begin`].
#[inline(always)]
pub(crate) unsafe fn end(counter: *mut u64) {
    // SAFETY: as in `begin`.
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(counter, ENDS) };
}

/// Whether a write whose [`begin`] returned `counter` is the only one in progress.
#[inline(always)]
pub(crate) fn alone(counter: u64) -> bool {
    counter & 0xffff_ffff == 1
}
