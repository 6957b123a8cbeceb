//! `fp run --deny PATH... -- CMD ARGS`: runs CMD in a new session cgroup whose file operations
//! (open, create, delete, rename, link, truncate, attribute changes, exec) on the denied paths are
//! refused in the kernel (EACCES).
use std::{
    ffi::OsString,
    io::Write as _,
    os::{fd::AsRawFd as _, unix::fs::MetadataExt as _, unix::process::CommandExt as _},
    path::{Path, PathBuf},
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicI32, Ordering},
    },
};

use anyhow::{Context as _, bail};
use fp_common::kernel::DenyEvent;

use crate::{audit, kernel, session};

/// Exit status when fp itself fails (as opposed to the command it runs).
pub const EXIT_FP_ERROR: u8 = 125;

#[derive(clap::Args)]
pub struct Args {
    /// Deny every operation on PATH and everything below it (repeatable).
    #[arg(long = "deny", value_name = "PATH", required = true)]
    deny: Vec<PathBuf>,
    /// Record the session and every denial in the hash-chained, signed audit log FILE
    /// (docs/audit-format.md) instead of printing denials to stderr.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Private key signing the audit log's checkpoints (`fp audit keygen`). Without it a new key
    /// is made for a new log and its public half written to FILE.pub.
    #[arg(long, value_name = "KEY", requires = "audit_log")]
    audit_key: Option<PathBuf>,
    /// cgroup v2 directory under which the session cgroup is created [default: <cgroup2 mount>/fp].
    #[arg(long, value_name = "DIR")]
    cgroup_parent: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

pub fn main(args: Args) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fp: error: {e:#}");
            ExitCode::from(EXIT_FP_ERROR)
        }
    }
}

fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !nix::unistd::geteuid().is_root() {
        bail!("fp run needs root: it loads BPF LSM programs and creates cgroups");
    }
    let deny =
        args.deny.iter().map(|p| DenyTarget::resolve(p)).collect::<anyhow::Result<Vec<_>>>()?;
    let hierarchy = session::Cgroup2::find()?;
    let parent = args.cgroup_parent.clone().unwrap_or_else(|| hierarchy.mount.join("fp"));
    let name = format!("run-{}", std::process::id());
    let cgroup = session::SessionCgroup::create(&hierarchy, &parent, &name)?;
    let started = match &args.audit_log {
        None => Ok((Sink::Stderr, None)),
        Some(path) => {
            AuditLog::start(path, args.audit_key.as_deref(), &name, &cgroup, &deny, &args.command)
                .map(|(log, writer)| (Sink::Audit(log), Some(writer)))
        }
    };
    let (sink, writer) = match started {
        Ok(started) => started,
        Err(e) => {
            cgroup.remove()?;
            return Err(e);
        }
    };
    let pin_dir = kernel::pin_root().join(format!("run-{}", cgroup.id));
    let confined = kernel::Enforcer::load(cgroup.level, pin_dir)
        .and_then(|enforcer| confine_and_wait(&args.command, &deny, &cgroup, enforcer, &sink));
    let removed = cgroup.remove();
    if let (Sink::Audit(log), Some(writer)) = (sink, writer) {
        log.end(writer, confined.as_ref().ok())?;
    }
    removed?;
    let outcome = confined?;
    Ok(ExitCode::from(outcome.status))
}

/// A denied path: the path the kernel will see (symlinks resolved when it exists) and the
/// identities that must be denied with it: the target itself and, below a directory, every file
/// with more than one link (a hardlink made before the session is another name for it, outside
/// the path rule; directories cannot be hardlinked, and bind mounts are caught by the directory's
/// own identity).
struct DenyTarget {
    path: Vec<u8>,
    inodes: Vec<(u64, u64)>,
}

impl DenyTarget {
    fn resolve(p: &Path) -> anyhow::Result<Self> {
        use std::os::unix::ffi::OsStrExt as _;
        let abs = std::path::absolute(p).with_context(|| format!("resolving {}", p.display()))?;
        let (path, inodes) = match std::fs::canonicalize(&abs) {
            Ok(real) => {
                let md = std::fs::metadata(&real)?;
                let mut inodes = vec![(md.dev(), md.ino())];
                if md.is_dir() {
                    hardlinked_files_below(&real, &mut inodes)?;
                }
                (real, inodes)
            }
            // Not there yet: the path rule still covers it once created.
            Err(_) => (abs, Vec::new()),
        };
        let path = crate::policy::normalize_path(path.as_os_str().as_bytes())
            .ok_or_else(|| anyhow::anyhow!("{} is not an absolute path", p.display()))?;
        Ok(Self { path, inodes })
    }
}

