//! The kernel side as userspace sees it: the embedded BPF object, kernel struct offsets from BTF,
//! loading and attaching the LSM programs, pinning, and the maps the programs consult.
mod bpffs;
pub mod btf;
mod enforcer;
pub mod tables;

pub use bpffs::Bpffs;
pub use enforcer::{BrokerClock, Enforcer, HOLD_HOOKS, MapUsage, SESSION_LINKS, remove_pins};

use std::{
    os::fd::{AsFd as _, BorrowedFd},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, anyhow, bail};
use aya::{
    Ebpf, EbpfLoader,
    programs::{LsmCgroup, Program, links::FdLink},
};
use fp_common::kernel::{
    ABI_VERSION, Hook, KERNEL_FIELDS, OPTIONAL_FIELDS, RDONLY_CAST, RDONLY_CAST_CALL, SEQ_COUNTERS,
    SEQCOUNT, SEQCOUNT_BTF_ID, SEQCOUNT_SEQUENCE, SESSION_CGROUP_LEVEL, SESSION_PARENT_CGROUP,
    programs,
};

use crate::owner::Owner;

/// Where session cgroups sit, as the programs are loaded to find a task's session: its ancestor
/// at `level`, looked up only when its ancestor one level above is `parent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SessionCgroups {
    /// cgroup v2 level of session cgroups (the parent's + 1).
    pub level: u32,
    /// cgroup id (the directory's inode number) of the one cgroup that holds them.
    pub parent: u64,
}

/// The BPF object built from fp-ebpf by build.rs.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/fp"));

/// The embedded BPF object, or an error if this binary was built with `FP_EBPF_STUB=1`.
pub fn object() -> anyhow::Result<&'static [u8]> {
    if cfg!(fp_ebpf_stub) || OBJECT.is_empty() {
        bail!(
            "this fp was built with FP_EBPF_STUB=1 and carries no BPF programs; rebuild without it"
        );
    }
    Ok(OBJECT)
}

/// fp-ebpf's pass-through programs (`fp-noop`), for the benchmark's `noop` phase only.
static NOOP_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/fp-noop"));

/// For `cargo xtask bench kernel` only (`fp-bench-load noop`): loads and attaches fp-ebpf's
/// pass-through programs (`noop_*`, each returning the earlier programs' verdict) to exactly the
/// hooks fp attaches on this kernel, with the same choice of prototype, so the benchmark can tell
/// the cost of a BPF LSM program on these hooks from the cost of fp's. They detach when the
/// returned links and object are dropped. fp itself never calls this.
///
/// With `cgroup`, the hooks fp attaches per cgroup get the per-cgroup twins (`noop_cgroup_*`)
/// attached to that cgroup instead, as fp's programs are to each session's cgroup: the floor of
/// fp's own design for the tasks in it or below it (the kernel's per-cgroup dispatch runs the
/// programs of a cgroup and its ancestors alike, from one array per cgroup).
pub fn attach_noop(cgroup: Option<BorrowedFd>) -> anyhow::Result<(Ebpf, Vec<FdLink>)> {
    if cfg!(fp_ebpf_stub) || NOOP_OBJECT.is_empty() {
        bail!("this build carries no BPF programs (FP_EBPF_STUB=1)");
    }
    let Prepared { hooks, btf, .. } = prepared()?;
    // A loader of its own: the shared one carries fp's globals, which this object lacks.
    let mut ebpf = EbpfLoader::new()
        .btf(Some(btf))
        .load(NOOP_OBJECT)
        .context("loading the pass-through BPF object")?;
    let names: Vec<(String, &str)> = hooks
        .iter()
        .map(|(program, hook)| {
            let stem = program.strip_prefix("fp_").unwrap_or(program);
            let twin = format!("noop_cgroup_{stem}");
            let name = match cgroup.is_some() && ebpf.program(&twin).is_some() {
                true => twin,
                false => format!("noop_{stem}"),
            };
            (name, hook.name())
        })
        .collect();
    let programs: Vec<(&str, &str)> = names.iter().map(|(p, h)| (p.as_str(), *h)).collect();
    let links = attach(&mut ebpf, btf, &programs, cgroup)?;
    Ok((ebpf, links))
}

