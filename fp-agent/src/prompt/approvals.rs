//! The pending-approval store: every held open of a prompt-tier path waits here until a person,
//! an `approval_command` or the timeout decides it. Opens of the same session on the same path
//! share one approval; the first decision wins; remembered grants answer later opens at once.
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use fp_common::kernel::{GrantScope, GrantValue, after_grant};
use fp_common::policy::{PrefixKeyData, TableVerdict};
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc, watch};

use super::command::ApprovalCommand;

pub type ApprovalId = u64;

/// How many decided approvals are kept to tell late deciders who decided first.
const DECIDED_KEPT: usize = 1024;
/// Capacity of the subscribe channel; a slower subscriber misses events (they are audited).
const EVENTS_CAPACITY: usize = 1024;

/// How the opener opens the file (from its open flags; an unknown mode counts as read-write).
/// The policy ops that decide it, and its name, are in [`crate::op`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    Read,
    Write,
    ReadWrite,
    Exec,
}

/// What `--remember` keeps after an approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Remember {
    /// Every prompt of the session.
    Session,
    /// Every path in the approved path's directory and below it.
    Dir,
    /// The approved path only.
    Path,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approve,
    Deny,
}

impl From<Remember> for GrantScope {
    fn from(remember: Remember) -> Self {
        match remember {
            Remember::Session => GrantScope::Session,
            Remember::Dir => GrantScope::Dir,
            Remember::Path => GrantScope::Path,
        }
    }
}

/// Where a decision came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Surface {
    /// `fp approve` / `fp deny`.
    Cli,
    /// Another client of the control socket (an agent runtime's approval surfacer).
    Socket,
    /// The configured `approval_command`.
    Command,
    /// The controlling terminal of `fp run`'s embedded agent.
    Terminal,
}

/// Who decided: the peer's uid and the surface it used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decider {
    pub uid: u32,
    pub surface: Surface,
}

/// Who opens what, and the rule that prompts: what approvals and outcomes describe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Open {
    pub session: String,
    pub agent: String,
    /// The opening thread (of an approval: the first one).
    pub pid: i32,
    pub comm: String,
    pub access: Access,
    /// As text; bytes that are not UTF-8 show as U+FFFD.
    pub path: String,
    /// The deciding rule as written; None when the default decided.
    pub rule: Option<String>,
}

/// A pending approval, as lists, subscribers and `approval_command` see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub id: ApprovalId,
    #[serde(flatten)]
    pub open: Open,
    /// RFC 3339, UTC.
    pub opened_at: String,
    pub age_ms: u64,
    /// Opens held by this approval (same session, same path).
    pub opens: u32,
}

/// A remembered approval: later prompt-tier opens it covers are allowed without asking.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub id: u64,
    pub session: String,
    pub scope: Remember,
    /// The approved path (`path`), its directory (`dir`), or empty (`session`).
    pub path: String,
    /// RFC 3339, UTC; None: until the session ends.
    pub expires_at: Option<String>,
    pub created_by: Decider,
    /// When it ends, CLOCK_BOOTTIME ns (the kernel's clock for it); 0: with the session.
    #[serde(skip)]
    expires: u64,
    /// [`crate::policy::Op::bit`] mask of the ops the approved open needed: a grant answers only those (an
    /// approved read does not answer an open for reading and writing).
    #[serde(skip)]
    ops: u8,
    #[serde(skip)]
    key: Vec<u8>,
}

impl Grant {
    /// What the broker and the kernel both decide with.
    fn value(&self) -> GrantValue {
        GrantValue::new(self.scope.into(), self.ops, self.expires)
    }

    /// Whether this grant turns the prompt of an `access` of `session` on `path` into an allow at
    /// `now` (CLOCK_BOOTTIME ns): it must answer every op of the access.
    fn allows(&self, session: &str, path: &[u8], access: Access, now: u64) -> bool {
        self.session == session
            && GrantScope::from(self.scope).covers(&self.key, path)
            && access.policy_ops().iter().all(|op| {
                after_grant(TableVerdict::Prompt, Some(&self.value()), *op, now)
                    == TableVerdict::Allow
            })
    }

