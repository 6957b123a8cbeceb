//! What is asked: who opens what, the request the broker wants decided, the pending approval as
//! it is shown, and the answer to a held open.
use std::time::Duration;

use fp_common::policy::Op;
use serde::{Deserialize, Serialize};

use crate::audit;

use super::{ApprovalId, OutcomeKind, PromptOutcome};

/// How the opener opens the file (from its open flags; an unknown mode counts as read-write).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    Read,
    Write,
    ReadWrite,
    Exec,
}

/// The audit op of a prompt's outcome: an open for reading and writing is recorded as a write.
impl From<Access> for audit::Op {
    fn from(access: Access) -> audit::Op {
        match access {
            Access::Read => audit::Op::Read,
            Access::Write | Access::ReadWrite => audit::Op::Write,
            Access::Exec => audit::Op::Exec,
        }
    }
}

impl Access {
    /// The policy ops that decide this access; exec decides as read, as the kernel does.
    pub fn policy_ops(self) -> &'static [Op] {
        match self {
            Access::Read | Access::Exec => &[Op::Read],
            Access::Write => &[Op::Write],
            Access::ReadWrite => &[Op::Read, Op::Write],
        }
    }

    /// [`Op::bit`] mask of [`Self::policy_ops`].
    pub fn op_bits(self) -> u8 {
        self.policy_ops().iter().fold(0, |bits, op| bits | op.bit())
    }

    /// The access in a sentence (`fp: approved read and write /path ...`).
    pub fn verb(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::ReadWrite => "read and write",
            Access::Exec => "execute",
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_access_is_recorded_as_an_op_its_policy_ops_decide() {
        for access in [Access::Read, Access::Write, Access::ReadWrite, Access::Exec] {
            let recorded = Op::from(audit::Op::from(access));
            assert!(access.policy_ops().contains(&recorded), "{access:?}");
        }
    }
}
