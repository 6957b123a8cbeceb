//! `fp kernel probe`, and the first thing a load does: proves the BPF LSM and its per-cgroup
//! programs work on this kernel with pass-through programs that cannot deny anything. And what
//! fmod_ret programs could do here, which the probe reports.
use std::{os::fd::AsFd as _, path::Path};

use anyhow::{Context as _, anyhow, bail};
use aya::Ebpf;
use fp_common::kernel::{Hook, programs};

use super::{
    Bpffs,
    backend::{FModRetFacts, compare_functions, ftrace_enabled},
    load::{SessionCgroups, attach, open},
};
use crate::owner::Owner;

/// What an agent (the daemon, or `fp run`'s embedded one) does before anything on the host
/// changes: proves the BPF LSM works here ([`probe`], on the cgroup v2 hierarchy mounted at
/// `cgroup2`), then mounts bpffs where fp pins if it is not mounted (unmounted when the guard
/// drops, if nothing is pinned there by then).
pub fn ready(cgroup2: &Path) -> anyhow::Result<Bpffs> {
    probe(cgroup2)?;
    Bpffs::mount()
}

/// Proves BPF LSM works here: loads and attaches the pass-through probe program (it cannot deny
/// anything), then detaches it; then its per-cgroup twin, on an empty cgroup made for it under
/// `cgroup2` (the hierarchy's mount) and removed after. Reading `/sys/kernel/security/lsm` is not
/// enough: some kernels list `bpf` and still refuse LSM programs.
pub fn probe(cgroup2: &Path) -> anyhow::Result<()> {
    // Nor is loading enough: a kernel booted without `bpf` in its LSM list (lsm=...) loads and
    // attaches LSM programs but never runs them. The list is read where securityfs shows it.
    if let Ok(active) = std::fs::read_to_string("/sys/kernel/security/lsm")
        && !active.trim().split(',').any(|l| l == "bpf")
    {
        bail!(
            "BPF LSM is not usable on this kernel: `bpf` is not in the active LSM list (active \
             now: {}); it needs CONFIG_BPF_LSM=y and `bpf` in that list (boot with lsm=...,bpf, \
             e.g. lsm=lockdown,capability,landlock,yama,apparmor,bpf)",
            active.trim()
        );
    }
    // A kernel locked down for confidentiality refuses BPF programs' reads of kernel memory
    // (LOCKDOWN_BPF_READ_KERNEL): the probe program makes none and would load, fp's would not.
    if let Ok(lockdown) = std::fs::read_to_string("/sys/kernel/security/lockdown")
        && lockdown.contains("[confidentiality]")
    {
        bail!(
            "fp cannot enforce on this kernel: it is locked down for confidentiality \
             (/sys/kernel/security/lockdown: {}), which refuses BPF programs that read kernel \
             memory, as fp's do to resolve paths; boot without lockdown=confidentiality \
             (lockdown=integrity keeps the rest of lockdown)",
            lockdown.trim()
        );
    }
    // The probe program looks no session up: where sessions sit does not matter.
    let (mut ebpf, btf, _) = open(SessionCgroups { level: 0, parent: 0 })?;
    let link =
        attach(&mut ebpf, btf, &[(programs::PROBE, Hook::FileOpen.name())], None).map_err(|e| {
            // The kernel's reason (EPERM, ...), without the loader's empty verifier log.
            let cause = e.root_cause().to_string();
            let active = std::fs::read_to_string("/sys/kernel/security/lsm")
                .map(|l| format!(" (active now: {})", l.trim()))
                .unwrap_or_default();
            anyhow!(
                "BPF LSM is not usable on this kernel: it needs CONFIG_BPF_LSM=y and `bpf` in the \
             active LSM list{active} (boot with lsm=...,bpf, e.g. \
             lsm=lockdown,capability,landlock,yama,apparmor,bpf); the kernel refused a \
             pass-through LSM program: {cause}"
            )
        })?;
    drop(link);
    // The hottest hooks are per-cgroup programs, which need more of the kernel.
    // Those of probes killed before they removed theirs (nothing ever runs in one).
    crate::owner::remove_dead(cgroup2, PROBE_CGROUP_PREFIX);
    let empty = cgroup2.join(Owner::current()?.name(PROBE_CGROUP_PREFIX));
    std::fs::create_dir(&empty).with_context(|| format!("creating {}", empty.display()))?;
    let probed = probe_cgroup(&mut ebpf, btf, &empty);
    let removed =
        std::fs::remove_dir(&empty).with_context(|| format!("removing {}", empty.display()));
    probed.and(removed)
}

/// What fmod_ret programs on the `security_*` functions can do here, for `fp kernel probe`:
/// attaches fp's pass-through one to `security_file_open` and detaches it, and compares the
/// function of each hook fp attaches with its hook.
pub fn probe_fmod_ret() -> anyhow::Result<FModRetFacts> {
    // The probe program looks no session up: where sessions sit does not matter.
    let (mut ebpf, btf, hooks) = open(SessionCgroups { level: 0, parent: 0 })?;
    let program = [(programs::PROBE_FMOD_RET, Hook::FileOpen.name())];
    let attached = attach(&mut ebpf, btf, &program, None).map(drop);
    let names: Vec<&str> = hooks.iter().map(|(_, hook)| hook.name()).collect();
    let (missing, other_arguments) = compare_functions(super::btf::Btf::from_sys()?, &names);
    Ok(FModRetFacts {
        attaches: attached.is_ok(),
        error: attached.err().map(|e| e.root_cause().to_string()),
        missing,
        other_arguments,
        ftrace_enabled: ftrace_enabled(),
    })
}

/// Attaches the probe's per-cgroup twin to the empty cgroup `empty`, then detaches it.
fn probe_cgroup(ebpf: &mut Ebpf, btf: &aya::Btf, empty: &Path) -> anyhow::Result<()> {
    let cgroup =
        std::fs::File::open(empty).with_context(|| format!("opening {}", empty.display()))?;
    let programs = [(programs::PROBE_CGROUP, Hook::FileOpen.name())];
    let links = attach(ebpf, btf, &programs, Some(cgroup.as_fd())).map_err(|e| {
        anyhow!(
            "per-cgroup BPF LSM programs are not usable on this kernel: fp needs \
             BPF_LSM_CGROUP (Linux 6.0+, CONFIG_CGROUP_BPF=y) and one of the 10 per-cgroup hook \
             slots for each of its 10 hottest hooks (docs/hooks.md); the kernel refused a \
             pass-through program: {}",
            e.root_cause()
        )
    })?;
    drop(links); // detached before the cgroup goes
    Ok(())
}

/// The name of [`probe`]'s cgroup, before the probing process's pid and start time
/// ([`Owner`]).
const PROBE_CGROUP_PREFIX: &str = "fp-probe-";