    fn live(&self, now: u64) -> bool {
        self.value().live(now)
    }

    /// This grant's entry in the kernel's `GRANTS` map for the session of cgroup `cgroup`
    /// (prefix length in bits, key, value); None if its path is longer than a key holds.
    pub fn kernel_entry(&self, cgroup: u64) -> Option<(u32, PrefixKeyData, GrantValue)> {
        let (bits, key) = GrantScope::from(self.scope).key(cgroup, &self.key)?;
        Some((bits, key, self.value()))
    }
}

/// The kernel's `GRANTS` entries for `grants`, whose sessions `cgroup_of` names by cgroup id:
/// grants of sessions it does not know and grants longer than a key are left to the broker;
/// grants with the same key merge into the one that lasts longer.
pub fn kernel_grants(
    grants: &[Grant],
    cgroup_of: impl Fn(&str) -> Option<u64>,
) -> Vec<(u32, PrefixKeyData, GrantValue)> {
    let mut entries: HashMap<(u32, PrefixKeyData), GrantValue> = HashMap::new();
    for (bits, key, value) in grants.iter().filter_map(|g| g.kernel_entry(cgroup_of(&g.session)?)) {
        let merged = entries.get(&(bits, key)).map_or(value, |other| value.longer(*other));
        entries.insert((bits, key), merged);
    }
    entries.into_iter().map(|((bits, key), value)| (bits, key, value)).collect()
}

/// CLOCK_BOOTTIME in ns: grants expire on the clock the BPF programs read
/// (`bpf_ktime_get_boot_ns`). Unreadable: the end of time, so every expiring grant has expired.
fn boottime_ns() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME) {
        Ok(t) => t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64,
        Err(_) => u64::MAX,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeKind {
    Approved,
    Denied,
    TimedOut,
    /// The broker could not decide (no path, shutdown): denied.
    FailedClosed,
    /// A remembered grant allowed the open without asking.
    Granted,
    /// Not a prompt: the kernel tables deferred the open and the exact evaluator denied it.
    DeferDenied,
}

/// One prompt outcome, for the host's audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptOutcome {
    /// None when no approval was opened (granted, or failed closed before one).
    pub approval: Option<ApprovalId>,
    #[serde(flatten)]
    pub open: Open,
    pub outcome: OutcomeKind,
    pub decided_by: Option<Decider>,
    /// From the first held open to the answer.
    pub latency_us: u64,
    pub opens: u32,
    /// The grant this decision created, or the one that allowed the open.
    pub grant: Option<Grant>,
    /// Why the broker failed closed.
    pub reason: Option<String>,
}

/// What subscribers receive.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ApprovalEvent {
    Opened { approval: Approval },
    Decided { outcome: PromptOutcome },
}

/// Why a decision was not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecideError {
    UnknownId(ApprovalId),
    /// Somebody (or the timeout) decided first.
    AlreadyDecided(Box<PromptOutcome>),
    /// `remember`/`for` with a denial.
    RememberOnDeny,
}

impl std::fmt::Display for DecideError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecideError::UnknownId(id) => write!(f, "no pending approval {id}"),
            DecideError::AlreadyDecided(o) => {
                let by = o.decided_by.map_or("fp".to_string(), |d| {
                    format!("uid {} via {}", d.uid, serde_plain(&d.surface))
                });
                write!(
                    f,
                    "approval {} was already decided: {} by {by}",
                    id_of(o),
                    serde_plain(&o.outcome)
                )
            }
            DecideError::RememberOnDeny => {
                write!(f, "--remember and --for apply to approvals only")
            }
        }
    }
}

fn id_of(o: &PromptOutcome) -> String {
    o.approval.map_or("-".to_string(), |id| id.to_string())
}

/// A unit enum's serde name (`timed-out`, `cli`).
pub(crate) fn serde_plain<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

impl std::error::Error for DecideError {}

/// Answers one held open: true allows it. The broker's answers write to the fanotify group.
pub type Answer = Box<dyn FnOnce(bool) + Send>;

