//! Remembered grants: what an approval with `--remember` keeps, whether it answers a later open,
//! and its entry in the kernel's `GRANTS` map.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fp_common::kernel::{GrantScope, GrantValue, after_grant};
use fp_common::policy::{PrefixKeyData, TableVerdict};
use serde::{Deserialize, Serialize};

use super::{Access, Decider, OpenRequest, Remember, State, rfc3339};

/// A remembered approval: later prompt-tier opens it covers are allowed without asking.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub id: u64,
    pub session: String,
    pub scope: Remember,
    /// The approved path (`path`), its directory (`dir`), or empty (`session`).
    pub path: String,
    /// RFC 3339, UTC; None: until the session ends.
    pub expires_at: Option<String>,
    pub created_by: Decider,
    /// When it ends, CLOCK_BOOTTIME ns (the kernel's clock for it); 0: with the session.
    #[serde(skip)]
    pub(super) expires: u64,
    /// [`crate::policy::Op::bit`] mask of the ops the approved open needed: a grant answers only those (an
    /// approved read does not answer an open for reading and writing).
    #[serde(skip)]
    ops: u8,
    #[serde(skip)]
    key: Vec<u8>,
}

impl Grant {
    /// What the broker and the kernel both decide with.
    fn value(&self) -> GrantValue {
        GrantValue::new(self.scope.into(), self.ops, self.expires)
    }

    /// Whether this grant turns the prompt of an `access` of `session` on `path` into an allow at
    /// `now` (CLOCK_BOOTTIME ns): it must answer every op of the access.
    pub(super) fn allows(&self, session: &str, path: &[u8], access: Access, now: u64) -> bool {
        self.session == session
            && GrantScope::from(self.scope).covers(&self.key, path)
            && access.policy_ops().iter().all(|op| {
                after_grant(TableVerdict::Prompt, Some(&self.value()), *op, now)
                    == TableVerdict::Allow
            })
    }

    pub(super) fn live(&self, now: u64) -> bool {
        self.value().live(now)
    }

    /// This grant's entry in the kernel's `GRANTS` map for the session of cgroup `cgroup`
    /// (prefix length in bits, key, value); None if its path is longer than a key holds.
    pub fn kernel_entry(&self, cgroup: u64) -> Option<(u32, PrefixKeyData, GrantValue)> {
        let (bits, key) = GrantScope::from(self.scope).key(cgroup, &self.key)?;
        Some((bits, key, self.value()))
    }
}

/// The kernel's `GRANTS` entries for `grants`, whose sessions `cgroup_of` names by cgroup id:
/// grants of sessions it does not know and grants longer than a key are left to the broker;
/// grants with the same key merge into the one that lasts longer.
pub fn kernel_grants(
    grants: &[Grant],
    cgroup_of: impl Fn(&str) -> Option<u64>,
) -> Vec<(u32, PrefixKeyData, GrantValue)> {
    let mut entries: HashMap<(u32, PrefixKeyData), GrantValue> = HashMap::new();
    for (bits, key, value) in grants.iter().filter_map(|g| g.kernel_entry(cgroup_of(&g.session)?)) {
        let merged = entries.get(&(bits, key)).map_or(value, |other| value.longer(*other));
        entries.insert((bits, key), merged);
    }
    entries.into_iter().map(|((bits, key), value)| (bits, key, value)).collect()
}

/// CLOCK_BOOTTIME in ns: grants expire on the clock the BPF programs read
/// (`bpf_ktime_get_boot_ns`). Unreadable: the end of time, so every expiring grant has expired.
pub(super) fn boottime_ns() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME) {
        Ok(t) => t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64,
        Err(_) => u64::MAX,
    }
}

/// Called with every live grant when the store starts (none) and whenever a grant is created,
/// expires or loses its session; calls are serialized, each with the grants at its time (the host mirrors them into the
/// kernel). It must not open files on a marked filesystem or wait on the broker.
pub type GrantsChanged = Arc<dyn Fn(&[Grant]) + Send + Sync>;

