//! `fp kernel probe`, and the first thing a load does: proves the chosen backend (the BPF LSM
//! and its per-cgroup programs, or fmod_ret) works on this kernel with pass-through programs
//! that cannot deny anything. And what fmod_ret programs can do here, which the probe reports.
use std::{os::fd::AsFd as _, path::Path};

use anyhow::{Context as _, anyhow, bail};
use aya::Ebpf;
use fp_common::kernel::{Hook, programs};

use super::{
    Bpffs,
    backend::{
        BACKEND_ENV, Backend, Chosen, FModRetFacts, active_lsms, chosen, compare_functions,
        ftrace_enabled,
    },
    load::{SessionCgroups, attach, open, trampoline_full},
    preemption::preemption,
};
use crate::owner::Owner;

/// What an agent (the daemon, or `fp run`'s embedded one) does before anything on the host
/// changes: proves its backend works here ([`probe`], on the cgroup v2 hierarchy mounted at
/// `cgroup2`), then mounts bpffs where fp pins if it is not mounted (unmounted when the guard
/// drops, if nothing is pinned there by then).
pub fn ready(cgroup2: &Path) -> anyhow::Result<Bpffs> {
    probe(cgroup2)?;
    Bpffs::mount()
}

/// Proves the backend this process chose ([`chosen`]) works here, with pass-through programs
/// that cannot deny anything, attached and detached again: on the BPF LSM, a program on
/// lsm/file_open, then a per-cgroup one (lsm_cgroup/mmap_file) on an empty cgroup made for it
/// under `cgroup2` (the hierarchy's mount) and removed after; on fmod_ret, a program on
/// security_file_open, and `kernel.ftrace_enabled`, without which none runs.
pub fn probe(cgroup2: &Path) -> anyhow::Result<&'static Chosen> {
    // A kernel locked down for confidentiality refuses BPF programs' reads of kernel memory
    // (LOCKDOWN_BPF_READ_KERNEL): the probe programs make none and would load, fp's would not.
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
    let chosen = chosen()?;
    match chosen.backend {
        Backend::BpfLsm => probe_bpf_lsm(cgroup2)?,
        Backend::FModRet => probe_fmod_ret_backend(chosen)?,
    }
    Ok(chosen)
}

/// [`probe`] on the BPF LSM. Reading `/sys/kernel/security/lsm` is not enough: some kernels
/// list `bpf` and still refuse LSM programs.
fn probe_bpf_lsm(cgroup2: &Path) -> anyhow::Result<()> {
    // Nor is loading enough: a kernel booted without `bpf` in its LSM list (lsm=...) loads and
    // attaches LSM programs but never runs them (the list matters where FP_BACKEND=bpf_lsm
    // chose this backend).
    if let Some(active) = active_lsms()
        && !active.split(',').any(|l| l == "bpf")
    {
        bail!(
            "fp cannot enforce on this kernel: the BPF LSM is not usable: `bpf` is not in the \
             active LSM list (active now: {active}); it needs CONFIG_BPF_LSM=y and `bpf` in \
             that list (boot with lsm=...,bpf, e.g. \
             lsm=lockdown,capability,landlock,yama,apparmor,bpf), or unset {BACKEND_ENV} to \
             enforce through fmod_ret"
        );
    }
    // The probe program looks no session up: where sessions sit does not matter.
    let (mut ebpf, btf, _) = open(SessionCgroups { level: 0 })?;
    let link =
        attach(&mut ebpf, btf, &[(programs::PROBE, Hook::FileOpen.name())], None).map_err(|e| {
            // The kernel's reason (EPERM, ...), without the loader's empty verifier log.
            let cause = e.root_cause().to_string();
            let active = std::fs::read_to_string("/sys/kernel/security/lsm")
                .map(|l| format!(" (active now: {})", l.trim()))
                .unwrap_or_default();
            anyhow!(
                "fp cannot enforce on this kernel: the BPF LSM is not usable: it needs \
                 CONFIG_BPF_LSM=y and `bpf` in the active LSM list{active} (boot with \
                 lsm=...,bpf, e.g. lsm=lockdown,capability,landlock,yama,apparmor,bpf); the \
                 kernel refused a pass-through LSM program: {cause}"
            )
        })?;
    drop(link);
    // The checks of pending files are per-cgroup programs, which need more of the kernel.
    // Those of probes killed before they removed theirs (nothing ever runs in one).
    crate::owner::remove_dead(cgroup2, PROBE_CGROUP_PREFIX);
    let empty = cgroup2.join(Owner::current()?.name(PROBE_CGROUP_PREFIX));
    std::fs::create_dir(&empty).with_context(|| format!("creating {}", empty.display()))?;
    let probed = probe_cgroup(&mut ebpf, btf, &empty);
    let removed =
        std::fs::remove_dir(&empty).with_context(|| format!("removing {}", empty.display()));
    probed.and(removed)
}