/// Called with every live grant when the store starts (none) and whenever a grant is created,
/// expires or loses its session; calls are serialized, each with the grants at its time (the host mirrors them into the
/// kernel). It must not open files on a marked filesystem or wait on the broker.
pub type GrantsChanged = Arc<dyn Fn(&[Grant]) + Send + Sync>;

/// An open the broker wants decided.
#[derive(Clone, Debug)]
pub struct OpenRequest {
    pub open: Open,
    /// The path's bytes: what batching and grants match.
    pub path: Vec<u8>,
}

impl OpenRequest {
    /// `open` with `path` as its path.
    pub fn new(mut open: Open, path: Vec<u8>) -> Self {
        open.path = String::from_utf8_lossy(&path).into_owned();
        OpenRequest { open, path }
    }

    fn outcome(&self, kind: OutcomeKind, latency: Duration) -> PromptOutcome {
        PromptOutcome {
            approval: None,
            open: self.open.clone(),
            outcome: kind,
            decided_by: None,
            latency_us: latency.as_micros() as u64,
            opens: 1,
            grant: None,
            reason: None,
        }
    }
}

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
    command: Option<ApprovalCommand>,
    events: broadcast::Sender<ApprovalEvent>,
    grant_generation: watch::Sender<u64>,
    grants_changed: Option<GrantsChanged>,
    /// Serializes `grants_changed` calls.
    publishing: Mutex<()>,
    outcomes: mpsc::UnboundedSender<PromptOutcome>,
}

