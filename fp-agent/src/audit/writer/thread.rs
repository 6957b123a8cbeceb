//! The writer thread and what producers hold: [`start`] opens the log and runs a [`LogWriter`]
//! on a thread fed through a bounded channel by [`AuditHandle`]s.
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};

use super::super::record::{Body, Event, Loss};
use super::{LogWriter, WriteError, WriterConfig};

/// Where a loss record says channel drops happened.
pub const CHANNEL_LOSS: &str = "audit-channel";
/// Staged bytes kept in memory while the disk is full; beyond this, events are counted as lost.
const MAX_PENDING_BYTES: usize = 16 << 20;
/// Records drained from the channel before the writer writes them out.
const MAX_BATCH: usize = 4096;

/// The writer's state as producers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    Ok = 0,
    /// The disk is full: keep enforcing, start no new sessions; records resume with space.
    NoSpace = 1,
    /// The writer stopped on an error (e.g. fsync): the log is no longer durable.
    Failed = 2,
    /// The log's filesystem is read-only (remounted so): as [`Health::NoSpace`], records resume
    /// once it is writable again.
    ReadOnly = 3,
}

impl Health {
    /// As `fp status` and its JSON name it.
    pub fn name(self) -> &'static str {
        match self {
            Health::Ok => "ok",
            Health::NoSpace => "no-space",
            Health::Failed => "failed",
            Health::ReadOnly => "read-only",
        }
    }

    /// Why the log cannot be written, as messages and records say it.
    pub fn cause(self) -> &'static str {
        match self {
            Health::Ok => "it can be written",
            Health::NoSpace => "no space is left on its filesystem",
            Health::Failed => "its writer stopped on an error (see the agent's log)",
            Health::ReadOnly => "its filesystem is read-only",
        }
    }
}

struct Shared {
    /// The log's active segment, for messages.
    log: std::path::PathBuf,
    dropped: AtomicU64,
    health: AtomicU8,
    shutdown: AtomicBool,
    /// Free space on the log's filesystem is under `[audit] space_left`.
    low_space: AtomicBool,
    /// That threshold in bytes, as last resolved against the filesystem's size.
    space_left: AtomicU64,
    /// Events put in the channel so far, counted in channel order (under the lock).
    sent: Mutex<u64>,
    /// Events the writer has written to the log file (or counted in a loss record) so far.
    written: Mutex<u64>,
    written_changed: Condvar,
    /// What the host does while the log cannot be written (`[audit] on_full`).
    on_full: super::OnFull,
    /// Told of every change of `health` ([`AuditHandle::on_health`]).
    on_health: Mutex<Option<HealthObserver>>,
}

/// Sees each change of the writer's health, on the writer's thread: must not block on the log.
pub type HealthObserver = Arc<dyn Fn(Health) + Send + Sync>;

impl Shared {
    fn set_health(&self, health: Health) {
        let was = self.health.swap(health as u8, Ordering::SeqCst);
        if was != health as u8
            && let Some(observe) = self.on_health.lock().unwrap().clone()
        {
            observe(health);
        }
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
            3 => Health::ReadOnly,
            _ => Health::Failed,
        }
    }

    /// What the host does while the log cannot be written (`[audit] on_full`).
    pub fn on_full(&self) -> super::OnFull {
        self.shared.on_full
    }

    /// Tells `observe` of every change of [`AuditHandle::health`] from now on.
    pub fn on_health(&self, observe: HealthObserver) {
        *self.shared.on_health.lock().unwrap() = Some(observe);
    }

    /// Whether new sessions may start (false while the disk is full or the writer failed).
    pub fn accepting_sessions(&self) -> bool {
        self.health() == Health::Ok
    }

    /// The log's active segment.
    pub fn log(&self) -> &std::path::Path {
        &self.shared.log
    }

    /// Bytes an unprivileged writer may still use on the log's filesystem (None: unreadable).
    pub fn free_bytes(&self) -> Option<u64> {
        super::space::space(log_dir(&self.shared.log)?).map(|s| s.free)
    }

    /// `[audit] space_left` in bytes, and whether the free space is under it (as the writer
    /// last looked, at most a second ago).
    pub fn space_left(&self) -> (u64, bool) {
        (
            self.shared.space_left.load(Ordering::Relaxed),
            self.shared.low_space.load(Ordering::Relaxed),
        )
    }

    /// Refuses a new session while the log cannot be written, or is about to fill its
    /// filesystem (less than [`SESSION_MIN_FREE`] left): no session acts without a record. The
    /// sessions running go on, enforced, their records queued (docs/audit.md, "Disk full").
    pub fn refuse_new_session(&self) -> anyhow::Result<()> {
        let free = self.free_bytes();
        let low;
        let cause = match self.health() {
            Health::Ok => match free {
                Some(free) if free < SESSION_MIN_FREE => {
                    low = format!("{free} bytes are left on its filesystem");
                    &low
                }
                _ => return Ok(()),
            },
            unwritable => unwritable.cause(),
        };
        anyhow::bail!(
            "the audit log {} cannot be written ({cause}): fp starts no new session until it can; \
             the running sessions stay enforced",
            self.shared.log.display()
        )
    }
}

