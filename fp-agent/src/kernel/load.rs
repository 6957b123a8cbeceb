//! Loading fp's programs into the running kernel and attaching them: what every load needs from
//! the kernel (BTF, offsets, hooks), prepared once per process; the object opened with its
//! globals set; the programs verified several at a time; each attached globally or to a
//! session's cgroup. And the benchmark's pass-through programs on the same hooks.
use std::os::fd::BorrowedFd;

use anyhow::{Context as _, anyhow, bail};
use aya::{
    Ebpf, EbpfLoader,
    programs::{LsmCgroup, Program, links::FdLink},
};
use fp_common::kernel::{Hook, SEQ_COUNTERS, SEQCOUNT_BTF_ID, SESSION_CGROUP_LEVEL};

use super::{
    backend::{Backend, chosen, security_function},
    btf,
    object::{NOOP_OBJECT, SeqReads, object, seq_reads},
    offsets::{Offset, kernel_release, resolve_offsets, seq_counters},
};

/// Where session cgroups sit, as the programs are loaded to find a task's session: its ancestor
/// at `level`, looked up only when its ancestor one level above is `parent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SessionCgroups {
    /// cgroup v2 level of session cgroups (the parent's + 1).
    pub level: u32,
}

/// Where [`attach_noop`] attaches the pass-through programs.
#[derive(Clone, Copy, Debug)]
pub enum NoopEntry<'fd> {
    /// `noop_<hook>` on `lsm/<hook>`, for every task.
    Lsm,
    /// The same, but the hooks fp attaches per cgroup get their per-cgroup twins
    /// (`noop_cgroup_<hook>`) attached to this cgroup instead, as fp's programs are to each
    /// session's cgroup: the floor of fp's own design for the tasks in it or below it (the
    /// kernel's per-cgroup dispatch runs the programs of a cgroup and its ancestors alike, from
    /// one array per cgroup).
    LsmCgroup(BorrowedFd<'fd>),
    /// `noop_fmod_ret_<hook>` on the kernel's `security_<hook>` functions (`noop_fentry_<hook>`
    /// where the function returns nothing), for every task: the floor of the backend for kernels
    /// without the BPF LSM.
    FModRet,
}

/// For `cargo xtask bench kernel` (`fp-bench-load noop`) and the kernel tests only: loads and
/// attaches fp-ebpf's pass-through programs (`noop_*`, each letting the operation through) to
/// exactly the hooks fp attaches on this kernel (or to `only` of them), with the same choice of
/// prototype, entering where `entry` says, so the benchmark can tell the cost of a program on
/// these hooks from the cost of fp's. They detach when the returned links and object are
/// dropped. fp itself never calls this.
pub fn attach_noop(entry: NoopEntry, only: Option<Hook>) -> anyhow::Result<(Ebpf, Vec<FdLink>)> {
    if cfg!(fp_ebpf_stub) || NOOP_OBJECT.is_empty() {
        bail!("this build carries no BPF programs (FP_EBPF_STUB=1)");
    }
    let Prepared { btf, .. } = prepared()?;
    let backend = match entry {
        NoopEntry::Lsm | NoopEntry::LsmCgroup(_) => Backend::BpfLsm,
        NoopEntry::FModRet => Backend::FModRet,
    };
    let mut hooks = available_hooks(btf::Btf::from_sys()?, backend)?;
    hooks.retain(|&(_, hook)| only.is_none_or(|only| hook == only));
    // A loader of its own: the shared one carries fp's globals, which this object lacks.
    let mut ebpf = EbpfLoader::new()
        .btf(Some(btf))
        .load(NOOP_OBJECT)
        .context("loading the pass-through BPF object")?;
    let names = hooks
        .iter()
        .map(|(program, hook)| {
            let stem = ["fp_fmod_ret_", "fp_fentry_", "fp_"]
                .iter()
                .find_map(|prefix| program.strip_prefix(prefix))
                .unwrap_or(program);
            let twins = match entry {
                NoopEntry::Lsm => vec![format!("noop_{stem}")],
                NoopEntry::LsmCgroup(_) => {
                    vec![format!("noop_cgroup_{stem}"), format!("noop_{stem}")]
                }
                NoopEntry::FModRet => {
                    vec![format!("noop_fmod_ret_{stem}"), format!("noop_fentry_{stem}")]
                }
            };
            let name = twins
                .into_iter()
                .find(|name| ebpf.program(name).is_some())
                .ok_or_else(|| anyhow!("no pass-through program for {program} ({entry:?})"))?;
            Ok((name, hook.name()))
        })
        .collect::<anyhow::Result<Vec<(String, &str)>>>()?;
    let programs: Vec<(&str, &str)> = names.iter().map(|(p, h)| (p.as_str(), *h)).collect();
    let cgroup = match entry {
        NoopEntry::LsmCgroup(cgroup) => Some(cgroup),
        NoopEntry::Lsm | NoopEntry::FModRet => None,
    };
    let links = attach(&mut ebpf, btf, &programs, cgroup)?;
    Ok((ebpf, links))
}

