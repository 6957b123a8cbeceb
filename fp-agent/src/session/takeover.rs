//! Taking over after an agent restart (the daemon's): the programs and sessions a previous agent
//! left pinned and saved stayed confined while no agent ran; a new agent records what they did
//! meanwhile, gives each saved one fresh tables, and ends those it cannot take over.
use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::{Context as _, anyhow};
use fp_common::kernel::SessionInfo;

use super::{
    Cgroup2, SessionCgroup,
    event::SessionContext,
    find_cgroup,
    manager::{Live, Manager},
    orphans,
    parent::{self, Parent},
    reader::{Observer, Outputs, Sink},
    saved::{self, SavedAgent, SavedSession},
};
use crate::{audit, kernel, owner::Owner, policy::EffectivePolicy};

impl Manager {
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
        let (held, sessions) = Parent::hold(&hierarchy, parent.clone())?;
        let outputs = Outputs { sink, observer };
        // Its hold goes with it if it cannot start.
        let loaded = (|| -> anyhow::Result<_> {
            std::fs::create_dir_all(&state)
                .with_context(|| format!("creating {}", state.display()))?;
            let agent = SavedAgent {
                abi: fp_common::kernel::ABI_VERSION,
                parent: parent.clone(),
                sessions,
            };
            let agent_file = state.join("agent.json");
            let adopted = match saved::read_json::<SavedAgent>(&agent_file) {
                Ok(saved) if saved == agent => kernel::Enforcer::adopt(pin_dir.clone()),
                Ok(_) => Err(anyhow!("the previous agent confined another cgroup parent or level")),
                Err(e) if pin_dir.exists() => Err(e),
                Err(_) => Ok(None),
            };
            let enforcer = match adopted {
                Ok(Some(enforcer)) => Some(enforcer),
                Ok(None) => None,
                Err(why) => {
                    let killed = clean_stale(&parent, &pin_dir)?;
                    // After a clean stop nothing is left to take over, and nothing to say.
                    if killed.is_empty() {
                        tracing::info!("starting afresh: {why:#}");
                    } else {
                        tracing::warn!(
                            "ended {} session(s) the previous fp daemon left running ({}): this \
                             daemon cannot take them over ({why:#}); their commands were killed, \
                             the audit log records each end",
                            killed.len(),
                            killed.join(", ")
                        );
                    }
                    for name in killed {
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
                    for (file, _) in saved::saved_sessions(&state)? {
                        std::fs::remove_file(&file)
                            .with_context(|| format!("removing {}", file.display()))?;
                    }
                    None
                }
            };
            saved::write_json(&agent_file, &agent)?;
            let adopting = enforcer.is_some();
            let enforcer = match enforcer {
                Some(enforcer) => enforcer,
                None => kernel::Enforcer::load(sessions, pin_dir)?,
            };
            Ok((enforcer, adopting))
        })();
        let (enforcer, adopting) = loaded.inspect_err(|_| held.release())?;
        let manager = Self::new(hierarchy, held, enforcer, outputs, Some(state))?;
        if adopting {
            manager.take_over()?;
        }
        manager.spawn_reader();
        manager.spawn_fmod_ret_watch();
        Ok(manager)
    }

