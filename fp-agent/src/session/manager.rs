//! The sessions of one host agent — the daemon, or the agent `fp run` embeds when no daemon runs —
//! and the one reader of the kernel's decision events. A session is a cgroup, a compiled policy
//! loaded into the kernel tables under its own tables id, and a mode.
use std::{
    collections::HashMap,
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
    policy::EffectivePolicy,
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
            self.record(audit::Event::Decision(kernel::event::audit_record(ev, ctx)));
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
    outputs: Outputs,
    stop: Arc<AtomicBool>,
    reader: Mutex<Option<JoinHandle<()>>>,
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
        std::fs::create_dir_all(&parent)
            .with_context(|| format!("creating cgroup {}", parent.display()))?;
        let level = hierarchy.level_of(&parent)? + 1;
        let mut enforcer = kernel::Enforcer::load(level, pin_dir)?;
        // Sessions may not signal or trace the agent itself.
        if let Err(e) = enforcer.protect(std::process::id()) {
            let _ = enforcer.unload();
            return Err(e);
        }
        let ring = match enforcer.take_events() {
            Ok(ring) => Arc::new(Mutex::new(ring)),
            Err(e) => {
                let _ = enforcer.unload();
                return Err(e);
            }
        };
        let manager = Arc::new(Self {
            hierarchy,
            parent,
            enforcer: Mutex::new(Some(enforcer)),
            sessions: Mutex::new(HashMap::new()),
            contexts: Arc::new(RwLock::new(HashMap::new())),
            ring,
            outputs: Outputs { sink, observer },
            stop: Arc::new(AtomicBool::new(false)),
            reader: Mutex::new(None),
        });
        let reader = {
            let (ring, contexts, outputs, stop) = (
                manager.ring.clone(),
                manager.contexts.clone(),
                manager.outputs.clone(),
                manager.stop.clone(),
            );
            std::thread::spawn(move || read_events(&ring, &contexts, &outputs, &stop))
        };
        *manager.reader.lock().unwrap() = Some(reader);
        Ok(manager)
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
        self.sessions.lock().unwrap().insert(
            id,
            Live {
                context,
                cgroup,
                mode: spec.mode,
                tables_id,
                inodes,
                started_at,
                uid: spec.uid,
                workspace: spec.workspace,
            },
        );
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
        self.with_enforcer(|e| e.heartbeat())
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
pub fn clean_stale(parent: &Path, pin_dir: &Path) -> anyhow::Result<Vec<String>> {
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
        std::fs::remove_file(&path).with_context(|| format!("unpinning {}", path.display()))?;
    }
    std::fs::remove_dir(pin_dir).with_context(|| format!("removing {}", pin_dir.display()))?;
    Ok(killed)
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

/// Records every queued event. An event of an unknown session cannot exist: a session's context
/// is removed only after the drain that follows the exit of its last process.
fn drain(
    ring: &Mutex<RingBuf<MapData>>,
    contexts: &RwLock<HashMap<u64, SessionContext>>,
    outputs: &Outputs,
) {
    let mut ring = ring.lock().unwrap();
    while let Some(item) = ring.next() {
        if item.len() < size_of::<DecisionEvent>() {
            continue;
        }
        // SAFETY: the programs write whole DecisionEvents; read_unaligned copies it out.
        let ev = unsafe { std::ptr::read_unaligned(item.as_ptr() as *const DecisionEvent) };
        let contexts = contexts.read().unwrap();
        let Some(ctx) = contexts.get(&ev.session) else {
            tracing::error!("decision event for unknown session cgroup {}", ev.session);
            continue;
        };
        outputs.decision(&ev, ctx);
    }
}