/// Where fp pins maps and links: versioned so an fp with another ABI never reuses them.
pub fn pin_root() -> PathBuf {
    PathBuf::from(format!("/sys/fs/bpf/fp/v{ABI_VERSION}"))
}

/// A resolved kernel struct offset, passed to the programs as a read-only global.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Offset {
    pub global: &'static str,
    pub strukt: &'static str,
    pub field: &'static str,
    /// The field's byte offset; None for an [`OPTIONAL_FIELDS`] one the kernel lacks.
    pub offset: Option<u32>,
    /// What the global holds: the offset, or for an optional field the offset plus one (0: absent).
    #[serde(skip)]
    pub value: u32,
}

/// Resolves every field the programs read from the running kernel's BTF. Any field that cannot be
/// resolved stops the load, naming the field and the kernel; an [`OPTIONAL_FIELDS`] one the
/// kernel lacks is 0 (one it has, its offset plus one).
pub fn resolve_offsets(btf: &btf::Btf) -> anyhow::Result<Vec<Offset>> {
    let optional = OPTIONAL_FIELDS.iter().map(|f| {
        let offset = btf.member_offset(f.strukt, f.field).ok();
        let value = offset.map_or(0, |o| o + 1);
        Ok(Offset { global: f.global, strukt: f.strukt, field: f.field, offset, value })
    });
    KERNEL_FIELDS
        .iter()
        .map(|f| {
            let offset = btf.member_offset(f.strukt, f.field).with_context(|| {
                format!(
                    "cannot resolve struct {}.{} (global {}) on kernel {}",
                    f.strukt,
                    f.field,
                    f.global,
                    kernel_release()
                )
            })?;
            Ok(Offset {
                global: f.global,
                strukt: f.strukt,
                field: f.field,
                offset: Some(offset),
                value: offset,
            })
        })
        .chain(optional)
        .collect()
}

/// The addresses of the kernel's sequence counters the verdict cache checks its entries against
/// ([`SEQ_COUNTERS`], in order), or None when the kernel does not show them (no
/// `CONFIG_KALLSYMS_ALL`, or addresses hidden by `kptr_restrict`): the cache is then off and every
/// decision walks its path, which is slower and exactly as sound.
pub fn seq_counters(btf: &btf::Btf) -> Option<[u64; 2]> {
    let offset = btf.member_offset(SEQCOUNT_SEQUENCE.0, SEQCOUNT_SEQUENCE.1).ok()?;
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").ok()?;
    let mut found = [0u64; 2];
    for line in kallsyms.lines() {
        let mut fields = line.split_whitespace();
        let (Some(addr), Some(_kind), Some(name), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue; // module symbols carry a fourth field; these two are in vmlinux
        };
        if let Some(i) = SEQ_COUNTERS.iter().position(|c| c.symbol == name) {
            found[i] = u64::from_str_radix(addr, 16).ok()?;
        }
    }
    found.iter().all(|&a| a != 0).then(|| found.map(|a| a + u64::from(offset)))
}

/// The object as the kernel's verifier gets it where the programs can read the sequence
/// counters with one load each (see [`SEQCOUNT_BTF_ID`]).
struct SeqReads {
    /// The object with its `bpf_rdonly_cast` calls made.
    object: &'static [u8],
    /// [`SEQCOUNT_BTF_ID`]'s value.
    seqcount_btf_id: u32,
}

/// [`SeqReads`] on this kernel, or None where it has no [`RDONLY_CAST`] (6.1), or no `struct
/// seqcount` that starts with its `sequence`, or where this build carries no programs: the
/// programs then read the counters with a helper call each.
fn seq_reads(btf: &btf::Btf) -> anyhow::Result<Option<SeqReads>> {
    let Some((kfunc, seqcount)) = rdonly_cast_ids(btf).filter(|_| !OBJECT.is_empty()) else {
        return Ok(None);
    };
    let (object, made) = with_kfunc_calls(OBJECT, kfunc)?;
    Ok((made > 0).then_some(SeqReads { object, seqcount_btf_id: seqcount }))
}

