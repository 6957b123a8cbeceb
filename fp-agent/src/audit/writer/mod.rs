//! The one writer of a log: exclusive lock, O_APPEND, whole records per write(2), group commit,
//! checkpoints, rotation, torn-tail recovery and ENOSPC back-off.
//!
//! [`LogWriter`] is the synchronous core; [`start`] runs it on a thread fed by [`AuditHandle`]s.
//! Beside the core here: its configuration (`config`), the stamp on every record (`origin`),
//! torn-tail recovery and resuming (`recovery`), checkpoints (`checkpointing`), rotation
//! (`rotation`), the count of records held in memory while the log cannot be written
//! (`queued`) and the writer thread with its handles (`thread`).
mod checkpointing;
mod config;
mod origin;
mod queued;
mod recovery;
mod rotation;
mod space;
mod thread;

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, anyhow};
use nix::fcntl::{Flock, FlockArg};

pub use config::{CheckpointSink, WriterConfig};
use origin::Origin;
use queued::QueuedNote;
pub use queued::UNWRITTEN_LOSS;
use recovery::{Resume, read_resume, recover_torn_tail, resume_from_rotated};
pub use space::{OnFull, SpaceLeft};
pub use thread::{AuditHandle, AuditWriter, CHANNEL_LOSS, Health, HealthObserver, start};

use super::chain::{self, GENESIS, Hash};
use super::record::{Body, DaemonRestart, Event, LogOpen, Loss, write_sealed};

/// Why a write did not happen.
#[derive(Debug)]
pub enum WriteError {
    /// The filesystem is full (ENOSPC/EDQUOT); staged records are kept and retried.
    NoSpace,
    /// The filesystem is read-only (EROFS: remounted so); retried as [`WriteError::NoSpace`].
    ReadOnly,
    /// Anything else, fsync errors above all: the log can no longer be trusted to be durable.
    Fatal(anyhow::Error),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::NoSpace => f.write_str("no space left for the audit log"),
            WriteError::ReadOnly => f.write_str("the audit log's filesystem is read-only"),
            WriteError::Fatal(e) => write!(f, "audit log write failed: {e:#}"),
        }
    }
}

impl std::error::Error for WriteError {}

fn io_error(e: std::io::Error, what: &str) -> WriteError {
    match e.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT) => WriteError::NoSpace,
        Some(libc::EROFS) => WriteError::ReadOnly,
        _ => WriteError::Fatal(anyhow::Error::new(e).context(what.to_owned())),
    }
}

fn random_log_id() -> anyhow::Result<String> {
    let mut id = [0u8; 16];
    getrandom::getrandom(&mut id).map_err(|e| anyhow!("getrandom: {e}"))?;
    Ok(hex::encode(id))
}

fn open_append(path: &Path, create_new: bool) -> anyhow::Result<File> {
    let mut options = OpenOptions::new();
    options.append(true).read(true).mode(0o600);
    if create_new {
        options.create_new(true);
    }
    options.open(path).with_context(|| format!("opening {}", path.display()))
}

/// The synchronous writer. Records are staged with [`LogWriter::append`] and reach the file in
/// one write(2) per [`LogWriter::flush`].
pub struct LogWriter {
    config: WriterConfig,
    origin: Origin,
    _lock: Flock<File>,
    file: File,
    log_id: String,
    segment: u64,
    segment_first_seq: u64,
    segment_opened: Instant,
    next_seq: u64,
    head: Hash,
    file_len: u64,
    pending: Vec<u8>,
    /// `next_seq` when the file last took everything staged.
    written_seq: u64,
    /// How many records are held in memory while the log cannot be written, for a writer
    /// started after this one dies.
    queued: QueuedNote,
    pending_deny: bool,
    unsynced: bool,
    last_sync: Instant,
    since_checkpoint: u64,
    last_checkpoint: Instant,
    /// A partial write could not be cut off (the filesystem went read-only under it): the next
    /// flush cuts the file back to `file_len` before it writes.
    torn: bool,
    /// A session ended since the last checkpoint: its records are sealed at once, so that its
    /// log verifies without warnings as soon as it ends.
    session_ended: bool,
}

