//! What is asked: who opens what, the request the broker wants decided, the pending approval as
//! it is shown, and the answer to a held open.
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ApprovalId, OutcomeKind, PromptOutcome};

/// How the opener opens the file (from its open flags; an unknown mode counts as read-write).
/// The policy ops that decide it, and its name, are in [`crate::op`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    Read,
    Write,
    ReadWrite,
    Exec,
}

/// Who opens what, and the rule that prompts: what approvals and outcomes describe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Open {
    pub session: String,
    pub agent: String,
    /// The opening thread (of an approval: the first one).
    pub pid: i32,
    pub comm: String,
    pub access: Access,
    /// As text; bytes that are not UTF-8 show as U+FFFD.
    pub path: String,
    /// The deciding rule as written; None when the default decided.
    pub rule: Option<String>,
}

/// A pending approval, as lists, subscribers and `approval_command` see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub id: ApprovalId,
    #[serde(flatten)]
    pub open: Open,
    /// RFC 3339, UTC.
    pub opened_at: String,
    pub age_ms: u64,
    /// Opens held by this approval (same session, same path).
    pub opens: u32,
}

/// Answers one held open: true allows it. The broker's answers write to the fanotify group.
pub type Answer = Box<dyn FnOnce(bool) + Send>;

/// An open the broker wants decided.
#[derive(Clone, Debug)]
pub struct OpenRequest {
    pub open: Open,
    /// The path's bytes: what batching and grants match.
    pub path: Vec<u8>,
}

impl OpenRequest {
    /// `open` with `path` as its path.
    pub fn new(mut open: Open, path: Vec<u8>) -> Self {
        open.path = String::from_utf8_lossy(&path).into_owned();
        OpenRequest { open, path }
    }

    pub(super) fn outcome(&self, kind: OutcomeKind, latency: Duration) -> PromptOutcome {
        PromptOutcome {
            approval: None,
            open: self.open.clone(),
            outcome: kind,
            decided_by: None,
            latency_us: latency.as_micros() as u64,
            opens: 1,
            grant: None,
            reason: None,
        }
    }
}
