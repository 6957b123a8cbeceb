//! What a broker is given: its config (the filesystems to mark, timeouts, the callbacks through
//! which the kernel half follows it) and the host's sessions, as it asks about them.
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::approvals::GrantsChanged;
use super::command::ApprovalCommand;
use crate::policy::EffectivePolicy;
use crate::session::{Cgroup2, SessionContext};

/// The host's sessions, as the broker asks about them.
///
/// Called on the broker thread for every event it sees: an implementation must never wait for a
/// lock that another thread may hold while it opens a file (loading a policy, writing the audit
/// log), or that open and the broker wait for each other. Hold a snapshot (`Arc` swapped under a
/// lock held only to clone or replace it).
pub trait SessionLookup: Send + Sync {
    /// The session whose cgroup directory is `cgroup` (an absolute path under the cgroup2
    /// mount). The broker asks for the opener's cgroup, then each ancestor.
    fn session(&self, cgroup: &Path) -> Option<SessionContext>;
    /// Every live session's policy: a file is cached as "never prompted" only when none of them
    /// prompts for it.
    fn policies(&self) -> Vec<Arc<EffectivePolicy>>;
}

#[derive(Clone)]
pub struct BrokerConfig {
    /// A path on each filesystem session processes can reach; each filesystem is marked whole.
    pub filesystems: Vec<PathBuf>,
    /// Undecided approvals are denied after this long.
    pub approval_timeout: Duration,
    pub approval_command: Option<ApprovalCommand>,
    pub cgroup2: Cgroup2,
    /// Most files cached as never prompted (one ignore mark each); the cache is flushed when full.
    pub ignore_cache_limit: usize,
    /// Called from the broker thread at least every `heartbeat_interval` while it serves events
    /// (the kernel half refreshes its heartbeat map here). It must not block or open files.
    pub heartbeat: Option<Heartbeat>,
    pub heartbeat_interval: Duration,
    /// Called with the opener's session cgroup and the (`st_dev`, `st_ino`) of a session's open
    /// once it is answered, before an allow reaches the opener (the kernel half stops refusing
    /// that session's reads of it as pending).
    pub settled: Option<Settled>,
    /// Called with every live grant at start (none) and whenever they change (the kernel half
    /// mirrors them into its `GRANTS` map, so the opens they cover are allowed without a pending
    /// entry).
    pub grants_changed: Option<GrantsChanged>,
}

pub type Heartbeat = Arc<dyn Fn() + Send + Sync>;
pub type Settled = Arc<dyn Fn(u64, u64, u64) + Send + Sync>;

impl BrokerConfig {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
    pub const DEFAULT_IGNORE_CACHE_LIMIT: usize = 65_536;
    pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);

    pub fn new(cgroup2: Cgroup2, filesystems: Vec<PathBuf>) -> Self {
        BrokerConfig {
            filesystems,
            approval_timeout: Self::DEFAULT_TIMEOUT,
            approval_command: None,
            cgroup2,
            ignore_cache_limit: Self::DEFAULT_IGNORE_CACHE_LIMIT,
            heartbeat: None,
            heartbeat_interval: Self::DEFAULT_HEARTBEAT_INTERVAL,
            settled: None,
            grants_changed: None,
        }
    }
}