impl LogWriter {
    /// Takes the log's lock, recovers a torn tail, and writes `log-open` (new log or segment) and
    /// `daemon-restart` (existing log) records, synced before returning.
    pub fn open(config: WriterConfig) -> anyhow::Result<Self> {
        let lock_path = PathBuf::from(format!("{}.lock", config.path.display()));
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .with_context(|| format!("opening lock {}", lock_path.display()))?;
        let lock = Flock::lock(lock_file, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
            anyhow!("{} is locked by another writer: {e}", config.path.display())
        })?;
        let origin = Origin::current();
        let (queued, unwritten) = QueuedNote::open(&config.path)?;
        let mut recovered = None;
        let (file, resume, fresh_file) = if config.path.exists() {
            let mut file = open_append(&config.path, false)?;
            recovered = recover_torn_tail(&config.path, &mut file)?;
            match read_resume(&mut file)? {
                Some(resume) => (file, Some(resume), false),
                None => (file, resume_from_rotated(&config.path)?, true),
            }
        } else {
            (open_append(&config.path, true)?, resume_from_rotated(&config.path)?, true)
        };
        let file_len = file.metadata()?.len();
        let existed = resume.is_some();
        let resume = match resume {
            Some(resume) if fresh_file => {
                Resume { segment: resume.segment + 1, segment_first_seq: resume.next_seq, ..resume }
            }
            Some(resume) => resume,
            None => Resume {
                log_id: random_log_id()?,
                segment: 0,
                segment_first_seq: 0,
                next_seq: 0,
                head: GENESIS,
            },
        };
        let now = Instant::now();
        let mut writer = LogWriter {
            config,
            origin,
            _lock: lock,
            file,
            log_id: resume.log_id,
            segment: resume.segment,
            segment_first_seq: resume.segment_first_seq,
            segment_opened: now,
            next_seq: resume.next_seq,
            head: resume.head,
            file_len,
            pending: Vec::with_capacity(1 << 16),
            written_seq: resume.next_seq,
            queued,
            pending_deny: false,
            unsynced: false,
            last_sync: now,
            since_checkpoint: 0,
            session_ended: false,
            torn: false,
            last_checkpoint: now,
        };
        if fresh_file {
            writer.append_body(&writer.log_open_body());
        }
        if let Some(recovery) = recovered {
            writer.append_body(&Body::Recovery(recovery));
        }
        if existed {
            let key_id = writer.config.signer.verifier().key_id();
            let restart = DaemonRestart { key_id, writer: writer_version() };
            writer.append_body(&Body::DaemonRestart(restart));
        }
        if unwritten > 0 {
            tracing::warn!(
                "audit log {}: the previous writer stopped with {unwritten} records it could not \
                 write (the log's filesystem was full); a loss record says so",
                writer.config.path.display()
            );
            let loss = Loss { count: unwritten, at: UNWRITTEN_LOSS.into() };
            writer.append_body(&Body::Loss(loss));
        }
        writer.flush(true).map_err(|e| anyhow!("{e}"))?;
        Ok(writer)
    }

    fn log_open_body(&self) -> Body {
        Body::LogOpen(LogOpen {
            log_id: self.log_id.clone(),
            key_id: self.config.signer.verifier().key_id(),
            segment: self.segment,
            writer: writer_version(),
        })
    }

    pub fn log_id(&self) -> &str {
        &self.log_id
    }

    /// The seq the next record will get (= records so far).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    pub fn pending_bytes(&self) -> usize {
        self.pending.len()
    }

    /// Notes how many records would be lost if this writer died now: those staged but not
    /// written, and `dropped` more the caller counted (the next writer chains a `loss` of them).
    pub fn note_unwritten(&mut self, dropped: u64) {
        self.queued.set(self.next_seq - self.written_seq + dropped);
    }

    /// Stages one producer event.
    pub fn append(&mut self, event: Event) {
        match &event {
            Event::Decision(decision) => self.pending_deny |= decision.decision.is_deny_or_prompt(),
            Event::SessionEnd(_) => self.session_ended = true,
            _ => {}
        }
        self.append_body(&Body::from(event));
    }

    fn append_body(&mut self, body: &Body) {
        let start = self.pending.len();
        let prev = hex::encode(self.head);
        write_sealed(&mut self.pending, self.next_seq, body, &self.origin.stamp(), &prev);
        self.head = chain::seal_in_place(&mut self.pending, start);
        self.next_seq += 1;
        self.since_checkpoint += 1;
    }

    /// Writes everything staged in one write(2); fdatasyncs when `sync` is set, when a deny or
    /// prompt decision was staged with `sync_on_deny`, or when `sync_interval` has passed.
    pub fn flush(&mut self, sync: bool) -> Result<(), WriteError> {
        if self.torn {
            self.file.set_len(self.file_len).map_err(|e| io_error(e, "cutting a partial write"))?;
            self.torn = false;
        }
        if !self.pending.is_empty() {
            if let Err(e) = self.file.write_all(&self.pending) {
                // Undo a partial write so the file still ends with a whole record (appends go
                // to its end): now, or before the next write.
                self.torn = self.file.set_len(self.file_len).is_err();
                return Err(io_error(e, "writing the audit log"));
            }
            self.file_len += self.pending.len() as u64;
            self.pending.clear();
            self.written_seq = self.next_seq;
            self.queued.set(0);
            self.unsynced = true;
        }
        let deny_sync = self.pending_deny && self.config.sync_on_deny;
        if self.unsynced
            && (sync || deny_sync || self.last_sync.elapsed() >= self.config.sync_interval)
        {
            self.file.sync_data().map_err(|e| {
                WriteError::Fatal(anyhow::Error::new(e).context("fdatasync of the audit log"))
            })?;
            self.unsynced = false;
            self.pending_deny = false;
            self.last_sync = Instant::now();
        }
        Ok(())
    }

    /// Seals the log with a final checkpoint.
    pub fn close(mut self) -> Result<(), WriteError> {
        self.checkpoint()
    }
}

fn writer_version() -> String {
    format!("fp {}", env!("CARGO_PKG_VERSION"))
}
