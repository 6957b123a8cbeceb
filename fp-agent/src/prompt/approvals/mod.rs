//! The pending-approval store: every held open of a prompt-tier path waits here until a person,
//! an `approval_command` or the timeout decides it. Opens of the same session on the same path
//! share one approval; the first decision wins; remembered grants answer later opens at once.
//!
//! The store is here; beside it: what is asked (`open`), who decides and what they remember
//! (`decision`), what comes of it (`outcome`) and remembered grants (`grants`).
mod decision;
mod grants;
mod open;
mod outcome;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{broadcast, mpsc};

pub use decision::{Decider, Decision, Remember, Surface};
pub use grants::{Grant, GrantsChanged, kernel_grants};
use grants::{boottime_ns, new_grant};
pub use open::{Access, Answer, Approval, Open, OpenRequest};
pub(crate) use outcome::serde_plain;
pub use outcome::{ApprovalEvent, DecideError, OutcomeKind, PromptOutcome};

pub type ApprovalId = u64;

/// How many decided approvals are kept to tell late deciders who decided first.
const DECIDED_KEPT: usize = 1024;
/// Capacity of the subscribe channel; a slower subscriber misses events (they are audited).
const EVENTS_CAPACITY: usize = 1024;

struct Pending {
    id: ApprovalId,
    request: OpenRequest,
    opened: Instant,
    opened_at: SystemTime,
    deadline: Instant,
    held: Vec<Answer>,
}

impl Pending {
    fn key(&self) -> (String, Vec<u8>) {
        (self.request.open.session.clone(), self.request.path.clone())
    }

    fn view(&self, now: Instant) -> Approval {
        Approval {
            id: self.id,
            open: self.request.open.clone(),
            opened_at: rfc3339(self.opened_at),
            age_ms: now.saturating_duration_since(self.opened).as_millis() as u64,
            opens: self.held.len() as u32,
        }
    }
}

#[derive(Default)]
struct State {
    next_id: ApprovalId,
    next_grant: u64,
    pending: BTreeMap<ApprovalId, Pending>,
    by_key: HashMap<(String, Vec<u8>), ApprovalId>,
    decided: VecDeque<PromptOutcome>,
    grants: Vec<Grant>,
    closed: bool,
}

/// The store. Thread-safe; share it as `Arc<Approvals>`.
pub struct Approvals {
    state: Mutex<State>,
    /// Wakes the reaper when a sooner deadline appears or the store closes.
    wake: Condvar,
    timeout: Duration,
    opened: Option<Opened>,
    events: broadcast::Sender<ApprovalEvent>,
    grants_changed: Option<GrantsChanged>,
    /// Serializes `grants_changed` calls.
    publishing: Mutex<()>,
    outcomes: mpsc::UnboundedSender<PromptOutcome>,
}

/// Called with each new approval, on the thread that opened it: the approval command's runner
/// (`super::command`), which decides it through the store it is given.
pub type Opened = Arc<dyn Fn(&Arc<Approvals>, Approval) + Send + Sync>;

impl Approvals {
    /// A store whose approvals time out (denied) after `timeout`; every outcome is sent to the
    /// returned receiver, which the host drains into the audit log.
    pub fn new(
        timeout: Duration,
        opened: Option<Opened>,
        grants_changed: Option<GrantsChanged>,
    ) -> (Arc<Approvals>, mpsc::UnboundedReceiver<PromptOutcome>) {
        let (outcomes, receiver) = mpsc::unbounded_channel();
        let store = Approvals {
            state: Mutex::new(State { next_id: 1, next_grant: 1, ..State::default() }),
            wake: Condvar::new(),
            timeout,
            opened,
            events: broadcast::channel(EVENTS_CAPACITY).0,
            grants_changed,
            publishing: Mutex::new(()),
            outcomes,
        };
        // A new store has no grants: whatever an earlier one left in the kernel goes (a
        // restarted daemon asks again rather than allow what it no longer knows of).
        store.grants_changed();
        (Arc::new(store), receiver)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere must not stop answering held opens: the state stays consistent
        // because every mutation completes under the lock.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pending approvals, oldest first.
    pub fn list(&self) -> Vec<Approval> {
        let now = Instant::now();
        self.lock().pending.values().map(|p| p.view(now)).collect()
    }

    /// New and decided approvals, from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<ApprovalEvent> {
        self.events.subscribe()
    }

