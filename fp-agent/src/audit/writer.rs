//! The one writer of a log: exclusive lock, O_APPEND, whole records per write(2), group commit,
//! checkpoints, rotation, torn-tail recovery and ENOSPC back-off.
//!
//! [`LogWriter`] is the synchronous core; [`start`] runs it on a thread fed by [`AuditHandle`]s.
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest as _, Sha256};

use super::chain::{self, GENESIS, Hash};
use super::checkpoint::{self, SignerKey};
use super::record::{
    Body, Checkpoint, DaemonRestart, Event, LogOpen, Loss, Record, Recovery, Stamp, format_time,
    write_sealed,
};
use super::segments;

/// Where a loss record says channel drops happened.
pub const CHANNEL_LOSS: &str = "audit-channel";
/// Staged bytes kept in memory while the disk is full; beyond this, events are counted as lost.
const MAX_PENDING_BYTES: usize = 16 << 20;
/// Records drained from the channel before the writer writes them out.
const MAX_BATCH: usize = 4096;

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
        }
    }
}

/// Why a write did not happen.
#[derive(Debug)]
pub enum WriteError {
    /// The filesystem is full (ENOSPC/EDQUOT); staged records are kept and retried.
    NoSpace,
    /// Anything else, fsync errors above all: the log can no longer be trusted to be durable.
    Fatal(anyhow::Error),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::NoSpace => f.write_str("no space left for the audit log"),
            WriteError::Fatal(e) => write!(f, "audit log write failed: {e:#}"),
        }
    }
}

impl std::error::Error for WriteError {}

fn io_error(e: std::io::Error, what: &str) -> WriteError {
    match e.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT) => WriteError::NoSpace,
        _ => WriteError::Fatal(anyhow::Error::new(e).context(what.to_owned())),
    }
}

/// Host facts stamped on every record.
struct Origin {
    boot_id: String,
    host: String,
}

impl Origin {
    fn current() -> Self {
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        Origin { boot_id, host }
    }

    fn stamp(&self) -> Stamp {
        Stamp {
            time: format_time(time::OffsetDateTime::now_utc()),
            mono_ns: monotonic_ns(),
            boot_id: self.boot_id.clone(),
            host: self.host.clone(),
        }
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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

fn sync_dir(path: &Path) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    File::open(dir)?.sync_all()
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
    pending_deny: bool,
    unsynced: bool,
    last_sync: Instant,
    since_checkpoint: u64,
    last_checkpoint: Instant,
}

/// Where an existing log left off.
struct Resume {
    log_id: String,
    segment: u64,
    segment_first_seq: u64,
    next_seq: u64,
    head: Hash,
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
            pending_deny: false,
            unsynced: false,
            last_sync: now,
            since_checkpoint: 0,
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

