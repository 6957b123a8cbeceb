//! The directory cache's verdicts for names no name entry can match: beside each directory's
//! entry, in a verdict cache entry's shape and under the same stamp ([`DIR_VERDICTS`]), what its
//! tables allow every name of the directory that no name entry can match
//! (`fp_common::policy::unmatched`) and that has no inode-table entry of its own
//! (`DirContext::unmatched_names`), kept when the directory's longest LPM match is too. A
//! decision on such a name ([`unmatched`]) reads the name's bytes, proves it unmatched against
//! the tables' name filter, and answers an allow without the path: no copy of the directory's
//! entry, no path, no evaluation (the property test `sibling_evaluations_resume_exactly`).

use aya_ebpf::{helpers::generated::bpf_loop, macros::map, maps::Array};
use core::ffi::c_void;
use fp_common::{
    kernel::PATH_MAX,
    policy::{
        InodeKey, MAX_NAME, Op, TableHeader, TableVerdict, Unmatched, may_have_inode,
        unmatched_step,
    },
};

use super::name::{copy_name, name_len};
use crate::{
    cache::{copied, unrenamed},
    outcome::by_identity,
    state::{
        SCRATCH, Scratch,
        entry::{Cache, Cached, OWNER_BITS, slot},
        walk::LOCAL_KNOWN,
    },
    tables::{INODES, LPM_FOUND, ScratchPath, header},
};

/// The directory cache's verdicts for names no name entry can match (crate::dirs), by the
/// directory's slot (as [`crate::cache::VERDICTS`]), each under its directory entry's stamp.
#[map]
pub(crate) static DIR_VERDICTS: Array<Cached> = Array::with_max_entries(1 << OWNER_BITS, 0);

/// Stores the verdict of the directory `dir`'s unmatched names (see the module's notes) under
/// `tables` from its entry just stored from the scratch value, under the entry's stamp.
#[inline(always)]
pub(crate) unsafe fn fill_unmatched(s: *mut Scratch, generation: u64, tables: u64, dir: u64) {
    // SAFETY: this CPU's scratch value, through the raw pointer (see `fp_check`); a map value,
    // which lives as long as the program runs.
    unsafe {
        let e = &raw const (*s).dir;
        let Some(header) = header(s, tables) else {
            return;
        };
        let prefix = ((*e).lpm_state == LPM_FOUND).then_some(&(*e).lpm);
        let best = (*e).context.unmatched_names(header, &(*e).up, prefix);
        let local_known = (*e).local_state == LOCAL_KNOWN;
        let (mut allowed, mut local) = (0u64, 0u64);
        for op in Op::ALL {
            if TableVerdict::from_u8(op.of(&best).verdict) == TableVerdict::Allow {
                allowed |= op.bit() as u64;
            }
            if local_known && by_identity(op.at(&(*e).local_up)).verdict == TableVerdict::Allow {
                local |= op.bit() as u64;
            }
        }
        let Some(at) = DIR_VERDICTS.get_ptr_mut(slot(dir)) else {
            return;
        };
        (*s).entry = Cached::sealed((*e).stamp, allowed, local);
        // As for the entry: the scratch value was this decision's until here.
        if core::ptr::read_volatile(&(*s).generation) != generation {
            return;
        }
        *at = (*s).entry;
    }
}

/// What the tables allow the name in `s.name` (see [`crate::dirs::name::read_name`]) by its directory's verdict for
/// unmatched names (see the module's notes), in the walk's `tables` and `vfsmount`: (the ops
/// allowed, the ops allowed the inode hooks), as [`Op::bit`]s; none if it has no usable
/// verdict or the name may match a name entry.
#[inline(always)]
pub(crate) fn unmatched() -> (u64, u64) {
    let bits = fp_dir_unmatched() as u64;
    (bits & 7, (bits >> 3) & 7)
}

/// [`unmatched`] as a global BPF function (see `fp_check`): the allowed ops, then the inode hooks'
/// allowed ops shifted by 3; 0 for none.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn fp_dir_unmatched() -> i32 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    match unmatched_ops(s) {
        Some((allowed, local)) => (allowed | local << 3) as i32,
        None => 0,
    }
}