    /// Live remembered grants.
    pub fn grants(&self) -> Vec<Grant> {
        let now = boottime_ns();
        self.lock().grants.iter().filter(|g| g.live(now)).cloned().collect()
    }

    /// Forgets what belongs to sessions that ended (`live` says which still run): their grants,
    /// and their pending approvals, denied (failed closed, "its session ended") rather than left
    /// listed until they time out.
    pub fn retain_sessions(&self, live: impl Fn(&str) -> bool) {
        let now = Instant::now();
        let mut state = self.lock();
        let ended: Vec<ApprovalId> = state
            .pending
            .values()
            .filter(|p| !live(&p.request.open.session))
            .map(|p| p.id)
            .collect();
        for id in ended {
            if let Some(pending) = state.pending.remove(&id) {
                state.by_key.remove(&pending.key());
                finish(self, &mut state, pending, Ending::failed_closed("its session ended"), now);
            }
        }
        let before = state.grants.len();
        state.grants.retain(|g| live(&g.session));
        let changed = state.grants.len() != before;
        drop(state);
        if changed {
            self.grants_changed();
        }
    }

    /// Tells the kernel's side of grants (`grants_changed`) what they are now.
    fn grants_changed(&self) {
        if let Some(changed) = &self.grants_changed {
            let _serial = self.publishing.lock().unwrap_or_else(|e| e.into_inner());
            changed(&self.grants());
        }
    }

    /// Holds `answer` until the open is decided: at once if a grant covers it, otherwise with the
    /// pending approval of the same (session, path), or a new one.
    pub fn hold(self: &Arc<Self>, request: OpenRequest, answer: Answer) {
        let now = Instant::now();
        let mut state = self.lock();
        if state.closed {
            drop(state);
            answer(false);
            let mut outcome = request.outcome(OutcomeKind::FailedClosed, Duration::ZERO);
            outcome.reason = Some("the broker is shutting down".to_string());
            self.emit(outcome);
            return;
        }
        let boottime = boottime_ns();
        if let Some(grant) = state
            .grants
            .iter()
            .find(|g| g.allows(&request.open.session, &request.path, request.open.access, boottime))
        {
            let grant = grant.clone();
            drop(state);
            answer(true);
            let mut outcome = request.outcome(OutcomeKind::Granted, Duration::ZERO);
            outcome.grant = Some(grant);
            self.emit(outcome);
            return;
        }
        let key = (request.open.session.clone(), request.path.clone());
        if let Some(id) = state.by_key.get(&key).copied()
            && let Some(pending) = state.pending.get_mut(&id)
        {
            pending.held.push(answer);
            return;
        }
        let id = state.next_id;
        state.next_id += 1;
        let pending = Pending {
            id,
            request,
            opened: now,
            opened_at: SystemTime::now(),
            deadline: now + self.timeout,
            held: vec![answer],
        };
        let view = pending.view(now);
        state.by_key.insert(key, id);
        state.pending.insert(id, pending);
        drop(state);
        self.wake.notify_all();
        let _ = self.events.send(ApprovalEvent::Opened { approval: view.clone() });
        if let Some(opened) = &self.opened {
            opened(self, view);
        }
    }