pub(super) fn new_grant(
    state: &mut State,
    request: &OpenRequest,
    scope: Remember,
    duration: Option<Duration>,
    decider: Decider,
    boottime: u64,
) -> Grant {
    let key = match scope {
        Remember::Session => Vec::new(),
        Remember::Path => request.path.clone(),
        Remember::Dir => match request.path.iter().rposition(|b| *b == b'/') {
            Some(0) => b"/".to_vec(),
            Some(i) => request.path[..i].to_vec(),
            None => request.path.clone(),
        },
    };
    let id = state.next_grant;
    state.next_grant += 1;
    Grant {
        id,
        session: request.open.session.clone(),
        scope,
        path: String::from_utf8_lossy(&key).into_owned(),
        expires_at: duration.map(|d| rfc3339(SystemTime::now() + d)),
        created_by: decider,
        expires: duration.map_or(0, |d| boottime.saturating_add(d.as_nanos() as u64).max(1)),
        ops: request.open.access.op_bits(),
        key,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{CLI, request};
    use super::*;

    #[test]
    fn grants_allow_their_scope_until_they_expire() {
        let mut state = State::default();
        let now = boottime_ns();
        let r = request("s1", "/ws/secrets/key");
        let dir = new_grant(&mut state, &r, Remember::Dir, None, CLI, now);
        assert_eq!(dir.path, "/ws/secrets");
        assert!(dir.allows("s1", b"/ws/secrets/other", Access::Read, now));
        assert!(!dir.allows("s1", b"/ws/secrets-not", Access::Read, now));
        assert!(!dir.allows("s2", b"/ws/secrets/other", Access::Read, now));
        let path = new_grant(&mut state, &r, Remember::Path, None, CLI, now);
        assert!(path.allows("s1", b"/ws/secrets/key", Access::Read, now));
        assert!(!path.allows("s1", b"/ws/secrets/key2", Access::Read, now));
        let session = new_grant(&mut state, &r, Remember::Session, None, CLI, now);
        assert!(session.allows("s1", b"/anything", Access::Read, u64::MAX));
        let root = new_grant(&mut state, &request("s1", "/top"), Remember::Dir, None, CLI, now);
        assert_eq!(root.path, "/");
        assert!(root.allows("s1", b"/etc/x", Access::Read, now));
        let brief = new_grant(&mut state, &r, Remember::Path, Some(Duration::ZERO), CLI, now);
        assert!(!brief.allows("s1", b"/ws/secrets/key", Access::Read, now));
        let ten = new_grant(&mut state, &r, Remember::Dir, Some(Duration::from_secs(10)), CLI, now);
        assert!(ten.allows("s1", b"/ws/secrets/x", Access::Read, now + 9_999_999_999));
        assert!(!ten.allows("s1", b"/ws/secrets/x", Access::Read, now + 10_000_000_000));
        assert!(
            !path.allows("s1", b"/ws/secrets/key", Access::ReadWrite, now),
            "an approved read does not answer an open for reading and writing"
        );
        assert!(path.allows("s1", b"/ws/secrets/key", Access::Exec, now), "exec decides as read");
    }

    #[test]
    fn kernel_entries_merge_grants_with_one_key_and_skip_unknown_sessions() {
        let mut state = State::default();
        let now = boottime_ns();
        let r = request("s1", "/ws/secrets/key");
        let short = Some(Duration::from_secs(5));
        let grants = [
            new_grant(&mut state, &r, Remember::Dir, short, CLI, now),
            new_grant(&mut state, &r, Remember::Dir, None, CLI, now),
            new_grant(&mut state, &r, Remember::Path, short, CLI, now),
            new_grant(&mut state, &request("s2", "/x"), Remember::Session, None, CLI, now),
        ];
        let entries = kernel_grants(&grants, |s| (s == "s1").then_some(42));
        assert_eq!(entries.len(), 2, "{entries:?}");
        let dir = GrantScope::Dir.key(42, b"/ws/secrets").unwrap();
        let merged = entries.iter().find(|(b, k, _)| (*b, *k) == dir).unwrap();
        assert_eq!(
            merged.2,
            GrantValue::new(GrantScope::Dir, crate::policy::Op::Read.bit(), 0),
            "the longer-lived grant wins"
        );
        let long = request("s1", &format!("/{}", "x".repeat(300)));
        let long = new_grant(&mut state, &long, Remember::Path, None, CLI, now);
        assert!(long.kernel_entry(42).is_none());
    }
}