    /// Stages one producer event.
    pub fn append(&mut self, event: Event) {
        if let Event::Decision(decision) = &event {
            self.pending_deny |= decision.decision.is_deny_or_prompt();
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
        if !self.pending.is_empty() {
            if let Err(e) = self.file.write_all(&self.pending) {
                // Undo a partial write so the file still ends with a whole record.
                let _ = self.file.set_len(self.file_len);
                return Err(io_error(e, "writing the audit log"));
            }
            self.file_len += self.pending.len() as u64;
            self.pending.clear();
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

    /// Whether a checkpoint is due by count or time.
    pub fn checkpoint_due(&self) -> bool {
        self.since_checkpoint >= self.config.checkpoint_every_records
            || (self.since_checkpoint > 0
                && self.last_checkpoint.elapsed() >= self.config.checkpoint_every)
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
        self.last_checkpoint = Instant::now();
        match &self.config.checkpoint_sink {
            None => Ok(()),
            Some(CheckpointSink::File(path)) => {
                checkpoint::write_atomic(path, note.as_bytes(), 0o644).map_err(|e| {
                    match e.downcast_ref::<std::io::Error>() {
                        Some(io) if io.raw_os_error() == Some(libc::ENOSPC) => WriteError::NoSpace,
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

    /// Seals the log with a final checkpoint.
    pub fn close(mut self) -> Result<(), WriteError> {
        self.checkpoint()
    }
}

fn writer_version() -> String {
    format!("fp {}", env!("CARGO_PKG_VERSION"))
}

fn syslog_checkpoint(note: &str) {
    let line = format!("fp-audit checkpoint {}", note.replace('\n', " | "));
    let Ok(message) = std::ffi::CString::new(line) else { return };
    // SAFETY: a constant format string with one NUL-terminated argument.
    unsafe {
        libc::syslog(libc::LOG_AUTHPRIV | libc::LOG_NOTICE, c"%s".as_ptr(), message.as_ptr())
    };
}

/// Bytes read from the end of a segment to find its last record.
const TAIL_WINDOW: u64 = 1 << 20;

fn read_tail(file: &mut File) -> std::io::Result<(u64, Vec<u8>)> {
    let len = file.metadata()?.len();
    let start = len.saturating_sub(TAIL_WINDOW);
    file.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::with_capacity((len - start) as usize);
    file.read_to_end(&mut tail)?;
    Ok((start, tail))
}

/// Parses and checks the seal of one line (without its `\n`).
pub(crate) fn parse_sealed_record(line: &[u8]) -> Option<Record> {
    let (sealed, hash) = chain::split_line(line)?;
    if chain::seal_hash(sealed) != hash {
        return None;
    }
    serde_json::from_slice(line).ok()
}

/// Moves a torn tail (the bytes after the last newline: what a crash in the middle of a write
/// leaves) to `<path>.<size>.torn`, then truncates the segment to its last whole line. A whole
/// last line that does not verify is not a crash artifact: it stays for `fp audit verify` to
/// report, and opening the log fails (see `read_resume`).
fn recover_torn_tail(path: &Path, file: &mut File) -> anyhow::Result<Option<Recovery>> {
    let (start, tail) = read_tail(file)?;
    let keep = match tail.iter().rposition(|&b| b == b'\n') {
        Some(i) => i + 1,
        None if start == 0 => 0,
        None => bail!("{}: last 1 MiB holds no record boundary", path.display()),
    };
    if keep == tail.len() {
        return Ok(None);
    }
    let torn = &tail[keep..];
    let keep_len = start + keep as u64;
    let torn_path = PathBuf::from(format!("{}.{keep_len}.torn", path.display()));
    checkpoint::write_atomic(&torn_path, torn, 0o600)?;
    file.set_len(keep_len)?;
    file.sync_all()?;
    tracing::warn!(
        "audit log {}: moved a torn tail of {} bytes to {}",
        path.display(),
        torn.len(),
        torn_path.display()
    );
    Ok(Some(Recovery {
        torn_file: torn_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        torn_size: torn.len() as u64,
        torn_sha256: hex::encode(Sha256::digest(torn)),
    }))
}

/// Reads where a non-empty segment left off: its first record (the `log-open`) and its last.
fn read_resume(file: &mut File) -> anyhow::Result<Option<Resume>> {
    let (_, tail) = read_tail(file)?;
    if tail.is_empty() {
        return Ok(None);
    }
    let body = &tail[..tail.len() - 1];
    let last_line = &body[body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)..];
    let last = parse_sealed_record(last_line).ok_or_else(|| {
        anyhow!(
            "last record does not verify (not a torn write); run `fp audit verify` and move the \
             log aside to start a new one"
        )
    })?;
    file.seek(SeekFrom::Start(0))?;
    let mut head = Vec::new();
    file.take(TAIL_WINDOW).read_to_end(&mut head)?;
    let first_line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let first = parse_sealed_record(first_line)
        .ok_or_else(|| anyhow!("first record is damaged; move the log aside to start a new one"))?;
    let Body::LogOpen(open) = first.body else {
        bail!("first record is not log-open; move the log aside to start a new one");
    };
    let head = chain::parse_hex_hash(&last.hash).ok_or_else(|| anyhow!("bad hash"))?;
    Ok(Some(Resume {
        log_id: open.log_id,
        segment: open.segment,
        segment_first_seq: first.seq,
        next_seq: last.seq + 1,
        head,
    }))
}

/// Where the newest rotated segment next to `path` left off, if there is one.
fn resume_from_rotated(path: &Path) -> anyhow::Result<Option<Resume>> {
    let Some(newest) = segments::rotated_segments(path)?.pop() else { return Ok(None) };
    let mut file = File::open(&newest).with_context(|| format!("opening {}", newest.display()))?;
    read_resume(&mut file).with_context(|| format!("resuming from {}", newest.display()))
}

/// The writer's state as producers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    Ok = 0,
    /// The disk is full: keep enforcing, start no new sessions; records resume with space.
    NoSpace = 1,
    /// The writer stopped on an error (e.g. fsync): the log is no longer durable.
    Failed = 2,
}

struct Shared {
    dropped: AtomicU64,
    health: AtomicU8,
    shutdown: AtomicBool,
    /// Events put in the channel so far, counted in channel order (under the lock).
    sent: Mutex<u64>,
    /// Events the writer has written to the log file (or counted in a loss record) so far.
    written: Mutex<u64>,
    written_changed: Condvar,
}

impl Shared {
    fn set_health(&self, health: Health) {
        self.health.store(health as u8, Ordering::SeqCst);
    }
}

/// What producers hold: cheap to clone; only [`AuditHandle::record_written`] waits.
#[derive(Clone)]
pub struct AuditHandle {
    tx: SyncSender<Event>,
    shared: Arc<Shared>,
}

impl AuditHandle {
    /// Queues an event for the writer. Never blocks: when the channel is full (or the writer is
    /// gone) the event is counted and the count later written as a `loss` record. Returns
    /// whether the event was queued.
    pub fn record(&self, event: Event) -> bool {
        self.send(event).is_some()
    }

    /// [`AuditHandle::record`], then waits (at most `timeout`) until the writer has written the
    /// event to the log file, where a crash of the agent cannot lose it: an event read from the
    /// kernel's pinned ring buffer is let go there only then. Returns whether it was written.
    pub fn record_written(&self, event: Event, timeout: Duration) -> bool {
        let Some(ticket) = self.send(event) else { return false };
        let written = self.shared.written.lock().unwrap();
        let (written, _) = self
            .shared
            .written_changed
            .wait_timeout_while(written, timeout, |w| *w < ticket)
            .unwrap();
        *written >= ticket
    }

    /// Queues `event`; its place in the channel, or None if it was dropped (and counted).
    fn send(&self, event: Event) -> Option<u64> {
        let mut sent = self.shared.sent.lock().unwrap();
        match self.tx.try_send(event) {
            Ok(()) => {
                *sent += 1;
                Some(*sent)
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    pub fn health(&self) -> Health {
        match self.shared.health.load(Ordering::SeqCst) {
            0 => Health::Ok,
            1 => Health::NoSpace,
            _ => Health::Failed,
        }
    }

    /// Whether new sessions may start (false while the disk is full or the writer failed).
    pub fn accepting_sessions(&self) -> bool {
        self.health() == Health::Ok
    }
}

/// The writer thread; [`AuditWriter::shutdown`] drains the channel and seals the log.
pub struct AuditWriter {
    shared: Arc<Shared>,
    thread: std::thread::JoinHandle<anyhow::Result<()>>,
}

impl AuditWriter {
    pub fn shutdown(self) -> anyhow::Result<()> {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        self.thread.join().map_err(|_| anyhow!("audit writer thread panicked"))?
    }
}

/// Opens the log (errors surface here) and starts its writer thread.
pub fn start(config: WriterConfig) -> anyhow::Result<(AuditHandle, AuditWriter)> {
    let capacity = config.channel_capacity;
    let writer = LogWriter::open(config)?;
    let (tx, rx) = std::sync::mpsc::sync_channel(capacity);
    let shared = Arc::new(Shared {
        dropped: AtomicU64::new(0),
        health: AtomicU8::new(Health::Ok as u8),
        shutdown: AtomicBool::new(false),
        sent: Mutex::new(0),
        written: Mutex::new(0),
        written_changed: Condvar::new(),
    });
    let thread_shared = Arc::clone(&shared);
    let thread = std::thread::Builder::new()
        .name("fp-audit-writer".into())
        .spawn(move || {
            let result = run(writer, &rx, &thread_shared);
            if let Err(e) = &result {
                thread_shared.set_health(Health::Failed);
                tracing::error!("audit writer stopped: {e:#}");
            }
            result
        })
        .context("spawning the audit writer")?;
    Ok((AuditHandle { tx, shared: Arc::clone(&shared) }, AuditWriter { shared, thread }))
}

/// The writer loop: batch, write, group-commit, checkpoint, rotate; back off on ENOSPC.
fn run(mut log: LogWriter, rx: &Receiver<Event>, shared: &Shared) -> anyhow::Result<()> {
    let poll = log.config.sync_interval.min(Duration::from_millis(100));
    let mut no_space_since: Option<Instant> = None;
    // Events taken from the channel: once flushed, what `record_written` waits for.
    let mut received = 0u64;
    loop {
        let wait = if no_space_since.is_some() { log.config.enospc_retry.min(poll) } else { poll };
        let mut disconnected = false;
        match rx.recv_timeout(wait) {
            Ok(event) => {
                received += 1;
                stage(&mut log, event, shared);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => disconnected = true,
        }
        let stopping = disconnected || shared.shutdown.load(Ordering::SeqCst);
        // Shutting down drains everything queued; otherwise a batch is bounded.
        let batch = if stopping { usize::MAX } else { MAX_BATCH };
        for event in rx.try_iter().take(batch) {
            received += 1;
            stage(&mut log, event, shared);
        }
        if let Some(since) = no_space_since
            && since.elapsed() < log.config.enospc_retry
            && !stopping
        {
            continue;
        }
        let dropped = shared.dropped.swap(0, Ordering::SeqCst);
        if dropped > 0 {
            log.append_body(&Body::Loss(Loss { count: dropped, at: CHANNEL_LOSS.into() }));
        }
        let result = (|| {
            log.flush(false)?;
            if log.rotation_due() {
                log.rotate()?;
            } else if log.checkpoint_due() {
                log.checkpoint()?;
            }
            Ok(())
        })();
        match result {
            Ok(()) => {
                *shared.written.lock().unwrap() = received;
                shared.written_changed.notify_all();
                if no_space_since.take().is_some() {
                    tracing::warn!("audit log has space again; resuming");
                    shared.set_health(Health::Ok);
                }
            }
            Err(WriteError::NoSpace) => {
                if no_space_since.is_none() {
                    tracing::error!(
                        "audit log {}: no space left; new sessions refused",
                        log.config.path.display()
                    );
                    shared.set_health(Health::NoSpace);
                }
                no_space_since = Some(Instant::now());
                if stopping {
                    bail!(
                        "shutting down with {} bytes of records unwritten: disk full",
                        log.pending_bytes()
                    );
                }
                continue;
            }
            Err(WriteError::Fatal(e)) => return Err(e),
        }
        if stopping {
            return log.close().map_err(|e| anyhow!("{e}"));
        }
    }
}

fn stage(log: &mut LogWriter, event: Event, shared: &Shared) {
    if log.pending_bytes() >= MAX_PENDING_BYTES {
        shared.dropped.fetch_add(1, Ordering::Relaxed);
    } else {
        log.append(event);
    }
}
