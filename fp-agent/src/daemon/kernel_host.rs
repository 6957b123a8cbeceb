//! The daemon's [`SessionHost`] over the real kernel: the agent ([`crate::agent`]: the
//! session manager writing into the daemon's audit log, the prompt host), a reaper that ends a
//! session when its last process exits, a periodic cleanup after killed `fp run`s, and the
//! subscribers' event stream.
use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use tokio::sync::broadcast;

use super::{
    Peer, SessionHost,
    api::{self, ApiError, ErrorCode},
};
use crate::{
    agent::{self, Agent},
    audit,
    config::Config,
    policy::{EffectivePolicy, LoadOptions},
    prompt,
    session::{Cgroup2, Manager, SessionSpec},
};

pub struct KernelHost {
    /// The audit log, the session manager and the prompt broker.
    host: Agent,
    events: broadcast::Sender<api::Event>,
    /// Sessions whose first process has joined, by cgroup id: the reaper ends them once empty.
    armed: Arc<Mutex<HashMap<u64, Armed>>>,
    /// fp's own files, never writable by sessions.
    protected: Vec<PathBuf>,
    secrets: Vec<PathBuf>,
    counters: Arc<EventCounters>,
    stop: Arc<AtomicBool>,
    next_id: AtomicU64,
}

/// What the reaper knows of a session it ends once empty.
#[derive(Default)]
struct Armed {
    /// The `fp run` that created it (none for the sessions taken over): it reports the exit
    /// code of the session's command.
    creator: Option<i32>,
    exit_code: Option<i32>,
    /// Since when the reaper has seen it empty.
    empty_since: Option<Instant>,
}

impl Armed {
    /// How long an empty session waits for its creator's report of the command's exit code: the
    /// command is often the last process, and the report follows its exit by milliseconds.
    const EXIT_REPORT_WAIT: Duration = Duration::from_secs(1);

    /// Whether the reaper ends the session, empty now, at `now`.
    fn ends(&mut self, now: Instant) -> bool {
        let since = *self.empty_since.get_or_insert(now);
        self.creator.is_none()
            || self.exit_code.is_some()
            || now.duration_since(since) >= Self::EXIT_REPORT_WAIT
    }
}

#[derive(Default)]
struct EventCounters {
    events: AtomicU64,
    losses: AtomicU64,
}

impl KernelHost {
    /// Opens the audit log, loads and attaches the programs (or takes over those pinned under
    /// `pin_dir`), starts the reaper and the periodic check for what killed `fp run`s left. The
    /// caller has checked that BPF LSM works ([`crate::kernel::ready`]) and holds the daemon's
    /// locks ([`super::run`]).
    pub fn start(config: &Config) -> anyhow::Result<Arc<Self>> {
        let signer = audit::checkpoint::SignerKey::load(&config.audit.key).with_context(|| {
            format!(
                "loading the audit key {} (make one with `fp audit keygen`)",
                config.audit.key.display()
            )
        })?;
        if let Some(dir) = config.audit.log.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let (events, _) = broadcast::channel(4096);
        let counters = Arc::new(EventCounters::default());
        let observer = {
            let (events, counters) = (events.clone(), counters.clone());
            Arc::new(move |event: &audit::Event| {
                counters.events.fetch_add(1, Ordering::Relaxed);
                if let audit::Event::Loss(loss) = event {
                    counters.losses.fetch_add(loss.count, Ordering::Relaxed);
                }
                if let Some(event) = api_event(event) {
                    let _ = events.send(event);
                }
            })
        };
        // A daemon that died left its programs pinned (still enforcing) and its sessions running:
        // they are taken over (docs/operations.md).
        let cgroup2 = Cgroup2::find()?;
        let host = Agent::start(agent::Settings {
            parent: config.sessions_parent(&cgroup2),
            cgroup2,
            pin_dir: refuse_other_abi_pins(&config.pin_dir)?,
            state: Some(config.state_dir()),
            audit: Some(config.audit.writer_config(signer)),
            observer: Some(observer),
            approval: config.approval.clone(),
            surfaces: prompt::Surfaces::ControlSocket,
        })?;
        let mut protected =
            vec![config.audit.log.clone(), config.socket.clone(), config.state_dir()];
        protected.extend(config.file.clone());
        let host = Arc::new(Self {
            host,
            events,
            armed: Arc::new(Mutex::new(HashMap::new())),
            protected,
            secrets: vec![config.audit.key.clone()],
            counters,
            stop: Arc::new(AtomicBool::new(false)),
            next_id: AtomicU64::new(1),
        });
        // The sessions taken over are ended by the reaper once empty.
        let taken_over =
            host.manager().sessions().into_iter().map(|s| (s.cgroup_id, Armed::default()));
        host.armed.lock().unwrap().extend(taken_over);
        let reaper = host.clone();
        std::thread::spawn(move || reaper.reap());
        let janitor = host.clone();
        std::thread::spawn(move || janitor.clean_orphans());
        Ok(host)
    }

