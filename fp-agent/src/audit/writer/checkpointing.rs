//! Checkpoints: a signed note over everything so far, in the log and in the checkpoint sink.
use std::time::Instant;

use super::super::checkpoint;
use super::super::record::{Body, Checkpoint};
use super::{CheckpointSink, LogWriter, WriteError};

impl LogWriter {
    /// Whether a checkpoint is due by count or time.
    pub fn checkpoint_due(&self) -> bool {
        self.since_checkpoint >= self.config.checkpoint_every_records
            || (self.since_checkpoint > 0
                && (self.session_ended
                    || self.last_checkpoint.elapsed() >= self.config.checkpoint_every))
    }

    /// Appends a signed checkpoint over everything so far, makes it durable, then publishes it
    /// to the sink.
    pub fn checkpoint(&mut self) -> Result<(), WriteError> {
        let origin = checkpoint::origin(&self.log_id);
        let note = self.config.signer.sign_checkpoint(&origin, self.next_seq, &self.head);
        let root = hex::encode(self.head);
        let body = Body::Checkpoint(Checkpoint { size: self.next_seq, root, note: note.clone() });
        self.append_body(&body);
        self.flush(true)?;
        self.since_checkpoint = 0;
        self.session_ended = false;
        self.last_checkpoint = Instant::now();
        match &self.config.checkpoint_sink {
            None => Ok(()),
            Some(CheckpointSink::File(path)) => {
                checkpoint::write_atomic(path, note.as_bytes(), 0o644).map_err(|e| {
                    match e.downcast_ref::<std::io::Error>() {
                        Some(io) if io.raw_os_error() == Some(libc::ENOSPC) => WriteError::NoSpace,
                        Some(io) if io.raw_os_error() == Some(libc::EROFS) => WriteError::ReadOnly,
                        _ => WriteError::Fatal(e.context("writing the checkpoint sink")),
                    }
                })
            }
            Some(CheckpointSink::Syslog) => {
                syslog_checkpoint(&note);
                Ok(())
            }
        }
    }
}

fn syslog_checkpoint(note: &str) {
    let line = format!("fp-audit checkpoint {}", note.replace('\n', " | "));
    let Ok(message) = std::ffi::CString::new(line) else { return };
    // SAFETY: a constant format string with one NUL-terminated argument.
    unsafe {
        libc::syslog(libc::LOG_AUTHPRIV | libc::LOG_NOTICE, c"%s".as_ptr(), message.as_ptr())
    };
}
