//! `fp run --deny PATH... -- CMD ARGS`: runs CMD in a new session cgroup whose file opens and
//! unlinks under the denied paths are refused in the kernel (EACCES).
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
use fp_common::kernel::{DenyEvent, DenyReason, Hook};

use crate::{kernel, session};

/// Exit status when fp itself fails (as opposed to the command it runs).
pub const EXIT_FP_ERROR: u8 = 125;

#[derive(clap::Args)]
pub struct Args {
    /// Deny opening or deleting PATH and everything below it (repeatable).
    #[arg(long = "deny", value_name = "PATH", required = true)]
    deny: Vec<PathBuf>,
    /// Append one JSON line per denial to FILE instead of printing them to stderr.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
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
    let sink = EventSink::open(args.audit_log.as_deref())?;
    let hierarchy = session::Cgroup2::find()?;
    let parent = args.cgroup_parent.clone().unwrap_or_else(|| hierarchy.mount.join("fp"));
    let cgroup = session::SessionCgroup::create(
        &hierarchy,
        &parent,
        &format!("run-{}", std::process::id()),
    )?;
    let pin_dir = kernel::pin_root().join(format!("run-{}", cgroup.id));
    let enforcer = match kernel::Enforcer::load(cgroup.level, pin_dir) {
        Ok(e) => e,
        Err(e) => {
            cgroup.remove()?;
            return Err(e);
        }
    };
    let result = confine_and_wait(&args.command, &deny, &cgroup, enforcer, sink);
    let removed = cgroup.remove();
    let (code, enforcer) = result?;
    enforcer.unload()?;
    removed?;
    Ok(code)
}

/// A denied path: the path the kernel will see (symlinks resolved when it exists) and, when it
/// exists, its identity.
struct DenyTarget {
    path: Vec<u8>,
    inode: Option<(u64, u64)>,
}

impl DenyTarget {
    fn resolve(p: &Path) -> anyhow::Result<Self> {
        use std::os::unix::ffi::OsStrExt as _;
        let abs = std::path::absolute(p).with_context(|| format!("resolving {}", p.display()))?;
        let (path, inode) = match std::fs::canonicalize(&abs) {
            Ok(real) => {
                let md = std::fs::metadata(&real)?;
                (real, Some((md.dev(), md.ino())))
            }
            // Not there yet: the path rule still covers it once created.
            Err(_) => (abs, None),
        };
        let path = crate::policy::normalize_path(path.as_os_str().as_bytes())
            .ok_or_else(|| anyhow::anyhow!("{} is not an absolute path", p.display()))?;
        Ok(Self { path, inode })
    }
}

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_signal(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

fn confine_and_wait(
    command: &[OsString],
    deny: &[DenyTarget],
    cgroup: &session::SessionCgroup,
    mut enforcer: kernel::Enforcer,
    mut sink: EventSink,
) -> anyhow::Result<(ExitCode, kernel::Enforcer)> {
    enforcer.add_session(cgroup.id)?;
    for target in deny {
        enforcer.deny_path(cgroup.id, &target.path)?;
        if let Some((dev, ino)) = target.inode {
            enforcer.deny_inode(cgroup.id, dev, ino)?;
        }
    }
    let mut ring = enforcer.take_events()?;
    let stop = Arc::new(AtomicBool::new(false));
    // Denials are written as they arrive; after the command exits the buffer is drained.
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || -> anyhow::Result<()> {
            loop {
                let done = stop.load(Ordering::Acquire);
                while let Some(item) = ring.next() {
                    if item.len() >= size_of::<DenyEvent>() {
                        // SAFETY: the programs write whole DenyEvents; read_unaligned copies it out.
                        let ev =
                            unsafe { std::ptr::read_unaligned(item.as_ptr() as *const DenyEvent) };
                        sink.write(&ev)?;
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
    let status = match spawned {
        Ok(mut child) => {
            CHILD.store(child.id() as i32, Ordering::Relaxed);
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                // SAFETY: installs a handler that only calls kill(2).
                unsafe { libc::signal(sig, forward_signal as *const () as libc::sighandler_t) };
            }
            let status = child.wait();
            CHILD.store(0, Ordering::Relaxed);
            Some(status.context("waiting for the command")?)
        }
        Err(e) => {
            eprintln!("fp: cannot run {}: {e}", command[0].to_string_lossy());
            None
        }
    };
    stop.store(true, Ordering::Release);
    reader.join().expect("event reader thread panicked")?;
    let counters = enforcer.session_counters(cgroup.id)?;
    if counters.dropped > 0 {
        eprintln!("fp: {} denial events were lost (ring buffer full)", counters.dropped);
    }
    let code = match status {
        Some(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
            (Some(c), _) => ExitCode::from(c as u8),
            (None, Some(sig)) => ExitCode::from(128 + sig as u8),
            _ => ExitCode::from(EXIT_FP_ERROR),
        },
        None => ExitCode::from(127),
    };
    Ok((code, enforcer))
}

/// Where denial lines go: stderr, or JSON lines appended to a file.
enum EventSink {
    Stderr,
    File(std::fs::File),
}

impl EventSink {
    fn open(path: Option<&Path>) -> anyhow::Result<Self> {
        Ok(match path {
            None => Self::Stderr,
            Some(p) => Self::File(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .with_context(|| format!("opening {}", p.display()))?,
            ),
        })
    }

    fn write(&mut self, ev: &DenyEvent) -> anyhow::Result<()> {
        let path = String::from_utf8_lossy(kernel::event_path(ev));
        let comm = String::from_utf8_lossy(ev.comm.split(|&b| b == 0).next().unwrap_or_default());
        let hook = Hook::from_u8(ev.hook).map_or("unknown", Hook::name);
        let reason = DenyReason::from_u8(ev.reason).map_or("unknown", DenyReason::name);
        match self {
            Self::Stderr => {
                // One write(2) per line, so it does not interleave with the command's own stderr.
                let line = format!(
                    "fp: denied {hook} {path} by {comm} (pid {}, uid {}): {reason}\n",
                    ev.tgid, ev.uid
                );
                std::io::stderr().write_all(line.as_bytes())?;
            }
            Self::File(f) => {
                let line = serde_json::json!({
                    "decision": "deny", "hook": hook, "reason": reason, "path": path,
                    "session": ev.session, "pid": ev.pid, "tgid": ev.tgid, "uid": ev.uid,
                    "gid": ev.gid, "comm": comm, "dev": ev.dev, "ino": ev.ino,
                });
                writeln!(f, "{line}")?;
            }
        }
        Ok(())
    }
}
