//! The floor of the session boundary for devices and kernel interfaces: what no session process
//! does, whatever its policy says (docs/threat-model.md, "The session boundary"). A device node
//! made in a writable workspace reads a disk past every rule, a block device is a whole
//! filesystem's bytes, and the kernel's own interfaces (/dev/mem, /proc/kcore, kexec, modules)
//! reach its memory or replace it.
use fp_common::kernel::{Hook, Op, Reason};

use crate::{
    kernel::{OFF_FILE_F_INODE, OFF_INODE_I_MODE, load, loaded_identity, off},
    protect::refuse_without_path,
    session::Session,
};

const S_IFMT: u32 = 0o170000;
const S_IFBLK: u32 = 0o060000;
const S_IFCHR: u32 = 0o020000;

/// `enum kernel_read_file_id` and `enum kernel_load_data_id` (the same numbers in both): a
/// driver asks for its firmware in whatever task triggers it, which may be a session's.
const FIRMWARE: u32 = 1;

/// Refuses a block or character device node (`mknod`, `mknodat`): char 0:0 is overlayfs's
/// whiteout, which opens nothing and which the kernel lets unprivileged users make.
#[inline(always)]
pub(crate) fn refuse_device_node(session: &Session, mode: u32, dev: u32) -> Option<i32> {
    let kind = mode & S_IFMT;
    (kind == S_IFBLK || kind == S_IFCHR && dev != 0)
        .then(|| refuse_without_path(session, Hook::PathMknod, Op::Write, Reason::Boundary, (0, 0)))
}

/// Refuses the open of a block device, by whatever name (a node the session did not make
/// included): its bytes are every file of a filesystem, past the rules of each.
#[inline(always)]
pub(crate) fn refuse_block_device(session: &Session, file: u64, op: Op) -> Option<i32> {
    let inode: u64 = load(file, off(&OFF_FILE_F_INODE));
    let mode: u16 = load(inode, off(&OFF_INODE_I_MODE));
    (mode as u32 & S_IFMT == S_IFBLK).then(|| {
        refuse_without_path(session, Hook::FileOpen, op, Reason::Boundary, loaded_identity(inode))
    })
}

/// Refuses every kernel interface the kernel's lockdown guards (`enum lockdown_reason`, in the
/// event's inode field): /dev/mem and /dev/port, /proc/kcore, kexec, raw I/O ports and MSRs,
/// kprobes and kernel perf events, tracefs, debugfs, unsigned modules: a session runs as under
/// `lockdown=confidentiality`.
#[inline(always)]
pub(crate) fn refuse_locked_down(session: &Session, what: u32) -> i32 {
    refuse_without_path(session, Hook::LockedDown, Op::Write, Reason::Boundary, (what as u64, 0))
}

/// Refuses a module, kexec image, policy or certificate handed to the kernel (`init_module`,
/// `finit_module`, `kexec_load`, `kexec_file_load`), by its id (the event's inode field);
/// firmware passes.
#[inline(always)]
pub(crate) fn refuse_kernel_load(session: &Session, hook: Hook, id: u32) -> i32 {
    if id == FIRMWARE {
        return 0;
    }
    refuse_without_path(session, hook, Op::Write, Reason::Boundary, (id as u64, 0))
}
