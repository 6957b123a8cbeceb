//! The sessions of one host agent — the daemon, or the agent `fp run` embeds when no daemon runs —
//! and the one reader of the kernel's decision events. A session is a cgroup, a compiled policy
//! loaded into the kernel tables under its own tables id, and a mode.
use std::{
    collections::{HashMap, HashSet},
    io::Write as _,
    os::fd::AsRawFd as _,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
};

use anyhow::{Context as _, anyhow};
use aya::maps::{MapData, RingBuf};
use fp_common::kernel::{DecisionEvent, SESSION_AUDIT_ONLY, SESSION_FULL_AUDIT, SessionInfo};

use super::{Cgroup2, SessionCgroup};
use crate::{
    audit,
    kernel::{self, event::SessionContext, tables::InodeTable},
    policy::{EffectivePolicy, SavedPolicy},
};

/// Whether a session's denials are enforced.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Deny what the policy denies.
    #[default]
    Enforce,
    /// Decide and record everything, deny nothing.
    Audit,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Audit => "audit",
        }
    }
}

/// What a new session is.
pub struct SessionSpec {
    /// The session's name in records (unique on the host).
    pub name: String,
    pub agent: String,
    pub policy: EffectivePolicy,
    pub mode: Mode,
    /// Also record allowed writes, deletes and execs.
    pub full_audit: bool,
    /// The user it runs as (and who asked for it, for the start record).
    pub uid: u32,
    /// What `<workspace>` expands to in its policy (kept for reloads).
    pub workspace: Option<PathBuf>,
    pub pid: u32,
    pub command: Vec<String>,
}

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
struct Outputs {
    sink: Sink,
    observer: Option<Observer>,
}

impl Outputs {
    fn record(&self, event: audit::Event) {
        if let Some(observe) = &self.observer {
            observe(&event);
        }
        if let Sink::Audit(handle) = &self.sink {
            handle.record(event);
        }
    }

    fn decision(&self, ev: &DecisionEvent, ctx: &SessionContext) {
        if let Sink::Stderr = self.sink {
            // One write(2) per line, so it does not interleave with the command's own stderr.
            let _ = std::io::stderr().write_all(kernel::event::line(ev, ctx).as_bytes());
        }
        if matches!(self.sink, Sink::Audit(_)) || self.observer.is_some() {
            let event = audit::Event::Decision(kernel::event::audit_record(ev, ctx));
            if let Some(observe) = &self.observer {
                observe(&event);
            }
            // The ring buffer lets the event go once this returns: it must be in the log file by
            // then, or an agent killed now would lose it from both.
            if let Sink::Audit(handle) = &self.sink {
                handle.record_written(event, RING_HANDOFF_TIMEOUT);
            }
        }
    }
}

/// A running session, as [`Manager::sessions`] lists it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Summary {
    pub name: String,
    pub agent: String,
    pub cgroup: u64,
    pub pids: usize,
    pub mode: Mode,
    pub denied: u64,
    pub dropped: u64,
    pub policy_hash: String,
    /// RFC 3339, UTC.
    pub started_at: String,
}

struct Live {
    context: SessionContext,
    cgroup: SessionCgroup,
    mode: Mode,
    tables_id: u64,
    inodes: InodeTable,
    started_at: String,
    uid: u32,
    workspace: Option<PathBuf>,
}

/// How a session ended.
pub struct Ended {
    /// Decision events the kernel could not queue (they became a loss record).
    pub dropped: u64,
}

pub struct Manager {
    hierarchy: Cgroup2,
    parent: PathBuf,
    enforcer: Mutex<Option<kernel::Enforcer>>,
    sessions: Mutex<HashMap<u64, Live>>,
    /// Contexts by cgroup id, for the event reader (kept apart so it never waits on a load).
    contexts: Arc<RwLock<HashMap<u64, SessionContext>>>,
    ring: Arc<Mutex<RingBuf<MapData>>>,
    broker_clock: Mutex<kernel::BrokerClock>,
    outputs: Outputs,
    stop: Arc<AtomicBool>,
    reader: Mutex<Option<JoinHandle<()>>>,
    /// Where each session is saved for a restarted agent to take over (the daemon's).
    state: Option<PathBuf>,
}