/// The BTF ids of [`RDONLY_CAST`] and of `struct seqcount` if the programs can read the sequence
/// counters through it on this kernel (6.2 and later): it has both, and `sequence` lies first.
pub fn rdonly_cast_ids(btf: &btf::Btf) -> Option<(u32, u32)> {
    let kfunc = btf.type_id(btf::Kind::Func, RDONLY_CAST)?;
    let seqcount = btf.type_id(btf::Kind::Struct, SEQCOUNT.0)?;
    (btf.member_offset(SEQCOUNT.0, SEQCOUNT.1).ok() == Some(0)).then_some((kfunc, seqcount))
}

/// A copy of `object` with every helper call numbered [`RDONLY_CAST_CALL`] in its code made a
/// call of the kernel function whose BTF id is `kfunc` (the toolchain cannot emit kfunc calls),
/// and how many it made. Aligned as the embedded object (the ELF reader wants its headers
/// aligned), and kept for the process: it is built once, by [`prepared`].
fn with_kfunc_calls(object: &[u8], kfunc: u32) -> anyhow::Result<(&'static [u8], usize)> {
    use object::{Object as _, ObjectSection as _, SectionKind};
    /// `src_reg` of a call of a kernel function (`BPF_PSEUDO_KFUNC_CALL`) in a call's register
    /// byte (`dst_reg` in the low nibble, `src_reg` in the high one).
    const KFUNC_CALL_REGS: u8 = 2 << 4;
    let words = Box::leak(vec![0u64; object.len().div_ceil(8)].into_boxed_slice());
    // SAFETY: the leaked u64s as bytes: every byte pattern is valid and the length lies within
    // the allocation, which lives as long as the process.
    let copy: &'static mut [u8] =
        unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), object.len()) };
    copy.copy_from_slice(object);
    let file = object::File::parse(object).context("parsing the BPF object")?;
    let mut made = 0;
    for section in file.sections().filter(|s| s.kind() == SectionKind::Text) {
        let Some((start, size)) = section.file_range() else { continue };
        let code = usize::try_from(start)
            .ok()
            .zip(usize::try_from(start + size).ok())
            .and_then(|(start, end)| copy.get_mut(start..end))
            .ok_or_else(|| anyhow!("BPF object section {:?} out of bounds", section.name()))?;
        for insn in code.chunks_exact_mut(8) {
            // BPF_JMP | BPF_CALL with no registers: a helper call, its number in the last 4 bytes.
            if insn[..2] == [0x85, 0] && insn[4..] == RDONLY_CAST_CALL.to_le_bytes() {
                insn[1] = KFUNC_CALL_REGS;
                insn[4..].copy_from_slice(&kfunc.to_le_bytes());
                made += 1;
            }
        }
    }
    Ok((copy, made))
}

pub fn kernel_release() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// The hooks to attach on a kernel, each with the name of its BPF program.
type HookPrograms = Vec<(&'static str, Hook)>;

/// What every load of the BPF object needs from the running kernel. Each BTF parse takes ~0.4 s
/// under TCG and a load needs three (fp's reader for the offsets and hooks, aya's for attaching,
/// and the one `EbpfLoader::new` always makes): they run side by side, once per process, and
/// `fp run`'s two loads (the probe, then the programs) share the loader.
struct Prepared {
    offsets: Vec<Offset>,
    /// [`seq_counters`]: 0 turns the verdict cache off.
    seq_counters: [u64; 2],
    seq_reads: Option<SeqReads>,
    hooks: HookPrograms,
    btf: aya::Btf,
    loader: std::sync::Mutex<EbpfLoader<'static>>,
}

fn prepared() -> anyhow::Result<&'static Prepared> {
    static PREPARED: std::sync::OnceLock<Result<Prepared, String>> = std::sync::OnceLock::new();
    // A second caller waits for the first instead of parsing again.
    let prepared = PREPARED.get_or_init(|| {
        std::thread::scope(|scope| {
            let loader = scope.spawn(EbpfLoader::new);
            let btf = scope.spawn(|| aya::Btf::from_sys_fs().context("reading kernel BTF"));
            let raw = btf::Btf::from_sys()?;
            let (offsets, hooks) = (resolve_offsets(raw)?, available_hooks(raw)?);
            let seq_counters = seq_counters(raw).unwrap_or_else(|| {
                tracing::warn!(
                    "the kernel hides rename_lock/mount_lock in /proc/kallsyms: the verdict \
                     cache is off, every decision walks its path"
                );
                [0; 2]
            });
            let seq_reads = seq_reads(raw)?;
            let btf = btf.join().unwrap_or_else(|e| std::panic::resume_unwind(e))?;
            let loader = loader.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
            let loader = std::sync::Mutex::new(loader);
            anyhow::Ok(Prepared { offsets, seq_counters, seq_reads, hooks, btf, loader })
        })
        .map_err(|e| format!("{e:#}"))
    });
    prepared.as_ref().map_err(|e| anyhow!("{e}"))
}

