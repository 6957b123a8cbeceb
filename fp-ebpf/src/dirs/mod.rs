//! The directory cache: what a decision on a name in a directory shares with every other name
//! there, so that a file created, opened or removed next to one decided before skips the walk up
//! the tree and the scan of its directories. Per directory (mount, dentry): its path, the
//! inode-table hits above it, and the evaluation's directory-name hits with where the final
//! component starts (`fp_common::policy::DirContext`). A decision in the directory then reads
//! the name and the file's own identity, rebuilds the path and evaluates the final component
//! only (`Evaluation::resume_below`: the same verdicts and deciding rules as the whole evaluation,
//! proven by the property test `sibling_evaluations_resume_exactly`).
//!
//! An entry also keeps the directory's longest LPM match when no LPM key lies at or below the
//! directory (it is not in `INTERIOR`): every key that matches `dir/name` then matches at a '/'
//! above `dir`, so all its names have the same longest match, and a decision there skips the
//! lookup (the property test `sibling_evaluations_resume_exactly` covers this too).
//!
//! An entry also has a verdict of its own for the names no name entry can match (`unmatched.rs`).
//!
//! An entry is used under the same checks as a verdict cache entry ([`crate::cache`]): the
//! tables id, `rename_lock`'s and `mount_lock`'s sequences read before the walk that filled it,
//! the directory dentry's inode, its lifetime and a check word; [`crate::cache::forget`] drops it
//! when the dentry's memory gets an inode. The name's own dentry is read after the sequences the
//! decision runs under (the ones the entry must match) and `rename_lock`'s sequence again after
//! it, so a name moved meanwhile takes the walk. Not used
//! for a name that is a mount root or whose directory is one (procfs names the task's own
//! directory after the task there), nor by renames and links.
use aya_ebpf::{helpers::generated::bpf_probe_read_kernel, macros::map, maps::LruHashMap};
use core::ffi::c_void;
use fp_common::{
    kernel::PATH_MAX,
    policy::{InodeKey, MAX_PREFIX, Op, OpEntry, may_have_inode},
};

pub(crate) mod name;
pub(crate) mod unmatched;

use self::{
    name::{copy_name, name_len},
    unmatched::fill_unmatched,
};
use crate::{
    cache::{number, unrenamed},
    state::{
        SCRATCH, Scratch,
        dir::DirCached,
        entry::{Cache, Stamp},
        walk::{NO_MOUNT, RESOLVED, start_walk},
    },
    tables::{INODES, INTERIOR, LPM_UNKNOWN, ScratchPath, prefix_key},
};

/// The directory cache (crate::dirs), by directory dentry address.
#[map]
pub(crate) static DIRS: LruHashMap<u64, DirCached> = LruHashMap::with_max_entries(8192, 0);

/// Resolves the walk's file (`tables`, `vfsmount` in the scratch value's walk, its name in
/// `s.name`, see [`name::read_name`]) from its directory's entry, if it has a usable one: leaves in the
/// walk the results (path, identity, hits) [`crate::walk`] would, with the entry's context in
/// `s.dir` for `resume_below`. Nonzero: no usable entry, the walk's fields untouched.
///
/// A global BPF function (see `fp_check`), called by the program before `fp_check`: the 512
/// bytes of stack are shared by the frames of a call chain, and this one is large.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn fp_dir_resolve() -> i32 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return 1;
    };
    // SAFETY: this CPU's scratch value.
    let (tables, vfsmount) = unsafe {
        let w = &raw const (*s).walk;
        (core::ptr::read_volatile(&(*w).tables), core::ptr::read_volatile(&(*w).vfsmount))
    };
    match resolve(s, tables, vfsmount) {
        Some(()) => 0,
        None => 1,
    }
}