/// A session as saved in the state directory: what a restarted agent needs to take it over.
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedSession {
    name: String,
    agent: String,
    cgroup: u64,
    path: PathBuf,
    mode: Mode,
    uid: u32,
    workspace: Option<PathBuf>,
    started_at: String,
    policy_hash: String,
    policy: SavedPolicy,
}

/// The agent whose sessions the state directory holds: a restarted agent takes over its pinned
/// programs only if they confine the same cgroup level.
#[derive(serde::Serialize, serde::Deserialize, PartialEq)]
struct SavedAgent {
    abi: u32,
    parent: PathBuf,
    session_cgroup_level: u32,
}

impl Manager {
    /// Loads and attaches the programs for sessions created under the cgroup `parent` (created if
    /// missing), with maps and links pinned under `pin_dir`, and starts reading events into `sink`.
    pub fn start(
        parent: PathBuf,
        pin_dir: PathBuf,
        sink: Sink,
        observer: Option<Observer>,
    ) -> anyhow::Result<Arc<Self>> {
        let hierarchy = Cgroup2::find()?;
        let level = session_level(&hierarchy, &parent)?;
        let enforcer = kernel::Enforcer::load(level, pin_dir).inspect_err(|_| {
            let _ = std::fs::remove_dir(&parent); // nothing stays behind (only if empty)
        })?;
        let manager = Self::new(hierarchy, parent, enforcer, Outputs { sink, observer }, None)?;
        manager.spawn_reader();
        Ok(manager)
    }

    /// [`Manager::start`] for an agent that restarts (the daemon): takes over the programs and
    /// sessions a previous agent left pinned under `pin_dir` and saved in `state` — they stayed
    /// confined while no agent ran —, records the events they produced meanwhile, and ends
    /// (killing what still runs) the sessions it cannot take over. Saves every session it
    /// hosts in `state`.
    pub fn start_or_adopt(
        parent: PathBuf,
        pin_dir: PathBuf,
        state: PathBuf,
        sink: Sink,
        observer: Option<Observer>,
    ) -> anyhow::Result<Arc<Self>> {
        let hierarchy = Cgroup2::find()?;
        let level = session_level(&hierarchy, &parent)?;
        let outputs = Outputs { sink, observer };
        std::fs::create_dir_all(&state).with_context(|| format!("creating {}", state.display()))?;
        let agent = SavedAgent {
            abi: fp_common::kernel::ABI_VERSION,
            parent: parent.clone(),
            session_cgroup_level: level,
        };
        let agent_file = state.join("agent.json");
        let adopted = match read_json::<SavedAgent>(&agent_file) {
            Ok(saved) if saved == agent => kernel::Enforcer::adopt(pin_dir.clone()),
            Ok(_) => Err(anyhow!("the previous agent confined another cgroup parent or level")),
            Err(e) if pin_dir.exists() => Err(e),
            Err(_) => Ok(None),
        };
        let enforcer = match adopted {
            Ok(Some(enforcer)) => Some(enforcer),
            Ok(None) => None,
            Err(why) => {
                tracing::warn!("not taking over the previous agent's sessions: {why:#}");
                for name in clean_stale(&parent, &pin_dir)? {
                    outputs.record(audit::Event::SessionEnd(audit::SessionEnd {
                        session: name,
                        agent: String::new(),
                        exit_code: None,
                        reason: format!(
                            "killed: the agent hosting it had died and its programs could not be \
                             taken over ({why:#})"
                        ),
                    }));
                }
                for (file, _) in saved_sessions(&state)? {
                    std::fs::remove_file(&file)
                        .with_context(|| format!("removing {}", file.display()))?;
                }
                None
            }
        };
        write_json(&agent_file, &agent)?;
        let adopting = enforcer.is_some();
        let enforcer = match enforcer {
            Some(enforcer) => enforcer,
            None => kernel::Enforcer::load(level, pin_dir)?,
        };
        let manager = Self::new(hierarchy, parent, enforcer, outputs, Some(state))?;
        if adopting {
            manager.take_over()?;
        }
        manager.spawn_reader();
        Ok(manager)
    }