impl Approvals {
    /// A store whose approvals time out (denied) after `timeout`; every outcome is sent to the
    /// returned receiver, which the host drains into the audit log.
    pub fn new(
        timeout: Duration,
        command: Option<ApprovalCommand>,
        grants_changed: Option<GrantsChanged>,
    ) -> (Arc<Approvals>, mpsc::UnboundedReceiver<PromptOutcome>) {
        let (outcomes, receiver) = mpsc::unbounded_channel();
        let store = Approvals {
            state: Mutex::new(State { next_id: 1, next_grant: 1, ..State::default() }),
            wake: Condvar::new(),
            timeout,
            command,
            events: broadcast::channel(EVENTS_CAPACITY).0,
            grant_generation: watch::channel(0).0,
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

    /// Changes whenever a grant is created or expires.
    pub fn grant_changes(&self) -> watch::Receiver<u64> {
        self.grant_generation.subscribe()
    }

    /// Drops the grants of sessions that ended (`live` says which still run).
    pub fn retain_grants_of(&self, live: impl Fn(&str) -> bool) {
        let mut state = self.lock();
        let before = state.grants.len();
        state.grants.retain(|g| live(&g.session));
        let changed = state.grants.len() != before;
        drop(state);
        if changed {
            self.grants_changed();
        }
    }

    /// Tells the watchers of grants.
    fn grants_changed(&self) {
        self.grant_generation.send_modify(|g| *g += 1);
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
        if let Some(command) = &self.command {
            command.spawn(Arc::clone(self), view);
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
        let reason = Some(reason.to_string());
        let ending = Ending { kind: OutcomeKind::FailedClosed, decider: None, grant: None, reason };
        finish(self, &mut state, pending, ending, Instant::now());
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
            let reason = Some(reason.to_string());
            let ending =
                Ending { kind: OutcomeKind::FailedClosed, decider: None, grant: None, reason };
            finish(self, &mut state, p, ending, now);
        }
        drop(state);
        self.wake.notify_all();
    }
}

fn new_grant(
    state: &mut State,
    request: &OpenRequest,
    scope: Remember,
    duration: Option<Duration>,
    decider: Decider,
    boottime: u64,
) -> Grant {
    let key = match scope {
        Remember::Session => Vec::new(),
        Remember::Path => request.path.clone(),
        Remember::Dir => match request.path.iter().rposition(|b| *b == b'/') {
            Some(0) => b"/".to_vec(),
            Some(i) => request.path[..i].to_vec(),
            None => request.path.clone(),
        },
    };
    let id = state.next_grant;
    state.next_grant += 1;
    Grant {
        id,
        session: request.open.session.clone(),
        scope,
        path: String::from_utf8_lossy(&key).into_owned(),
        expires_at: duration.map(|d| rfc3339(SystemTime::now() + d)),
        created_by: decider,
        expires: duration.map_or(0, |d| boottime.saturating_add(d.as_nanos() as u64).max(1)),
        ops: request.open.access.op_bits(),
        key,
    }
}

/// How an approval ended.
struct Ending {
    kind: OutcomeKind,
    decider: Option<Decider>,
    grant: Option<Grant>,
    reason: Option<String>,
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

    const CLI: Decider = Decider { uid: 0, surface: Surface::Cli };

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
    fn grants_allow_their_scope_until_they_expire() {
        let mut state = State::default();
        let now = boottime_ns();
        let r = request("s1", "/ws/secrets/key");
        let dir = new_grant(&mut state, &r, Remember::Dir, None, CLI, now);
        assert_eq!(dir.path, "/ws/secrets");
        assert!(dir.allows("s1", b"/ws/secrets/other", Access::Read, now));
        assert!(!dir.allows("s1", b"/ws/secrets-not", Access::Read, now));
        assert!(!dir.allows("s2", b"/ws/secrets/other", Access::Read, now));
        let path = new_grant(&mut state, &r, Remember::Path, None, CLI, now);
        assert!(path.allows("s1", b"/ws/secrets/key", Access::Read, now));
        assert!(!path.allows("s1", b"/ws/secrets/key2", Access::Read, now));
        let session = new_grant(&mut state, &r, Remember::Session, None, CLI, now);
        assert!(session.allows("s1", b"/anything", Access::Read, u64::MAX));
        let root = new_grant(&mut state, &request("s1", "/top"), Remember::Dir, None, CLI, now);
        assert_eq!(root.path, "/");
        assert!(root.allows("s1", b"/etc/x", Access::Read, now));
        let brief = new_grant(&mut state, &r, Remember::Path, Some(Duration::ZERO), CLI, now);
        assert!(!brief.allows("s1", b"/ws/secrets/key", Access::Read, now));
        let ten = new_grant(&mut state, &r, Remember::Dir, Some(Duration::from_secs(10)), CLI, now);
        assert!(ten.allows("s1", b"/ws/secrets/x", Access::Read, now + 9_999_999_999));
        assert!(!ten.allows("s1", b"/ws/secrets/x", Access::Read, now + 10_000_000_000));
        assert!(
            !path.allows("s1", b"/ws/secrets/key", Access::ReadWrite, now),
            "an approved read does not answer an open for reading and writing"
        );
        assert!(path.allows("s1", b"/ws/secrets/key", Access::Exec, now), "exec decides as read");
    }

    #[test]
    fn kernel_entries_merge_grants_with_one_key_and_skip_unknown_sessions() {
        let mut state = State::default();
        let now = boottime_ns();
        let r = request("s1", "/ws/secrets/key");
        let short = Some(Duration::from_secs(5));
        let grants = [
            new_grant(&mut state, &r, Remember::Dir, short, CLI, now),
            new_grant(&mut state, &r, Remember::Dir, None, CLI, now),
            new_grant(&mut state, &r, Remember::Path, short, CLI, now),
            new_grant(&mut state, &request("s2", "/x"), Remember::Session, None, CLI, now),
        ];
        let entries = kernel_grants(&grants, |s| (s == "s1").then_some(42));
        assert_eq!(entries.len(), 2, "{entries:?}");
        let dir = GrantScope::Dir.key(42, b"/ws/secrets").unwrap();
        let merged = entries.iter().find(|(b, k, _)| (*b, *k) == dir).unwrap();
        assert_eq!(
            merged.2,
            GrantValue::new(GrantScope::Dir, crate::policy::Op::Read.bit(), 0),
            "the longer-lived grant wins"
        );
        let long = request("s1", &format!("/{}", "x".repeat(300)));
        let long = new_grant(&mut state, &long, Remember::Path, None, CLI, now);
        assert!(long.kernel_entry(42).is_none());
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
        store.retain_grants_of(|session| session != "s2");
        assert_eq!(heard.lock().unwrap().last(), Some(&vec![]));
        store.close("done");
        reaper.join().unwrap();
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
