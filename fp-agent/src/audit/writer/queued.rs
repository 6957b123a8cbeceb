//! How many records the writer holds in memory because the log cannot be written, noted in
//! `<log>.queued`, so that a writer started after a crash (or a stop) while the disk was full
//! chains a `loss` record of how many never reached the log, and why (docs/audit.md, "Disk
//! full"). The note is made while the log is opened, when there is space, and is later only
//! overwritten in place, which needs no new block on ext4, xfs or tmpfs; on a copy-on-write
//! filesystem (btrfs) a full disk may refuse that too, and the note is best effort.
use std::fs::{File, OpenOptions};
use std::io::Read as _;
use std::os::unix::fs::{FileExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// Where a `loss` record says records a previous writer held in memory were lost.
pub const UNWRITTEN_LOSS: &str = "audit-log-unwritten";

/// The note's fixed size: a decimal count, padded.
const SIZE: usize = 24;

/// `<log>.queued`, open.
pub(super) struct QueuedNote {
    path: PathBuf,
    file: File,
    /// The count it holds now.
    noted: u64,
}

impl QueuedNote {
    /// Opens (or makes) the note of the log `log`, and reads the count a previous writer left in
    /// it (0 when none, or when it does not read as a count: then a warning).
    pub(super) fn open(log: &Path) -> anyhow::Result<(Self, u64)> {
        let path = PathBuf::from(format!("{}.queued", log.display()));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        let mut text = String::new();
        let left = match (&mut file).take(SIZE as u64 + 1).read_to_string(&mut text) {
            Ok(_) if text.trim().is_empty() => 0,
            Ok(_) => text.trim().parse::<u64>().unwrap_or_else(|_| {
                tracing::warn!("{}: not a count of records; ignored", path.display());
                0
            }),
            Err(e) => {
                tracing::warn!("{}: {e}; ignored", path.display());
                0
            }
        };
        // Its one block is taken now, while there is space: later writes only overwrite it.
        let made = file.metadata().is_ok_and(|md| md.len() == SIZE as u64);
        let mut note = QueuedNote { path, file, noted: if made { left } else { u64::MAX } };
        note.set(left);
        Ok((note, left))
    }

    /// Notes that `count` records are held in memory (0: none). Writes only a change.
    pub(super) fn set(&mut self, count: u64) {
        if count == self.noted {
            return;
        }
        let text = format!("{count:<width$}\n", width = SIZE - 1);
        match self.file.write_at(text.as_bytes(), 0) {
            Ok(_) => self.noted = count,
            Err(e) => tracing::warn!("{}: {e}", self.path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_left_behind_is_read_back_once_cleared() {
        let dir = std::env::temp_dir().join(format!("fp-queued-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("audit.log");
        let (mut note, left) = QueuedNote::open(&log).unwrap();
        assert_eq!(left, 0);
        note.set(1234);
        note.set(7);
        drop(note);
        let (mut note, left) = QueuedNote::open(&log).unwrap();
        assert_eq!(left, 7);
        note.set(0);
        assert_eq!(QueuedNote::open(&log).unwrap().1, 0);
        assert_eq!(std::fs::metadata(dir.join("audit.log.queued")).unwrap().len(), SIZE as u64);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