#[inline(always)]
fn resolve(s: *mut Scratch, tables: u64, vfsmount: u64) -> Option<()> {
    // Read in place, a field at a time: a copy of the name would take stack the program's frame
    // shares.
    // SAFETY: this CPU's scratch value.
    let n = unsafe { &raw const (*s).name };
    // SAFETY: fields of `n`.
    let field = |f: *const u64| unsafe { core::ptr::read_volatile(f) };
    let (seqs, parent) = unsafe { (field(&raw const (*n).seqs), field(&raw const (*n).parent)) };
    // SAFETY: a copy out of the map value into this CPU's scratch value (by the helper: a plain
    // copy of this size goes through the stack), checked before use.
    let e = unsafe {
        let found = DIRS.get_ptr(&parent)?;
        let size = core::mem::size_of::<DirCached>() as u32;
        let dst = &raw mut (*s).dir;
        if bpf_probe_read_kernel(dst as *mut c_void, size, found as *const c_void) != 0 {
            return None;
        }
        &*dst
    };
    if e.check != e.check_word()
        || !e.stamp.holds(Cache::Dirs, (tables, vfsmount, parent), seqs, || {
            // SAFETY: as above.
            Ok(field(unsafe { &raw const (*n).parent_inode }))
        })
    {
        return None;
    }
    let (len, cursor) = (name_len(s)?, e.context.cursor as usize);
    if cursor < 2 || cursor > MAX_PREFIX {
        return None;
    }
    // The path, `dir/name`, ending at PATH_MAX as the walk leaves it: the directory's bytes
    // first (a constant-size copy that may run past PATH_MAX), then the '/' and the name.
    // Indexes from a number the compiler cannot bound, so that it keeps the masks the verifier
    // needs (it proves them redundant from the checks above, which the verifier does not follow).
    let cursor = number(s, cursor as u64) as usize;
    let pos = PATH_MAX.wrapping_sub(cursor + len.0);
    // SAFETY: this CPU's scratch value; every range stays inside the 2 * PATH_MAX buffer by the
    // masks, and the helper checks its source.
    unsafe {
        let path = (*s).path.as_mut_ptr();
        let at = pos & (PATH_MAX - 1);
        if bpf_probe_read_kernel(
            path.add(at) as *mut c_void,
            MAX_PREFIX as u32,
            (*s).dir.path.as_ptr() as *const c_void,
        ) != 0
        {
            return None;
        }
        *path.add((at + cursor - 1) & (2 * PATH_MAX - 1)) = b'/';
    }
    copy_name(s, len)?;
    // The name was not moved since the sequences were read, before it was.
    if !unrenamed(seqs) {
        return None;
    }
    // SAFETY: as above.
    let (inode, ino, dev) = unsafe {
        (field(&raw const (*n).inode), field(&raw const (*n).ino), field(&raw const (*n).dev))
    };
    // SAFETY: a field of this CPU's scratch value, set with the tables.
    let devices = unsafe { core::ptr::read_volatile(&raw const (*s).walk.inode_devices) };
    let mut own = [OpEntry::default(); 3];
    if inode != 0 && may_have_inode(devices, dev as u32) {
        let key = InodeKey { tables_id: tables, ino, dev: dev as u32, _pad: 0 };
        // SAFETY: a read of the map value.
        if let Some(value) = unsafe { INODES.get(&key) } {
            own = value.this;
        }
    }
    // SAFETY: this CPU's scratch value.
    unsafe {
        let w = &raw mut (*s).walk;
        let e = &raw const (*s).dir;
        start_walk(w);
        for op in Op::ALL {
            let own = op.of(&own);
            let (mut hit, mut local) = (own, own);
            let (up, local_up) = (op.of(&(*e).up), op.of(&(*e).local_up));
            if up.outranks(&hit) {
                hit = up;
            }
            if local_up.outranks(&local) {
                local = local_up;
            }
            *op.of_mut(&mut (*w).hit) = hit;
            *op.of_mut(&mut (*w).local) = local;
        }
        (*w).local_state = (*e).local_state;
        (*w).inode = inode;
        (*w).ino = ino;
        (*w).dev = dev;
        (*w).pos = pos as u64;
        (*w).depth = (*e).context.depth;
        (*w).state = RESOLVED;
    }
    Some(())
}

