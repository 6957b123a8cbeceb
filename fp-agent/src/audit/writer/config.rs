//! What a writer is configured with: the log's path and key, checkpoint, group-commit and
//! rotation intervals, and where checkpoints go besides the log.
use std::path::PathBuf;
use std::time::Duration;

use super::super::checkpoint::SignerKey;
use super::{OnFull, SpaceLeft};

/// Where checkpoints go besides the log itself, so a truncated log is noticed.
#[derive(Clone, Debug)]
pub enum CheckpointSink {
    /// The latest checkpoint note, atomically replaced (feed it to `--trusted-checkpoint`).
    File(PathBuf),
    /// syslog (and so journald), facility AUTHPRIV, one line per checkpoint.
    Syslog,
}

#[derive(Clone)]
pub struct WriterConfig {
    /// The active segment, e.g. `/var/log/fp/audit.log`; rotated ones get a `.<first seq>` suffix.
    pub path: PathBuf,
    pub signer: SignerKey,
    pub checkpoint_every_records: u64,
    pub checkpoint_every: Duration,
    /// Group commit: the longest a written record waits for fdatasync.
    pub sync_interval: Duration,
    /// fdatasync at once after any batch holding a deny or prompt decision.
    pub sync_on_deny: bool,
    pub rotate_bytes: u64,
    pub rotate_age: Duration,
    pub channel_capacity: usize,
    pub checkpoint_sink: Option<CheckpointSink>,
    /// How often a writer stopped by ENOSPC tries again.
    pub enospc_retry: Duration,
    /// Free space on the log's filesystem under which the writer warns (`[audit] space_left`).
    pub space_left: SpaceLeft,
    /// What the host does while the log cannot be written (the writer only reports it).
    pub on_full: OnFull,
}

impl WriterConfig {
    pub fn new(path: PathBuf, signer: SignerKey) -> Self {
        WriterConfig {
            path,
            signer,
            checkpoint_every_records: 10_000,
            checkpoint_every: Duration::from_secs(60),
            sync_interval: Duration::from_millis(50),
            sync_on_deny: true,
            rotate_bytes: 256 << 20,
            rotate_age: Duration::from_secs(24 * 3600),
            channel_capacity: 65_536,
            checkpoint_sink: None,
            enospc_retry: Duration::from_secs(1),
            space_left: SpaceLeft::default(),
            on_full: OnFull::default(),
        }
    }
}
