//! The kernel side as userspace sees it, one file per job: the embedded BPF objects
//! (`object`), what the running kernel's BTF says (`offsets`), where programs enter the kernel's
//! security checks (`backend`), loading and attaching the programs (`load`), proving the chosen
//! backend works (`probe`), the maps of sessions (`enforcer`, `tables`), pinning (`bpffs`).
mod backend;
mod bpffs;
pub mod btf;
mod enforcer;
mod load;
mod object;
mod offsets;
mod preemption;
mod probe;
pub mod tables;

use std::path::PathBuf;

use fp_common::kernel::ABI_VERSION;

pub use backend::{
    BACKEND_ENV, Backend, Chosen, FModRetFacts, active_lsms, chosen as chosen_backend,
    ftrace_enabled,
};
pub use bpffs::Bpffs;
pub use enforcer::{BrokerClock, Enforcer, HOLD_HOOKS, MapUsage, SESSION_LINKS, remove_pins};
pub use load::{NoopEntry, SessionCgroups, attach_noop, prepare_in_background};
pub use object::object;
pub use offsets::{
    Offset, kernel_release, lockdown_reason, rdonly_cast_ids, resolve_offsets, seq_counters,
};
pub use preemption::{Preemption, PreemptionFact, debugfs_mode, preemption};
pub use probe::{FTRACE_DISABLED, probe, probe_fmod_ret, ready};

/// Where fp pins maps and links: versioned so an fp with another ABI never reuses them.
pub fn pin_root() -> PathBuf {
    PathBuf::from(format!("/sys/fs/bpf/fp/v{ABI_VERSION}"))
}
