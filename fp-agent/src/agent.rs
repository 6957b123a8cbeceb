//! The agent: what the daemon and `fp run`'s embedded agent both run — the audit writer, the
//! session manager writing into it, and the prompt host serving its sessions. Each change to the
//! sessions goes through here once: the prompt broker is prepared for a policy before a session
//! gets it, and learns of every change before the session's processes run.
use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
};

use anyhow::Context as _;

use crate::{
    audit, config,
    policy::EffectivePolicy,
    prompt::{self, PromptHost},
    session::{Cgroup2, Manager, Observer, SessionSpec, Sink},
};

/// What an agent is made of.
pub struct Settings {
    pub cgroup2: Cgroup2,
    /// The cgroup directory sessions are created in.
    pub parent: PathBuf,
    /// Where the programs' maps and links are pinned.
    pub pin_dir: PathBuf,
    /// Where sessions are saved for a restarted agent to take over, which this one does first
    /// (the daemon's); `None`: the agent's sessions end with it (`fp run`'s).
    pub state: Option<PathBuf>,
    /// The audit log; `None`: decisions are lines on stderr.
    pub audit: Option<audit::WriterConfig>,
    /// Sees every record of the session manager.
    pub observer: Option<Observer>,
    /// The config's `[approval]`.
    pub approval: config::Approval,
    pub surfaces: prompt::Surfaces,
}

pub struct Agent {
    manager: Arc<Manager>,
    prompt: PromptHost,
    writer: Mutex<Option<audit::AuditWriter>>,
}

impl Agent {
    /// Opens the audit log, loads and attaches the programs (or takes over a previous agent's,
    /// with `state`), cleans up after the `fp run`s that were killed (`session::orphans`) and
    /// hosts the prompt broker, prepared for every session taken over. The caller has checked
    /// that BPF LSM works and bpffs is mounted ([`crate::kernel::ready`]).
    pub fn start(settings: Settings) -> anyhow::Result<Self> {
        let Settings { cgroup2, parent, pin_dir, state, audit, observer, approval, surfaces } =
            settings;
        let (sink, writer) = match audit {
            None => (Sink::Stderr, None),
            Some(config) => {
                let path = config.path.clone();
                let (handle, writer) = audit::start(config)
                    .with_context(|| format!("opening the audit log {}", path.display()))?;
                (Sink::Audit(handle), Some(writer))
            }
        };
        let manager = match state {
            Some(state) => Manager::start_or_adopt(parent, pin_dir, state, sink.clone(), observer),
            None => Manager::start(parent, pin_dir, sink.clone(), observer),
        };
        let manager = match manager {
            Ok(manager) => manager,
            Err(e) => {
                if let Some(writer) = writer {
                    let _ = writer.shutdown();
                }
                return Err(e);
            }
        };
        // What `fp run`s killed left behind, cleaned up (or kept confined) and recorded.
        manager.clean_orphans();
        watch_audit_health(&manager);
        let settings = prompt::HostSettings { cgroup2, approval, surfaces, outcomes: sink };
        let agent = Agent {
            prompt: PromptHost::new(manager.clone(), settings),
            manager,
            writer: Mutex::new(writer),
        };
        agent.resume();
        Ok(agent)
    }

    /// The sessions taken over from a previous agent are served by the prompt broker if their
    /// policies need it.
    fn resume(&self) {
        let sessions = self.manager.snapshot();
        for (_, ctx) in &sessions {
            let pids = self.manager.pids(ctx.cgroup);
            if let Err(e) = self.prompt.prepare(ctx.cgroup, &ctx.policy, &pids) {
                tracing::error!("prompt broker for session {}: {e:#}", ctx.session);
            }
        }
        if !sessions.is_empty() {
            self.prompt.sessions_changed();
        }
    }

    /// The session manager (its sessions, their summaries, the kernel's state).
    pub fn manager(&self) -> &Arc<Manager> {
        &self.manager
    }

    /// The approval store, once the prompt broker runs.
    pub fn approvals(&self) -> Option<Arc<prompt::Approvals>> {
        self.prompt.approvals()
    }

