//! `[audit] on_full = "freeze"` (docs/audit.md, "Disk full"): while the audit log cannot be
//! written, every session is frozen (cgroup v2 `cgroup.freeze`), so that none of its processes
//! acts without a record; once the log can be written again they are thawed. Each change is a
//! `session-freeze` record: the freeze is queued while the log cannot take it and written first
//! when it can, before the thaw.
use std::path::Path;

use super::Manager;
use crate::audit::{self, Health, OnFull};

impl Manager {
    /// Freezes every session while the audit log cannot be written and `on_full` says freeze,
    /// and thaws every frozen one otherwise (also those a previous agent froze before it died).
    /// Reads the writer's health itself, so that calls racing each other end in its last state.
    pub fn match_audit_health(&self, on_full: OnFull) {
        let Some(log) = self.audit_log() else { return };
        let health = log.health();
        let freeze = on_full == OnFull::Freeze && health != Health::Ok;
        let mut changed = Vec::new();
        {
            let sessions = self.sessions.lock().unwrap();
            for live in sessions.values() {
                match set_frozen(&live.cgroup.path, freeze) {
                    Ok(true) => changed.push(live.context.session.clone()),
                    Ok(false) => {}
                    Err(e) => tracing::error!(
                        "session {}: cannot set cgroup.freeze to {}: {e}",
                        live.context.session,
                        freeze as u8
                    ),
                }
            }
        }
        if changed.is_empty() {
            return;
        }
        let (state, reason) = match health {
            Health::Ok => ("thawed", "the audit log can be written again".to_owned()),
            _ => ("frozen", format!("the audit log cannot be written ({})", health.cause())),
        };
        tracing::warn!("sessions {state}: {}: {reason}", changed.join(", "));
        changed.sort();
        self.record(audit::Event::SessionFreeze(audit::SessionFreeze {
            sessions: changed,
            state: state.into(),
            reason,
        }));
    }
}

/// Sets the cgroup `dir` frozen or thawed; whether that changed it.
fn set_frozen(dir: &Path, frozen: bool) -> std::io::Result<bool> {
    let file = dir.join("cgroup.freeze");
    let now = std::fs::read_to_string(&file)?.trim() == "1";
    if now == frozen {
        return Ok(false);
    }
    std::fs::write(&file, if frozen { "1" } else { "0" })?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_is_frozen_and_thawed_once() {
        let dir = std::env::temp_dir().join(format!("fp-freeze-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cgroup.freeze"), "0\n").unwrap();
        assert!(set_frozen(&dir, true).unwrap());
        assert!(!set_frozen(&dir, true).unwrap());
        assert!(set_frozen(&dir, false).unwrap());
        assert_eq!(std::fs::read_to_string(dir.join("cgroup.freeze")).unwrap(), "0");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