    fn new(
        hierarchy: Cgroup2,
        parent: PathBuf,
        mut enforcer: kernel::Enforcer,
        outputs: Outputs,
        state: Option<PathBuf>,
    ) -> anyhow::Result<Arc<Self>> {
        // Sessions may not signal or trace the agent itself.
        let taken = enforcer
            .protect(std::process::id())
            .and_then(|()| Ok((enforcer.take_events()?, enforcer.take_broker_clock()?)));
        let (ring, broker_clock) = match taken {
            Ok((ring, clock)) => (Arc::new(Mutex::new(ring)), Mutex::new(clock)),
            Err(e) => {
                let _ = enforcer.unload();
                return Err(e);
            }
        };
        Ok(Arc::new(Self {
            hierarchy,
            parent,
            enforcer: Mutex::new(Some(enforcer)),
            sessions: Mutex::new(HashMap::new()),
            contexts: Arc::new(RwLock::new(HashMap::new())),
            ring,
            broker_clock,
            outputs,
            stop: Arc::new(AtomicBool::new(false)),
            reader: Mutex::new(None),
            state,
        }))
    }

    fn spawn_reader(&self) {
        let (ring, contexts, outputs, stop) =
            (self.ring.clone(), self.contexts.clone(), self.outputs.clone(), self.stop.clone());
        let reader = std::thread::spawn(move || read_events(&ring, &contexts, &outputs, &stop));
        *self.reader.lock().unwrap() = Some(reader);
    }

    /// Takes over the sessions the programs confine now: those saved in the state directory get
    /// fresh tables from their saved policy (switched in one map update, like a reload); the
    /// others — saved by no one, or saved in a form this fp cannot read — are killed, since no
    /// agent could record or change them. Events queued while no agent ran are recorded first.
    fn take_over(&self) -> anyhow::Result<()> {
        let state = self.state.clone().ok_or_else(|| anyhow!("no state directory"))?;
        let confined = self.with_enforcer(|e| e.sessions())?;
        let mut saved = HashMap::new();
        for (file, session) in saved_sessions(&state)? {
            let restored = session.and_then(|s| {
                let policy = EffectivePolicy::from_saved(s.policy.clone())?;
                let policy_hash = format!("sha256:{}", hex::encode(policy.hash()));
                if policy_hash != s.policy_hash {
                    anyhow::bail!("its saved policy no longer hashes to {}", s.policy_hash);
                }
                Ok((s, policy))
            });
            match restored {
                Ok((s, policy)) => {
                    let context = SessionContext {
                        session: s.name.clone(),
                        agent: s.agent.clone(),
                        policy: Arc::new(policy),
                        policy_hash: s.policy_hash.clone(),
                    };
                    self.contexts.write().unwrap().insert(s.cgroup, context.clone());
                    saved.insert(s.cgroup, (file, s, context));
                }
                Err(e) => {
                    tracing::error!("{}: {e:#}", file.display());
                    std::fs::remove_file(&file)
                        .with_context(|| format!("removing {}", file.display()))?;
                }
            }
        }
        // What the sessions did while no agent read the ring buffer.
        drain(&self.ring, &self.contexts, &self.outputs);
        for (cgroup, info) in confined {
            let adopted = match saved.remove(&cgroup) {
                Some((_, s, context)) => self.adopt(cgroup, info, s, context),
                None => Err(anyhow!("no agent saved it")),
            };
            if let Err(why) = adopted {
                self.kill_unadoptable(cgroup, &format!("{why:#}"));
            }
        }
        // Saved, but no longer confined: their cgroups are not left running unconfined.
        for (cgroup, (file, s, _)) in saved {
            self.contexts.write().unwrap().remove(&cgroup);
            if let Ok(c) = SessionCgroup::existing(&self.hierarchy, &s.path)
                && c.id == cgroup
            {
                let _ = c.remove();
            }
            let _ = std::fs::remove_file(file);
            self.record(audit::Event::SessionEnd(audit::SessionEnd {
                session: s.name,
                agent: s.agent,
                exit_code: None,
                reason: "killed: its kernel entries were gone when the agent restarted".into(),
            }));
        }
        let (tables, cgroups): (HashSet<u64>, HashSet<u64>) = {
            let sessions = self.sessions.lock().unwrap();
            (sessions.values().map(|l| l.tables_id).collect(), sessions.keys().copied().collect())
        };
        self.with_enforcer(|e| e.sweep(&tables, &cgroups))?;
        self.record_unanswered_prompts()
    }

