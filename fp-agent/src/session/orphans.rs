//! What an `fp run` killed (SIGKILL) leaves behind: its embedded agent's programs, still attached
//! through the links pinned in its pin directory, and its session cgroup, whose processes those
//! programs go on confining. The next agent to start (an `fp run` or the daemon) cleans up after
//! it: once no process is left in the session it removes the cgroup, then the pins; while one is,
//! it leaves both (a session's process is never unconfined) and cleans up later: at a later start,
//! or, in the daemon, at one of its periodic checks. Each is said on stderr and recorded
//! (`orphan-cleanup`).
//!
//! A pin directory names its owner by pid and start time (`run-<pid>-<start>`, the start time in
//! clock ticks since boot, field 22 of `/proc/<pid>/stat`): a reused pid does not come back with
//! the start time of the process that had it before within a boot, and pins do not outlive one.
use std::{io, path::Path};

use anyhow::Context as _;

use super::{SessionCgroup, find_cgroup, manager::Manager};
use crate::{audit, kernel};

/// The process an embedded agent's pin directory belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    /// In clock ticks since boot; `None` in the names older fp versions gave (`run-<pid>`).
    pub start: Option<u64>,
}

impl Owner {
    /// This process.
    pub fn current() -> anyhow::Result<Self> {
        let pid = std::process::id();
        let (_, start) = stat(pid).with_context(|| format!("reading /proc/{pid}/stat"))?;
        Ok(Self { pid, start: Some(start) })
    }

    /// The name of its pin directory, which is also its session's and session cgroup's.
    pub fn name(&self) -> String {
        match self.start {
            Some(start) => format!("run-{}-{start}", self.pid),
            None => format!("run-{}", self.pid),
        }
    }

    /// The owner a pin directory's name names, if it is an embedded agent's.
    pub fn parse(name: &str) -> Option<Self> {
        let rest = name.strip_prefix("run-")?;
        let (pid, start) = match rest.split_once('-') {
            Some((pid, start)) => (pid, Some(number(start)?)),
            None => (rest, None),
        };
        Some(Self { pid: u32::try_from(number(pid)?).ok()?, start })
    }

    /// Whether it still runs: its pid names a process started when it was, not a zombie. A name
    /// without a start time is alive while any process has its pid. What cannot be read counts
    /// as alive.
    pub fn alive(&self) -> bool {
        match stat(self.pid) {
            Err(e) => e.kind() != io::ErrorKind::NotFound,
            Ok((state, start)) => {
                self.start.is_none_or(|s| s == start) && !matches!(state, 'Z' | 'X')
            }
        }
    }
}

/// Decimal digits only (no sign, no spaces), as fp writes them.
fn number(text: &str) -> Option<u64> {
    text.bytes().all(|b| b.is_ascii_digit()).then(|| text.parse().ok()).flatten()
}

/// The state and start time of process `pid`.
fn stat(pid: u32) -> io::Result<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat(&text).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, text))
}

/// The state (field 3) and start time (field 22) of a `/proc/<pid>/stat` line. The command name
/// (field 2, in parentheses) may hold spaces and parentheses: the fields after it follow the last
/// `)`.
fn parse_stat(text: &str) -> Option<(char, u64)> {
    let (_, after) = text.rsplit_once(')')?;
    let mut fields = after.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(22 - 4)?.parse().ok()?;
    Some((state, start))
}

impl Manager {
    /// Cleans up after each `fp run` that died leaving its pin directory under
    /// [`kernel::pin_root`] (see the module). Says on stderr and records what it did: the first
    /// time it finds one kept, and when it removes one.
    pub fn clean_orphans(&self) {
        let Ok(entries) = std::fs::read_dir(kernel::pin_root()) else { return };
        let mut seen = std::collections::BTreeSet::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(owner) = Owner::parse(&name) else { continue };
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
        // No link pinned: no program of it is attached (maps are pinned before links).
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
            // As the dead agent would have at its end: its parent, if no one else uses it.
            if let Some(parent) = path.parent().filter(|p| *p != self.parent.path) {
                let _ = std::fs::remove_dir(parent);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let owner = Owner { pid: 812, start: Some(4711) };
        assert_eq!(owner.name(), "run-812-4711");
        assert_eq!(Owner::parse("run-812-4711"), Some(owner));
        assert_eq!(Owner::parse("run-812"), Some(Owner { pid: 812, start: None }));
        for other in
            ["run-", "run-x", "run-812-", "run-812-x", "run--1", "run-+1", "v2", "run-1-2-3"]
        {
            assert_eq!(Owner::parse(other), None, "{other}");
        }
        assert_eq!(Owner::parse("run-99999999999"), None, "not a pid");
    }

    #[test]
    fn stat_lines_parse_whatever_the_command_name() {
        let tail = "S 1 812 812 0 -1 4194560 123 0 0 0 5 6 0 0 20 0 1 0 4711 12345 67 \
                    18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        for comm in ["fp", "a b", "a) (b", "))", "(", ") S 1 2 3"] {
            let line = format!("812 ({comm}) {tail}\n");
            assert_eq!(parse_stat(&line), Some(('S', 4711)), "{line}");
        }
        assert_eq!(parse_stat("812 (fp) Z 1 2"), None, "too short");
        assert_eq!(parse_stat("812 fp S"), None, "no command name");
    }

    #[test]
    fn this_process_is_alive_and_a_reused_pid_is_not_it() {
        let me = Owner::current().unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(me.alive());
        assert!(Owner { start: None, ..me }.alive());
        let start = me.start.unwrap();
        assert!(!Owner { start: Some(start + 1), ..me }.alive(), "another start time");
        // pid_max is at most 2^22: no process has this pid.
        assert!(!Owner { pid: 1 << 23, start: None }.alive());
    }
}
