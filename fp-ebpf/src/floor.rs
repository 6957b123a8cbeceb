//! The floor of the session boundary for devices and kernel interfaces: what no session process
//! does, whatever its policy says (docs/threat-model.md, "The session boundary"). A device node
//! made in a writable workspace reads a disk past every rule, a block device is a whole
//! filesystem's bytes, and the kernel's own interfaces (/dev/mem, /proc/kcore, kexec, modules)
//! reach its memory or replace it.
use aya_ebpf::{macros::map, maps::HashMap};
use fp_common::{
    floor::{
        KERNEL_FILESYSTEMS, LOAD_FIRMWARE, PERF_SECURITY_OPEN, S_IFBLK, S_IFCHR, S_IFMT,
        mknod_device,
    },
    kernel::{BlockDeviceKey, Hook, KernelOp, Reason, SESSION_PERF},
};

use crate::{
    kernel::{
        OFF_INODE_I_MODE, OFF_INODE_I_RDEV, OFF_INODE_I_SB, OFF_PROC_INODE_PDE,
        OFF_PROC_INODE_SYSCTL, OFF_PROC_INODE_VFS_INODE, OFF_SUPER_BLOCK_S_MAGIC, PROC_SUPER_MAGIC,
        load, loaded_identity, off, read,
    },
    protect::{refuse_device, refuse_kernel_setting_write, refuse_without_path},
    session::Session,
};

/// The block devices each session's policy names (`block_devices`), by device number: written
/// by userspace when the session's tables are installed, removed when it ends.
#[map]
pub(crate) static BLOCK_DEVICES: HashMap<BlockDeviceKey, u8> = HashMap::with_max_entries(1024, 0);

/// Refuses a block or character device node (`mknod`, `mknodat`), whatever the policy: char 0:0
/// is overlayfs's whiteout, which opens nothing and which the kernel lets unprivileged users make.
/// `dev` is as mknod(2) was given it (the hook runs before the kernel decodes it); the event
/// names the device in the kernel's encoding.
#[inline(always)]
pub(crate) fn refuse_device_node(session: &Session, mode: u32, dev: u32) -> Option<i32> {
    let kind = mode & S_IFMT;
    (kind == S_IFBLK || kind == S_IFCHR && dev != 0)
        .then(|| refuse_device(session, Hook::PathMknod, KernelOp::Write, mknod_device(dev)))
}

/// Refuses the open of a block device, by whatever name (a node the session did not make
/// included): its bytes are every file of a filesystem, past the rules of each. A device the
/// session's policy names (`BLOCK_DEVICES`) is left to its rules for the name it was opened by.
/// `inode`: the BTF-typed `f_inode` of the open file.
#[inline(always)]
pub(crate) fn refuse_block_device(session: &Session, inode: u64, op: KernelOp) -> Option<i32> {
    let mode: u16 = load(inode, off(&OFF_INODE_I_MODE));
    if mode as u32 & S_IFMT != S_IFBLK {
        return None;
    }
    let rdev: u32 = load(inode, off(&OFF_INODE_I_RDEV));
    let key = BlockDeviceKey { session: session.id, rdev: rdev as u64 };
    // SAFETY: a presence check; the value is not read.
    if unsafe { BLOCK_DEVICES.get(&key) }.is_some() {
        return None;
    }
    Some(refuse_device(session, Hook::FileOpen, op, rdev))
}

/// Refuses an open for writing of a kernel setting, by filesystem and inode rather than path (a
/// name can be another mount of the same files): a file of [`KERNEL_FILESYSTEMS`], or a procfs
/// file of the kernel's own rather than of a process, a sysctl (`core_pattern` and `modprobe` name
/// programs the kernel runs outside every session) or another `/proc` entry (`sysrq-trigger`).
/// `/proc/PID/*` stays the policy's. `inode`: the BTF-typed `f_inode` of the open file.
#[inline(always)]
pub(crate) fn refuse_kernel_setting(session: &Session, inode: u64) -> Option<i32> {
    let sb: u64 = load(inode, off(&OFF_INODE_I_SB));
    let magic: u64 = load(sb, off(&OFF_SUPER_BLOCK_S_MAGIC));
    let kernel = match magic {
        PROC_SUPER_MAGIC => {
            // `struct proc_inode` holds the inode; `inode` is a BTF pointer, this a number.
            let proc = inode - off(&OFF_PROC_INODE_VFS_INODE) as u64;
            // Unreadable: refused (fail closed).
            let set = |at: usize| read::<u64>(proc, at).map_or(true, |p| p != 0);
            set(off(&OFF_PROC_INODE_PDE)) || set(off(&OFF_PROC_INODE_SYSCTL))
        }
        _ => KERNEL_FILESYSTEMS.contains(&magic),
    };
    kernel.then(|| refuse_kernel_setting_write(session, loaded_identity(inode), magic))
}

/// Refuses every kernel interface the kernel's lockdown guards (`enum lockdown_reason`, in the
/// event's inode field): /dev/mem and /dev/port, /proc/kcore, kexec, raw I/O ports and MSRs,
/// kprobes and kernel perf events, tracefs, debugfs, unsigned modules: a session runs as under
/// `lockdown=confidentiality`.
#[inline(always)]
pub(crate) fn refuse_locked_down(session: &Session, what: u32) -> i32 {
    refuse_without_path(
        session,
        Hook::LockedDown,
        KernelOp::Write,
        Reason::Boundary,
        (what as u64, 0),
    )
}

/// Refuses a module, kexec image, policy or certificate handed to the kernel (`init_module`,
/// `finit_module`, `kexec_load`, `kexec_file_load`), by its id (the event's inode field);
/// firmware passes.
#[inline(always)]
pub(crate) fn refuse_kernel_load(session: &Session, hook: Hook, id: u32) -> i32 {
    if id == LOAD_FIRMWARE {
        return 0;
    }
    refuse_without_path(session, hook, KernelOp::Write, Reason::Boundary, (id as u64, 0))
}

/// Refuses a perf event beyond the counters of processes (the event's inode field names the
/// check): CPU-wide events see every process, kernel ones and tracepoints the kernel. Counting a
/// process's user space (`perf stat -e cycles:u`) passes; which process is the ptrace check's.
/// A session whose policy's `kernel_interfaces` has `perf` (a profiler's) passes every check.
#[inline(always)]
pub(crate) fn refuse_perf_event(session: &Session, check: u32) -> i32 {
    if check == PERF_SECURITY_OPEN || session.info.flags & SESSION_PERF != 0 {
        return 0;
    }
    refuse_without_path(
        session,
        Hook::PerfEventOpen,
        KernelOp::Write,
        Reason::Boundary,
        (check as u64, 0),
    )
}

/// Refuses a module the kernel would load for the session (an unknown device, protocol, binary
/// format or filesystem asks for one): modprobe runs outside every session, and a module it loads
/// is kernel code.
#[inline(always)]
pub(crate) fn refuse_module_request(session: &Session) -> i32 {
    refuse_without_path(
        session,
        Hook::KernelModuleRequest,
        KernelOp::Write,
        Reason::Boundary,
        (0, 0),
    )
}
