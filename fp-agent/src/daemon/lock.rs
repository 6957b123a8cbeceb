//! One daemon per pin directory and per socket: exclusive flocks held for the daemon's life (the
//! kernel releases them when the process dies, so a crash never leaves a stale lock).
//!
//! The pin directory is host-wide state (the attached programs, their maps, the sessions they
//! confine), so it is locked first, before the daemon touches anything: a second daemon with
//! another socket but the same `pin_dir` is refused before it could adopt the live daemon's
//! sessions. The socket's lock file (`<socket>.lock`) is taken next.
use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};
use nix::fcntl::{Flock, FlockArg};

#[derive(Debug)]
pub struct InstanceLock {
    _file: Flock<std::fs::File>,
    pub path: PathBuf,
    /// A directory this lock created: removed again when the lock ends, if empty.
    created_dir: bool,
}

impl Drop for InstanceLock {
    fn drop(&mut self) {
        if self.created_dir {
            let _ = std::fs::remove_dir(&self.path);
        }
    }
}

impl InstanceLock {
    /// Takes the socket's lock (`path` is `<socket>.lock`), or says which daemon holds it.
    pub fn acquire(path: &Path) -> anyhow::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("opening the lock file {}", path.display()))?;
        let mut file = lock(file, path, "or give this one another socket")?;
        // The pid is for the message and for operators; the flock is the lock.
        file.set_len(0)?;
        write!(file, "{}", std::process::id())?;
        Ok(InstanceLock { _file: file, path: path.to_path_buf(), created_dir: false })
    }

    /// Takes the lock of the pin directory `dir` (created if missing: on bpffs, where no plain
    /// file can be made, the directory itself is locked), or says which daemon holds it.
    pub fn acquire_dir(dir: &Path) -> anyhow::Result<Self> {
        let created_dir = !dir.exists();
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let file =
            std::fs::File::open(dir).with_context(|| format!("opening {}", dir.display()))?;
        let file = lock(
            file,
            dir,
            "(pinned programs and sessions are shared by every daemon using this pin_dir)",
        )?;
        Ok(InstanceLock { _file: file, path: dir.to_path_buf(), created_dir })
    }
}

fn lock(file: std::fs::File, path: &Path, advice: &str) -> anyhow::Result<Flock<std::fs::File>> {
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(locked) => Ok(locked),
        Err((file, nix::errno::Errno::EWOULDBLOCK)) => {
            let holder = holder(&file, path).map_or_else(|| "?".to_owned(), |p| p.to_string());
            Err(anyhow!(
                "another fp daemon is running (pid {holder}, holding {}); stop it first \
                 (systemctl stop fp) {advice}",
                path.display()
            ))
        }
        Err((_, e)) => Err(e).with_context(|| format!("locking {}", path.display())),
    }
}

/// The pid holding the flock on `file`: the pid written in a lock file, else the kernel's list
/// of locks (`/proc/locks`).
fn holder(file: &std::fs::File, path: &Path) -> Option<u32> {
    if path.is_file()
        && let Some(pid) = std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse().ok())
    {
        return Some(pid);
    }
    let meta = file.metadata().ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    flock_holder(&locks, meta.dev(), meta.ino())
}

/// Parses `/proc/locks` (`1: FLOCK  ADVISORY  WRITE 812 00:1a:5678 0 EOF`) for the flock on the
/// inode `ino` of device `dev`.
fn flock_holder(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let id = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [_, "FLOCK", _, _, pid, at, ..] if *at == id => pid.parse().ok(),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_instance_is_refused_until_the_first_ends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fp.sock.lock");
        let first = InstanceLock::acquire(&path).unwrap();
        let e = InstanceLock::acquire(&path).unwrap_err().to_string();
        let pid = std::process::id();
        assert!(e.starts_with(&format!("another fp daemon is running (pid {pid}")), "{e}");
        drop(first);
        InstanceLock::acquire(&path).unwrap();
    }

    #[test]
    fn a_locked_pin_directory_names_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let pins = dir.path().join("bpf/fp");
        let first = InstanceLock::acquire_dir(&pins).unwrap();
        let e = InstanceLock::acquire_dir(&pins).unwrap_err().to_string();
        let pid = std::process::id();
        let expected =
            format!("another fp daemon is running (pid {pid}, holding {}", pins.display());
        assert!(e.starts_with(&expected), "{e}");
        drop(first);
        assert!(!pins.exists(), "the directory it made is removed when empty");
        InstanceLock::acquire_dir(&pins).unwrap();
    }

    #[test]
    fn proc_locks_lines_are_read() {
        let locks = "1: FLOCK  ADVISORY  WRITE 812 00:1a:5678 0 EOF\n\
                     2: POSIX  ADVISORY  WRITE 9 08:01:77 0 EOF\n";
        assert_eq!(flock_holder(locks, libc::makedev(0, 0x1a), 5678), Some(812));
        assert_eq!(flock_holder(locks, libc::makedev(8, 1), 77), None);
        assert_eq!(flock_holder(locks, libc::makedev(0, 0x1a), 5679), None);
    }
}