    /// Takes over one confined session: its saved policy under a fresh tables id.
    fn adopt(
        &self,
        cgroup_id: u64,
        info: SessionInfo,
        s: SavedSession,
        context: SessionContext,
    ) -> anyhow::Result<()> {
        let cgroup = SessionCgroup::existing(&self.hierarchy, &s.path)?;
        if cgroup.id != cgroup_id {
            anyhow::bail!("{} is another cgroup now", s.path.display());
        }
        let inodes = InodeTable::resolve(context.policy.tables());
        let tables_id = new_tables_id()?;
        self.with_enforcer(|e| {
            e.install_tables(tables_id, context.policy.tables(), &inodes)?;
            let set =
                e.set_session(cgroup_id, SessionInfo { tables: tables_id, flags: info.flags });
            if set.is_err() {
                let _ = e.remove_tables(tables_id, context.policy.tables(), &inodes);
            }
            set
        })?;
        let pids = cgroup.pids().len() as u32;
        self.record(audit::Event::SessionAdopt(audit::SessionAdopt {
            session: s.name.clone(),
            agent: s.agent.clone(),
            cgroup: cgroup_id,
            pids,
            policy_hash: s.policy_hash.clone(),
        }));
        let live = Live {
            context,
            cgroup,
            mode: s.mode,
            tables_id,
            inodes,
            started_at: s.started_at,
            uid: s.uid,
            workspace: s.workspace,
        };
        self.save(cgroup_id, &live);
        self.sessions.lock().unwrap().insert(cgroup_id, live);
        Ok(())
    }

    /// Ends a confined session no agent can take over: kills its processes, forgets its kernel
    /// entries (its tables go with the sweep), records its losses and its end.
    fn kill_unadoptable(&self, cgroup_id: u64, why: &str) {
        let path = find_cgroup(&self.parent, cgroup_id);
        let name = path
            .as_ref()
            .and_then(|p| p.file_name())
            .map_or_else(|| format!("cgroup-{cgroup_id}"), |n| n.to_string_lossy().into_owned());
        if let Some(path) = path
            && let Ok(cgroup) = SessionCgroup::existing(&self.hierarchy, &path)
            && let Err(e) = cgroup.remove()
        {
            tracing::error!("killing session {name}: {e:#}");
        }
        let counters = self.with_enforcer(|e| {
            let counters = e.counters(cgroup_id).unwrap_or_default();
            e.end_session(cgroup_id)?;
            Ok(counters)
        });
        self.contexts.write().unwrap().remove(&cgroup_id);
        if let Ok(c) = counters
            && c.dropped > 0
        {
            self.record(audit::Event::Loss(audit::Loss {
                count: c.dropped,
                at: "kernel-ringbuf".to_owned(),
            }));
        }
        self.record(audit::Event::SessionEnd(audit::SessionEnd {
            session: name,
            agent: String::new(),
            exit_code: None,
            reason: format!("killed: the restarted agent could not take it over ({why})"),
        }));
    }

    /// Records the prompt-tier opens a dead broker never answered (their reads stay refused).
    fn record_unanswered_prompts(&self) -> anyhow::Result<()> {
        let pending = self.with_enforcer(|e| e.unrecorded_pending())?;
        let contexts = self.contexts.read().unwrap();
        for key in pending {
            let Some(ctx) = contexts.get(&key.session_id) else { continue };
            self.record(audit::Event::Decision(audit::FileDecision {
                session: ctx.session.clone(),
                agent: ctx.agent.clone(),
                op: audit::Op::Read,
                hook: "fanotify".into(),
                dev: key.dev as u64,
                ino: key.ino,
                decision: audit::Verdict::PromptDenied,
                rule: "(unknown: the broker died)".into(),
                rule_source: "prompt broker".into(),
                policy_hash: ctx.policy_hash.clone(),
                reason: Some(
                    "failed closed: the prompt broker died before answering this open; reads, \
                     writes and maps of the file stay refused"
                        .into(),
                ),
                ..audit::FileDecision::default()
            }));
        }
        Ok(())
    }