/// `bpf_loop` states of the name check in [`unmatched_ops`].
const NAME_PENDING: u64 = 0;
const NAME_ADMITTED: u64 = 1;
const NAME_UNMATCHED: u64 = 2;

#[inline(always)]
fn unmatched_ops(s: *mut Scratch) -> Option<(u64, u64)> {
    // SAFETY: this CPU's scratch value, read a field at a time (see `resolve`).
    let field = |f: *const u64| unsafe { core::ptr::read_volatile(f) };
    // SAFETY: as above.
    let (w, n) = unsafe { (&raw const (*s).walk, &raw const (*s).name) };
    // SAFETY: fields of `w` and `n`.
    let (tables, devices, vfsmount, seqs, parent, parent_inode) = unsafe {
        (
            field(&raw const (*w).tables),
            field(&raw const (*w).inode_devices),
            field(&raw const (*w).vfsmount),
            field(&raw const (*n).seqs),
            field(&raw const (*n).parent),
            field(&raw const (*n).parent_inode),
        )
    };
    let entry = copied(s, &DIR_VERDICTS, parent)?;
    let ops = entry.ops();
    if ops == (0, 0)
        || !entry.stamp().holds(Cache::Dirs, (tables, vfsmount, parent), seqs, || Ok(parent_inode))
    {
        return None;
    }
    // SAFETY: fields of `n`.
    let (inode, ino, dev) = unsafe {
        (field(&raw const (*n).inode), field(&raw const (*n).ino), field(&raw const (*n).dev))
    };
    if inode != 0 && may_have_inode(devices, dev as u32) {
        let key = InodeKey { tables_id: tables, ino, dev: dev as u32, _pad: 0 };
        // SAFETY: a lookup; only its presence matters.
        if unsafe { INODES.get(&key) }.is_some() {
            return None; // the name's own rule may decide
        }
    }
    // The name's bytes, for the name filter.
    copy_name(s, name_len(s)?)?;
    // This CPU's copy, for the steps below (see `NameCheck`).
    let header = header(s, tables)?;
    let mut check = NameCheck { s, header };
    // SAFETY: this CPU's scratch value; the callback reads `check` only, which outlives the call.
    unsafe {
        core::ptr::write_volatile(&raw mut (*s).name_from, 0);
        core::ptr::write_volatile(&raw mut (*s).name_state, NAME_PENDING);
        bpf_loop(
            (2 * MAX_NAME + 2) as u32,
            unmatched_name_step as *mut c_void,
            &raw mut check as *mut c_void,
            0,
        );
        if core::ptr::read_volatile(&raw const (*s).name_state) != NAME_UNMATCHED {
            return None;
        }
    }
    // The name was not moved since the sequences were read, before it was.
    unrenamed(seqs).then_some(ops)
}

/// What the name check's `bpf_loop` callback gets from [`unmatched_ops`], on its stack: the
/// scratch value and the session's header, looked up once per name rather than once per step.
/// The check's state stays in the scratch value, where the verifier sees unknown values (on the
/// stack it would follow every step's value as a state of its own).
struct NameCheck {
    s: *mut Scratch,
    header: *const TableHeader,
}

/// bpf_loop callback: one lookup of the name check in [`unmatched_ops`]
/// (`fp_common::policy::unmatched_step`); 1 once it is done. One per step: a loop of them here
/// would cost the verifier each lookup again in every program.
extern "C" fn unmatched_name_step(_index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `ctx` is the caller's `NameCheck`: this CPU's scratch value, read and written a
    // field at a time, and a map value, both live while the program runs.
    unsafe {
        let NameCheck { s, header } = *(ctx as *const NameCheck);
        let len = core::ptr::read_volatile(&raw const (*s).name.len) as usize;
        let from = core::ptr::read_volatile(&raw const (*s).name_from);
        let path = ScratchPath::within(s, PATH_MAX.wrapping_sub(len), len);
        let state = match unmatched_step(&*header, &path, (0, len), from) {
            Unmatched::Next(next) => {
                core::ptr::write_volatile(&raw mut (*s).name_from, next);
                return 0;
            }
            Unmatched::Admitted => NAME_ADMITTED,
            Unmatched::Proven => NAME_UNMATCHED,
        };
        core::ptr::write_volatile(&raw mut (*s).name_state, state);
    }
    1
}
