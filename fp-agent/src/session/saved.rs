//! The state directory of an agent that restarts (the daemon's): each session it hosts, saved for
//! the next agent to take over, and the agent itself.
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::Mode;
use crate::policy::SavedPolicy;

/// A session as saved in the state directory: what a restarted agent needs to take it over.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct SavedSession {
    pub name: String,
    pub agent: String,
    pub cgroup: u64,
    pub path: PathBuf,
    #[serde(flatten)]
    pub settings: Settings,
    pub policy_hash: String,
    pub policy: SavedPolicy,
}

/// What a session keeps across reloads and agent restarts besides its name and policy.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Settings {
    pub mode: Mode,
    /// The user it runs as.
    pub uid: u32,
    /// What `<workspace>` expands to in its policy.
    pub workspace: Option<PathBuf>,
    /// RFC 3339, UTC.
    pub started_at: String,
}

/// The agent whose sessions the state directory holds: a restarted agent takes over its pinned
/// programs only if they confine the same cgroups (the same parent, its sessions at the level the
/// programs were loaded with).
#[derive(serde::Serialize, serde::Deserialize, PartialEq)]
pub(super) struct SavedAgent {
    pub abi: u32,
    pub parent: PathBuf,
    pub sessions: crate::kernel::SessionCgroups,
}

/// Saves `saved` in `state` for a restarted agent; a session that cannot be saved would be killed
/// by the next agent, so a failure is only logged.
pub(super) fn save(state: &Path, saved: &SavedSession) {
    if let Err(e) = write_json(&session_file(state, saved.cgroup), saved) {
        tracing::error!("saving session {}: {e:#}", saved.name);
    }
}

/// Removes the saved session of cgroup `cgroup`.
pub(super) fn forget(state: &Path, cgroup: u64) {
    let _ = std::fs::remove_file(session_file(state, cgroup));
}

fn session_file(state: &Path, cgroup: u64) -> PathBuf {
    state.join(format!("session-{cgroup}.json"))
}

/// The sessions saved in `state`, each with its file.
pub(super) fn saved_sessions(
    state: &Path,
) -> anyhow::Result<Vec<(PathBuf, anyhow::Result<SavedSession>)>> {
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

pub(super) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Writes `value` to `path` whole or not at all (a temporary file renamed over it).
pub(super) fn write_json(path: &Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file =
        std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    serde_json::to_writer(&mut file, value)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}