/// Adds the identity of every non-directory below `dir` that has more than one link. Symlinks are
/// not followed. An unreadable directory stops fp: its files would be left unprotected.
fn hardlinked_files_below(dir: &Path, inodes: &mut Vec<(u64, u64)>) -> anyhow::Result<()> {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
            let md = entry.metadata().with_context(|| format!("{}", entry.path().display()))?;
            if md.is_dir() {
                pending.push(entry.path());
            } else if md.nlink() > 1 {
                inodes.push((md.dev(), md.ino()));
            }
        }
    }
    Ok(())
}

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_signal(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

/// How the confined command ended.
struct Outcome {
    /// fp's exit status: the command's, 128 + signal, or 127 when it could not be started.
    status: u8,
    /// Denial events the kernel could not queue (ring buffer full).
    dropped: u64,
}

/// Fills the session's kernel tables, runs the command in the session cgroup, reports denials as
/// they arrive, and unloads the programs when the command has exited.
fn confine_and_wait(
    command: &[OsString],
    deny: &[DenyTarget],
    cgroup: &session::SessionCgroup,
    mut enforcer: kernel::Enforcer,
    sink: &Sink,
) -> anyhow::Result<Outcome> {
    let waited = fill_and_run(command, deny, cgroup, &mut enforcer, sink);
    let unloaded = enforcer.unload();
    let outcome = waited?;
    unloaded?;
    if outcome.dropped > 0 {
        eprintln!("fp: {} denial events were lost (ring buffer full)", outcome.dropped);
    }
    Ok(outcome)
}

fn fill_and_run(
    command: &[OsString],
    deny: &[DenyTarget],
    cgroup: &session::SessionCgroup,
    enforcer: &mut kernel::Enforcer,
    sink: &Sink,
) -> anyhow::Result<Outcome> {
    enforcer.add_session(cgroup.id)?;
    for target in deny {
        enforcer.deny_path(cgroup.id, &target.path)?;
        for &(dev, ino) in &target.inodes {
            enforcer.deny_inode(cgroup.id, dev, ino)?;
        }
    }
    let mut ring = enforcer.take_events()?;
    let stop = Arc::new(AtomicBool::new(false));
    // Denials are reported as they arrive; after the command exits the buffer is drained.
    let reader = {
        let (stop, sink) = (stop.clone(), sink.clone());
        std::thread::spawn(move || -> anyhow::Result<()> {
            loop {
                let done = stop.load(Ordering::Acquire);
                while let Some(item) = ring.next() {
                    if item.len() >= size_of::<DenyEvent>() {
                        // SAFETY: the programs write whole DenyEvents; read_unaligned copies it out.
                        let ev =
                            unsafe { std::ptr::read_unaligned(item.as_ptr() as *const DenyEvent) };
                        sink.deny(&ev)?;
                    }
                }
                if done {
                    return Ok(());
                }
                let fd = ring.as_raw_fd();
                let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut pfd, 1, 100) };
            }
        })
    };
    let status = spawn_in_cgroup_and_wait(command, cgroup);
    stop.store(true, Ordering::Release);
    reader.join().expect("event reader thread panicked")?;
    let dropped = enforcer.session_counters(cgroup.id)?.dropped;
    Ok(Outcome { status: status?, dropped })
}

/// Runs the command with the session cgroup joined before exec; forwards fp's termination
/// signals to it while it runs.
fn spawn_in_cgroup_and_wait(
    command: &[OsString],
    cgroup: &session::SessionCgroup,
) -> anyhow::Result<u8> {
    let procs = cgroup.procs_file()?;
    let procs_fd = procs.as_raw_fd();
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..]);
    // SAFETY: the closure only calls write(2) on an fd opened before fork (async-signal-safe).
    unsafe {
        cmd.pre_exec(move || {
            if libc::write(procs_fd, b"0".as_ptr().cast(), 1) != 1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    drop(procs);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            eprintln!("fp: cannot run {}: {e}", command[0].to_string_lossy());
            return Ok(127);
        }
    };
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: installs a handler that only calls kill(2).
        unsafe { libc::signal(sig, forward_signal as *const () as libc::sighandler_t) };
    }
    let status = child.wait().context("waiting for the command");
    CHILD.store(0, Ordering::Relaxed);
    let status = status?;
    Ok(match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => 128 + sig as u8,
        _ => EXIT_FP_ERROR,
    })
}