/// Remembers the directory of the name the walk of decision `generation`
/// (crate::decide::Decision) went through, decided under `seqs` (read before the walk), unless it
/// is remembered already.
#[inline(always)]
pub(crate) fn fill(generation: u64, seqs: u64) {
    fp_dir_fill(generation, seqs);
}

/// [`fill`] as a global BPF function (see `fp_check`), on the walk and evaluation in the scratch
/// value.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn fp_dir_fill(generation: u64, seqs: u64) -> i32 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return 1;
    };
    // SAFETY: this CPU's scratch value, through the raw pointer (see `fp_check`).
    unsafe {
        let w = &raw const (*s).walk;
        let dir = core::ptr::read_volatile(&(*w).dir);
        let Some(context) = (*s).eval.context() else {
            return 0;
        };
        let cursor = context.cursor as usize;
        let vfsmount = core::ptr::read_volatile(&(*w).dir_mount);
        if dir == 0
            || vfsmount == NO_MOUNT
            || core::ptr::read_volatile(&(*w).per_task) != 0
            || core::ptr::read_volatile(&(*w).state) != RESOLVED
            || !(2..=MAX_PREFIX).contains(&cursor)
        {
            return 0;
        }
        let tables = (*w).tables;
        if let Some(old) = DIRS.get(&dir)
            && old.stamp.same(Cache::Dirs, tables, vfsmount, seqs)
        {
            return 0; // remembered (a torn read here only costs a rewrite or a later walk)
        }
        let e = &raw mut (*s).dir;
        let start = core::ptr::read_volatile(&(*w).pos) as usize & (PATH_MAX - 1);
        if bpf_probe_read_kernel(
            (*e).path.as_mut_ptr() as *mut c_void,
            MAX_PREFIX as u32,
            (*s).path.as_ptr().add(start) as *const c_void,
        ) != 0
        {
            return 0;
        }
        let Some(stamp) = Stamp::new(
            &raw mut (*s).fills,
            Cache::Dirs,
            tables,
            vfsmount,
            dir,
            (*w).dir_inode,
            seqs,
        ) else {
            return 0;
        };
        (*e).stamp = stamp;
        (*e).local_state = (*w).local_state;
        (*e).up = (*w).up;
        (*e).local_up = (*w).local_up;
        (*e).context = context;
        (*e).lpm_state = LPM_UNKNOWN;
        let lpm_state = core::ptr::read_volatile(&(*s).lpm_state);
        if lpm_state != LPM_UNKNOWN && !interior(s, tables, cursor) {
            (*e).lpm = (*s).lpm;
            (*e).lpm_state = lpm_state;
        }
        (*e).check = (*e).check_word();
        // All of it was this decision's unless another one began on this CPU since.
        if core::ptr::read_volatile(&(*s).generation) != generation {
            return 0;
        }
        let _ = DIRS.insert(&dir, &*e, 0);
        if (*e).lpm_state != LPM_UNKNOWN {
            fill_unmatched(s, generation, tables, dir);
        }
    }
    0
}

/// Whether an LPM key of `tables` lies at or below the directory of the path in the scratch
/// buffer, whose final component starts at `cursor` (in 2..=MAX_PREFIX): a lookup of `dir\0` in
/// `INTERIOR`. True when it cannot tell.
#[inline(always)]
fn interior(s: *mut Scratch, tables: u64, cursor: usize) -> bool {
    // SAFETY: this CPU's scratch value.
    unsafe {
        if prefix_key(s, tables, &ScratchPath::of(s)).is_none() {
            return true;
        }
        // The key of the path, cut to `dir\0`: its NUL in place of the directory's '/'. Masked
        // from a number the compiler cannot bound (see `resolve`), for the verifier.
        let at = number(s, cursor.wrapping_sub(1) as u64) as usize & 0xff;
        let key = &mut (*s).prefix_key;
        let Some(slash) = key.data.path.get_mut(at) else {
            return true;
        };
        *slash = 0;
        key.prefix_len = ((8 + cursor) * 8) as u32;
        INTERIOR.get(&*key).is_some()
    }
}
