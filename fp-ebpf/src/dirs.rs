//! The directory cache: what a decision on a name in a directory shares with every other name
//! there, so that a file created, opened or removed next to one decided before skips the walk up
//! the tree and the scan of its directories. Per directory (mount, dentry): its path, the
//! inode-table hits above it, and the evaluation's directory-name hits with where the final
//! component starts (`fp_common::policy::DirContext`). A decision in the directory then reads
//! the name and the file's own identity, rebuilds the path and evaluates the final component
//! only (`Evaluation::resume_below`: the same verdicts and deciding rules as the whole evaluation,
//! proven by the property test `sibling_evaluations_resume_exactly`).
//!
//! An entry is used under the same checks as a verdict cache entry ([`crate::cache`]): the
//! tables id, `rename_lock`'s and `mount_lock`'s sequences read before the walk that filled it,
//! the directory dentry's inode, its lifetime and a check word; [`crate::cache::forget`] drops it
//! when the dentry's memory gets an inode. The name's own dentry is read after the sequences are
//! checked and the sequences again after it, so a name moved meanwhile takes the walk. Not used
//! for a name that is a mount root or whose directory is one (procfs names the task's own
//! directory after the task there), nor by renames and links.
use aya_ebpf::helpers::generated::{bpf_probe_read_kernel, bpf_probe_read_kernel_str};
use core::ffi::c_void;
use fp_common::{
    kernel::PATH_MAX,
    policy::{DirContext, InodeKey, MAX_PREFIX, Op as PolicyOp, OpEntry},
};

use crate::{
    cache::{Cache, Stamp, mix, number, sequences},
    decide::start_walk,
    kernel::{
        OFF_DENTRY_D_INODE, OFF_DENTRY_D_NAME, OFF_DENTRY_D_PARENT, OFF_QSTR_LEN, OFF_QSTR_NAME,
        OFF_VFSMOUNT_MNT_ROOT, inode_identity, off, read,
    },
    maps::{DIRS, INODES, SCRATCH, Scratch},
    walk::{NO_MOUNT, RESOLVED},
};

/// One directory's share of its names' decisions; plain integers, as every map value.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct DirCached {
    check: u64,
    stamp: Stamp,
    local_state: u64,
    /// The walk's `up` and `local_up` for a name in the directory.
    up: [OpEntry; 3],
    local_up: [OpEntry; 3],
    pub(crate) context: DirContext,
    /// The directory's path, `context.cursor - 1` bytes.
    path: [u8; MAX_PREFIX],
}

const WORDS: usize = core::mem::size_of::<DirCached>() / 8;

impl DirCached {
    /// A hash of every word after `check`.
    #[inline(always)]
    fn check_word(&self) -> u64 {
        let words = self as *const DirCached as *const u64;
        (1..WORDS).fold(0x243f_6a88_85a3_08d3u64, |h, i| {
            // SAFETY: i < WORDS words of the value.
            mix(h, unsafe { core::ptr::read_volatile(words.add(i)) })
        })
    }
}

/// Resolves the walk's file (`tables`, `vfsmount` and `dentry` in the scratch value's walk) from
/// its directory's entry, if it has a usable one: leaves in the walk the results (path, identity,
/// hits) [`crate::walk`] would, with the entry's context in `s.dir` for `resume_below`. Nonzero:
/// no usable entry, the walk's fields untouched.
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
    let (tables, vfsmount, dentry) = unsafe {
        let w = &raw const (*s).walk;
        (
            core::ptr::read_volatile(&(*w).tables),
            core::ptr::read_volatile(&(*w).vfsmount),
            core::ptr::read_volatile(&(*w).dentry),
        )
    };
    match resolve(s, tables, vfsmount, dentry) {
        Some(()) => 0,
        None => 1,
    }
}

#[inline(always)]
fn resolve(s: *mut Scratch, tables: u64, vfsmount: u64, dentry: u64) -> Option<()> {
    let seqs = sequences()?;
    let mnt_root: u64 = read(vfsmount, off(&OFF_VFSMOUNT_MNT_ROOT)).ok()?;
    let parent: u64 = read(dentry, off(&OFF_DENTRY_D_PARENT)).ok()?;
    if dentry == mnt_root || parent == mnt_root || parent == dentry {
        return None;
    }
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
            read(parent, off(&OFF_DENTRY_D_INODE))
        })
    {
        return None;
    }
    // The name's own identity and inode-table entries (as the walk offers them at depth 0).
    // The identity events report is the first positive dentry's, as the walk's: the directory's
    // for a name not created yet.
    let inode: u64 = read(dentry, off(&OFF_DENTRY_D_INODE)).ok()?;
    let identified = if inode != 0 { inode } else { e.stamp.inode() };
    let (ino, dev) = inode_identity(identified).ok()?;
    let len: u32 = read(dentry, off(&OFF_DENTRY_D_NAME) + off(&OFF_QSTR_LEN)).ok()?;
    let name: u64 = read(dentry, off(&OFF_DENTRY_D_NAME) + off(&OFF_QSTR_NAME)).ok()?;
    let (len, cursor) = (len as usize, e.context.cursor as usize);
    if len == 0 || len > 255 || cursor < 2 || cursor > MAX_PREFIX {
        return None;
    }
    // The path, `dir/name`, ending at PATH_MAX as the walk leaves it: the directory's bytes
    // first (a constant-size copy that may run past PATH_MAX), then the '/' and the name, whose
    // NUL lands on PATH_MAX.
    // Indexes from a number the compiler cannot bound, so that it keeps the masks the verifier
    // needs (it proves them redundant from the checks above, which the verifier does not follow).
    let cursor = number(s, cursor as u64) as usize;
    let pos = PATH_MAX.wrapping_sub(cursor + len);
    // SAFETY: this CPU's scratch value; every range stays inside the 2 * PATH_MAX buffer by the
    // masks, and the helpers check their sources.
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
        let copied = bpf_probe_read_kernel_str(
            path.add((PATH_MAX - len) & (PATH_MAX - 1)) as *mut c_void,
            256,
            name as *const c_void,
        );
        if copied != len as i64 + 1 {
            return None;
        }
    }
    // The name was not moved while it was read.
    if sequences() != Some(seqs) {
        return None;
    }
    let mut own = [OpEntry::default(); 3];
    if inode != 0 {
        let key = InodeKey { session_id: tables, ino, dev, _pad: 0 };
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
        (*w).dev = dev as u64;
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
        let Some(stamp) = Stamp::new(s, Cache::Dirs, tables, vfsmount, dir, (*w).dir_inode, seqs)
        else {
            return 0;
        };
        (*e).stamp = stamp;
        (*e).local_state = (*w).local_state;
        (*e).up = (*w).up;
        (*e).local_up = (*w).local_up;
        (*e).context = context;
        (*e).check = (*e).check_word();
        // All of it was this decision's unless another one began on this CPU since.
        if core::ptr::read_volatile(&(*s).generation) != generation {
            return 0;
        }
        let _ = DIRS.insert(&dir, &*e, 0);
    }
    0
}