    /// Takes over the sessions the programs confine now: those saved in the state directory get
    /// fresh tables from their saved policy (switched in one map update, like a reload); the
    /// others — saved by no one, or saved in a form this fp cannot read — are killed, since no
    /// agent could record or change them. Events queued while no agent ran are recorded first.
    pub(super) fn take_over(&self) -> anyhow::Result<()> {
        let state = self.state.clone().ok_or_else(|| anyhow!("no state directory"))?;
        let confined = self.with_enforcer(|e| e.sessions())?;
        let mut saved = HashMap::new();
        for (file, session) in saved::saved_sessions(&state)? {
            let restored = session.and_then(|s| {
                let policy = EffectivePolicy::from_saved(s.policy.clone())?;
                let context = SessionContext::new(
                    s.name.clone(),
                    s.agent.clone(),
                    s.cgroup,
                    Arc::new(policy),
                );
                if context.policy_hash != s.policy_hash {
                    anyhow::bail!("its saved policy no longer hashes to {}", s.policy_hash);
                }
                Ok((s, context))
            });
            match restored {
                Ok((s, context)) => {
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
        self.drain();
        for (cgroup, info) in confined {
            let adopted = match saved.remove(&cgroup) {
                Some((_, s, context)) => self.adopt(info, s, context),
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
        info: SessionInfo,
        s: SavedSession,
        context: SessionContext,
    ) -> anyhow::Result<()> {
        let cgroup = SessionCgroup::existing(&self.hierarchy, &s.path)?;
        if cgroup.id != context.cgroup {
            anyhow::bail!("{} is another cgroup now", s.path.display());
        }
        let (tables_id, inodes) = self.install(&context, &cgroup.path, info.flags)?;
        self.record(audit::Event::SessionAdopt(audit::SessionAdopt {
            session: s.name.clone(),
            agent: s.agent.clone(),
            cgroup: cgroup.id,
            pids: cgroup.pids().len() as u32,
            policy_hash: s.policy_hash.clone(),
        }));
        let settings = s.settings;
        self.admit(Live { context, cgroup, tables_id, inodes, settings, unstarted: None });
        Ok(())
    }

    /// Ends a confined session no agent can take over: kills its processes, forgets its kernel
    /// entries (its tables go with the sweep), records its losses and its end.
    fn kill_unadoptable(&self, cgroup_id: u64, why: &str) {
        let path = find_cgroup(&self.parent.path, cgroup_id);
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
        let dropped = counters.map_or(0, |c| c.dropped);
        let reason = format!("killed: the restarted agent could not take it over ({why})");
        self.record_end(dropped, &name, "", None, &reason);
    }

    /// Records the prompt-tier opens a dead broker never answered (their reads stay refused).
    fn record_unanswered_prompts(&self) -> anyhow::Result<()> {
        let pending = self.with_enforcer(|e| e.unrecorded_pending())?;
        let contexts = self.contexts.read().unwrap();
        for key in pending {
            let Some(ctx) = contexts.get(&key.session) else { continue };
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
}

/// Cleans up after an agent that died: kills the processes of the sessions it left under
/// `parent` (once its programs are gone they would run unconfined) and removes its pins under
/// `pin_dir`. Returns the names of the sessions killed. Nothing to do if `pin_dir` is absent.
/// The sessions of `fp run`s are not its: their own pins confine them (see [`super::orphans`]).
fn clean_stale(parent: &Path, pin_dir: &Path) -> anyhow::Result<Vec<String>> {
    if !pin_dir.exists() {
        return Ok(Vec::new());
    }
    let hierarchy = Cgroup2::find()?;
    let mut killed = Vec::new();
    if let Ok(entries) = std::fs::read_dir(parent) {
        for entry in entries.flatten().filter(|e| e.path().is_dir()) {
            let name = entry.file_name().to_string_lossy().into_owned();
            // Other agents' holds, and the sessions of `fp run`s, confined by their own pins.
            if parent::is_hold(&name)
                || Owner::parse(orphans::RUN, &name).is_some()
                    && kernel::pin_root().join(&name).exists()
            {
                continue;
            }
            SessionCgroup::existing(&hierarchy, &entry.path())?.remove()?;
            killed.push(name);
        }
    }
    for entry in std::fs::read_dir(pin_dir)? {
        let path = entry?.path();
        // Other directories are the pins of other agents (`fp run`'s), alive or not: not ours.
        if !path.is_dir() || path.file_name().is_some_and(|n| n == kernel::SESSION_LINKS) {
            kernel::remove_pins(&path)?;
        }
    }
    let _ = std::fs::remove_dir(pin_dir);
    Ok(killed)
}