    /// Decides a pending approval: answers every open it holds, records the grant asked for.
    pub fn decide(
        &self,
        id: ApprovalId,
        decision: Decision,
        remember: Option<Remember>,
        duration: Option<Duration>,
        decider: Decider,
    ) -> Result<PromptOutcome, DecideError> {
        if decision == Decision::Deny && (remember.is_some() || duration.is_some()) {
            return Err(DecideError::RememberOnDeny);
        }
        let now = Instant::now();
        let mut state = self.lock();
        let Some(pending) = state.pending.remove(&id) else {
            return Err(match state.decided.iter().find(|o| o.approval == Some(id)) {
                Some(o) => DecideError::AlreadyDecided(Box::new(o.clone())),
                None => DecideError::UnknownId(id),
            });
        };
        state.by_key.remove(&pending.key());
        let grant = match (decision, remember) {
            (Decision::Approve, Some(scope)) => {
                let boottime = boottime_ns();
                let grant =
                    new_grant(&mut state, &pending.request, scope, duration, decider, boottime);
                state.grants.push(grant.clone());
                Some(grant)
            }
            _ => None,
        };
        let kind = match decision {
            Decision::Approve => OutcomeKind::Approved,
            Decision::Deny => OutcomeKind::Denied,
        };
        let outcome = finish(
            self,
            &mut state,
            pending,
            Ending { kind, decider: Some(decider), grant, reason: None },
            now,
        );
        drop(state);
        if outcome.grant.is_some() {
            self.wake.notify_all();
            self.grants_changed();
        }
        Ok(outcome)
    }

    /// Denies a pending approval that no surface can put to anyone (failed closed, with why).
    pub fn deny_unasked(&self, id: ApprovalId, reason: &str) -> Result<(), DecideError> {
        let mut state = self.lock();
        let pending = state.pending.remove(&id).ok_or(DecideError::UnknownId(id))?;
        state.by_key.remove(&pending.key());
        finish(self, &mut state, pending, Ending::failed_closed(reason), Instant::now());
        Ok(())
    }

    /// Records that the broker denied a session's prompt-tier open it could not put to anyone.
    pub fn failed_closed(&self, request: OpenRequest, reason: String) {
        let mut outcome = request.outcome(OutcomeKind::FailedClosed, Duration::ZERO);
        outcome.reason = Some(reason);
        self.emit(outcome);
    }

    /// Records an open the kernel deferred and the broker denied by policy.
    pub fn defer_denied(&self, request: OpenRequest) {
        self.emit(request.outcome(OutcomeKind::DeferDenied, Duration::ZERO));
    }

    fn emit(&self, outcome: PromptOutcome) {
        let _ = self.events.send(ApprovalEvent::Decided { outcome: outcome.clone() });
        // The host drains this into the audit log; if it is gone, so is the log.
        let _ = self.outcomes.send(outcome);
    }