    /// Creates a session, prepares the prompt broker for it if its policy needs one (in the
    /// mount namespace of `first`, the process about to run the session's command), and moves
    /// `first` into it: (name, cgroup directory, cgroup id). The broker knows the session when
    /// this returns. A session that fails before `first` has joined leaves no record.
    pub fn create(&self, spec: SessionSpec, first: i32) -> anyhow::Result<(String, PathBuf, u64)> {
        let created = self.manager.create(spec)?;
        // Before the broker marks the namespace's mounts: this is one of them.
        if let Err(e) = self.manager.show_own_cgroup(&created.1, first) {
            tracing::warn!(
                "session {}: its cgroup is not shown at the cgroup mount: {e:#}",
                created.0
            );
        }
        let prepared = match self.manager.identity(created.2) {
            Some((policy, ..)) => self.prompt.prepare(created.2, &policy, &[first]),
            None => Err(anyhow::anyhow!("session {} ended as it started", created.0)),
        };
        if let Err(e) = prepared {
            let _ = self.manager.end(created.2, None, "the prompt broker could not be prepared");
            return Err(e);
        }
        self.prompt.sessions_changed();
        let procs = created.1.join("cgroup.procs");
        let joined = std::fs::write(&procs, first.to_string())
            .with_context(|| format!("moving pid {first} into {}", procs.display()));
        if let Err(e) = joined {
            let _ = self.manager.end(created.2, None, "its first process could not join it");
            return Err(e);
        }
        self.manager.started(created.2);
        Ok(created)
    }

    /// Replaces the policy of the session of cgroup `id` (see [`Manager::reload`]), the prompt
    /// broker prepared for it first: (previous, new policy hash).
    pub fn reload(
        &self,
        id: u64,
        policy: EffectivePolicy,
        source: &str,
    ) -> anyhow::Result<(String, String)> {
        self.prompt.prepare(id, &policy, &self.manager.pids(id))?;
        let hashes = self.manager.reload(id, policy, source)?;
        self.prompt.sessions_changed();
        Ok(hashes)
    }

    /// Ends the session of cgroup `id` (see [`Manager::end`]); the prompt broker forgets it.
    pub fn end(
        &self,
        id: u64,
        exit_code: Option<i32>,
        reason: &str,
    ) -> anyhow::Result<crate::session::Ended> {
        let ended = self.manager.end(id, exit_code, reason);
        self.prompt.sessions_changed();
        ended
    }

    /// Stops the prompt broker: its pending approvals are denied, its outcomes written. Call
    /// before a session's processes are killed, for them not to wait on it.
    pub fn stop_prompts(&self) {
        self.prompt.shutdown();
    }

    /// Stops the prompt broker, ends every session, unloads the programs and closes the audit
    /// log: the first error, after doing all of it.
    pub fn shutdown(&self, reason: &str) -> anyhow::Result<()> {
        self.prompt.shutdown();
        let stopped = self.manager.shutdown(reason).context("shutting the sessions down");
        let closed = match self.writer.lock().unwrap().take() {
            Some(writer) => writer.shutdown().context("closing the audit log"),
            None => Ok(()),
        };
        match (stopped, closed) {
            (Err(stopped), Err(closed)) => {
                tracing::error!("{closed:#}");
                Err(stopped)
            }
            (stopped, closed) => stopped.and(closed),
        }
    }
}

/// Freezes the sessions while the audit log cannot be written, with `on_full = "freeze"`
/// (crate::session's `freeze`), and thaws those taken over frozen once it can. The writer tells
/// of each change on its own thread, which must not wait for the sessions: the change is
/// applied on a thread of its own.
fn watch_audit_health(manager: &Arc<Manager>) {
    let Some(log) = manager.audit_log() else { return };
    let on_full = log.on_full();
    let weak = Arc::downgrade(manager);
    log.on_health(Arc::new(move |_| {
        let weak = weak.clone();
        std::thread::spawn(move || {
            if let Some(manager) = weak.upgrade() {
                manager.match_audit_health(on_full);
            }
        });
    }));
    manager.match_audit_health(on_full);
}