    /// Saves the session for a restarted agent (the daemon's); a session that cannot be saved
    /// would be killed by the next agent, so a failure is only logged.
    fn save(&self, cgroup: u64, live: &Live) {
        let Some(state) = &self.state else { return };
        let saved = SavedSession {
            name: live.context.session.clone(),
            agent: live.context.agent.clone(),
            cgroup,
            path: live.cgroup.path.clone(),
            mode: live.mode,
            uid: live.uid,
            workspace: live.workspace.clone(),
            started_at: live.started_at.clone(),
            policy_hash: live.context.policy_hash.clone(),
            policy: live.context.policy.saved(),
        };
        if let Err(e) = write_json(&state.join(format!("session-{cgroup}.json")), &saved) {
            tracing::error!("saving session {}: {e:#}", saved.name);
        }
    }

    fn forget(&self, cgroup: u64) {
        if let Some(state) = &self.state {
            let _ = std::fs::remove_file(state.join(format!("session-{cgroup}.json")));
        }
    }

    fn with_enforcer<T>(
        &self,
        f: impl FnOnce(&mut kernel::Enforcer) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let mut guard = self.enforcer.lock().unwrap();
        let enforcer = guard.as_mut().ok_or_else(|| anyhow!("the agent is shutting down"))?;
        f(enforcer)
    }

    /// Creates a session: its cgroup, its tables in the kernel, its start record. Processes that
    /// join the returned cgroup are confined from then on. Nothing stays behind on error.
    pub fn create(&self, spec: SessionSpec) -> anyhow::Result<(String, PathBuf, u64)> {
        let cgroup = SessionCgroup::create(&self.hierarchy, &self.parent, &spec.name)?;
        let policy_hash = format!("sha256:{}", hex::encode(spec.policy.hash()));
        let context = SessionContext {
            session: spec.name.clone(),
            agent: spec.agent.clone(),
            policy: Arc::new(spec.policy),
            policy_hash: policy_hash.clone(),
        };
        let inodes = InodeTable::resolve(context.policy.tables());
        for (dir, why) in &inodes.incomplete {
            tracing::warn!(
                "hardlinks below {} not all recorded ({why}): files linked out of it before the \
                 session are protected by path only",
                dir.display()
            );
        }
        let tables_id = new_tables_id()?;
        let flags = if spec.mode == Mode::Audit { SESSION_AUDIT_ONLY } else { 0 }
            | if spec.full_audit { SESSION_FULL_AUDIT } else { 0 };
        let loaded = self.with_enforcer(|e| {
            e.install_tables(tables_id, context.policy.tables(), &inodes)?;
            let set = e.set_session(cgroup.id, SessionInfo { tables: tables_id, flags });
            if set.is_err() {
                let _ = e.remove_tables(tables_id, context.policy.tables(), &inodes);
            }
            set
        });
        if let Err(e) = loaded {
            let _ = cgroup.remove();
            return Err(e);
        }
        self.contexts.write().unwrap().insert(cgroup.id, context.clone());
        self.record(audit::Event::SessionStart(audit::SessionStart {
            session: spec.name.clone(),
            agent: spec.agent,
            cgroup: cgroup.id,
            pid: spec.pid,
            uid: spec.uid,
            policy_hash,
            floor_exceptions: context
                .policy
                .floor_exceptions()
                .iter()
                .map(|e| e.value.clone())
                .collect(),
            command: spec.command,
        }));
        let (path, id) = (cgroup.path.clone(), cgroup.id);
        let started_at = audit::record::format_time(time::OffsetDateTime::now_utc());
        let live = Live {
            context,
            cgroup,
            mode: spec.mode,
            tables_id,
            inodes,
            started_at,
            uid: spec.uid,
            workspace: spec.workspace,
        };
        self.save(id, &live);
        self.sessions.lock().unwrap().insert(id, live);
        Ok((spec.name, path, id))
    }

