//! fp's BPF LSM programs. Kept thin: each hook names the file(s) it touches and the op, and calls
//! [`decide`], which finds the session of the current task, resolves the path from the system root,
//! looks it up in the session's tables and reports denials. docs/hooks.md has the hook -> op table.
//!
//! Kernel struct offsets are read-only globals written by userspace from the running kernel's BTF
//! (see fp_common::kernel::KERNEL_FIELDS); the verifier sees them as constants.
//!
//! One module per concept (docs/architecture.md, "fp-ebpf modules"): `kernel` (offsets, reads,
//! constants), `maps`, `session`, `walk` (the path walk), `tables` (the session's tables and the
//! evaluation), `decide`, `cache` (the verdict cache), `created`
//! (the creation slot), `dirs` (the directory cache), `moves`
//! (renames and links), `prompt`, `protect`, `boundary` (the session boundary), `sigio` (the boundary for a file's
//! signals), `floor` (devices and kernel interfaces), `terminal` (TIOCSTI and TIOCLINUX), `unix` (unix sockets served from outside), `report` (the event) and `hooks` (the `#[lsm]`
//! programs by object family).
#![no_std]
#![no_main]
// The BPF target has no `AtomicU64::fetch_add`; the intrinsic lowers to BPF_ATOMIC_ADD.
#![allow(internal_features)]
#![feature(core_intrinsics)]

mod boundary;
mod cache;
mod cgroups;
mod created;
mod decide;
mod dirs;
mod floor;
mod hooks;
mod kernel;
mod maps;
mod moves;
mod prompt;
mod protect;
mod report;
mod runtime;
mod session;
mod sigio;
mod tables;
mod terminal;
mod unix;
mod walk;
