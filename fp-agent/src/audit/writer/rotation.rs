//! Rotation: the active segment is sealed, renamed to `<path>.<first seq>`, and a new one opened.
use std::fs::File;
use std::path::Path;
use std::time::Instant;

use super::super::segments;
use super::{LogWriter, WriteError, io_error, open_append};

impl LogWriter {
    pub fn rotation_due(&self) -> bool {
        self.file_len >= self.config.rotate_bytes
            || self.segment_opened.elapsed() >= self.config.rotate_age
    }

    /// Seals the active segment with a checkpoint, renames it to `<path>.<first seq>`, and
    /// opens a new segment whose `log-open` links to the old head.
    pub fn rotate(&mut self) -> Result<(), WriteError> {
        self.checkpoint()?;
        let rotated = segments::rotated_path(&self.config.path, self.segment_first_seq);
        std::fs::rename(&self.config.path, &rotated)
            .map_err(|e| io_error(e, "renaming the active segment"))?;
        self.file = open_append(&self.config.path, true).map_err(WriteError::Fatal)?;
        sync_dir(&self.config.path).map_err(|e| io_error(e, "syncing the log directory"))?;
        self.segment += 1;
        self.segment_first_seq = self.next_seq;
        self.segment_opened = Instant::now();
        self.file_len = 0;
        let body = self.log_open_body();
        self.append_body(&body);
        self.flush(true)
    }
}

fn sync_dir(path: &Path) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    File::open(dir)?.sync_all()
}