/// Starts [`prepared`] on another thread, for a command that will load the programs once it has
/// done its own work (compiling a policy, reading its config).
pub fn prepare_in_background() {
    std::thread::spawn(|| prepared().map(drop));
}

/// Loads the object with offsets and the session cgroup level set, and picks the hooks to attach;
/// programs are not yet loaded into the kernel (see [`attach`]).
fn open(sessions: SessionCgroups) -> anyhow::Result<(Ebpf, &'static aya::Btf, HookPrograms)> {
    let prepared = prepared()?;
    let mut loader = prepared.loader.lock().unwrap_or_else(|e| e.into_inner());
    for o in &prepared.offsets {
        loader.override_global(o.global, &o.value, true);
    }
    // The loader outlives this call and keeps references: 16 bytes per load, two at most per
    // process.
    let sessions: &'static SessionCgroups = Box::leak(Box::new(sessions));
    loader.override_global(SESSION_CGROUP_LEVEL, &sessions.level, true);
    loader.override_global(SESSION_PARENT_CGROUP, &sessions.parent, true);
    for (counter, address) in SEQ_COUNTERS.iter().zip(&prepared.seq_counters) {
        loader.override_global(counter.global, address, true);
    }
    let built = object()?;
    let (object, seqcount_btf_id) = match &prepared.seq_reads {
        Some(reads) => (reads.object, &reads.seqcount_btf_id),
        None => (built, &0),
    };
    loader.override_global(SEQCOUNT_BTF_ID, seqcount_btf_id, true);
    let ebpf = loader.load(object).context("loading the fp BPF object")?;
    Ok((ebpf, &prepared.btf, prepared.hooks.clone()))
}

/// The hooks to attach on this kernel, with the program matching each hook's prototype: all of
/// them, except optional hooks it does not have (their operations go through other hooks there).
/// A missing mandatory hook stops the load.
fn available_hooks(btf: &btf::Btf) -> anyhow::Result<HookPrograms> {
    let mut hooks = Vec::new();
    for &hook in Hook::ALL {
        if let Some(params) = btf.func_params(&format!("bpf_lsm_{}", hook.name())) {
            hooks.push((hook.program(&params), hook));
        } else if !hook.is_optional() {
            bail!("kernel {} has no LSM hook {}", kernel_release(), hook.name());
        }
    }
    Ok(hooks)
}

/// Loads `programs` (name, hook) into the kernel, then attaches them ([`attach_loaded`]).
fn attach(
    ebpf: &mut Ebpf,
    btf: &aya::Btf,
    programs: &[(&str, &str)],
    cgroup: Option<BorrowedFd>,
) -> anyhow::Result<Vec<FdLink>> {
    load(ebpf, btf, programs)?;
    attach_loaded(ebpf, programs, cgroup)
}

