//! The prompt broker's side in the kernel: its heartbeat, files pending its answer, and the
//! grants it remembered.
use aya_ebpf::{
    helpers::bpf_ktime_get_boot_ns,
    macros::map,
    maps::{Array, HashMap, LpmTrie},
};
use fp_common::{
    kernel::{BROKER_HEARTBEAT_TIMEOUT_NS, GrantValue, Hook, KernelOp, PendingKey, Reason},
    policy::PrefixKeyData,
};

use crate::{
    kernel::{EACCES, OFF_FILE_F_INODE, inode_identity, off, read},
    protect::refuse_without_path,
    session::{COUNTERS, Session, count},
    state::Scratch,
    tables::{ScratchPath, prefix_key},
};

/// The prompt broker's last heartbeat, CLOCK_BOOTTIME ns (0: no broker).
#[map]
pub(crate) static BROKER: Array<u64> = Array::with_max_entries(1, 0);

/// Files a session opened with a prompt or defer verdict, by (session cgroup id, inode), until
/// the broker has answered: reads, writes and mmaps of them are denied meanwhile, so a broker
/// that dies mid-prompt (fanotify then lets the open through) gives no data away.
#[map]
pub(crate) static PENDING: HashMap<PendingKey, u64> = HashMap::with_max_entries(4096, 0);

/// Remembered prompt grants, by session cgroup id and `GrantScope::key` pattern: a prompt
/// verdict of an open or exec that a live grant covers is allowed here (`after_grant`), without a
/// pending entry. Grants whose pattern is longer than a key stay with the broker.
#[map]
pub(crate) static GRANTS: LpmTrie<PrefixKeyData, GrantValue> = LpmTrie::with_max_entries(4096, 1); // BPF_F_NO_PREALLOC

/// The session's grant covering the path `check` resolved, if any (the longest: a shorter one
/// it shadows is left to the broker).
#[inline(always)]
pub(crate) fn grant(session: u64, s: *mut Scratch) -> Option<GrantValue> {
    GRANTS.get(prefix_key(s, session, &ScratchPath::of(s))?).copied()
}

#[inline(always)]
pub(crate) fn broker_alive() -> bool {
    // SAFETY: a copy out of the map value.
    let beat = BROKER.get(0).copied().unwrap_or(0);
    // SAFETY: a helper call without arguments.
    let now = unsafe { bpf_ktime_get_boot_ns() };
    beat != 0 && now.wrapping_sub(beat) <= BROKER_HEARTBEAT_TIMEOUT_NS
}

/// Records the file `check` resolved as pending for `session`; false (deny) if it cannot.
#[inline(always)]
pub(crate) fn mark_pending(session: u64, s: *const Scratch) -> bool {
    // SAFETY: this CPU's scratch value, filled by `check`.
    let (ino, dev) = unsafe { ((*s).walk.ino, (*s).walk.dev) };
    let key = PendingKey { session, ino, dev: dev as u32, _pad: 0 };
    // Counted before the entry exists: `check_pending` skips the lookup only while it is 0.
    count(session, |c| unsafe { &raw mut (*c).held });
    ino != 0 && PENDING.insert(&key, &1, 0).is_ok()
}

/// Denies reads, writes and mmaps by a task in `session` of a file whose prompt-tier open is
/// still pending.
#[inline(always)]
pub(crate) fn check_pending(session: &Session, hook: Hook, file: u64) -> i32 {
    // A session that never had an open held has no pending file (without its counters: look).
    if let Some(c) = COUNTERS.get_ptr(&session.id)
        // SAFETY: a read of the map value; the programs only ever add to it.
        && unsafe { core::ptr::read_volatile(&raw const (*c).held) } == 0
    {
        return 0;
    }
    let Ok((ino, dev)) = read::<u64>(file, off(&OFF_FILE_F_INODE)).and_then(inode_identity) else {
        return -EACCES;
    };
    let key = PendingKey { session: session.id, ino, dev, _pad: 0 };
    // SAFETY: only tested for presence.
    if unsafe { PENDING.get(&key) }.is_none() {
        return 0;
    }
    refuse_without_path(session, hook, KernelOp::Read, Reason::PromptPending, (ino, dev))
}
