//! The creation slot: `open(O_CREAT)` of a new file decides twice, `path_mknod` on the name
//! (a negative dentry, which the verdict cache never keeps) and then `file_open` on the file it
//! became. Both decide the same path: the slot carries the first decision to the second, which
//! puts it in the verdict cache ([`crate::cache`]) under the file's new inode for the calls that
//! follow, and answers with it instead of walking or resolving the name again.
//!
//! Per CPU and per thread: `path_mknod` of a session task leaves what its tables allow on the
//! name, `file_open` takes it when the file says the open created it (`FMODE_CREATED`, set only
//! by an open that called `path_mknod` on that name just before, in the same call). It is used only
//! under the verdict cache's checks (tables id, both sequences unchanged since before the
//! `path_mknod` walk, the same mount and dentry, a check word over the slot) and three of its own:
//! the same thread, within [`TTL_JIFFIES`], and no inode-table entry for the new inode (the
//! `path_mknod` decision saw none: a negative dentry has no identity). Anything else, a thread
//! that changed CPUs, another creation on this CPU, an `O_TMPFILE` (which sets `FMODE_CREATED`
//! without `path_mknod`), is a miss and takes the usual decision.
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_jiffies64},
    macros::map,
    maps::PerCpuArray,
};
use fp_common::{
    check::mix,
    kernel::SessionInfo,
    policy::{InodeKey, may_have_inode},
};

use crate::{
    cache::{self, Fill, number},
    kernel::{OFF_DENTRY_D_INODE, file_path, load, loaded_identity, off, path_parts},
    state::SCRATCH,
    tables::INODES,
};

/// The creation slot (crate::created), per CPU.
#[map]
pub(crate) static CREATED: PerCpuArray<Created> = PerCpuArray::with_max_entries(1, 0);

/// Far above the time from `path_mknod` to `file_open` in one open (a miss only costs a decision):
/// 25 ms at HZ=1000, 100 ms at 250 (jiffies, as the verdict cache's entries).
const TTL_JIFFIES: u64 = 25;

/// One thread's last creation decision on this CPU; plain integers, as every map value.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Created {
    check: u64,
    /// `bpf_get_current_pid_tgid`; 0: empty.
    thread: u64,
    expires: u64,
    tables: u64,
    vfsmount: u64,
    dentry: u64,
    seqs: u64,
    allowed: u64,
    local: u64,
}

impl Created {
    fn check_word(&self) -> u64 {
        let Created { check: _, thread, expires, tables, vfsmount, dentry, seqs, allowed, local } =
            *self;
        [thread, expires, tables, vfsmount, dentry, seqs, allowed, local]
            .into_iter()
            .fold(0x1319_8a2e_0370_7344u64, mix)
    }
}

/// After the `path_mknod` decision of decision `generation` (crate::decide::Decision), whose walk
/// is in the scratch value: what it allowed (`cache::allowed_ops`), if it was intact and decided
/// under the sequences `intact`; otherwise the slot is emptied.
#[inline(always)]
pub(crate) fn remember(generation: u64, intact: Option<u64>, (allowed, local): (u64, u64)) {
    // Sequences are never 0 once the host has mounted anything; 0 would only make this a miss.
    fp_created_remember(generation, intact.unwrap_or(0), allowed, local);
}

/// [`remember`] as a global BPF function (see `fp_check`): verified once, whatever the states
/// of the decision before it. `seqs` 0: nothing to remember.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn fp_created_remember(generation: u64, seqs: u64, allowed: u64, local: u64) -> i32 {
    let (Some(slot), Some(s)) = (CREATED.get_ptr_mut(0), SCRATCH.get_ptr_mut(0)) else {
        return 1;
    };
    // SAFETY: this CPU's slot and scratch value. A program preempted mid-write by another's
    // leaves a slot whose check word does not match.
    unsafe {
        (*slot).thread = 0;
        if seqs == 0 {
            return 0;
        }
        let w = &raw const (*s).walk;
        if (allowed | local) == 0 {
            return 0;
        }
        (*slot).expires = bpf_jiffies64() + TTL_JIFFIES;
        (*slot).tables = core::ptr::read_volatile(&(*w).tables);
        (*slot).vfsmount = core::ptr::read_volatile(&(*w).vfsmount);
        (*slot).dentry = core::ptr::read_volatile(&(*w).dentry);
        (*slot).seqs = seqs;
        (*slot).allowed = allowed;
        (*slot).local = local;
        // Everything above was the decision's own unless another one began on this CPU since.
        if core::ptr::read_volatile(&(*s).generation) != generation {
            return 0;
        }
        (*slot).thread = bpf_get_current_pid_tgid();
        (*slot).check = (*slot).check_word();
    }
    0
}

/// At the `file_open` of `file`, which the open created (`FMODE_CREATED`, not `O_TMPFILE`), in
/// a session with tables `info.tables`: moves the slot's decision into the verdict cache if it is
/// this file's, and returns the ops ([`fp_common::policy::Op::bit`]s) it allows there (0: none,
/// or not this file's): what a lookup of the verdict cache right after would answer.
#[inline(always)]
pub(crate) fn claim(info: &SessionInfo, file: u64) -> u64 {
    let tables = info.tables;
    let (Some(slot), Some(s)) = (CREATED.get_ptr_mut(0), SCRATCH.get_ptr_mut(0)) else {
        return 0;
    };
    let (vfsmount, typed) = path_parts(file_path(file));
    let (vfsmount, dentry) = (number(s, vfsmount), number(s, typed));
    // SAFETY: this CPU's slot; copied out, then emptied (one claim per creation).
    let c = unsafe {
        let c = *slot;
        (*slot).thread = 0;
        c
    };
    // SAFETY: helper calls without arguments.
    let (thread, now) = unsafe { (bpf_get_current_pid_tgid(), bpf_jiffies64()) };
    if c.thread != thread
        || c.check != c.check_word()
        || now >= c.expires
        || c.tables != tables
        || c.vfsmount != vfsmount
        || c.dentry != dentry
        || cache::sequences() != Some(c.seqs)
    {
        return 0;
    }
    let typed_inode: u64 = load(typed, off(&OFF_DENTRY_D_INODE));
    // A plain number: it goes into the entry's check word.
    let inode = number(s, typed_inode);
    if inode == 0 {
        return 0;
    }
    let (ino, dev) = loaded_identity(typed_inode);
    let key = InodeKey { tables_id: tables, ino, dev, _pad: 0 };
    // SAFETY: a lookup; only its presence matters.
    if dev == 0
        || (may_have_inode(info.inode_devices, dev) && unsafe { INODES.get(&key) }.is_some())
    {
        return 0;
    }
    let fill = Fill { inode, allowed: c.allowed, local: c.local };
    match cache::fill(s, fill, tables, vfsmount, dentry, c.seqs) {
        true => c.allowed,
        false => 0,
    }
}
