//! Mount namespaces of sessions, as the agent reaches them from outside: which one a process is
//! in, whether that is the host's, and bind mounts made in one (a session's processes may not
//! mount: fp's programs refuse it them).
use std::{
    ffi::CString,
    os::fd::{AsRawFd as _, OwnedFd},
};

use anyhow::Context as _;

/// The identity (device, inode) of the mount namespace of `pid` (None: it is gone).
pub fn identity(pid: i32) -> Option<(u64, u64)> {
    of_file(&format!("/proc/{pid}/ns/mnt"))
}

/// The namespaces a session shares with the host: PID 1's, and this process's (a daemon's
/// private one under systemd's sandboxing). Never bound into.
pub fn shared() -> [Option<(u64, u64)>; 2] {
    [of_file("/proc/1/ns/mnt"), of_file("/proc/self/ns/mnt")]
}

/// The mount namespace of `pid`, open, when it is one of its own (not [`shared`]).
pub fn own(pid: i32) -> anyhow::Result<Option<OwnedFd>> {
    let path = format!("/proc/{pid}/ns/mnt");
    let ns = OwnedFd::from(std::fs::File::open(&path).with_context(|| format!("opening {path}"))?);
    let mine = std::fs::metadata(format!("/proc/self/fd/{}", ns.as_raw_fd())).ok().map(|m| {
        use std::os::unix::fs::MetadataExt as _;
        (m.dev(), m.ino())
    });
    Ok((mine.is_some() && !shared().contains(&mine)).then_some(ns))
}

fn of_file(path: &str) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| {
        use std::os::unix::fs::MetadataExt as _;
        (m.dev(), m.ino())
    })
}

/// Bind-mounts each `(source, target)` recursively in the mount namespace `ns`, from a child
/// process (a thread of a multi-threaded process cannot enter another mount namespace).
pub fn bind_in(ns: &OwnedFd, binds: &[(CString, CString)]) -> anyhow::Result<()> {
    let ns = ns.as_raw_fd();
    // SAFETY: the child makes only async-signal-safe system calls on values prepared before
    // the fork, then exits.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()).context("fork"),
        0 => unsafe {
            if libc::setns(ns, libc::CLONE_NEWNS) != 0 {
                libc::_exit(1);
            }
            for (i, (source, target)) in binds.iter().enumerate() {
                let flags = libc::MS_BIND | libc::MS_REC;
                if libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    flags,
                    std::ptr::null(),
                ) != 0
                {
                    libc::_exit(2 + i as i32);
                }
            }
            libc::_exit(0)
        },
        child => {
            let status = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child), None)?;
            match status {
                nix::sys::wait::WaitStatus::Exited(_, 0) => Ok(()),
                nix::sys::wait::WaitStatus::Exited(_, 1) => {
                    anyhow::bail!(
                        "entering the session's mount namespace failed (setns needs \
                         CAP_SYS_ADMIN and CAP_SYS_CHROOT, and under systemd \
                         RestrictNamespaces=mnt, as packaging/fp.service has)"
                    )
                }
                nix::sys::wait::WaitStatus::Exited(_, n) => anyhow::bail!(
                    "bind-mounting {} in the session's mount namespace failed",
                    usize::try_from(n - 2)
                        .ok()
                        .and_then(|i| binds.get(i))
                        .map_or("a path".into(), |(_, t)| t.to_string_lossy())
                ),
                other => anyhow::bail!("the bind-mounting child: {other:?}"),
            }
        }
    }
}