    fn manager(&self) -> &Manager {
        self.host.manager()
    }

    /// The cgroup id of session `id`.
    fn cgroup_of(&self, id: &str) -> Result<u64, ApiError> {
        self.manager()
            .find(id)
            .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("no session {id}")))
    }

    /// Ends sessions whose processes have all exited.
    fn reap(&self) {
        while !self.stop.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(200));
            let now = Instant::now();
            for summary in self.manager().sessions() {
                let ends = {
                    let mut armed = self.armed.lock().unwrap();
                    let id = summary.cgroup_id;
                    let ends = armed.get_mut(&id).is_some_and(|a| match summary.pids {
                        0 => a.ends(now),
                        _ => {
                            a.empty_since = None;
                            false
                        }
                    });
                    if ends { armed.remove(&id).map(|a| a.exit_code) } else { None }
                };
                if let Some(exit_code) = ends {
                    let _ = self.end_session(summary.cgroup_id, exit_code, "last process exited");
                }
            }
        }
    }

    /// Every 5 s, cleans up after the `fp run`s that were killed and whose processes have all
    /// exited since (on its own thread: removing a cgroup may wait for it to empty).
    fn clean_orphans(&self) {
        for tick in 1u64.. {
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
            if tick % 25 == 0 {
                self.manager().clean_orphans();
            }
        }
    }

    fn end_session(
        &self,
        cgroup: u64,
        exit_code: Option<i32>,
        reason: &str,
    ) -> Result<(), ApiError> {
        let name = self.manager().session(cgroup).map(|s| s.id);
        self.host.end(cgroup, exit_code, reason).map_err(unavailable)?;
        if let Some(id) = name {
            let _ = self.events.send(api::Event::SessionEnded { id, reason: reason.into() });
        }
        Ok(())
    }

    fn load_policy(
        &self,
        source: &api::PolicySource,
        workspace: Option<PathBuf>,
        uid: u32,
    ) -> Result<EffectivePolicy, ApiError> {
        let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten()
            .ok_or_else(|| {
                ApiError::new(ErrorCode::BadRequest, format!("no user with uid {uid}"))
            })?;
        let options = LoadOptions {
            policy_files: source.policy.iter().cloned().collect(),
            policy_text: source.policy_text.clone(),
            config_file: source.config.clone(),
            workspace,
            user: Some(user.name),
            protected_paths: self.protected.clone(),
            secret_paths: self.secrets.clone(),
            profile: source.profile.clone(),
        };
        Ok(EffectivePolicy::load(&options)?)
    }
}

/// The pin directory of this fp's ABI under `pin_root`. Pins of another ABI version belong to
/// another fp build whose programs may still be enforcing: this fp cannot read their maps, so it
/// refuses to start beside them.
fn refuse_other_abi_pins(pin_root: &std::path::Path) -> anyhow::Result<PathBuf> {
    let abi = fp_common::kernel::ABI_VERSION;
    if let Ok(entries) = std::fs::read_dir(pin_root) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let other = name.strip_prefix('v').and_then(|v| v.parse::<u32>().ok());
            let used = std::fs::read_dir(entry.path()).is_ok_and(|mut d| d.next().is_some());
            if other.is_some_and(|v| v != abi) && used {
                anyhow::bail!(
                    "{} holds the pinned programs and maps of another fp version (ABI {name}, this \
                     fp is ABI v{abi}); they may still be enforcing its sessions. Stop that fp's \
                     daemon and sessions (or reboot), remove {}, then start this one",
                    entry.path().display(),
                    entry.path().display()
                );
            }
        }
    }
    Ok(pin_root.join(format!("v{abi}")))
}

fn unavailable(e: anyhow::Error) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, format!("{e:#}"))
}

/// The subscribers' view of an audit event.
fn api_event(event: &audit::Event) -> Option<api::Event> {
    match event {
        audit::Event::Decision(d) => {
            Some(api::Event::Decision { record: serde_json::to_value(d).ok()? })
        }
        _ => None,
    }
}