/// [`probe`] on fmod_ret: the probe program attaches, every mandatory hook's function is there
/// (else [`open`] has refused, naming them), and `kernel.ftrace_enabled` is 1.
fn probe_fmod_ret_backend(chosen: &Chosen) -> anyhow::Result<()> {
    let facts = probe_fmod_ret()?;
    if let (true, Some(error)) = (facts.full, &facts.error) {
        bail!("fp cannot enforce through fmod_ret, its backend here ({}): {error}", chosen.why);
    }
    if let Some(error) = &facts.error {
        bail!(
            "fp cannot enforce on this kernel: the BPF LSM backend is not chosen ({}) and \
             fmod_ret programs on its security_* functions do not attach (they need BPF \
             trampolines: x86_64, CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS, CONFIG_BPF_JIT); \
             the kernel refused a pass-through program: {error}; where the kernel has \
             CONFIG_BPF_LSM=y, booting with lsm=...,bpf gives fp the BPF LSM backend",
            chosen.why
        );
    }
    if facts.ftrace_enabled == Some(false) {
        bail!("{FTRACE_DISABLED}");
    }
    match facts.preemption.refusal() {
        Some(why) => bail!("{why}"),
        None => Ok(()),
    }
}

/// What fp says where `kernel.ftrace_enabled` is 0 on the fmod_ret backend.
pub const FTRACE_DISABLED: &str = "fp cannot enforce with the fmod_ret backend while \
     kernel.ftrace_enabled is 0: the kernel runs no fmod_ret program then (they stay attached); \
     set it to 1 (sysctl kernel.ftrace_enabled=1), or enforce through the BPF LSM (boot with \
     lsm=...,bpf)";

/// What fmod_ret programs on the `security_*` functions can do here, for `fp kernel probe`:
/// attaches fp's pass-through one to `security_file_open` and detaches it, and compares the
/// function of each hook fp attaches with its hook.
pub fn probe_fmod_ret() -> anyhow::Result<FModRetFacts> {
    // The probe program looks no session up: where sessions sit does not matter.
    let (mut ebpf, btf, hooks) = open(SessionCgroups { level: 0 })?;
    let program = [(programs::PROBE_FMOD_RET, Hook::FileOpen.name())];
    let attached = attach(&mut ebpf, btf, &program, None).map(drop);
    let names: Vec<&str> = hooks.iter().map(|(_, hook)| hook.name()).collect();
    let (missing, other_arguments) = compare_functions(super::btf::Btf::from_sys()?, &names);
    let full = attached.as_ref().is_err_and(trampoline_full);
    Ok(FModRetFacts {
        attaches: attached.is_ok(),
        // The kernel's reason, or with a full function the limit it names.
        error: attached.err().map(|e| match full {
            true => format!("{e:#}"),
            false => e.root_cause().to_string(),
        }),
        full,
        missing,
        other_arguments,
        ftrace_enabled: ftrace_enabled(),
        preemption: preemption(),
    })
}

/// Attaches the probe's per-cgroup twin to the empty cgroup `empty`, then detaches it.
fn probe_cgroup(ebpf: &mut Ebpf, btf: &aya::Btf, empty: &Path) -> anyhow::Result<()> {
    let cgroup =
        std::fs::File::open(empty).with_context(|| format!("opening {}", empty.display()))?;
    let programs = [(programs::PROBE_CGROUP, Hook::MmapFile.name())];
    let links = attach(ebpf, btf, &programs, Some(cgroup.as_fd())).map_err(|e| {
        anyhow!(
            "fp cannot enforce on this kernel: per-cgroup BPF LSM programs are not usable: fp \
             needs BPF_LSM_CGROUP (Linux 6.0+, CONFIG_CGROUP_BPF=y) and two of the 10 per-cgroup \
             hook slots for its checks of pending files (docs/hooks.md); the kernel refused a \
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
