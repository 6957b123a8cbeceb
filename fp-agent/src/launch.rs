//! Starting a command in a session: who it runs as ([`RunAs`]), and [`run_placed`], which starts
//! it in mount and cgroup namespaces of its own with only stdio (and the fds asked for)
//! inherited, and lets not one of its instructions run before its session holds it. `fp run`
//! uses it with the embedded agent and with the daemon alike.
use std::{
    ffi::{CString, OsString},
    os::{fd::AsRawFd as _, unix::process::CommandExt as _},
    path::PathBuf,
    sync::atomic::{AtomicI32, Ordering},
};

use anyhow::{Context as _, bail};
use nix::unistd::{Gid, Uid, User};

use crate::exit;

/// Who the command runs as.
pub struct RunAs {
    pub user: User,
    pub groups: Vec<Gid>,
}

impl RunAs {
    /// `--user`, else the user behind sudo, else root (said on stderr: never silently).
    pub fn resolve(name: Option<&str>) -> anyhow::Result<Self> {
        let user = match name {
            Some(name) => {
                User::from_name(name)?.with_context(|| format!("no user named {name}"))?
            }
            None if !nix::unistd::geteuid().is_root() => {
                let uid = nix::unistd::getuid();
                User::from_uid(uid)?.with_context(|| format!("no passwd entry for uid {uid}"))?
            }
            None => match std::env::var("SUDO_UID").ok().and_then(|u| u.parse().ok()) {
                Some(uid) => User::from_uid(Uid::from_raw(uid))?
                    .with_context(|| format!("no user with uid {uid} (SUDO_UID)"))?,
                None => {
                    eprintln!(
                        "fp: note: the command runs as root (pass --user to run it as another user)"
                    );
                    User::from_uid(Uid::from_raw(0))?.context("no passwd entry for root")?
                }
            },
        };
        let name = CString::new(user.name.as_bytes())?;
        let groups = nix::unistd::getgrouplist(&name, user.gid)
            .with_context(|| format!("groups of {}", user.name))?;
        Ok(Self { user, groups })
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

/// Runs the command as `run_as`, with only stdio (and `keep_fds`) inherited, after `place` has
/// put it into its session: the child reports its pid and waits before exec until `place`
/// returns, so not one instruction of the command runs outside the session. Forwards fp's
/// termination signals to it while it runs. Returns fp's exit status: the command's, 128 +
/// signal, or 127 when it could not be started. The command starts in `cwd`,
/// else in fp's own working directory (if it still has one).
pub fn run_placed(
    command: &[OsString],
    run_as: &RunAs,
    keep_fds: &[i32],
    cwd: Option<PathBuf>,
    place: impl FnOnce(i32) -> anyhow::Result<()>,
) -> anyhow::Result<u8> {
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..]);
    let user = &run_as.user;
    if !user.uid.is_root() || nix::unistd::getuid() != user.uid {
        cmd.env("HOME", &user.dir).env("USER", &user.name).env("LOGNAME", &user.name);
    }
    for &fd in keep_fds {
        // SAFETY: F_GETFD only reads the fd's flags.
        if fd < 3 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            bail!("--keep-fd {fd}: not an open file descriptor above stderr");
        }
    }
    let keep_fds = keep_fds.to_vec();
    let (uid, gid) = (user.uid.as_raw(), user.gid.as_raw());
    // Only root changes identity; anyone else runs the command as themselves.
    let switch = nix::unistd::geteuid().is_root();
    if !switch && nix::unistd::geteuid() != user.uid {
        bail!("only root can run a command as another user ({})", user.name);
    }
    let groups: Vec<libc::gid_t> = run_as.groups.iter().map(|g| g.as_raw()).collect();
    // Unprivileged, the command runs with this process's own ids: those are what it may map.
    let own_mounts =
        UserNamespace::mapping(nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw())?;
    let cwd = cwd.or_else(|| std::env::current_dir().ok()).and_then(|dir| {
        std::ffi::CString::new(std::os::unix::ffi::OsStringExt::into_vec(dir.into_os_string())).ok()
    });
    let (pid_read, pid_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let (release_read, release_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let (pid_w, release_r, release_w) =
        (pid_write.as_raw_fd(), release_read.as_raw_fd(), release_write.as_raw_fd());
    // SAFETY: the closure only makes async-signal-safe system calls on values prepared before fork.
    unsafe {
        cmd.pre_exec(move || {
            // A mount namespace of its own, a slave of the host's (mounts and unmounts there
            // still reach it): the prompt broker marks its mounts, so that opens outside every
            // session never wait for the broker. A caller who is not root owns it through a user
            // namespace that maps only themselves (`own_mounts`). Where neither is allowed the
            // session shares the host's, and the broker marks whole filesystems.
            let own = libc::unshare(libc::CLONE_NEWNS) == 0 || (!switch && own_mounts.enter()?);
            if own
                && libc::mount(
                    c"none".as_ptr(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_SLAVE,
                    std::ptr::null(),
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            let pid = libc::getpid().to_ne_bytes();
            if libc::write(pid_w, pid.as_ptr().cast(), pid.len()) != pid.len() as isize {
                return Err(std::io::Error::last_os_error());
            }
            // Held until placed; EOF means fp gave up (so this copy of the write end must go).
            libc::close(release_w);
            let mut go = 0u8;
            if libc::read(release_r, (&raw mut go).cast(), 1) != 1 {
                return Err(std::io::Error::other("fp did not place the command in its session"));
            }
            // A cgroup namespace rooted at the session's cgroup, where it now is: with the
            // hierarchy mounted `nsdelegate`, the kernel keeps every move of the session's
            // processes between cgroups inside it, and fp lets them make cgroups of their own
            // there (docs/threat-model.md, "Sub-cgroups"). Without one, cgroupfs stays
            // read-only to the session.
            let _ = libc::unshare(libc::CLONE_NEWCGROUP);
            // Its working directory by name, entered now: a prompt scope above it may have
            // become a mount of its own while it waited (docs/prompt.md, Marks).
            if let Some(cwd) = &cwd
                && libc::chdir(cwd.as_ptr()) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // Only stdio (and --keep-fd) cross into the session: every other fd closes at exec.
            const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
            if libc::syscall(libc::SYS_close_range, 3, libc::c_uint::MAX, CLOSE_RANGE_CLOEXEC) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            for &fd in &keep_fds {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if switch
                && (libc::setgroups(groups.len(), groups.as_ptr()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // spawn() returns only once the child has exec'd, so it runs on its own thread while this one
    // places the child.
    // The thread keeps the child's ends open until spawn() returns: a child that fails before
    // reporting its pid then shows as EOF here.
    let spawner = std::thread::spawn(move || {
        let spawned = cmd.spawn();
        drop((pid_write, release_read));
        spawned
    });
    let mut pid = [0u8; 4];
    let reported = nix::unistd::read(&pid_read, &mut pid);
    let placed = match reported {
        Ok(4) => place(i32::from_ne_bytes(pid)),
        _ => Err(anyhow::anyhow!("the command did not start")),
    };
    if placed.is_ok() {
        nix::unistd::write(&release_write, b"g")?;
    }
    drop(release_write);
    let spawned = spawner.join().expect("the spawner thread panicked");
    placed?;
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            eprintln!("fp: cannot run {}: {e}", command[0].to_string_lossy());
            return Ok(exit::CANNOT_START);
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
        (None, Some(sig)) => exit::SIGNALED + sig as u8,
        _ => exit::FP_ERROR,
    })
}

/// A user namespace mapping only the caller's own uid and gid to themselves, for a caller who is
/// not root to own the session's mount namespace: files keep their owners and the caller their
/// groups, and the command, not uid 0 inside, runs without capabilities. (Inside, other users'
/// files show as nobody's, and setuid and file capabilities do not apply: docs/prompt.md.)
struct UserNamespace {
    uid_map: CString,
    gid_map: CString,
}

impl UserNamespace {
    fn mapping(uid: libc::uid_t, gid: libc::gid_t) -> anyhow::Result<Self> {
        Ok(Self {
            uid_map: CString::new(format!("{uid} {uid} 1"))?,
            gid_map: CString::new(format!("{gid} {gid} 1"))?,
        })
    }

    /// Enters a new user namespace and a mount namespace it owns: `Ok(false)` when the host
    /// does not allow it (unprivileged user namespaces disabled), an error if entered but not
    /// mapped (the command must not run unmapped). Called between fork and exec: system calls
    /// only.
    unsafe fn enter(&self) -> std::io::Result<bool> {
        // SAFETY: async-signal-safe system calls on buffers prepared before fork.
        unsafe {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                return Ok(false);
            }
            // gid_map may be written only once setgroups(2) is refused in the namespace.
            for (file, text) in [
                (c"/proc/self/setgroups", c"deny"),
                (c"/proc/self/uid_map", self.uid_map.as_c_str()),
                (c"/proc/self/gid_map", self.gid_map.as_c_str()),
            ] {
                let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                let len = text.to_bytes().len();
                let written = fd >= 0 && libc::write(fd, text.as_ptr().cast(), len) == len as isize;
                let error = std::io::Error::last_os_error();
                if fd >= 0 {
                    libc::close(fd);
                }
                if !written {
                    return Err(error);
                }
            }
            Ok(true)
        }
    }
}