impl SessionHost for KernelHost {
    fn create(
        &self,
        peer: &Peer,
        req: api::CreateSession,
    ) -> Result<api::SessionCreated, ApiError> {
        let loading = std::time::Instant::now();
        let policy = self.load_policy(&req.source, req.workspace.clone(), req.uid)?;
        let name =
            format!("s{}-{}", std::process::id(), self.next_id.fetch_add(1, Ordering::Relaxed));
        tracing::debug!(session = %name, policy_us = loading.elapsed().as_micros(), "policy loaded");
        let unreadable_base = policy.unreadable_base();
        let spec = SessionSpec {
            name,
            agent: req.agent.clone(),
            policy,
            mode: req.mode.unwrap_or_default(),
            full_audit: req.full_audit.unwrap_or(false),
            uid: req.uid,
            workspace: req.workspace.clone(),
            pid: req.pid as u32,
            command: req.command.clone(),
        };
        // Moves the client's child in, which waits for this before it execs the command.
        let (name, _, id) = self.host.create(spec, req.pid).map_err(unavailable)?;
        let armed = Armed { creator: Some(peer.pid), ..Armed::default() };
        self.armed.lock().unwrap().insert(id, armed);
        let summary = self.manager().session(id);
        let policy_hash = summary.as_ref().map(|s| s.policy_hash.clone()).unwrap_or_default();
        if let Some(s) = summary {
            let _ = self.events.send(api::Event::SessionStarted { session: s });
        }
        Ok(api::SessionCreated { id: name, cgroup_id: id, policy_hash, unreadable_base })
    }

    fn list(&self) -> Vec<api::SessionSummary> {
        self.manager().sessions().into_iter().collect()
    }

    fn end(&self, id: &str) -> Result<(), ApiError> {
        let cgroup = self.cgroup_of(id)?;
        let exit_code = self.armed.lock().unwrap().remove(&cgroup).and_then(|a| a.exit_code);
        self.end_session(cgroup, exit_code, "ended on request")
    }

    fn command_exited(&self, peer: &Peer, id: &str, exit_code: i32) -> Result<(), ApiError> {
        let cgroup = self.cgroup_of(id)?;
        let mut armed = self.armed.lock().unwrap();
        match armed.get_mut(&cgroup) {
            Some(a) if a.creator == Some(peer.pid) => {
                a.exit_code = Some(exit_code);
                Ok(())
            }
            _ => Err(ApiError::new(
                ErrorCode::PermissionDenied,
                format!("session {id} was not created by pid {}", peer.pid),
            )),
        }
    }

    fn reload(&self, req: api::Reload) -> Result<api::Reloaded, ApiError> {
        let cgroup = self.cgroup_of(&req.id)?;
        // The session keeps its workspace and user: they are part of what it is.
        let (_, workspace, uid) = self
            .manager()
            .identity(cgroup)
            .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("no session {}", req.id)))?;
        let policy = self.load_policy(&req.source, workspace, uid)?;
        let source = match (&req.source.policy, &req.source.policy_text) {
            (Some(p), _) => p.display().to_string(),
            (None, Some(_)) => "<request>".to_owned(),
            (None, None) => "the daemon's default policy".to_owned(),
        };
        let (previous_policy_hash, policy_hash) =
            self.host.reload(cgroup, policy, &source).map_err(unavailable)?;
        let reloaded = api::Reloaded { id: req.id, previous_policy_hash, policy_hash };
        let _ = self.events.send(api::Event::PolicyReloaded(reloaded.clone()));
        Ok(reloaded)
    }

    fn status(&self) -> api::HostStatus {
        api::HostStatus {
            bpf_lsm: crate::kernel::active_lsms()
                .is_some_and(|list| list.split(',').any(|l| l == "bpf")),
            backend: self.manager().backend().map(|b| b.name().to_owned()).unwrap_or_default(),
            backend_why: crate::kernel::chosen_backend()
                .map(|c| c.why.clone())
                .unwrap_or_else(|e| format!("{e:#}")),
            attached_hooks: self.manager().attached_hooks(),
            maps: self
                .manager()
                .map_usage()
                .into_iter()
                .map(|m| api::MapUsage { name: m.name.into(), used: m.used, capacity: m.capacity })
                .collect(),
            sessions: self.manager().sessions().len() as u32,
            counters: api::Counters {
                events: self.counters.events.load(Ordering::Relaxed),
                losses: self.counters.losses.load(Ordering::Relaxed),
            },
            orphans: self.manager().orphans(),
            audit: self.manager().audit_log().map(|log| {
                let (space_left, low_space) = log.space_left();
                api::AuditStatus {
                    log: log.log().to_path_buf(),
                    health: log.health().name().to_owned(),
                    free_bytes: log.free_bytes(),
                    space_left,
                    low_space,
                    on_full: log.on_full(),
                }
            }),
        }
    }

    fn subscribe(&self) -> broadcast::Receiver<api::Event> {
        self.events.subscribe()
    }

    fn approvals(&self) -> Option<Arc<prompt::Approvals>> {
        self.host.approvals()
    }

    fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        if let Err(e) = self.host.shutdown("daemon stopped") {
            tracing::error!("{e:#}");
        }
    }
}