    /// Replaces the policy of the session of cgroup `id`: the new tables are installed under a new
    /// id, the session switched to them in one map update, then the old ones removed. Programs
    /// that raced with the switch redo their decision on the new tables.
    /// Returns the previous and the new policy hash.
    pub fn reload(
        &self,
        id: u64,
        policy: EffectivePolicy,
        source: &str,
    ) -> anyhow::Result<(String, String)> {
        let mut sessions = self.sessions.lock().unwrap();
        let live = sessions.get_mut(&id).ok_or_else(|| anyhow!("no session with cgroup {id}"))?;
        let policy = Arc::new(policy);
        let inodes = InodeTable::resolve(policy.tables());
        let tables_id = new_tables_id()?;
        let old = (live.tables_id, live.context.policy.clone());
        self.with_enforcer(|e| {
            let current = e.session(id)?;
            e.install_tables(tables_id, policy.tables(), &inodes)?;
            let info = SessionInfo { tables: tables_id, flags: current.flags };
            if let Err(err) = e.set_session(id, info) {
                let _ = e.remove_tables(tables_id, policy.tables(), &inodes);
                return Err(err);
            }
            e.remove_tables(old.0, old.1.tables(), &live.inodes)
        })?;
        let old_policy_hash = live.context.policy_hash.clone();
        live.context.policy = policy;
        live.context.policy_hash = format!("sha256:{}", hex::encode(live.context.policy.hash()));
        live.tables_id = tables_id;
        live.inodes = inodes;
        self.contexts.write().unwrap().insert(id, live.context.clone());
        self.save(id, live);
        self.record(audit::Event::PolicyReload(audit::PolicyReload {
            session: Some(live.context.session.clone()),
            old_policy_hash: old_policy_hash.clone(),
            policy_hash: live.context.policy_hash.clone(),
            source: source.to_owned(),
        }));
        Ok((old_policy_hash, live.context.policy_hash.clone()))
    }

    /// Ends the session of cgroup `id`: kills what still runs in it, removes its cgroup and its
    /// kernel entries, records its losses and its end.
    pub fn end(&self, id: u64, exit_code: Option<i32>, reason: &str) -> anyhow::Result<Ended> {
        let live = self
            .sessions
            .lock()
            .unwrap()
            .remove(&id)
            .ok_or_else(|| anyhow!("no session with cgroup {id}"))?;
        let removed = live.cgroup.remove();
        self.forget(id);
        // Every event of the session is in the ring buffer now: record them before its context goes.
        drain(&self.ring, &self.contexts, &self.outputs);
        let counters = self.with_enforcer(|e| {
            let counters = e.counters(id)?;
            e.end_session(id)?;
            e.remove_tables(live.tables_id, live.context.policy.tables(), &live.inodes)?;
            Ok(counters)
        });
        self.contexts.write().unwrap().remove(&id);
        let dropped = counters.as_ref().map_or(0, |c| c.dropped);
        if dropped > 0 {
            self.record(audit::Event::Loss(audit::Loss {
                count: dropped,
                at: "kernel-ringbuf".to_owned(),
            }));
        }
        self.record(audit::Event::SessionEnd(audit::SessionEnd {
            session: live.context.session.clone(),
            agent: live.context.agent.clone(),
            exit_code,
            reason: reason.to_owned(),
        }));
        removed?;
        counters?;
        Ok(Ended { dropped })
    }

    /// The running sessions.
    pub fn sessions(&self) -> Vec<Summary> {
        let sessions = self.sessions.lock().unwrap();
        sessions
            .iter()
            .map(|(&id, live)| {
                let counters = self.with_enforcer(|e| e.counters(id)).unwrap_or_default();
                Summary {
                    name: live.context.session.clone(),
                    agent: live.context.agent.clone(),
                    cgroup: id,
                    pids: live.cgroup.pids().len(),
                    mode: live.mode,
                    denied: counters.denied,
                    dropped: counters.dropped,
                    policy_hash: live.context.policy_hash.clone(),
                    started_at: live.started_at.clone(),
                }
            })
            .collect()
    }

