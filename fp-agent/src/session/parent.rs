//! The cgroup sessions are created in (`<cgroup2 mount>/fp` unless configured), shared by every
//! agent on the host: the daemon and each embedded `fp run`. Each agent holds it for its
//! lifetime by an empty child cgroup of its own, `agent-<pid>-<start>` (see [`Owner`]): a cgroup
//! with a child cannot be removed, so no agent's end removes it under another. Its programs know
//! only its level (`kernel::SessionCgroups`), and each session by its own cgroup id. The last
//! agent out removes it; holds of agents that died are removed by the next agent's orphan
//! cleanup. Nothing ever runs in a hold.
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::Cgroup2;
use crate::{kernel, owner::Owner};

/// The prefix of a hold's name, before its agent's pid and start time.
pub const HOLD: &str = "agent-";

/// The parent cgroup, as this agent holds it.
pub(super) struct Parent {
    pub path: PathBuf,
    /// This agent's hold on it (none in the unit tests' fake hierarchy).
    pub hold: Option<PathBuf>,
}

impl Parent {
    /// Holds `path` (created if missing) for this agent, and says where its sessions sit.
    pub fn hold(
        hierarchy: &Cgroup2,
        path: PathBuf,
    ) -> anyhow::Result<(Self, kernel::SessionCgroups)> {
        let hold = path.join(Owner::current()?.name(HOLD));
        // Another agent's end may remove an empty parent between the two: made again, then held.
        let mut tries = 0;
        loop {
            std::fs::create_dir_all(&path)
                .with_context(|| format!("creating cgroup {}", path.display()))?;
            match std::fs::create_dir(&hold) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 100 => tries += 1,
                Err(e) => {
                    return Err(e).with_context(|| format!("creating cgroup {}", hold.display()));
                }
            }
        }
        let level = match hierarchy.level_of(&path) {
            Ok(level) => level + 1,
            Err(e) => {
                release(&path, &hold);
                return Err(e);
            }
        };
        let parent = Self { path, hold: Some(hold) };
        Ok((parent, kernel::SessionCgroups { level }))
    }

    /// Lets it go: the hold goes, and the parent too if no one else holds it or has a session
    /// in it.
    pub fn release(&self) {
        if let Some(hold) = &self.hold {
            release(&self.path, hold);
        }
    }
}

fn release(parent: &Path, hold: &Path) {
    let _ = std::fs::remove_dir(hold);
    let _ = std::fs::remove_dir(parent);
}

/// Whether `name`, a child of the parent, is an agent's hold (not a session).
pub(super) fn is_hold(name: &str) -> bool {
    Owner::parse(HOLD, name).is_some()
}

/// Removes the holds in `parent` of agents that died, then `parent` if no one holds it or has a
/// session in it.
pub(super) fn remove_dead_holds(parent: &Path) {
    crate::owner::remove_dead(parent, HOLD);
    let _ = std::fs::remove_dir(parent);
}