    /// Denies timed-out approvals and drops expired grants until [`Approvals::close`]; the
    /// broker runs this on its own thread.
    pub fn run_timeouts(&self) {
        let mut state = self.lock();
        loop {
            if state.closed {
                return;
            }
            let now = Instant::now();
            let expired: Vec<ApprovalId> =
                state.pending.values().filter(|p| p.deadline <= now).map(|p| p.id).collect();
            for id in expired {
                if let Some(pending) = state.pending.remove(&id) {
                    state.by_key.remove(&pending.key());
                    let ending = Ending {
                        kind: OutcomeKind::TimedOut,
                        decider: None,
                        grant: None,
                        reason: None,
                    };
                    finish(self, &mut state, pending, ending, now);
                }
            }
            let boottime = boottime_ns();
            let before = state.grants.len();
            state.grants.retain(|g| g.live(boottime));
            if state.grants.len() != before {
                drop(state);
                self.grants_changed();
                state = self.lock();
                continue;
            }
            let next =
                state
                    .pending
                    .values()
                    .map(|p| p.deadline)
                    .chain(
                        state.grants.iter().filter(|g| g.expires != 0).map(|g| {
                            now + Duration::from_nanos(g.expires.saturating_sub(boottime))
                        }),
                    )
                    .min();
            let wait = next.map_or(Duration::from_secs(3600), |t| t.saturating_duration_since(now));
            state = self.wake.wait_timeout(state, wait).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Denies every pending approval (failed closed) and stops [`Approvals::run_timeouts`];
    /// later opens are denied at once.
    pub fn close(&self, reason: &str) {
        let now = Instant::now();
        let mut state = self.lock();
        state.closed = true;
        state.by_key.clear();
        let pending = std::mem::take(&mut state.pending);
        for (_, p) in pending {
            finish(self, &mut state, p, Ending::failed_closed(reason), now);
        }
        drop(state);
        self.wake.notify_all();
    }
}

/// How an approval ended.
struct Ending {
    kind: OutcomeKind,
    decider: Option<Decider>,
    grant: Option<Grant>,
    reason: Option<String>,
}

impl Ending {
    /// Denied by nobody, with why (the broker could not put the approval to anyone).
    fn failed_closed(reason: &str) -> Self {
        let reason = Some(reason.to_string());
        Ending { kind: OutcomeKind::FailedClosed, decider: None, grant: None, reason }
    }
}

/// Answers a decided approval's opens and records and sends the outcome. Runs under the lock:
/// answers write to the fanotify group and the channels never block.
fn finish(
    approvals: &Approvals,
    state: &mut State,
    pending: Pending,
    ending: Ending,
    now: Instant,
) -> PromptOutcome {
    let Ending { kind, decider, grant, reason } = ending;
    let allow = kind == OutcomeKind::Approved;
    let opens = pending.held.len() as u32;
    for answer in pending.held {
        answer(allow);
    }
    let mut outcome = pending.request.outcome(kind, now.saturating_duration_since(pending.opened));
    outcome.approval = Some(pending.id);
    outcome.decided_by = decider;
    outcome.opens = opens;
    outcome.grant = grant;
    outcome.reason = reason;
    if state.decided.len() == DECIDED_KEPT {
        state.decided.pop_front();
    }
    state.decided.push_back(outcome.clone());
    approvals.emit(outcome.clone());
    outcome
}

/// RFC 3339 UTC with milliseconds.
fn rfc3339(t: SystemTime) -> String {
    let t: time::OffsetDateTime = t.into();
    let t = t.replace_nanosecond(t.millisecond() as u32 * 1_000_000).unwrap_or(t);
    t.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(super) const CLI: Decider = Decider { uid: 0, surface: Surface::Cli };

    pub(in crate::prompt) fn request(session: &str, path: &str) -> OpenRequest {
        let open = Open {
            session: session.into(),
            agent: "a".into(),
            pid: 1,
            comm: "cat".into(),
            access: Access::Read,
            path: String::new(),
            rule: None,
        };
        OpenRequest::new(open, path.as_bytes().to_vec())
    }

    /// An answer that records itself in `log`.
    pub(in crate::prompt) fn answer(log: &Arc<Mutex<Vec<bool>>>) -> Answer {
        let log = Arc::clone(log);
        Box::new(move |allow| log.lock().unwrap().push(allow))
    }

    #[test]
    fn one_approval_per_session_and_path_and_the_first_decision_wins() {
        let (store, mut outcomes) = Approvals::new(Duration::from_secs(60), None, None);
        let log = Arc::new(Mutex::new(Vec::new()));
        store.hold(request("s1", "/f"), answer(&log));
        store.hold(request("s1", "/f"), answer(&log));
        store.hold(request("s2", "/f"), answer(&log));
        let list = store.list();
        assert_eq!(list.iter().map(|a| a.opens).collect::<Vec<_>>(), [2, 1]);
        let approved = store.decide(list[0].id, Decision::Approve, None, None, CLI).unwrap();
        assert_eq!((approved.outcome, approved.opens), (OutcomeKind::Approved, 2));
        assert_eq!(*log.lock().unwrap(), [true, true]);
        let again = store.decide(list[0].id, Decision::Deny, None, None, CLI);
        assert!(matches!(again, Err(DecideError::AlreadyDecided(_))));
        assert_eq!(
            store.decide(list[1].id, Decision::Deny, Some(Remember::Dir), None, CLI),
            Err(DecideError::RememberOnDeny)
        );
        assert_eq!(
            store.decide(99, Decision::Deny, None, None, CLI),
            Err(DecideError::UnknownId(99))
        );
        assert_eq!(outcomes.try_recv().map(|o| o.outcome), Ok(OutcomeKind::Approved));
    }

    #[test]
    fn the_host_hears_of_each_grant_made_expired_or_orphaned() {
        let heard: Arc<Mutex<Vec<Vec<u64>>>> = Arc::default();
        let changed: GrantsChanged = {
            let heard = Arc::clone(&heard);
            Arc::new(move |grants: &[Grant]| {
                heard.lock().unwrap().push(grants.iter().map(|g| g.id).collect())
            })
        };
        let (store, _outcomes) = Approvals::new(Duration::from_secs(60), None, Some(changed));
        let reaper = {
            let store = Arc::clone(&store);
            std::thread::spawn(move || store.run_timeouts())
        };
        let log = Arc::new(Mutex::new(Vec::new()));
        for (session, remember) in [("s1", Duration::from_millis(500)), ("s2", Duration::ZERO)] {
            store.hold(request(session, "/ws/f"), answer(&log));
            let id = store.list()[0].id;
            let duration = (!remember.is_zero()).then_some(remember);
            store.decide(id, Decision::Approve, Some(Remember::Dir), duration, CLI).unwrap();
        }
        assert_eq!(heard.lock().unwrap()[..3], [vec![], vec![1], vec![1, 2]]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while heard.lock().unwrap().last() != Some(&vec![2]) {
            assert!(Instant::now() < deadline, "the expiry was not heard: {heard:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
        store.retain_sessions(|session| session != "s2");
        assert_eq!(heard.lock().unwrap().last(), Some(&vec![]));
        store.close("done");
        reaper.join().unwrap();
    }

    /// A session that ends takes its pending approvals with it: denied, failed closed, unlisted.
    #[test]
    fn an_ended_session_ends_its_pending_approvals() {
        let (store, mut outcomes) = Approvals::new(Duration::from_secs(60), None, None);
        let log = Arc::new(Mutex::new(Vec::new()));
        store.hold(request("s1", "/f"), answer(&log));
        store.hold(request("s2", "/g"), answer(&log));
        store.retain_sessions(|session| session != "s1");
        let listed: Vec<String> = store.list().iter().map(|a| a.open.session.clone()).collect();
        assert_eq!(listed, ["s2"]);
        assert_eq!(*log.lock().unwrap(), [false]);
        let outcome = outcomes.try_recv().unwrap();
        assert_eq!(outcome.outcome, OutcomeKind::FailedClosed);
        assert_eq!(outcome.reason.as_deref(), Some("its session ended"));
        store.close("done");
    }

    #[test]
    fn timeouts_deny_and_close_fails_closed() {
        let (timed, mut outcomes) = Approvals::new(Duration::from_millis(20), None, None);
        let reaper = {
            let timed = Arc::clone(&timed);
            std::thread::spawn(move || timed.run_timeouts())
        };
        let log = Arc::new(Mutex::new(Vec::new()));
        timed.hold(request("s1", "/f"), answer(&log));
        let deadline = Instant::now() + Duration::from_secs(10);
        while log.lock().unwrap().is_empty() {
            assert!(Instant::now() < deadline, "the approval never timed out");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(*log.lock().unwrap(), [false]);
        assert_eq!(outcomes.try_recv().map(|o| o.outcome), Ok(OutcomeKind::TimedOut));
        timed.close("done");
        reaper.join().unwrap();

        let (store, mut outcomes) = Approvals::new(Duration::from_secs(60), None, None);
        store.hold(request("s1", "/g"), answer(&log));
        store.close("stopping");
        store.hold(request("s1", "/h"), answer(&log));
        assert_eq!(*log.lock().unwrap(), [false, false, false]);
        let kinds: Vec<_> =
            std::iter::from_fn(|| outcomes.try_recv().ok()).map(|o| o.outcome).collect();
        assert_eq!(kinds, [OutcomeKind::FailedClosed, OutcomeKind::FailedClosed]);
    }
}
