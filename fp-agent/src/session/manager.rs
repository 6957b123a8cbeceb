//! The sessions of one host agent — the daemon, or the agent `fp run` embeds when no daemon runs.
//! A session is a cgroup, a compiled policy loaded into the kernel tables under its own tables id,
//! and a mode. Its lifecycle is here; taking sessions over after a restart is in `takeover`, their
//! saved state in `saved`, the event reader in `reader`, the calls passed through to the kernel
//! half (for the prompt broker, the status) in `enforce`.
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, RwLock, Weak,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
};

use anyhow::{Context as _, anyhow};
use fp_common::kernel::{
    SESSION_AUDIT_ONLY, SESSION_FULL_AUDIT, SESSION_LINKS_PENDING, SESSION_POLICY_FLAGS,
    SessionInfo,
};

use super::{
    Cgroup2, Mode, SessionCgroup,
    enforce::Enforce,
    event::SessionContext,
    parent::Parent,
    reader::{self, Contexts, EventSource, Events, Observer, Outputs, Sink},
    saved::{self, Settings},
};
use crate::{
    audit,
    kernel::{self, tables::InodeTable},
    policy::EffectivePolicy,
};

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

/// A running session, as [`Manager::sessions`] lists it and the daemon's API sends it
/// (`fp sessions --json`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// The session's name.
    pub id: String,
    pub agent: String,
    pub cgroup_id: u64,
    pub pids: u32,
    pub mode: Mode,
    pub denials: u64,
    /// The share of `denials` at the session boundary: processes outside the session, devices
    /// and kernel interfaces (docs/threat-model.md, "The session boundary").
    #[serde(default)]
    pub boundary: u64,
    /// Decision events the kernel could not queue so far (they become a loss record).
    #[serde(default)]
    pub dropped: u64,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub policy_hash: String,
}

/// A session the manager hosts.
pub(super) struct Live {
    pub context: SessionContext,
    pub cgroup: SessionCgroup,
    pub tables_id: u64,
    pub inodes: InodeTable,
    pub settings: Settings,
    /// The start record of a session no process has joined yet ([`Manager::started`]): one that
    /// ends before leaves no record.
    pub unstarted: Option<audit::SessionStart>,
}

impl Live {
    /// What a restarted agent needs to take it over.
    fn saved(&self) -> saved::SavedSession {
        saved::SavedSession {
            name: self.context.session.clone(),
            agent: self.context.agent.clone(),
            cgroup: self.context.cgroup,
            path: self.cgroup.path.clone(),
            settings: self.settings.clone(),
            policy_hash: self.context.policy_hash.clone(),
            policy: self.context.policy.saved(),
        }
    }
}

/// How a session ended.
pub struct Ended {
    /// Decision events the kernel could not queue (they became a loss record).
    pub dropped: u64,
}

