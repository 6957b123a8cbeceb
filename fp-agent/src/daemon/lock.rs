//! One daemon per socket: an exclusive flock on `<socket>.lock`, held for the daemon's life (the
//! kernel releases it when the process dies, so a crash never leaves a stale lock).
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};
use nix::fcntl::{Flock, FlockArg};

#[derive(Debug)]
pub struct InstanceLock {
    _file: Flock<std::fs::File>,
    pub path: PathBuf,
}

impl InstanceLock {
    /// Takes the lock, or says which daemon holds it.
    pub fn acquire(path: &Path) -> anyhow::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("opening the lock file {}", path.display()))?;
        let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => locked,
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                let holder = std::fs::read_to_string(path).unwrap_or_default();
                let holder = holder.trim();
                let holder = if holder.is_empty() { "?" } else { holder };
                return Err(anyhow!(
                    "another fp daemon is running (pid {holder}, holding {}); stop it first \
                     (systemctl stop fp) or give this one another socket",
                    path.display()
                ));
            }
            Err((_, e)) => return Err(e).with_context(|| format!("locking {}", path.display())),
        };
        // The pid is for the message above and for operators; the flock is the lock.
        file.set_len(0)?;
        write!(file, "{}", std::process::id())?;
        Ok(InstanceLock { _file: file, path: path.to_path_buf() })
    }
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
}
