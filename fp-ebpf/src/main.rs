//! fp's BPF LSM programs. Kept thin: each hook names the file(s) it touches and the op, and calls
//! [`decide`], which finds the session of the current task, resolves the path from the system root,
//! looks it up in the session's tables and reports denials. docs/hooks.md has the hook -> op table.
//!
//! Kernel struct offsets are read-only globals written by userspace from the running kernel's BTF
//! (see fp_common::kernel::KERNEL_FIELDS); the verifier sees them as constants.
//!
//! One module per concept, in layers that import only downwards (docs/architecture.md, "fp-ebpf
//! modules"): `kernel` (offsets, reads, constants) and `outcome`; `state` (the per-CPU scratch
//! value and the state each concept keeps in it) and `session`; `tables` (the session's tables
//! and the evaluation), `report` (the event) and `cgroups`; `walk` (the path walk), `cache` (the
//! verdict cache), `dirs` (the directory cache), `created` (the creation slot) and `protect`;
//! `prompt`, `boundary` (the session boundary), `floor` (devices and kernel interfaces),
//! `terminal` (TIOCSTI and TIOCLINUX), `unix` (unix sockets served from outside); `decide`,
//! `sigio` (the boundary for a file's signals); `moves` (renames and links); and on top `hooks`
//! (the `#[lsm]` programs by object family). Each map lives beside the module that owns it.
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
mod moves;
mod outcome;
mod prompt;
mod protect;
mod report;
mod runtime;
mod session;
mod sigio;
mod state;
mod tables;
mod terminal;
mod unix;
mod walk;
mod writers;