/// The directory of the log's active segment.
fn log_dir(log: &std::path::Path) -> Option<&std::path::Path> {
    log.parent().filter(|d| !d.as_os_str().is_empty())
}

/// Free space on the log's filesystem below which no new session starts: a session's start and
/// first decisions must fit.
pub const SESSION_MIN_FREE: u64 = 1 << 20;

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
    let log = config.path.clone();
    let on_full = config.on_full;
    let writer = LogWriter::open(config)?;
    let (tx, rx) = std::sync::mpsc::sync_channel(capacity);
    let shared = Arc::new(Shared {
        log,
        dropped: AtomicU64::new(0),
        health: AtomicU8::new(Health::Ok as u8),
        shutdown: AtomicBool::new(false),
        low_space: AtomicBool::new(false),
        space_left: AtomicU64::new(0),
        sent: Mutex::new(0),
        written: Mutex::new(0),
        written_changed: Condvar::new(),
        on_full,
        on_health: Mutex::new(None),
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

/// Says a crossing of `[audit] space_left` in the daemon's log.
fn warn_of_space(log: &std::path::Path, crossing: &super::space::Crossing) {
    use super::space::Crossing;
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let (free, threshold, low) = match *crossing {
        Crossing::Under { free, threshold } => (free, threshold, true),
        Crossing::Over { free, threshold } => (free, threshold, false),
    };
    if low {
        tracing::warn!(
            "audit log {}: {:.1} MiB free on its filesystem, under space_left ({:.1} MiB); at \
             {} MiB new sessions are refused",
            log.display(),
            mib(free),
            mib(threshold),
            SESSION_MIN_FREE >> 20
        );
    } else {
        tracing::info!(
            "audit log {}: {:.1} MiB free again, over space_left ({:.1} MiB)",
            log.display(),
            mib(free),
            mib(threshold)
        );
    }
}

/// The writer loop: batch, write, group-commit, checkpoint, rotate; back off on ENOSPC or EROFS.
fn run(mut log: LogWriter, rx: &Receiver<Event>, shared: &Shared) -> anyhow::Result<()> {
    let poll = log.config.sync_interval.min(Duration::from_millis(100));
    let mut blocked_since: Option<Instant> = None;
    let mut watch = super::space::SpaceWatch::new(log.config.space_left);
    // Events taken from the channel: once flushed, what `record_written` waits for.
    let mut received = 0u64;
    loop {
        if let Some(crossing) = log_dir(&log.config.path).and_then(|d| watch.check(d)) {
            warn_of_space(&log.config.path, &crossing);
        }
        let (threshold, low) = watch.state();
        shared.space_left.store(threshold, Ordering::Relaxed);
        shared.low_space.store(low, Ordering::Relaxed);
        let wait = if blocked_since.is_some() { log.config.enospc_retry.min(poll) } else { poll };
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
        if let Some(since) = blocked_since
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
            if watch.read_only() {
                return Err(WriteError::ReadOnly);
            }
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
                if blocked_since.take().is_some() {
                    tracing::warn!("audit log can be written again; resuming");
                    shared.set_health(Health::Ok);
                }
            }
            Err(e @ (WriteError::NoSpace | WriteError::ReadOnly)) => {
                let health = match e {
                    WriteError::NoSpace => Health::NoSpace,
                    _ => Health::ReadOnly,
                };
                if blocked_since.is_none() || shared.health.load(Ordering::SeqCst) != health as u8 {
                    tracing::error!(
                        "audit log {}: {}; new sessions refused, records held until it can be \
                         written",
                        log.config.path.display(),
                        health.cause()
                    );
                    shared.set_health(health);
                }
                blocked_since = Some(Instant::now());
                log.note_unwritten(shared.dropped.load(Ordering::SeqCst));
                if stopping {
                    bail!(
                        "shutting down with {} bytes of records unwritten: {}",
                        log.pending_bytes(),
                        health.cause()
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
