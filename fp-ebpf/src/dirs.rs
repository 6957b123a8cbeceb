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
//! An entry also has a verdict of its own ([`DIR_VERDICTS`], beside it in a verdict cache entry's
//! shape and under the same stamp) for the directory's names that no name entry can match
//! (`fp_common::policy::unmatched`) and that have no inode-table entry of their own: what its
//! tables allow every such name (`DirContext::unmatched_names`), kept when the directory's longest
//! LPM match is too. A decision on such a name ([`unmatched`]) reads the name's bytes, proves it
//! unmatched against the tables' name filter, and answers an allow without the path: no copy of
//! the directory's entry, no path, no evaluation (the property test
//! `sibling_evaluations_resume_exactly` again).
//!
//! An entry is used under the same checks as a verdict cache entry ([`crate::cache`]): the
//! tables id, `rename_lock`'s and `mount_lock`'s sequences read before the walk that filled it,
//! the directory dentry's inode, its lifetime and a check word; [`crate::cache::forget`] drops it
//! when the dentry's memory gets an inode. The name's own dentry is read after the sequences the
//! decision runs under (the ones the entry must match) and `rename_lock`'s sequence again after
//! it, so a name moved meanwhile takes the walk. Not used
//! for a name that is a mount root or whose directory is one (procfs names the task's own
//! directory after the task there), nor by renames and links.
use aya_ebpf::{
    helpers::generated::{bpf_loop, bpf_probe_read_kernel, bpf_probe_read_kernel_str},
    macros::map,
    maps::{Array, LruHashMap},
};
use core::ffi::c_void;
use fp_common::{
    kernel::PATH_MAX,
    policy::{
        InodeKey, MAX_COMPONENT, MAX_NAME, MAX_PREFIX, Op as PolicyOp, OpEntry, TableHeader,
        TableVerdict, Unmatched, may_have_inode, unmatched_step,
    },
};

use crate::{
    cache::{copied, number, unrenamed},
    kernel::{
        OFF_DENTRY_D_INODE, OFF_DENTRY_D_NAME, OFF_DENTRY_D_PARENT, OFF_QSTR_LEN, OFF_QSTR_NAME,
        OFF_VFSMOUNT_MNT_ROOT, load, loaded_identity, off,
    },
    outcome::by_identity,
    state::{
        SCRATCH, Scratch,
        dir::DirCached,
        entry::{Cache, Cached, OWNER_BITS, Stamp, slot},
        walk::{LOCAL_KNOWN, NO_MOUNT, RESOLVED, start_walk},
    },
    tables::{INODES, INTERIOR, LPM_FOUND, LPM_UNKNOWN, ScratchPath, header, prefix_key},
};

/// The directory cache (crate::dirs), by directory dentry address.
#[map]
pub(crate) static DIRS: LruHashMap<u64, DirCached> = LruHashMap::with_max_entries(8192, 0);

/// The directory cache's verdicts for names no name entry can match (crate::dirs), by the
/// directory's slot (as [`VERDICTS`]), each under its directory entry's stamp.
#[map]
pub(crate) static DIR_VERDICTS: Array<Cached> = Array::with_max_entries(1 << OWNER_BITS, 0);

