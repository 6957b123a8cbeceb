//! What a process held by the broker is opening: its file's path (from the fd the kernel hands
//! the broker), its name, and the access its open asks for (from its syscall in /proc: the open
//! flags are not in the fanotify event).
use std::os::fd::{AsRawFd as _, BorrowedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::FileExt as _;
use std::time::Duration;

use anyhow::{Context as _, anyhow};

use super::approvals::Access;

/// Longest wait for an opener to go to sleep on its event (its syscall is unreadable before).
const SYSCALL_RUNNING_WAIT: Duration = Duration::from_millis(50);

/// The path of an event's file, from the fd the kernel opened for us (never by reopening it).
pub(super) fn event_path(fd: BorrowedFd<'_>) -> anyhow::Result<Vec<u8>> {
    let link = nix::fcntl::readlink(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str())
        .context("readlink of the event fd")?;
    let mut path = link.as_bytes().to_vec();
    if path.first() != Some(&b'/') {
        return Err(anyhow!("not a path: {}", String::from_utf8_lossy(&path)));
    }
    // An unlinked file (opened through /proc/PID/fd): decide on the name it had.
    if let Some(name) = path.strip_suffix(b" (deleted)")
        && nix::sys::stat::fstat(fd).is_ok_and(|s| s.st_nlink == 0)
    {
        path.truncate(name.len());
    }
    Ok(path)
}

pub(super) fn comm(tid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{tid}/comm"))
        .map(|c| c.trim_end().to_string())
        .unwrap_or_default()
}

/// What the blocked thread is doing, from its syscall (the open flags are not in the event).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Opening {
    /// Inside execve: this FAN_OPEN_PERM comes with the exec event of the same open.
    InExec,
    Access(Access),
}

pub(super) fn open_access(tid: i32) -> Opening {
    // The opener queues the event, then sleeps until answered; until it sleeps, its syscall reads
    // as `running`, so that is retried (briefly: it cannot get past the open without us).
    let deadline = std::time::Instant::now() + SYSCALL_RUNNING_WAIT;
    while let Ok(text) = std::fs::read_to_string(format!("/proc/{tid}/syscall")) {
        if let Some((nr, args)) = parse_syscall(&text) {
            return syscall_opening(tid, nr, &args);
        }
        if !text.starts_with("running") || std::time::Instant::now() >= deadline {
            break;
        }
        std::thread::yield_now();
    }
    Opening::Access(Access::ReadWrite)
}

/// `/proc/TID/syscall`: the number and six arguments in hex (or `running` / `-1 ...`).
fn parse_syscall(text: &str) -> Option<(i64, [u64; 6])> {
    let mut fields = text.split_whitespace();
    let nr = fields.next()?.parse().ok()?;
    let mut args = [0u64; 6];
    for arg in &mut args {
        *arg = u64::from_str_radix(fields.next()?.strip_prefix("0x")?, 16).ok()?;
    }
    Some((nr, args))
}

fn syscall_opening(tid: i32, nr: i64, args: &[u64; 6]) -> Opening {
    let flags = match nr {
        libc::SYS_execve | libc::SYS_execveat => return Opening::InExec,
        libc::SYS_openat | libc::SYS_open_by_handle_at => Some(args[2]),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_open => Some(args[1]),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_creat => Some(libc::O_WRONLY as u64),
        libc::SYS_openat2 => open_how_flags(tid, args[2]),
        // io_uring and anything else: the mode is unknown.
        _ => None,
    };
    Opening::Access(flags.map_or(Access::ReadWrite, flags_access))
}

/// `struct open_how.flags` (its first field) from the opener's memory.
fn open_how_flags(tid: i32, address: u64) -> Option<u64> {
    let mem = std::fs::File::open(format!("/proc/{tid}/mem")).ok()?;
    let mut flags = [0u8; 8];
    mem.read_exact_at(&mut flags, address).ok()?;
    Some(u64::from_ne_bytes(flags))
}

fn flags_access(flags: u64) -> Access {
    let flags = flags as i32;
    let writes = flags & (libc::O_TRUNC | libc::O_CREAT) != 0;
    match flags & libc::O_ACCMODE {
        libc::O_RDONLY if !writes => Access::Read,
        libc::O_WRONLY => Access::Write,
        _ => Access::ReadWrite,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_lines_and_open_flags() {
        let line = "257 0xffffff9c 0x7ffd1234 0x0 0x0 0x0 0x0 0x7ffd 0x7f00\n";
        let (nr, args) = parse_syscall(line).unwrap();
        assert_eq!(nr, libc::SYS_openat);
        assert_eq!(syscall_opening(0, nr, &args), Opening::Access(Access::Read));
        assert_eq!(parse_syscall("running\n"), None);
        assert_eq!(parse_syscall("-1 0x7ffd 0x7f00\n"), None);
        let at = |flags: i32| syscall_opening(0, libc::SYS_openat, &[0, 0, flags as u64, 0, 0, 0]);
        assert_eq!(at(libc::O_WRONLY | libc::O_CREAT), Opening::Access(Access::Write));
        assert_eq!(at(libc::O_RDWR), Opening::Access(Access::ReadWrite));
        assert_eq!(at(libc::O_RDONLY | libc::O_TRUNC), Opening::Access(Access::ReadWrite));
        assert_eq!(syscall_opening(0, libc::SYS_execve, &[0; 6]), Opening::InExec);
        assert_eq!(
            syscall_opening(0, libc::SYS_io_uring_enter, &[0; 6]),
            Opening::Access(Access::ReadWrite)
        );
    }
}