/// Attaches loaded `programs` (name, hook) one by one in their order: one link each, which
/// detaches its program when dropped. `#[lsm]` programs attach to their hook for every task;
/// `#[lsm_cgroup]` programs to their hook for the tasks in `cgroup`, and there must be one.
fn attach_loaded(
    ebpf: &mut Ebpf,
    programs: &[(&str, &str)],
    cgroup: Option<BorrowedFd>,
) -> anyhow::Result<Vec<FdLink>> {
    programs
        .iter()
        .map(|&(program, hook)| {
            match ebpf
                .program_mut(program)
                .ok_or_else(|| anyhow!("program {program} missing from the BPF object"))?
            {
                Program::Lsm(prog) => {
                    let id = prog
                        .attach()
                        .with_context(|| format!("attaching {program} to lsm/{hook}"))?;
                    Ok(prog.take_link(id)?.into())
                }
                Program::LsmCgroup(prog) => {
                    let attaching = format!("{program} to lsm_cgroup/{hook}");
                    let cgroup = cgroup.ok_or_else(|| anyhow!("{attaching}: no cgroup given"))?;
                    attach_to_cgroup(prog, cgroup, &attaching)
                }
                _ => bail!("program {program} is not an LSM program"),
            }
        })
        .collect()
}

/// Attaches the loaded per-cgroup program `prog` (`what`, for the error) to `cgroup`: one link,
/// which detaches it when dropped.
fn attach_to_cgroup(
    prog: &mut LsmCgroup,
    cgroup: BorrowedFd,
    what: &str,
) -> anyhow::Result<FdLink> {
    let id = prog.attach(cgroup).with_context(|| {
        format!(
            "attaching {what} (the kernel allows 10 per-cgroup LSM hooks on the whole host; E2BIG \
             says other programs hold them)"
        )
    })?;
    Ok(prog.take_link(id)?.into())
}

/// The hooks whose programs the verifier takes longest on, longest first: the two paths of a
/// rename or link are each decided (with the REFER check), then the open.
const SLOWEST_TO_VERIFY: [Hook; 3] = [Hook::PathRename, Hook::PathLink, Hook::FileOpen];

