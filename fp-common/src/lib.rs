//! Types shared between the fp BPF programs (`fp-ebpf`) and userspace (`fp-agent`).
//!
//! Everything here is `no_std`, allocation-free and `#[repr(C)]` without implicit padding, so the
//! same bytes mean the same thing on both sides of a map or ring buffer.
#![no_std]

pub mod check;
pub mod floor;
pub mod kernel;
pub mod op;
pub mod policy;
pub mod refer;
