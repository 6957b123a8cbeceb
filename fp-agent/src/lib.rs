//! fp: per-agent file policies enforced in the kernel, with a tamper-evident audit log.
//!
//! One module per concept: `policy` (language, layering, compiler), `kernel` (BPF object, BTF
//! offsets, maps), `session` (cgroups, the session manager), `audit` (the hash-chained log),
//! `config` (the config file), `input` (bounded reads of the files a user names), `prompt` (the
//! prompt tier), `agent` (what the daemon and `fp run` both run: audit log, sessions, prompt
//! broker), `daemon` (the control socket), `cli` (the `fp` command).
pub mod agent;
pub mod audit;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod exit;
pub mod input;
pub mod kernel;
pub mod launch;
pub mod mount_ns;
pub mod owner;
pub mod policy;
pub mod prompt;
pub mod session;