pub struct Manager {
    pub(super) hierarchy: Cgroup2,
    pub(super) parent: Parent,
    pub(super) enforcer: Mutex<Option<Box<dyn Enforce>>>,
    pub(super) sessions: Mutex<HashMap<u64, Live>>,
    /// Contexts by cgroup id, for the event reader (kept apart so it never waits on a load).
    pub(super) contexts: Contexts,
    pub(super) events: Events,
    pub(super) broker_clock: Mutex<Option<kernel::BrokerClock>>,
    pub(super) outputs: Outputs,
    pub(super) stop: Arc<AtomicBool>,
    reader: Mutex<Option<JoinHandle<()>>>,
    /// Where each session is saved for a restarted agent to take over (the daemon's).
    pub(super) state: Option<PathBuf>,
    /// What killed `fp run`s left that is kept (its processes live), by name, as last seen.
    pub(super) orphans: Mutex<std::collections::BTreeMap<String, audit::OrphanCleanup>>,
    /// The manager itself, for the threads it starts (`links`).
    pub(super) this: Weak<Manager>,
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
        let (parent, sessions) = Parent::hold(&hierarchy, parent)?;
        let enforcer =
            kernel::Enforcer::load(sessions, pin_dir).inspect_err(|_| parent.release())?;
        let outputs = Outputs { sink, observer };
        let manager = Self::new(hierarchy, parent, enforcer, outputs, None)?;
        manager.spawn_reader();
        manager.spawn_fmod_ret_watch();
        Ok(manager)
    }

    pub(super) fn new(
        hierarchy: Cgroup2,
        parent: Parent,
        mut enforcer: kernel::Enforcer,
        outputs: Outputs,
        state: Option<PathBuf>,
    ) -> anyhow::Result<Arc<Self>> {
        // Sessions may not signal or trace the agent itself.
        let taken = enforcer
            .protect(std::process::id())
            .and_then(|()| Ok((enforcer.take_events()?, enforcer.take_broker_clock()?)));
        match taken {
            Ok((ring, clock)) => Ok(Self::assemble(
                hierarchy,
                parent,
                Box::new(enforcer),
                Box::new(ring),
                Some(clock),
                outputs,
                state,
            )),
            Err(e) => {
                let _ = enforcer.unload();
                parent.release();
                Err(e)
            }
        }
    }

    /// A manager over any kernel half (the tests' is a fake), with no event reader running yet.
    pub(super) fn assemble(
        hierarchy: Cgroup2,
        parent: Parent,
        enforcer: Box<dyn Enforce>,
        events: Box<dyn EventSource>,
        broker_clock: Option<kernel::BrokerClock>,
        outputs: Outputs,
        state: Option<PathBuf>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|this| Self {
            hierarchy,
            parent,
            enforcer: Mutex::new(Some(enforcer)),
            sessions: Mutex::new(HashMap::new()),
            contexts: Arc::new(RwLock::new(HashMap::new())),
            events: Arc::new(Mutex::new(events)),
            broker_clock: Mutex::new(broker_clock),
            outputs,
            stop: Arc::new(AtomicBool::new(false)),
            reader: Mutex::new(None),
            state,
            orphans: Mutex::default(),
            this: this.clone(),
        })
    }

    pub(super) fn spawn_reader(&self) {
        let (events, contexts, outputs, stop) =
            (self.events.clone(), self.contexts.clone(), self.outputs.clone(), self.stop.clone());
        let reader =
            std::thread::spawn(move || reader::read_events(&events, &contexts, &outputs, &stop));
        *self.reader.lock().unwrap() = Some(reader);
    }

    /// Records every decision event queued now.
    pub(super) fn drain(&self) {
        reader::drain(&self.events, &self.contexts, &self.outputs);
    }

    /// The one way tables reach the kernel: `context`'s policy under a fresh tables id, then the
    /// session of cgroup `context.cgroup` (at `path`) pointed at them with `flags` in one map
    /// update (which confines a new session, or switches a running one). Tables that can hold an
    /// open for the prompt broker get the checks of pending files attached first (they stay).
    /// The unix sockets and block devices its policy names (`sockets`, `block_devices`) are
    /// resolved and written with them, and the flags of its kernel interfaces set in `flags`.
    /// Nothing of the new tables stays behind on error. Returns their id and inode table.
    pub(super) fn install(
        &self,
        context: &SessionContext,
        path: &Path,
        flags: u64,
    ) -> anyhow::Result<(u64, InodeTable)> {
        let inodes = InodeTable::resolve(context.policy.tables());
        self.install_resolved(context, path, flags, inodes)
    }

    /// [`Manager::install`] with the inode table resolved: while it defers hardlinks, the
    /// session gets `SESSION_LINKS_PENDING` ([`super::links`]).
    pub(super) fn install_resolved(
        &self,
        context: &SessionContext,
        path: &Path,
        flags: u64,
        inodes: InodeTable,
    ) -> anyhow::Result<(u64, InodeTable)> {
        let tables = context.policy.tables();
        let holds = kernel::tables::can_hold(tables, &inodes);
        let tables_id = new_tables_id()?;
        let peers = context.policy.socket_peers();
        let devices = context.policy.devices();
        let pending = if inodes.pending() { SESSION_LINKS_PENDING } else { 0 };
        let flags = flags & !(SESSION_POLICY_FLAGS | SESSION_LINKS_PENDING)
            | context.policy.session_flags()
            | pending;
        self.with_enforcer(|e| {
            if holds {
                e.attach_holds(context.cgroup, path)?;
            }
            e.install_tables(tables_id, tables, &inodes)?;
            let info = SessionInfo { tables: tables_id, flags, inode_devices: inodes.devices() };
            let set = e
                .set_unix_peers(context.cgroup, &peers)
                .and_then(|()| e.set_block_devices(context.cgroup, &devices))
                .and_then(|()| e.set_session(context.cgroup, info));
            if set.is_err() {
                let _ = e.remove_tables(tables_id, tables, &inodes);
            }
            set
        })?;
        Ok((tables_id, inodes))
    }

    /// Hosts `live` from now on: the event reader attributes its events, a restarted agent finds
    /// it saved.
    pub(super) fn admit(&self, live: Live) {
        let id = live.context.cgroup;
        self.contexts.write().unwrap().insert(id, live.context.clone());
        if let Some(state) = &self.state {
            saved::save(state, &live.saved());
        }
        let mut sessions = self.sessions.lock().unwrap();
        // Under the lock: the listing's end must find the session.
        self.complete_links_later(id, live.tables_id, &live.inodes);
        sessions.insert(id, live);
    }

    /// The audit log the manager's records go to (None: they go to stderr).
    pub fn audit_log(&self) -> Option<&crate::audit::AuditHandle> {
        match &self.outputs.sink {
            Sink::Audit(log) => Some(log),
            Sink::Stderr => None,
        }
    }

    /// Creates a session: its cgroup, its tables in the kernel, and its start record, written
    /// once a process joins ([`Manager::started`]). Processes that join the returned cgroup are
    /// confined from then on. Nothing stays behind on error.
    pub fn create(&self, spec: SessionSpec) -> anyhow::Result<(String, PathBuf, u64)> {
        if let Some(log) = self.audit_log() {
            log.refuse_new_session()?;
        }
        // At kernel.ftrace_enabled = 0 the kernel runs no fmod_ret program, and where it
        // preempts tasks inside programs it skips some: such a session would not be confined.
        if self.backend() == Some(kernel::Backend::FModRet)
            && let Some(why) = super::fmod_ret::fmod_ret_refusal()
        {
            anyhow::bail!("{why}");
        }
        // Where a session's start goes, for `FP_LOG=fp_agent=debug` (issue 53 item 5).
        let mut clock = std::time::Instant::now();
        let mut lap = || {
            let now = std::time::Instant::now();
            std::mem::replace(&mut clock, now).elapsed().as_micros()
        };
        let cgroup = SessionCgroup::create(&self.hierarchy, &self.parent.path, &spec.name)?;
        let cgroup_us = lap();
        let context =
            SessionContext::new(spec.name.clone(), spec.agent, cgroup.id, Arc::new(spec.policy));
        let flags = if spec.mode == Mode::Audit { SESSION_AUDIT_ONLY } else { 0 }
            | if spec.full_audit { SESSION_FULL_AUDIT } else { 0 };
        let installed = self.install(&context, &cgroup.path, flags);
        tracing::debug!(
            session = %spec.name,
            cgroup_us,
            tables_us = lap(),
            "session set up"
        );
        let (tables_id, inodes) = match installed {
            Ok(installed) => installed,
            Err(e) => {
                let id = cgroup.id;
                let _ = cgroup.remove();
                let _ = self.with_enforcer(|e| e.end_session(id));
                return Err(e);
            }
        };
        let start = audit::SessionStart {
            session: spec.name.clone(),
            agent: context.agent.clone(),
            cgroup: cgroup.id,
            pid: spec.pid,
            uid: spec.uid,
            policy_hash: context.policy_hash.clone(),
            floor_exceptions: context
                .policy
                .floor_exceptions()
                .iter()
                .map(|e| e.value.clone())
                .collect(),
            profile: context.policy.profile().map(str::to_owned),
            backend: self.backend().map(|b| b.name().to_owned()),
            command: spec.command,
        };
        let (path, id) = (cgroup.path.clone(), cgroup.id);
        let settings = Settings {
            mode: spec.mode,
            uid: spec.uid,
            workspace: spec.workspace,
            started_at: audit::record::format_time(time::OffsetDateTime::now_utc()),
        };
        self.admit(Live { context, cgroup, tables_id, inodes, settings, unstarted: Some(start) });
        Ok((spec.name, path, id))
    }

    /// Records the start of the session of cgroup `id`, created by [`Manager::create`], as its
    /// first process joins it.
    pub fn started(&self, id: u64) {
        let start = self.sessions.lock().unwrap().get_mut(&id).and_then(|l| l.unstarted.take());
        if let Some(start) = start {
            self.record(audit::Event::SessionStart(start));
        }
    }

    /// Replaces the policy of the session of cgroup `id`: the new tables are installed under a new
    /// id, the session switched to them in one map update, then the old ones removed (header
    /// first). A decision that raced with the switch keeps its verdict under the old tables if
    /// they were whole, else it is denied (fp-ebpf's `settle`).
    /// Returns the previous and the new policy hash.
    pub fn reload(
        &self,
        id: u64,
        policy: EffectivePolicy,
        source: &str,
    ) -> anyhow::Result<(String, String)> {
        let mut sessions = self.sessions.lock().unwrap();
        let live = sessions.get_mut(&id).ok_or_else(|| anyhow!("no session with cgroup {id}"))?;
        let context = live.context.with_policy(Arc::new(policy));
        let inodes = InodeTable::resolve(context.policy.tables());
        let old = self.replace_tables(live, context, inodes)?;
        self.complete_links_later(id, live.tables_id, &live.inodes);
        self.record(audit::Event::PolicyReload(audit::PolicyReload {
            session: Some(live.context.session.clone()),
            old_policy_hash: old.policy_hash.clone(),
            policy_hash: live.context.policy_hash.clone(),
            source: source.to_owned(),
        }));
        Ok((old.policy_hash, live.context.policy_hash.clone()))
    }

    /// Switches the session `live` to `context`'s tables with the inode table `inodes` under a
    /// new tables id in one map update, then removes its old tables. Returns its old context.
    pub(super) fn replace_tables(
        &self,
        live: &mut Live,
        context: SessionContext,
        inodes: InodeTable,
    ) -> anyhow::Result<SessionContext> {
        let id = live.context.cgroup;
        let flags = self.with_enforcer(|e| e.session(id))?.flags;
        let (tables_id, inodes) =
            self.install_resolved(&context, &live.cgroup.path, flags, inodes)?;
        self.with_enforcer(|e| {
            e.remove_tables(live.tables_id, live.context.policy.tables(), &live.inodes)
        })?;
        let old = std::mem::replace(&mut live.context, context);
        live.tables_id = tables_id;
        live.inodes = inodes;
        self.contexts.write().unwrap().insert(id, live.context.clone());
        if let Some(state) = &self.state {
            saved::save(state, &live.saved());
        }
        Ok(old)
    }

    /// Ends the session of cgroup `id`: kills what still runs in it, removes its cgroup and its
    /// kernel entries, records its losses and its end (none for a session that never started).
    pub fn end(&self, id: u64, exit_code: Option<i32>, reason: &str) -> anyhow::Result<Ended> {
        let live = self
            .sessions
            .lock()
            .unwrap()
            .remove(&id)
            .ok_or_else(|| anyhow!("no session with cgroup {id}"))?;
        let removed = live.cgroup.remove();
        if let Some(state) = &self.state {
            saved::forget(state, id);
        }
        // Every event of the session is in the ring buffer now: record them before its context goes.
        self.drain();
        let counters = self.with_enforcer(|e| {
            let counters = e.counters(id)?;
            e.end_session(id)?;
            e.remove_tables(live.tables_id, live.context.policy.tables(), &live.inodes)?;
            Ok(counters)
        });
        self.contexts.write().unwrap().remove(&id);
        let dropped = counters.as_ref().map_or(0, |c| c.dropped);
        if live.unstarted.is_none() {
            self.record_end(dropped, &live.context.session, &live.context.agent, exit_code, reason);
        }
        removed?;
        counters?;
        Ok(Ended { dropped })
    }

    /// Records a session's end, after the events the kernel could not queue for it.
    pub(super) fn record_end(
        &self,
        dropped: u64,
        session: &str,
        agent: &str,
        exit_code: Option<i32>,
        reason: &str,
    ) {
        if dropped > 0 {
            self.record(audit::Event::Loss(audit::Loss {
                count: dropped,
                at: "kernel-ringbuf".to_owned(),
            }));
        }
        self.record(audit::Event::SessionEnd(audit::SessionEnd {
            session: session.to_owned(),
            agent: agent.to_owned(),
            exit_code,
            reason: reason.to_owned(),
        }));
    }

    /// The running sessions.
    pub fn sessions(&self) -> Vec<Summary> {
        let sessions = self.sessions.lock().unwrap();
        sessions.values().map(|live| self.summary(live)).collect()
    }

    /// The running session of cgroup `id`.
    pub fn session(&self, id: u64) -> Option<Summary> {
        self.sessions.lock().unwrap().get(&id).map(|live| self.summary(live))
    }

    fn summary(&self, live: &Live) -> Summary {
        let id = live.context.cgroup;
        let counters = self.with_enforcer(|e| e.counters(id)).unwrap_or_default();
        Summary {
            id: live.context.session.clone(),
            agent: live.context.agent.clone(),
            cgroup_id: id,
            pids: live.cgroup.pids().len() as u32,
            mode: live.settings.mode,
            denials: counters.denied,
            boundary: counters.boundary,
            dropped: counters.dropped,
            started_at: live.settings.started_at.clone(),
            policy_hash: live.context.policy_hash.clone(),
        }
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

    /// The policy, workspace and user of the session of cgroup `id` (a reload keeps the last two).
    pub fn identity(&self, id: u64) -> Option<(Arc<EffectivePolicy>, Option<PathBuf>, u32)> {
        let sessions = self.sessions.lock().unwrap();
        sessions
            .get(&id)
            .map(|l| (l.context.policy.clone(), l.settings.workspace.clone(), l.settings.uid))
    }

    /// The processes of the session of cgroup `id` (none once it has ended).
    pub fn pids(&self, id: u64) -> Vec<i32> {
        let sessions = self.sessions.lock().unwrap();
        sessions.get(&id).map(|l| l.cgroup.pids()).unwrap_or_default()
    }

    /// The cgroup directory sessions are created in.
    pub fn parent(&self) -> &Path {
        &self.parent.path
    }

    pub(super) fn record(&self, event: audit::Event) {
        self.outputs.record(event);
    }

    /// Calls `f` with the kernel half (an error once the agent is shutting down).
    pub(super) fn with_enforcer<T>(
        &self,
        f: impl FnOnce(&mut dyn Enforce) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let mut guard = self.enforcer.lock().unwrap();
        let enforcer = guard.as_mut().ok_or_else(|| anyhow!("the agent is shutting down"))?;
        f(enforcer.as_mut())
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
        self.parent.release();
        first_error.map_or(Ok(()), Err)
    }
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
