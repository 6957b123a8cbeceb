//! The one reader of the kernel's decision events, and where the manager's records go: a stderr
//! line, or the audit log, and the observer.
use std::{
    collections::HashMap,
    io::Write as _,
    os::fd::{AsRawFd as _, RawFd},
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicBool, Ordering},
    },
};

use aya::maps::{MapData, RingBuf};
use fp_common::kernel::DecisionEvent;

use super::event::{self, SessionContext};
use crate::audit;

/// Where decision events go.
#[derive(Clone)]
pub enum Sink {
    /// One line each on stderr.
    Stderr,
    /// The audit log.
    Audit(audit::AuditHandle),
}

/// How long the event reader waits for the audit writer to write one event before reading on
/// (a writer stalled on a full disk must not stall the reader: its queue still holds the event).
const RING_HANDOFF_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Sees every record the manager produces (decisions, session start and end, reloads), e.g. to
/// stream them to the daemon's subscribers. Called on the event reader's thread: must not block.
pub type Observer = Arc<dyn Fn(&audit::Event) + Send + Sync>;

/// The sink and the observer, as the manager and its event reader share them.
#[derive(Clone)]
pub(super) struct Outputs {
    pub sink: Sink,
    pub observer: Option<Observer>,
}

impl Outputs {
    /// Records `event` (observed, then queued for the audit log).
    pub fn record(&self, event: audit::Event) {
        self.emit(event, None);
    }

    /// Records a decision event of the session `ctx`: a line on stderr, or an audit record in
    /// the log before this returns (bounded), so that the ring buffer can let it go.
    pub fn decision(&self, ev: &DecisionEvent, ctx: &SessionContext) {
        if let Sink::Stderr = self.sink {
            // One write(2) per line, so it does not interleave with the command's own stderr.
            let _ = std::io::stderr().write_all(event::line(ev, ctx).as_bytes());
        }
        if matches!(self.sink, Sink::Audit(_)) || self.observer.is_some() {
            let record = audit::Event::Decision(event::audit_record(ev, ctx));
            // An agent killed once the ring buffer let the event go would lose it from both.
            self.emit(record, Some(RING_HANDOFF_TIMEOUT));
        }
    }

    /// Shows `event` to the observer, then hands it to the audit log (waiting up to `written`
    /// for it to be in the file).
    fn emit(&self, event: audit::Event, written: Option<std::time::Duration>) {
        if let Some(observe) = &self.observer {
            observe(&event);
        }
        if let Sink::Audit(handle) = &self.sink {
            let _ = match written {
                Some(timeout) => handle.record_written(event, timeout),
                None => handle.record(event),
            };
        }
    }
}

/// Where the reader takes decision events from: the kernel's ring buffer (a queue in the tests).
pub(super) trait EventSource: Send {
    /// Hands the next whole event queued, if any, to `record`, and lets it go from the queue
    /// only once `record` has returned: an agent killed in between leaves it queued for the next
    /// one (recorded twice at worst, never lost). False when nothing is queued.
    fn next_event(&mut self, record: &mut dyn FnMut(DecisionEvent)) -> bool;
    /// A descriptor that polls readable while events are queued.
    fn raw_fd(&self) -> RawFd;
}

impl EventSource for RingBuf<MapData> {
    fn next_event(&mut self, record: &mut dyn FnMut(DecisionEvent)) -> bool {
        while let Some(item) = self.next() {
            if item.len() >= size_of::<DecisionEvent>() {
                // SAFETY: the programs write whole DecisionEvents; read_unaligned copies it out.
                record(unsafe { std::ptr::read_unaligned(item.as_ptr() as *const DecisionEvent) });
                // Dropping `item` (after `record`) releases it in the ring buffer.
                return true;
            }
        }
        false
    }

    fn raw_fd(&self) -> RawFd {
        self.as_raw_fd()
    }
}

pub(super) type Events = Arc<Mutex<Box<dyn EventSource>>>;
/// Contexts by cgroup id, for the event reader (kept apart so it never waits on a load).
pub(super) type Contexts = Arc<RwLock<HashMap<u64, SessionContext>>>;

/// The event reader: drains the ring buffer whenever it has data, until stopped.
pub(super) fn read_events(
    events: &Mutex<Box<dyn EventSource>>,
    contexts: &RwLock<HashMap<u64, SessionContext>>,
    outputs: &Outputs,
    stop: &AtomicBool,
) {
    let fd = events.lock().unwrap().raw_fd();
    while !stop.load(Ordering::Acquire) {
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; the ring buffer (and its fd) outlives this thread.
        unsafe { libc::poll(&mut pfd, 1, 100) };
        drain(events, contexts, outputs);
    }
    drain(events, contexts, outputs);
}

/// Records every queued event. An event of a session no agent knows (one a restarted agent could
/// not take over) cannot be attributed: those are counted in a loss record.
pub(super) fn drain(
    events: &Mutex<Box<dyn EventSource>>,
    contexts: &RwLock<HashMap<u64, SessionContext>>,
    outputs: &Outputs,
) {
    let mut events = events.lock().unwrap();
    let mut unknown = 0;
    while events.next_event(&mut |ev| match contexts.read().unwrap().get(&ev.session) {
        Some(ctx) => outputs.decision(&ev, ctx),
        None => unknown += 1,
    }) {}
    if unknown > 0 {
        tracing::error!("{unknown} decision event(s) of unknown sessions");
        outputs.record(audit::Event::Loss(audit::Loss {
            count: unknown,
            at: "unknown-session".to_owned(),
        }));
    }
}