    /// The cgroup id of the session named `name`.
    pub fn find(&self, name: &str) -> Option<u64> {
        let sessions = self.sessions.lock().unwrap();
        sessions.iter().find(|(_, l)| l.context.session == name).map(|(id, _)| *id)
    }

    /// Each running session's cgroup directory and context.
    pub fn snapshot(&self) -> Vec<(PathBuf, SessionContext)> {
        let sessions = self.sessions.lock().unwrap();
        sessions.values().map(|l| (l.cgroup.path.clone(), l.context.clone())).collect()
    }

    /// The workspace and user of the session of cgroup `id`, which a reload keeps.
    pub fn identity(&self, id: u64) -> Option<(Option<PathBuf>, u32)> {
        let sessions = self.sessions.lock().unwrap();
        sessions.get(&id).map(|l| (l.workspace.clone(), l.uid))
    }

    /// Refreshes the prompt broker's heartbeat in the kernel.
    pub fn broker_heartbeat(&self) -> anyhow::Result<()> {
        self.broker_clock.lock().unwrap().beat()
    }

    /// The broker answered an open of (`st_dev`, `st_ino`): no session's reads of it are pending.
    pub fn settle(&self, st_dev: u64, st_ino: u64) -> anyhow::Result<()> {
        let ids: Vec<u64> = self.contexts.read().unwrap().keys().copied().collect();
        self.with_enforcer(|e| ids.iter().try_for_each(|&id| e.settle(id, st_dev, st_ino)))
    }

    /// Replaces the remembered prompt grants in the kernel (see `kernel::Enforcer::set_grants`).
    pub fn set_grants(
        &self,
        grants: &[(u32, fp_common::policy::PrefixKeyData, fp_common::kernel::GrantValue)],
    ) -> anyhow::Result<()> {
        self.with_enforcer(|e| e.set_grants(grants))
    }

    /// How full the kernel maps are (empty if they cannot be read).
    pub fn map_usage(&self) -> Vec<kernel::MapUsage> {
        self.with_enforcer(|e| e.usage()).unwrap_or_else(|e| {
            tracing::warn!("reading map usage: {e:#}");
            Vec::new()
        })
    }

    /// The hooks the programs are attached to.
    pub fn attached_hooks(&self) -> Vec<String> {
        self.enforcer.lock().unwrap().as_ref().map(|e| e.hooks()).unwrap_or_default()
    }

    /// The cgroup directory sessions are created in.
    pub fn parent(&self) -> &Path {
        &self.parent
    }

    fn record(&self, event: audit::Event) {
        self.outputs.record(event);
    }

    /// Ends every session, stops the event reader, and detaches and unpins the programs.
    pub fn shutdown(&self, reason: &str) -> anyhow::Result<()> {
        let ids: Vec<u64> = self.sessions.lock().unwrap().keys().copied().collect();
        let mut first_error = None;
        for id in ids {
            if let Err(e) = self.end(id, None, reason) {
                first_error.get_or_insert(e);
            }
        }
        self.stop.store(true, Ordering::Release);
        if let Some(reader) = self.reader.lock().unwrap().take() {
            let _ = reader.join();
        }
        if let Some(enforcer) = self.enforcer.lock().unwrap().take()
            && let Err(e) = enforcer.unload()
        {
            first_error.get_or_insert(e);
        }
        // Only if no one else uses it.
        let _ = std::fs::remove_dir(&self.parent);
        first_error.map_or(Ok(()), Err)
    }
}

