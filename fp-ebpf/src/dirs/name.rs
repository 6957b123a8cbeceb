//! The name a decision in a directory reads for the directory cache: read by the program after
//! the sequences the decision runs under, and copied into the scratch path when an entry answers.

use aya_ebpf::helpers::generated::bpf_probe_read_kernel_str;
use core::ffi::c_void;
use fp_common::{kernel::PATH_MAX, policy::MAX_COMPONENT};

use crate::{
    cache::number,
    kernel::{
        OFF_DENTRY_D_INODE, OFF_DENTRY_D_NAME, OFF_DENTRY_D_PARENT, OFF_QSTR_LEN, OFF_QSTR_NAME,
        OFF_VFSMOUNT_MNT_ROOT, load, loaded_identity, off,
    },
    state::Scratch,
};

/// Reads the name (`vfsmount`, `dentry`: BTF-typed, see [`load`]) of a decision that runs under
/// `seqs` into `s` for [`super::fp_dir_resolve`]; false if it cannot be resolved from its directory: a
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

/// The length of the name [`read_name`] read, if a name of it can be copied whole.
#[derive(Clone, Copy)]
pub(crate) struct NameLen(pub(crate) usize);

/// [`NameLen`] of the name in `s.name`; None if it is empty or longer than a component can be.
#[inline(always)]
pub(crate) fn name_len(s: *const Scratch) -> Option<NameLen> {
    // SAFETY: this CPU's scratch value.
    let len = unsafe { core::ptr::read_volatile(&raw const (*s).name.len) } as usize;
    (len != 0 && len <= MAX_COMPONENT).then_some(NameLen(len))
}

/// Copies the name [`read_name`] read, `len` bytes, into the scratch path, ending at PATH_MAX
/// (where its NUL lands) as a walk leaves a path; None if it cannot be read whole. The caller
/// re-reads `rename_lock`'s sequence after it: the name was not moved meanwhile if it did not
/// change.
#[inline(always)]
pub(crate) fn copy_name(s: *mut Scratch, NameLen(len): NameLen) -> Option<()> {
    // Masked from a number the compiler cannot bound (see `crate::dirs::resolve`): it knows `len`'s range
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
