//! Hosting the broker for a [`session::Manager`]: the daemon and `fp run`'s embedded agent both
//! start it here, with the first session that needs it. The host wires the kernel half (heartbeat,
//! settled opens), publishes its sessions to the broker, marks the filesystems where the kernel
//! can leave an open to the broker, writes every outcome to its audit sink, and puts approvals to
//! its surfaces (docs/prompt.md).
use std::{
    collections::{BTreeSet, HashMap, HashSet},
    fs::File,
    io::{Read as _, Write as _},
    os::{
        fd::{AsFd as _, AsRawFd as _},
        unix::ffi::OsStrExt as _,
    },
    path::{Path, PathBuf},
    sync::{Arc, Mutex, Weak},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use tokio::sync::broadcast;

use super::{
    Approval, ApprovalCommand, ApprovalEvent, Approvals, BrokerConfig, Decider, Decision,
    OutcomeKind, PromptBroker, PromptOutcome, SessionLookup, Surface,
    mounts::{MountView, Namespace, existing_ancestor},
};
use crate::{
    audit, config,
    kernel::tables,
    policy::EffectivePolicy,
    session::{Cgroup2, Manager, SessionContext, Sink},
};

/// Longest wait at shutdown for the last prompt outcomes to be written.
const OUTCOMES_DRAIN: Duration = Duration::from_secs(5);

/// Who is asked about an approval, besides `approval_command` when one is configured.
pub enum Surfaces {
    /// The daemon: people and agent runtimes decide over the control socket (`fp approve`).
    ControlSocket,
    /// `fp run`'s embedded agent, which has no socket: the `approval_command` if configured, else
    /// the controlling terminal, else nobody (every approval is denied at once).
    Embedded,
}

/// How a host runs its broker.
pub struct HostSettings {
    pub cgroup2: Cgroup2,
    /// The config's `[approval]`: timeout and command.
    pub approval: config::Approval,
    pub surfaces: Surfaces,
    /// Where prompt outcomes are written, as the manager's decisions are.
    pub outcomes: Sink,
}

/// The host's prompt broker, started with the first session whose policy needs it.
pub struct PromptHost {
    manager: Arc<Manager>,
    settings: HostSettings,
    /// The broker and the thread writing its outcomes.
    broker: Mutex<Option<(PromptBroker, JoinHandle<()>)>>,
    sessions: Arc<SessionSnapshot>,
    /// What sessions sharing the host's mount namespace were warned of.
    warned: Warned,
}

/// The filesystems each session (by cgroup id) sharing the host's mount namespace has been
/// warned about, so that a reload warns of new ones only.
#[derive(Default)]
struct Warned(Mutex<HashMap<u64, HashSet<PathBuf>>>);

impl Warned {
    /// Of `filesystems`, marked whole for the session of cgroup `session`, those it has not been
    /// warned about; remembered as warned from now on.
    fn not_yet(&self, session: u64, filesystems: Vec<PathBuf>) -> Vec<PathBuf> {
        let mut warned = self.0.lock().unwrap();
        let seen = warned.entry(session).or_default();
        filesystems.into_iter().filter(|fs| seen.insert(fs.clone())).collect()
    }

    /// Forgets the sessions `live` says have ended.
    fn retain(&self, live: impl Fn(u64) -> bool) {
        self.0.lock().unwrap().retain(|id, _| live(*id));
    }
}

/// The sessions as the broker sees them: a snapshot swapped on every change, so its lookups never
/// wait on a lock held while files are opened.
#[derive(Default)]
struct SessionSnapshot(Mutex<Arc<HashMap<PathBuf, SessionContext>>>);

impl SessionLookup for SessionSnapshot {
    fn session(&self, cgroup: &Path) -> Option<SessionContext> {
        let snapshot = self.0.lock().unwrap().clone();
        snapshot.get(cgroup).cloned()
    }

    fn policies(&self) -> Vec<Arc<EffectivePolicy>> {
        let snapshot = self.0.lock().unwrap().clone();
        snapshot.values().map(|s| s.policy.clone()).collect()
    }
}

impl PromptHost {
    pub fn new(manager: Arc<Manager>, settings: HostSettings) -> Self {
        PromptHost {
            manager,
            settings,
            broker: Mutex::new(None),
            sessions: Arc::new(SessionSnapshot::default()),
            warned: Warned::default(),
        }
    }

    /// Call before the processes of the session of cgroup `session` run its command with
    /// `policy` (or are reloaded to it): starts the broker if the policy has verdicts only the
    /// broker can answer, and marks where the kernel can leave an open to the broker (below each
    /// of the policy's broker scopes) in the mount namespaces of `pids`, the session's processes:
    /// in a session's own namespace, each existing scope made a mount of its own and marked, now
    /// and as mounts appear below it; whole filesystems for one that shares the host's.
    pub fn prepare(
        &self,
        session: u64,
        policy: &EffectivePolicy,
        pids: &[i32],
    ) -> anyhow::Result<()> {
        let scopes = broker_scopes(policy);
        let mut slot = self.broker.lock().unwrap();
        if scopes.is_empty() {
            if let Some((broker, _)) = &*slot {
                broker.watch_mounts(session, Vec::new())?;
            }
            return Ok(());
        }
        let (broker, _) = match &mut *slot {
            Some(running) => running,
            none => none.insert(self.start()?),
        };
        let scopes: Vec<&Path> = scopes.iter().map(PathBuf::as_path).collect();
        let mut own = Vec::new();
        for view in MountView::of(pids) {
            match view {
                MountView::Shared => {
                    let filesystems: Vec<PathBuf> =
                        scopes.iter().map(|dir| existing_ancestor(Path::new("/"), dir)).collect();
                    for dir in &filesystems {
                        broker.mark_filesystem(dir)?;
                    }
                    let filesystems = self.warned.not_yet(session, filesystems);
                    if filesystems.is_empty() {
                        continue;
                    }
                    // What this costs every process of the host, said where operators look.
                    tracing::warn!(
                        "the session of cgroup {session} shares the host's mount namespace (its \
                         first process could not make one: no CAP_SYS_ADMIN), so the prompt \
                         broker marks the whole filesystems of {}: the first open of each file \
                         there, by any process, waits for the broker (docs/prompt.md, Marks)",
                        filesystems
                            .iter()
                            .map(|d| d.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
                MountView::Own { pid } => {
                    let mut ns = Namespace::open(pid, &scopes)?;
                    ns.bind_scopes();
                    own.push(ns);
                }
            }
        }
        broker.watch_mounts(session, own)
    }

    /// Call after any change to the manager's sessions, before a new session's processes run:
    /// publishes them to the broker and flushes its cache.
    pub fn sessions_changed(&self) {
        let snapshot: Arc<HashMap<_, _>> = Arc::new(self.manager.snapshot().into_iter().collect());
        *self.sessions.0.lock().unwrap() = snapshot.clone();
        if let Some((broker, _)) = self.broker.lock().unwrap().as_ref() {
            if let Err(e) = broker.sessions_changed() {
                tracing::warn!("flushing the prompt broker's cache: {e:#}");
            }
            // An ended session's mount namespaces are released, its grants go (in the kernel
            // too), and its pending approvals are denied.
            broker.forget_mounts(|id| snapshot.values().any(|s| s.cgroup == id));
            self.warned.retain(|id| snapshot.values().any(|s| s.cgroup == id));
            broker.approvals().retain_sessions(|id| snapshot.values().any(|s| s.session == id));
        }
    }

    /// The approval store, once the broker runs.
    pub fn approvals(&self) -> Option<Arc<Approvals>> {
        self.broker.lock().unwrap().as_ref().map(|(b, _)| b.approvals().clone())
    }

    /// Stops the broker (pending approvals are denied) and waits until every outcome is written;
    /// call before the sessions end and the audit log closes.
    pub fn shutdown(&self) {
        if let Some((broker, outcomes)) = self.broker.lock().unwrap().take() {
            broker.shutdown();
            // Every outcome is in the writer's channel now; the writer ends once the store (its
            // sender) is dropped, which a socket watcher still holding it may delay: bounded.
            let deadline = Instant::now() + OUTCOMES_DRAIN;
            while !outcomes.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    fn start(&self) -> anyhow::Result<(PromptBroker, JoinHandle<()>)> {
        let HostSettings { cgroup2, approval, surfaces, outcomes } = &self.settings;
        let mut config = BrokerConfig::new(cgroup2.clone(), Vec::new());
        config.approval_timeout = Duration::from_secs(approval.timeout_secs);
        config.approval_command = approval.command.as_ref().and_then(|argv| {
            let (program, args) = argv.split_first()?;
            Some(ApprovalCommand {
                program: program.into(),
                args: args.to_vec(),
                timeout: config.approval_timeout,
            })
        });
        // Opened before the broker marks anything: an open on a marked filesystem from here
        // could wait for the broker.
        let asker = match surfaces {
            Surfaces::Embedded if config.approval_command.is_none() => Some(Asker::open()),
            _ => None,
        };
        let manager = self.manager.clone();
        config.heartbeat = Some(Arc::new(move || {
            if let Err(e) = manager.broker_heartbeat() {
                tracing::error!("broker heartbeat: {e:#}");
            }
        }));
        let manager = self.manager.clone();
        config.settled = Some(Arc::new(move |session, dev, ino| {
            if let Err(e) = manager.settle(session, dev, ino) {
                tracing::error!("settling a pending open: {e:#}");
            }
        }));
        let manager = self.manager.clone();
        config.grants_changed = Some(Arc::new(move |grants: &[super::Grant]| {
            let entries = super::kernel_grants(grants, |session| manager.find(session));
            if let Err(e) = manager.set_grants(&entries) {
                tracing::error!("installing the prompt grants in the kernel: {e:#}");
            }
        }));
        let timeout = config.approval_timeout;
        let (broker, mut receiver) = PromptBroker::start(config, self.sessions.clone())?;
        let sink = outcomes.clone();
        let writer =
            std::thread::Builder::new().name("fp-prompt-outcomes".into()).spawn(move || {
                while let Some(outcome) = receiver.blocking_recv() {
                    record(&sink, &outcome);
                }
            })?;
        if let Some(asker) = asker {
            // Subscribed before any filesystem is marked, so before any approval opens.
            let (events, approvals) = (broker.approvals().subscribe(), broker.approvals());
            let approvals = Arc::downgrade(approvals);
            std::thread::Builder::new()
                .name("fp-approval-asker".into())
                .spawn(move || asker.serve(events, approvals, timeout))?;
        }
        Ok((broker, writer))
    }
}

/// The directories under which `policy`'s kernel tables can leave an open to the broker (a
/// prompt or defer verdict), from the tables themselves: each rule's longest literal directory
/// prefix (its LPM key or name-table scope), `/` for a prompt default or an unscoped name.
/// Empty: the session never needs the broker.
pub fn broker_scopes(policy: &EffectivePolicy) -> Vec<PathBuf> {
    let dirs: BTreeSet<&[u8]> = tables::brokered_dirs(policy.tables())
        .map(|d| if d.is_empty() { b"/" } else { d })
        .collect();
    dirs.into_iter().map(|d| PathBuf::from(std::ffi::OsStr::from_bytes(d))).collect()
}

/// Writes a prompt outcome where the host's decisions go.
fn record(sink: &Sink, outcome: &PromptOutcome) {
    match sink {
        Sink::Audit(handle) => {
            handle.record(audit::Event::Decision(prompt_record(outcome)));
        }
        Sink::Stderr => {
            let record = prompt_record(outcome);
            let by = record.approver.map(|a| format!(" by {a}")).unwrap_or_default();
            let reason = outcome.reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default();
            let line = format!(
                "fp: {} {} {} ({}, pid {}, rule \"{}\"){by}{reason}\n",
                super::serde_plain(&outcome.outcome),
                outcome.open.access.verb(),
                outcome.open.path,
                outcome.open.comm,
                outcome.open.pid,
                record.rule,
            );
            // One write: the session's own processes share this stderr, and a line written in
            // pieces interleaves with theirs.
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
        }
    }
}

/// The audit record of a prompt outcome.
fn prompt_record(outcome: &PromptOutcome) -> audit::FileDecision {
    use OutcomeKind::*;
    let decision = match outcome.outcome {
        Approved | Granted => audit::Verdict::PromptApproved,
        Denied | FailedClosed | DeferDenied => audit::Verdict::PromptDenied,
        TimedOut => audit::Verdict::PromptTimedOut,
    };
    let op = outcome.open.access.into();
    let detail = serde_json::json!({
        "outcome": outcome.outcome,
        "approval": outcome.approval,
        "latency_us": outcome.latency_us,
        "opens": outcome.opens,
        "grant": outcome.grant,
        "reason": outcome.reason,
    });
    audit::FileDecision {
        session: outcome.open.session.clone(),
        agent: outcome.open.agent.clone(),
        pid: outcome.open.pid as u32,
        tgid: outcome.open.pid as u32,
        comm: outcome.open.comm.clone(),
        op,
        hook: "fanotify".into(),
        path: audit::RawPath(outcome.open.path.clone().into_bytes()),
        decision,
        rule: outcome.open.rule.clone().unwrap_or_else(|| "(default)".into()),
        rule_source: "prompt broker".into(),
        approver: outcome.decided_by.map(|d| {
            format!("uid {} via {}", d.uid, super::serde_plain(&d.surface)).to_lowercase()
        }),
        reason: Some(detail.to_string()),
        ..audit::FileDecision::default()
    }
}

/// The embedded agent's surface when no `approval_command` is configured.
enum Asker {
    /// The controlling terminal, asked like sudo asks for a password.
    Terminal(File),
    /// No terminal: every approval is denied at once, saying how to configure one.
    Nobody,
}

impl Asker {
    fn open() -> Asker {
        match File::options().read(true).write(true).open("/dev/tty") {
            Ok(tty) => Asker::Terminal(tty),
            Err(_) => Asker::Nobody,
        }
    }

    /// Puts each new approval to the surface until the store is gone.
    fn serve(
        mut self,
        mut events: broadcast::Receiver<ApprovalEvent>,
        approvals: Weak<Approvals>,
        timeout: Duration,
    ) {
        loop {
            let approval = match events.blocking_recv() {
                Ok(ApprovalEvent::Opened { approval }) => approval,
                Ok(ApprovalEvent::Decided { .. }) => continue,
                // The missed approvals time out.
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!("{n} approvals were not asked (they time out, denied)");
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            let Some(approvals) = approvals.upgrade() else { return };
            let question = format!(
                "fp: {} wants to {} {} (rule \"{}\").",
                approval.open.session,
                approval.open.access.verb(),
                approval.open.path,
                approval.open.rule.as_deref().unwrap_or("(default)"),
            );
            match &mut self {
                Asker::Terminal(tty) => ask(tty, &approvals, &approval, &question, timeout),
                Asker::Nobody => {
                    let reason = "no terminal to ask on and no approval_command configured";
                    eprintln!(
                        "{question} Denied: {reason}; set `command = [\"/path/to/approver\"]` \
                         under [approval] in the file given to --config (docs/prompt.md)"
                    );
                    if let Err(e) = approvals.deny_unasked(approval.id, reason) {
                        tracing::debug!("approval {}: {e}", approval.id);
                    }
                }
            }
        }
    }
}

/// Asks on the terminal until an answer, the approval's deadline, or a decision elsewhere.
fn ask(tty: &mut File, approvals: &Approvals, approval: &Approval, question: &str, t: Duration) {
    let pending = || approvals.list().iter().any(|a| a.id == approval.id);
    if !pending() {
        return;
    }
    // Only what is typed after the question answers it.
    // SAFETY: tcflush only discards the terminal's pending input; the fd is open.
    unsafe { libc::tcflush(tty.as_raw_fd(), libc::TCIFLUSH) };
    let _ = write!(tty, "{question} Allow? [y/N] (denied in {} s) ", t.as_secs());
    let deadline = Instant::now() + t;
    let answer = loop {
        let mut fds = [PollFd::new(tty.as_fd(), PollFlags::POLLIN)];
        let ready = poll(&mut fds, PollTimeout::from(250u16)).unwrap_or(0) > 0;
        if ready {
            let mut input = [0u8; 64];
            let n = tty.read(&mut input).unwrap_or(0);
            break input[..n].iter().find(|b| !b.is_ascii_whitespace()).copied();
        }
        if !pending() || Instant::now() >= deadline {
            let _ = writeln!(tty);
            return;
        }
    };
    let decision = match answer {
        Some(b'y' | b'Y') => Decision::Approve,
        _ => Decision::Deny,
    };
    let decider = Decider { uid: nix::unistd::getuid().as_raw(), surface: Surface::Terminal };
    if let Err(e) = approvals.decide(approval.id, decision, None, None, decider) {
        let _ = writeln!(tty, "fp: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::super::approvals::tests::{answer, request};
    use super::*;
    use crate::policy::LoadOptions;

    fn policy(text: &str) -> EffectivePolicy {
        let options = LoadOptions {
            policy_text: Some(text.to_owned()),
            workspace: Some("/ws".into()),
            user: Some("root".into()),
            ..LoadOptions::default()
        };
        EffectivePolicy::load(&options).unwrap()
    }

    #[test]
    fn a_session_is_warned_once_per_filesystem_marked_whole() {
        let warned = Warned::default();
        let paths = |p: &[&str]| p.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(warned.not_yet(7, paths(&["/"])), paths(&["/"]));
        // A reload with the same scopes, then one that adds a filesystem.
        assert!(warned.not_yet(7, paths(&["/"])).is_empty());
        assert_eq!(warned.not_yet(7, paths(&["/", "/home"])), paths(&["/home"]));
        assert_eq!(warned.not_yet(8, paths(&["/"])), paths(&["/"]), "another session");
        warned.retain(|id| id == 8);
        assert_eq!(warned.not_yet(7, paths(&["/"])), paths(&["/"]), "a new session of that id");
    }

    #[test]
    fn the_broker_marks_where_prompt_and_defer_verdicts_live() {
        let none = policy("[file_policy]\ndefault = \"write\"\ndeny_paths = [\"/etc/x/**\"]\n");
        assert!(broker_scopes(&none).is_empty());
        let scopes = broker_scopes(&policy(
            "[file_policy]\ndefault = \"write\"\n\
             prompt_paths = [\"<workspace>/secret/**\", \"/home/u/.aws/**\", \"/srv/**/key\"]\n",
        ));
        for dir in ["/ws/secret", "/home/u/.aws", "/srv"] {
            assert!(scopes.contains(&PathBuf::from(dir)), "{dir} not in {scopes:?}");
        }
        assert!(!scopes.contains(&PathBuf::from("/")), "{scopes:?}");
        let unscoped = policy("[file_policy]\ndefault = \"write\"\nprompt_paths = [\"**/.env\"]\n");
        assert_eq!(broker_scopes(&unscoped), [PathBuf::from("/")]);
        let default = policy("[file_policy]\ndefault = \"prompt\"\n");
        assert!(broker_scopes(&default).contains(&PathBuf::from("/")));
    }

    #[test]
    fn with_nobody_to_ask_approvals_are_denied_at_once() {
        let (store, mut outcomes) = Approvals::new(Duration::from_secs(60), None, None);
        let (events, weak) = (store.subscribe(), Arc::downgrade(&store));
        let asker = std::thread::spawn(move || Asker::Nobody.serve(events, weak, Duration::ZERO));
        let answers = Arc::new(Mutex::new(Vec::new()));
        store.hold(request("run-1", "/ws/secret/f"), answer(&answers));
        let deadline = Instant::now() + Duration::from_secs(10);
        while answers.lock().unwrap().is_empty() {
            assert!(Instant::now() < deadline, "the approval was not denied");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(*answers.lock().unwrap(), [false]);
        let outcome = outcomes.try_recv().unwrap();
        assert_eq!(outcome.outcome, OutcomeKind::FailedClosed);
        assert!(outcome.reason.unwrap().contains("no approval_command"));
        drop(store);
        asker.join().unwrap();
    }

    #[test]
    fn marks_go_to_the_closest_existing_directory() {
        let ancestor = |p| existing_ancestor(Path::new("/"), Path::new(p));
        assert_eq!(ancestor("/proc/self/no/such/dir"), Path::new("/proc/self"));
        assert_eq!(ancestor("/"), Path::new("/"));
    }
}