/// Cleans up after an agent that died: kills the processes of the sessions it left under
/// `parent` (once its programs are gone they would run unconfined) and removes its pins under
/// `pin_dir`. Returns the names of the sessions killed. Nothing to do if `pin_dir` is absent.
fn clean_stale(parent: &Path, pin_dir: &Path) -> anyhow::Result<Vec<String>> {
    if !pin_dir.exists() {
        return Ok(Vec::new());
    }
    let hierarchy = Cgroup2::find()?;
    let mut killed = Vec::new();
    if let Ok(entries) = std::fs::read_dir(parent) {
        for entry in entries.flatten().filter(|e| e.path().is_dir()) {
            SessionCgroup::existing(&hierarchy, &entry.path())?.remove()?;
            killed.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    for entry in std::fs::read_dir(pin_dir)? {
        let path = entry?.path();
        // Directories are the pins of other agents (`fp run`'s), alive or not: not ours.
        if !path.is_dir() {
            std::fs::remove_file(&path).with_context(|| format!("unpinning {}", path.display()))?;
        }
    }
    let _ = std::fs::remove_dir(pin_dir);
    Ok(killed)
}

/// The cgroup level of sessions created in `parent` (created if missing).
fn session_level(hierarchy: &Cgroup2, parent: &Path) -> anyhow::Result<u32> {
    std::fs::create_dir_all(parent)
        .with_context(|| format!("creating cgroup {}", parent.display()))?;
    Ok(hierarchy.level_of(parent)? + 1)
}

/// The directory below `parent` whose cgroup id is `id`.
fn find_cgroup(parent: &Path, id: u64) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::read_dir(parent)
        .ok()?
        .flatten()
        .find(|e| e.metadata().is_ok_and(|m| m.is_dir() && m.ino() == id))
        .map(|e| e.path())
}

/// The sessions saved in `state`, each with its file.
fn saved_sessions(state: &Path) -> anyhow::Result<Vec<(PathBuf, anyhow::Result<SavedSession>)>> {
    let mut saved = Vec::new();
    for entry in std::fs::read_dir(state).with_context(|| format!("reading {}", state.display()))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with("session-") && name.ends_with(".json") {
            let session = read_json(&path);
            saved.push((path, session));
        }
    }
    Ok(saved)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Writes `value` to `path` whole or not at all (a temporary file renamed over it).
fn write_json(path: &Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file =
        std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    serde_json::to_writer(&mut file, value)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}

/// A fresh, non-zero tables id: random, so ids never collide across sessions, reloads and agent
/// restarts.
fn new_tables_id() -> anyhow::Result<u64> {
    let mut buf = [0u8; 8];
    loop {
        // SAFETY: writes at most buf.len() bytes into buf.
        let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n != buf.len() as isize {
            return Err(std::io::Error::last_os_error()).context("getrandom");
        }
        let id = u64::from_ne_bytes(buf);
        if id != 0 {
            return Ok(id);
        }
    }
}

/// The event reader: drains the ring buffer whenever it has data, until stopped.
fn read_events(
    ring: &Mutex<RingBuf<MapData>>,
    contexts: &RwLock<HashMap<u64, SessionContext>>,
    outputs: &Outputs,
    stop: &AtomicBool,
) {
    let fd = ring.lock().unwrap().as_raw_fd();
    while !stop.load(Ordering::Acquire) {
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; the ring buffer (and its fd) outlives this thread.
        unsafe { libc::poll(&mut pfd, 1, 100) };
        drain(ring, contexts, outputs);
    }
    drain(ring, contexts, outputs);
}

/// Records every queued event. An event of a session no agent knows (one a restarted agent could
/// not take over) cannot be attributed: those are counted in a loss record.
fn drain(
    ring: &Mutex<RingBuf<MapData>>,
    contexts: &RwLock<HashMap<u64, SessionContext>>,
    outputs: &Outputs,
) {
    let mut ring = ring.lock().unwrap();
    let mut unknown = 0;
    while let Some(item) = ring.next() {
        if item.len() < size_of::<DecisionEvent>() {
            continue;
        }
        // SAFETY: the programs write whole DecisionEvents; read_unaligned copies it out.
        let ev = unsafe { std::ptr::read_unaligned(item.as_ptr() as *const DecisionEvent) };
        let contexts = contexts.read().unwrap();
        match contexts.get(&ev.session) {
            Some(ctx) => outputs.decision(&ev, ctx),
            None => unknown += 1,
        }
    }
    if unknown > 0 {
        tracing::error!("{unknown} decision event(s) of unknown sessions");
        outputs.record(audit::Event::Loss(audit::Loss {
            count: unknown,
            at: "unknown-session".to_owned(),
        }));
    }
}
