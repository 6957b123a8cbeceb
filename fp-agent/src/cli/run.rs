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
use fp_common::kernel::{DenyEvent, DenyReason, EVENT_PATH_FS_RELATIVE, Hook, Op};

use crate::{kernel, session};

/// Exit status when fp itself fails (as opposed to the command it runs).
pub const EXIT_FP_ERROR: u8 = 125;

#[derive(clap::Args)]
pub struct Args {
    /// Deny every operation on PATH and everything below it (repeatable).
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
        for &(dev, ino) in &target.inodes {
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
        let raw_path = kernel::event_path(ev);
        let path = String::from_utf8_lossy(raw_path);
        let comm = String::from_utf8_lossy(ev.comm.split(|&b| b == 0).next().unwrap_or_default());
        let hook = Hook::from_u8(ev.hook).map_or("unknown", Hook::name);
        let op = Op::from_u8(ev.op).map_or("unknown", Op::name);
        let reason = DenyReason::from_u8(ev.reason).map_or("unknown", DenyReason::name);
        // Inode hooks see no mount: their path starts at the root of the file's filesystem.
        let fs_relative = ev.flags & EVENT_PATH_FS_RELATIVE != 0;
        match self {
            Self::Stderr => {
                let within = if fs_relative {
                    format!(" (within filesystem {}:{})", ev.dev >> 20, ev.dev & 0xfffff)
                } else {
                    String::new()
                };
                // One write(2) per line, so it does not interleave with the command's own stderr.
                let line = format!(
                    "fp: denied {hook} {}{within} by {comm} ({op}, pid {}, uid {}): {reason}\n",
                    escape_path(raw_path),
                    ev.tgid,
                    ev.uid
                );
                std::io::stderr().write_all(line.as_bytes())?;
            }
            Self::File(f) => {
                let line = serde_json::json!({
                    "decision": "deny", "hook": hook, "op": op, "reason": reason, "path": path,
                    "path_fs_relative": fs_relative,
                    "session": ev.session, "pid": ev.pid, "tgid": ev.tgid, "uid": ev.uid,
                    "gid": ev.gid, "comm": comm, "dev": ev.dev, "ino": ev.ino,
                });
                writeln!(f, "{line}")?;
            }
        }
        Ok(())
    }
}

/// A path for one line of text: UTF-8 as is, control characters escaped (`\n`), bytes that are
/// not UTF-8 as `\xNN`, so a denial is one line and no name is lost.
fn escape_path(path: &[u8]) -> String {
    let mut out = String::with_capacity(path.len());
    for chunk in path.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_paths_to_one_line() {
        assert_eq!(escape_path("/a/b c/é".as_bytes()), "/a/b c/é");
        assert_eq!(escape_path(b"/new\nline"), "/new\\nline");
        assert_eq!(escape_path(b"/bad\xffname"), "/bad\\xffname");
    }
}