/// The hooks to attach on a kernel, each with the name of its BPF program.
pub(super) type HookPrograms = Vec<(&'static str, Hook)>;

/// What every load of the BPF object needs from the running kernel. Each BTF parse takes ~0.4 s
/// under TCG and a load needs three (fp's reader for the offsets and hooks, aya's for attaching,
/// and the one `EbpfLoader::new` always makes): they run side by side, once per process, and
/// `fp run`'s two loads (the probe, then the programs) share the loader.
struct Prepared {
    offsets: Vec<Offset>,
    /// [`seq_counters`]: 0 turns the verdict cache off.
    seq_counters: [u64; 2],
    seq_reads: Option<SeqReads>,
    /// The hooks of the [`chosen`] backend.
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
            let backend = chosen()?.backend;
            let (offsets, hooks) = (resolve_offsets(raw)?, available_hooks(raw, backend)?);
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
pub(super) fn open(
    sessions: SessionCgroups,
) -> anyhow::Result<(Ebpf, &'static aya::Btf, HookPrograms)> {
    let prepared = prepared()?;
    let mut loader = prepared.loader.lock().unwrap_or_else(|e| e.into_inner());
    for o in &prepared.offsets {
        loader.override_global(o.global, &o.value, true);
    }
    // The loader outlives this call and keeps references: 16 bytes per load, two at most per
    // process.
    let sessions: &'static SessionCgroups = Box::leak(Box::new(sessions));
    loader.override_global(SESSION_CGROUP_LEVEL, &sessions.level, true);
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

/// The hooks to attach on this kernel with `backend`, with the program matching the prototype of
/// the function each enters at (`bpf_lsm_<hook>`, or the `security_*` function): all of them,
/// except optional hooks it does not have (their operations go through other hooks there). A
/// missing mandatory one stops the load, naming them all.
pub(super) fn available_hooks(btf: &btf::Btf, backend: Backend) -> anyhow::Result<HookPrograms> {
    let (mut hooks, mut missing) = (Vec::new(), Vec::new());
    for &hook in Hook::ALL {
        let function = match backend {
            Backend::BpfLsm => format!("bpf_lsm_{}", hook.name()),
            Backend::FModRet => security_function(hook.name()),
        };
        if let Some(params) = btf.func_params(&function) {
            hooks.push((hook.program(backend, &params), hook));
        } else if !hook.is_optional() {
            missing.push(function);
        }
    }
    if missing.is_empty() {
        return Ok(hooks);
    }
    let why = match backend {
        Backend::BpfLsm => "LSM hooks",
        // Kernels built without CONFIG_SECURITY_PATH (Flatcar, RHEL 9's early releases) have
        // none of the path functions; fp decides names there and has no other hook for them.
        Backend::FModRet if missing.iter().any(|f| f.starts_with("security_path_")) => {
            "kernel functions fmod_ret programs attach to (the security_path_* ones need \
             CONFIG_SECURITY_PATH=y; the BPF LSM backend, lsm=...,bpf, does not)"
        }
        Backend::FModRet => "kernel functions fmod_ret programs attach to",
    };
    bail!(
        "fp cannot enforce on kernel {} with the {} backend: it lacks these {why}: {}",
        kernel_release(),
        backend.name(),
        missing.join(", ")
    )
}

/// Loads `programs` (name, hook) into the kernel, then attaches them ([`attach_loaded`]).
pub(super) fn attach(
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
/// `#[lsm_cgroup]` programs to their hook for the tasks in `cgroup`, and there must be one;
/// fmod_ret and fentry programs to the hook's `security_*` function for every task.
pub(super) fn attach_loaded(
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
                    let id = prog.attach().with_context(|| trampoline(program, "lsm", hook))?;
                    Ok(prog.take_link(id)?.into())
                }
                Program::LsmCgroup(prog) => {
                    let attaching = format!("{program} to lsm_cgroup/{hook}");
                    let cgroup = cgroup.ok_or_else(|| anyhow!("{attaching}: no cgroup given"))?;
                    attach_to_cgroup(prog, cgroup, &attaching)
                }
                Program::FModRet(prog) => {
                    let function = security_function(hook);
                    let id = prog
                        .attach()
                        .with_context(|| trampoline(program, "fmod_ret", &function))?;
                    Ok(prog.take_link(id)?.into())
                }
                Program::FEntry(prog) => {
                    let function = security_function(hook);
                    let id =
                        prog.attach().with_context(|| trampoline(program, "fentry", &function))?;
                    Ok(prog.take_link(id)?.into())
                }
                _ => bail!("program {program} is neither an LSM nor an fmod_ret/fentry program"),
            }
        })
        .collect()
}

/// The error of attaching `program` as a `kind` program to the kernel function `function`
/// (`lsm`: the hook's `bpf_lsm_*` stub): each takes at most `BPF_MAX_TRAMP_LINKS` (38 on x86_64)
/// BPF LSM, fmod_ret and fentry programs, shared with every tool that attaches there (Tetragon,
/// bpftrace), and the kernel refuses one more with E2BIG.
pub(super) fn trampoline(program: &str, kind: &str, function: &str) -> String {
    format!(
        "attaching {program} to {kind}/{function} (a kernel function takes at most 38 BPF LSM, \
         fmod_ret and fentry programs, shared with every tool: E2BIG says other tools hold them \
         all; `bpftool link` lists them)"
    )
}

/// Whether `error` is the kernel's refusal of one more program on a function that has all
/// [`trampoline`] allows.
pub(super) fn trampoline_full(error: &anyhow::Error) -> bool {
    let e2big = |e: &std::io::Error| e.raw_os_error() == Some(nix::libc::E2BIG);
    error.chain().any(|e| e.downcast_ref::<std::io::Error>().is_some_and(e2big))
}

/// Attaches the loaded per-cgroup program `prog` (`what`, for the error) to `cgroup`: one link,
/// which detaches it when dropped.
pub(super) fn attach_to_cgroup(
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
pub(super) fn load(
    ebpf: &mut Ebpf,
    btf: &aya::Btf,
    programs: &[(&str, &str)],
) -> anyhow::Result<()> {
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
                    Program::FModRet(p) => p.load(&security_function(hook), btf),
                    Program::FEntry(p) => p.load(&security_function(hook), btf),
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