/// Reads the name (`vfsmount`, `dentry`: BTF-typed, see [`load`]) of a decision that runs under
/// `seqs` into `s` for [`fp_dir_resolve`]; false if it cannot be resolved from its directory: a
/// mount root, a name whose directory is one (procfs names the task's own directory after the
/// task there), or fields that read 0 (unreadable: the walk decides).
#[inline(always)]
pub(crate) fn read_name(s: *mut Scratch, vfsmount: u64, dentry: u64, seqs: u64) -> bool {
    let parent: u64 = load(dentry, off(&OFF_DENTRY_D_PARENT));
    let parent_inode: u64 = load(parent, off(&OFF_DENTRY_D_INODE));
    let inode: u64 = load(dentry, off(&OFF_DENTRY_D_INODE));
    let identified = if inode != 0 { inode } else { parent_inode };
    let (ino, dev) = loaded_identity(identified);
    let qstr = off(&OFF_DENTRY_D_NAME);
    let len: u32 = load(dentry, qstr + off(&OFF_QSTR_LEN));
    let name: u64 = load(dentry, qstr + off(&OFF_QSTR_NAME));
    let mnt_root = number(s, load(vfsmount, off(&OFF_VFSMOUNT_MNT_ROOT)));
    let (parent, dentry) = (number(s, parent), number(s, dentry));
    if mnt_root == 0 || parent == 0 || dentry == mnt_root || parent == mnt_root || parent == dentry
    {
        return false;
    }
    let (parent_inode, inode) = (number(s, parent_inode), number(s, inode));
    if parent_inode == 0 || dev == 0 {
        return false;
    }
    // Field by field: a struct literal is built on the stack first (see `fp_check`).
    // SAFETY: this CPU's scratch value.
    unsafe {
        let n = &raw mut (*s).name;
        (*n).seqs = seqs;
        (*n).parent = parent;
        (*n).parent_inode = parent_inode;
        (*n).inode = inode;
        (*n).ino = ino;
        (*n).dev = dev as u64;
        (*n).len = len as u64;
        (*n).name = name;
    }
    true
}

/// Resolves the walk's file (`tables`, `vfsmount` in the scratch value's walk, its name in
/// `s.name`, see [`read_name`]) from its directory's entry, if it has a usable one: leaves in the
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
        let key = InodeKey { session_id: tables, ino, dev: dev as u32, _pad: 0 };
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
        for op in PolicyOp::ALL {
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
/// (crate::decide::begin) went through, decided under `seqs` (read before the walk), unless it
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

/// Stores the verdict of the directory `dir`'s unmatched names (see the module's notes) under
/// `tables` from its entry just stored from the scratch value, under the entry's stamp.
#[inline(always)]
unsafe fn fill_unmatched(s: *mut Scratch, generation: u64, tables: u64, dir: u64) {
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
        for op in PolicyOp::ALL {
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

/// What the tables allow the name in `s.name` (see [`read_name`]) by its directory's verdict for
/// unmatched names (see the module's notes), in the walk's `tables` and `vfsmount`: (the ops
/// allowed, the ops allowed the inode hooks), as [`PolicyOp::bit`]s; none if it has no usable
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
        let key = InodeKey { session_id: tables, ino, dev: dev as u32, _pad: 0 };
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

/// The length of the name [`read_name`] read, if a name of it can be copied whole.
#[derive(Clone, Copy)]
struct NameLen(usize);

/// [`NameLen`] of the name in `s.name`; None if it is empty or longer than a component can be.
#[inline(always)]
fn name_len(s: *const Scratch) -> Option<NameLen> {
    // SAFETY: this CPU's scratch value.
    let len = unsafe { core::ptr::read_volatile(&raw const (*s).name.len) } as usize;
    (len != 0 && len <= MAX_COMPONENT).then_some(NameLen(len))
}

/// Copies the name [`read_name`] read, `len` bytes, into the scratch path, ending at PATH_MAX
/// (where its NUL lands) as a walk leaves a path; None if it cannot be read whole. The caller
/// re-reads `rename_lock`'s sequence after it: the name was not moved meanwhile if it did not
/// change.
#[inline(always)]
fn copy_name(s: *mut Scratch, NameLen(len): NameLen) -> Option<()> {
    // Masked from a number the compiler cannot bound (see `resolve`): it knows `len`'s range
    // from `name_len` and would drop the mask the verifier needs.
    let at = number(s, PATH_MAX.wrapping_sub(len) as u64) as usize & (PATH_MAX - 1);
    // SAFETY: this CPU's scratch value; the mask keeps the copy inside the 2 * PATH_MAX buffer,
    // and the helper checks its source.
    unsafe {
        let copied = bpf_probe_read_kernel_str(
            (*s).path.as_mut_ptr().add(at) as *mut c_void,
            MAX_COMPONENT as u32 + 1,
            core::ptr::read_volatile(&raw const (*s).name.name) as *const c_void,
        );
        (copied == len as i64 + 1).then_some(())
    }
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
