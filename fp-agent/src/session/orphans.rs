//! What an `fp run` killed (SIGKILL) leaves behind: its embedded agent's programs, still attached
//! through the links pinned in its pin directory, and its session cgroup, whose processes those
//! programs go on confining. The next agent to start (an `fp run` or the daemon) cleans up after
//! it: once no process is left in the session it removes the cgroup, then the pins; while one is,
//! it leaves both (a session's process is never unconfined) and cleans up later: at a later start,
//! or, in the daemon, at one of its periodic checks. Each is said on stderr and recorded
//! (`orphan-cleanup`).
//!
//! A pin directory names its owner by pid and start time (`run-<pid>-<start>`, see
//! [`crate::owner`]).
use std::path::Path;

use super::{SessionCgroup, find_cgroup, manager::Manager, parent};
use crate::{audit, kernel, owner::Owner};

/// The prefix of an embedded agent's pin directory name, before its [`Owner`]'s pid and start.
pub const RUN: &str = "run-";

impl Manager {
    /// Cleans up after each `fp run` that died leaving its pin directory under
    /// [`kernel::pin_root`] (see the module). Says on stderr and records what it did: the first
    /// time it finds one kept, and when it removes one.
    pub fn clean_orphans(&self) {
        let Ok(entries) = std::fs::read_dir(kernel::pin_root()) else { return };
        let mut seen = std::collections::BTreeSet::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(owner) = Owner::parse(RUN, &name) else { continue };
            if owner.alive() || !entry.path().is_dir() {
                continue;
            }
            let record = self.clean_orphan(&entry.path(), &name, owner.pid);
            // Failed because another agent cleaned it up meanwhile.
            if record.reason.is_some() && !entry.path().exists() {
                continue;
            }
            let known = {
                let mut orphans = self.orphans.lock().unwrap();
                let known = orphans.contains_key(&name);
                match record.outcome {
                    audit::OrphanOutcome::Kept => orphans.insert(name.clone(), record.clone()),
                    audit::OrphanOutcome::Removed => orphans.remove(&name),
                };
                known
            };
            seen.insert(name);
            if !known || record.outcome == audit::OrphanOutcome::Removed {
                eprintln!("fp: {}", said(&record));
                self.record(audit::Event::OrphanCleanup(record));
            }
        }
        self.orphans.lock().unwrap().retain(|name, _| seen.contains(name));
        parent::remove_dead_holds(&self.parent.path);
    }

    /// What killed `fp run`s left that is kept, still confined, as [`Manager::clean_orphans`]
    /// last saw it.
    pub fn orphans(&self) -> Vec<audit::OrphanCleanup> {
        self.orphans.lock().unwrap().values().cloned().collect()
    }

    /// Removes the session cgroup of a dead embedded agent's pins in `dir` if no process is left
    /// in it, then the pins (the programs detach); else leaves both.
    fn clean_orphan(&self, dir: &Path, name: &str, pid: u32) -> audit::OrphanCleanup {
        let record = |cgroup, pids: usize, outcome, reason: Option<String>| audit::OrphanCleanup {
            session: name.to_owned(),
            pid,
            cgroup,
            pids: pids as u32,
            outcome,
            reason,
        };
        let kept = |cgroup, pids, reason| record(cgroup, pids, audit::OrphanOutcome::Kept, reason);
        let mut pins = match kernel::Enforcer::open_pinned(dir.to_path_buf()) {
            Ok(pins) => pins,
            Err(e) => return kept(None, 0, Some(format!("its pins cannot be read: {e:#}"))),
        };
        // Only maps pinned: no program of it is attached (maps are pinned before programs).
        let sessions = if pins.hooks().is_empty() {
            Vec::new()
        } else {
            match pins.sessions() {
                Ok(sessions) => sessions.into_iter().map(|(cgroup, _)| cgroup).collect(),
                Err(e) => {
                    return kept(None, 0, Some(format!("its sessions cannot be read: {e:#}")));
                }
            }
        };
        // Its programs confine its session as long as they are attached: the cgroup goes first,
        // and only once empty (a removed cgroup takes no process).
        let mut cgroup = None;
        for id in sessions {
            cgroup = Some(id);
            let Some(path) = find_cgroup(&self.hierarchy.mount, id) else {
                // Within the whole hierarchy, not found is gone; in a cgroup namespace (or a
                // mount of part of it), it may be outside the part seen here.
                if self.hierarchy.root == Path::new("/") {
                    continue;
                }
                let why = format!("its session cgroup (id {id}) is not visible here");
                return kept(cgroup, 0, Some(why));
            };
            let session = match SessionCgroup::existing(&self.hierarchy, &path) {
                Ok(session) => session,
                Err(e) => return kept(cgroup, 0, Some(format!("{e:#}"))),
            };
            let pids = session.pids().len();
            if pids > 0 {
                return kept(cgroup, pids, None);
            }
            if let Err(e) = session.remove_empty() {
                return kept(cgroup, 0, Some(format!("{e:#}")));
            }
            // As the dead agent would have at its end: its hold, and its parent if no one else
            // holds it.
            if let Some(parent) = path.parent().filter(|p| *p != self.parent.path) {
                parent::remove_dead_holds(parent);
            }
        }
        match pins.unload() {
            Ok(()) => record(cgroup, 0, audit::OrphanOutcome::Removed, None),
            Err(e) => kept(cgroup, 0, Some(format!("{e:#}"))),
        }
    }
}

/// The stderr line of a cleanup.
fn said(r: &audit::OrphanCleanup) -> String {
    let whose = format!("session {} of an fp run killed (pid {})", r.session, r.pid);
    match (r.outcome, &r.reason) {
        (audit::OrphanOutcome::Removed, _) => {
            format!("{whose}: no process was left; its programs and cgroup are removed")
        }
        (audit::OrphanOutcome::Kept, None) => format!(
            "{whose}: {} process(es) still run in it, confined by its programs, which stay \
             attached until a later fp run or fp daemon finds them gone",
            r.pids
        ),
        (audit::OrphanOutcome::Kept, Some(why)) => {
            format!("{whose}: left as it is, still confined: {why}")
        }
    }
}
