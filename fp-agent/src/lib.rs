//! fp: per-agent file policies enforced in the kernel, with a tamper-evident audit log.
//!
//! One module per concept: `policy` (language, layering, compiler), `kernel` (BPF object, BTF
//! offsets, maps), `session` (cgroups), `audit` (the hash-chained log), `config` (the config
//! file), `daemon` (the control socket), `prompt` (the prompt tier), `cli` (the `fp` command).
pub mod audit;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod exit;
pub mod kernel;
pub mod op;
pub mod policy;
pub mod prompt;
pub mod session;