/// Where denials go: a line on stderr, or a record in the audit log.
#[derive(Clone)]
enum Sink {
    Stderr,
    Audit(AuditLog),
}

impl Sink {
    fn deny(&self, ev: &DenyEvent) -> anyhow::Result<()> {
        match self {
            // One write(2) per line, so it does not interleave with the command's own stderr.
            Self::Stderr => std::io::stderr().write_all(kernel::event::line(ev).as_bytes())?,
            Self::Audit(log) => {
                log.handle
                    .record(audit::Event::Decision(kernel::event::audit_record(ev, &log.context)));
            }
        }
        Ok(())
    }
}

/// The audit log of one `fp run` session, as producers see it: a start record, every denial,
/// losses, an end record. The writer (owned by `run`) closes it with a signed checkpoint.
#[derive(Clone)]
struct AuditLog {
    handle: audit::AuditHandle,
    context: kernel::event::SessionContext,
}

impl AuditLog {
    fn start(
        path: &Path,
        key: Option<&Path>,
        session: &str,
        cgroup: &session::SessionCgroup,
        deny: &[DenyTarget],
        command: &[OsString],
    ) -> anyhow::Result<(Self, audit::AuditWriter)> {
        let signer = match key {
            Some(key) => audit::checkpoint::SignerKey::load(key)?,
            None => ephemeral_signer(path)?,
        };
        let (handle, writer) =
            audit::start(audit::WriterConfig::new(path.to_path_buf(), signer))
                .with_context(|| format!("opening the audit log {}", path.display()))?;
        let context = kernel::event::SessionContext {
            session: session.to_owned(),
            agent: "fp-run".to_owned(),
            rule: "--deny".to_owned(),
            rule_source: "command line".to_owned(),
            policy_hash: deny_list_hash(deny),
        };
        handle.record(audit::Event::SessionStart(audit::SessionStart {
            session: context.session.clone(),
            agent: context.agent.clone(),
            cgroup: cgroup.id,
            pid: std::process::id(),
            uid: nix::unistd::getuid().as_raw(),
            policy_hash: context.policy_hash.clone(),
            floor_exceptions: Vec::new(),
            command: command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
        }));
        Ok((Self { handle, context }, writer))
    }

    /// Records what was lost and how the session ended, then closes the log with a checkpoint.
    fn end(self, writer: audit::AuditWriter, outcome: Option<&Outcome>) -> anyhow::Result<()> {
        if let Some(o) = outcome.filter(|o| o.dropped > 0) {
            self.handle.record(audit::Event::Loss(audit::Loss {
                count: o.dropped,
                at: "kernel-ringbuf".to_owned(),
            }));
        }
        self.handle.record(audit::Event::SessionEnd(audit::SessionEnd {
            session: self.context.session.clone(),
            agent: self.context.agent.clone(),
            exit_code: outcome.map(|o| i32::from(o.status)),
            reason: if outcome.is_some() { "command exited" } else { "fp failed" }.to_owned(),
        }));
        writer.shutdown()
    }
}

/// A new key for a new log, its public half written next to the log; an existing log needs the
/// key that signed it.
fn ephemeral_signer(log: &Path) -> anyhow::Result<audit::checkpoint::SignerKey> {
    if log.exists() {
        bail!("{} exists: pass --audit-key with the key that signs it", log.display());
    }
    let signer = audit::checkpoint::SignerKey::generate("fp-run")?;
    let public = PathBuf::from(format!("{}.pub", log.display()));
    audit::checkpoint::write_atomic(
        &public,
        format!("{}\n", signer.verifier().encode()).as_bytes(),
        0o644,
    )?;
    eprintln!(
        "fp: audit log {} is signed with a new key; its public key is {}",
        log.display(),
        public.display()
    );
    Ok(signer)
}

/// What this session enforces, hashed: the resolved deny paths.
fn deny_list_hash(deny: &[DenyTarget]) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(b"fp run --deny v1\n");
    for target in deny {
        h.update(&target.path);
        h.update(b"\n");
    }
    format!("sha256:{}", hex::encode(h.finalize()))
}