/// Loads `programs` into the kernel, several at a time. The verifier's work is most of a
/// session's start (seconds per program under TCG for the path pairs), and the kernel verifies
/// privileged loads in parallel; nothing is attached here, so the order is free.
fn load(ebpf: &mut Ebpf, btf: &aya::Btf, programs: &[(&str, &str)]) -> anyhow::Result<()> {
    let mut by_name: std::collections::HashMap<&str, &mut Program> = ebpf.programs_mut().collect();
    let mut queue = std::collections::VecDeque::new();
    for &(name, hook) in programs {
        let program = by_name
            .remove(name)
            .ok_or_else(|| anyhow!("program {name} missing from the BPF object"))?;
        queue.push_back((name, hook, program));
    }
    // Longest first: started last, the two-path programs (3-4 s each under TCG, the rest 0.05-1 s)
    // would leave one CPU idle at the end.
    queue.make_contiguous().sort_by_key(|&(_, hook, _)| {
        SLOWEST_TO_VERIFY.iter().position(|h| h.name() == hook).unwrap_or(SLOWEST_TO_VERIFY.len())
    });
    let queue = std::sync::Mutex::new(queue);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(programs.len());
    std::thread::scope(|scope| {
        let load_next = || -> anyhow::Result<()> {
            loop {
                let pending = || queue.lock().unwrap_or_else(|e| e.into_inner());
                let Some((name, hook, program)) = pending().pop_front() else { return Ok(()) };
                let started = std::time::Instant::now();
                let loaded = match program {
                    Program::Lsm(p) => p.load(hook, btf),
                    Program::LsmCgroup(p) => p.load(hook, btf),
                    _ => Err(aya::programs::ProgramError::UnexpectedProgramType),
                };
                if let Err(e) = loaded {
                    // The load fails as a whole: the other workers stop after their program.
                    pending().clear();
                    return Err(e)
                        .with_context(|| format!("loading {name} ({hook} hook) into the kernel"));
                }
                // Where a session's start goes, per program (FP_LOG=debug).
                tracing::debug!("loaded {name} in {:.2?}", started.elapsed());
            }
        };
        let workers: Vec<_> = (0..workers).map(|_| scope.spawn(load_next)).collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
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
    remove_dead_probes(cgroup2);
    let empty = cgroup2.join(Owner::current()?.name(PROBE_CGROUP_PREFIX));
    std::fs::create_dir(&empty).with_context(|| format!("creating {}", empty.display()))?;
    let probed = probe_cgroup(&mut ebpf, btf, &empty);
    let removed =
        std::fs::remove_dir(&empty).with_context(|| format!("removing {}", empty.display()));
    probed.and(removed)
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

/// Removes the cgroups of probes that were killed before they removed theirs: those whose
/// [`Owner`] is gone. They are empty (nothing ever runs in one), so `rmdir` removes them; what
/// fails stays for a later probe.
fn remove_dead_probes(cgroup2: &Path) {
    let Ok(entries) = std::fs::read_dir(cgroup2) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let owner = name.to_str().and_then(|n| Owner::parse(PROBE_CGROUP_PREFIX, n));
        if owner.is_some_and(|o| !o.alive()) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// The name of the running kernel's lockdown reason `what` (`enum lockdown_reason`, whose numbers
/// differ between kernels), `dev-mem` for `LOCKDOWN_DEV_MEM`; None without BTF or such a value.
pub fn lockdown_reason(what: u64) -> Option<String> {
    let name =
        btf::Btf::from_sys().ok()?.enumerator("lockdown_reason", u32::try_from(what).ok()?)?;
    let name = String::from_utf8_lossy(name);
    Some(name.strip_prefix("LOCKDOWN_").unwrap_or(&name).to_lowercase().replace('_', "-"))
}

#[cfg(test)]
mod tests {
    use fp_common::kernel::maps;

    use super::enforcer::gone;
    use super::*;

    /// The pass-through object's per-cgroup twins sit on exactly the hooks fp attaches per
    /// cgroup, so that the benchmark's `noop-cgroup` phase measures fp's design's floor.
    #[test]
    #[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
    fn noop_object_mirrors_the_per_cgroup_hooks() {
        let (fp, noop) = (object().unwrap(), NOOP_OBJECT);
        let (fp, noop) = (String::from_utf8_lossy(fp), String::from_utf8_lossy(noop));
        for hook in Hook::ALL {
            let section = format!("lsm_cgroup/{}", hook.name());
            assert_eq!(fp.contains(&section), noop.contains(&section), "{section}");
        }
    }

    /// Every call of `bpf_rdonly_cast` the programs make by number becomes a kfunc call of the
    /// given id, nothing else in the object changes, and the object still parses as aya reads it.
    #[test]
    #[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
    fn kfunc_calls_replace_every_numbered_call_and_nothing_else() {
        let built = object().unwrap();
        let call = |regs: u8, imm: i32| {
            let mut insn = vec![0x85, regs, 0, 0];
            insn.extend_from_slice(&imm.to_le_bytes());
            insn
        };
        let count = |object: &[u8], insn: &[u8]| {
            object.chunks_exact(8).filter(|chunk| *chunk == insn).count()
        };
        let (numbered, kfunc) = (call(0, RDONLY_CAST_CALL), call(2 << 4, 0x1234_5678));
        let before = count(built, &numbered);
        assert!(before > 0, "the programs read the sequence counters through the kfunc");
        let (made, calls) = with_kfunc_calls(built, 0x1234_5678).unwrap();
        assert_eq!((calls, count(made, &numbered), count(made, &kfunc)), (before, 0, before));
        let changed = built.chunks_exact(8).zip(made.chunks_exact(8)).filter(|(a, b)| a != b);
        assert_eq!(changed.count(), before);
        aya_obj::Object::parse(made).expect("the object with its kfunc calls parses");
    }

    /// The real build embeds a real BPF object: an ELF file with fp's LSM program sections.
    #[test]
    #[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
    fn embedded_object_is_real() {
        let obj = object().expect("a real BPF object is embedded");
        assert_eq!(&obj[..4], b"\x7fELF");
        let text = String::from_utf8_lossy(obj);
        let mut per_cgroup = 0;
        for hook in Hook::ALL {
            let (section, cgroup) =
                (format!("lsm/{}", hook.name()), format!("lsm_cgroup/{}", hook.name()));
            assert!(
                text.contains(&section) || text.contains(&cgroup),
                "object lacks section {section}"
            );
            per_cgroup += usize::from(text.contains(&cgroup));
        }
        // The kernel's CGROUP_LSM_NUM: per-cgroup LSM hooks the whole host can use.
        assert!(per_cgroup <= 10, "{per_cgroup} per-cgroup hooks, the kernel has 10");
        assert!(per_cgroup > 0, "the hottest hooks are per-cgroup (fp-ebpf/src/hooks)");
        assert!(text.contains("license"));
        for f in KERNEL_FIELDS.iter().chain(OPTIONAL_FIELDS) {
            assert!(text.contains(f.global), "object lacks the global {}", f.global);
        }
        for global in [SESSION_CGROUP_LEVEL, SESSION_PARENT_CGROUP] {
            assert!(text.contains(global), "object lacks the global {global}");
        }
        for c in SEQ_COUNTERS {
            assert!(text.contains(c.global), "object lacks the global {}", c.global);
        }
    }

    /// The embedded object, parsed as aya parses it to load it.
    fn parsed_object() -> aya_obj::Object {
        let obj = object().expect("a real BPF object is embedded");
        aya_obj::Object::parse(obj).expect("the embedded BPF object parses")
    }

    /// The object's maps are exactly the ones userspace names (fp_common::kernel::maps): the
    /// `#[map]` statics of fp-ebpf cannot take their names from those consts, so a renamed,
    /// added or removed map shows here rather than when a session fails to start.
    #[test]
    #[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
    fn object_maps_are_the_named_ones() {
        use aya_obj::EbpfSectionKind;
        let obj = parsed_object();
        // Not the .rodata/.bss/.data sections aya also lists as maps: the globals are checked
        // by `embedded_object_is_real`.
        let mut found: Vec<&str> = obj
            .maps
            .iter()
            .filter(|(_, m)| {
                matches!(m.section_kind(), EbpfSectionKind::Maps | EbpfSectionKind::BtfMaps)
            })
            .map(|(name, _)| name.as_str())
            .collect();
        found.sort_unstable();
        let mut named: Vec<&str> = maps::PINNED.iter().chain(&maps::UNPINNED).copied().collect();
        named.sort_unstable();
        assert_eq!(found, named, "the maps of fp-ebpf/src/maps.rs against fp_common::kernel::maps");
    }

    /// The object's programs are exactly those userspace attaches by name: one per hook and
    /// kernel prototype ([`Hook::program`]) and the probe.
    #[test]
    #[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
    fn object_programs_are_the_named_ones() {
        let obj = parsed_object();
        let mut found: Vec<&str> = obj.programs.keys().map(String::as_str).collect();
        found.sort_unstable();
        let mut named: Vec<&str> = Hook::ALL.iter().map(|h| h.program(&[])).collect();
        named.extend([
            programs::INODE_SETATTR_IDMAP,
            programs::BPF_KERNEL,
            programs::PERF_EVENT_OPEN_TYPE,
            programs::PROBE,
            programs::PROBE_CGROUP,
        ]);
        named.sort_unstable();
        assert_eq!(found, named, "the #[lsm] programs of fp-ebpf/src/hooks against fp_common");
    }

    /// aya 0.14's `remove` of a missing key fails as the delete syscall with ENOENT.
    #[test]
    fn a_missing_key_is_gone_already() {
        use aya::{maps::MapError, sys::SyscallError};
        let syscall = |errno| {
            Err(MapError::SyscallError(SyscallError {
                call: "bpf_map_delete_elem",
                io_error: std::io::Error::from_raw_os_error(errno),
            }))
        };
        assert!(gone(Ok(())).is_ok());
        assert!(gone(Err(MapError::KeyNotFound)).is_ok());
        assert!(gone(syscall(libc::ENOENT)).is_ok());
        assert!(gone(syscall(libc::EPERM)).is_err(), "other failures stay errors");
    }
}
