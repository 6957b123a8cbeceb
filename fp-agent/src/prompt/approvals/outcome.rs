//! What comes of an approval: the outcome the audit log records, the events subscribers receive,
//! and why a decision was not taken.
use serde::{Deserialize, Serialize};

use super::{Approval, ApprovalId, Decider, Grant, Open};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeKind {
    Approved,
    Denied,
    TimedOut,
    /// The broker could not decide (no path, shutdown): denied.
    FailedClosed,
    /// A remembered grant allowed the open without asking.
    Granted,
    /// Not a prompt: the kernel tables deferred the open and the exact evaluator denied it.
    DeferDenied,
}

/// One prompt outcome, for the host's audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptOutcome {
    /// None when no approval was opened (granted, or failed closed before one).
    pub approval: Option<ApprovalId>,
    #[serde(flatten)]
    pub open: Open,
    pub outcome: OutcomeKind,
    pub decided_by: Option<Decider>,
    /// From the first held open to the answer.
    pub latency_us: u64,
    pub opens: u32,
    /// The grant this decision created, or the one that allowed the open.
    pub grant: Option<Grant>,
    /// Why the broker failed closed.
    pub reason: Option<String>,
}

/// What subscribers receive.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ApprovalEvent {
    Opened { approval: Approval },
    Decided { outcome: PromptOutcome },
}

/// Why a decision was not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecideError {
    UnknownId(ApprovalId),
    /// Somebody (or the timeout) decided first.
    AlreadyDecided(Box<PromptOutcome>),
    /// `remember`/`for` with a denial.
    RememberOnDeny,
}

impl std::fmt::Display for DecideError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecideError::UnknownId(id) => write!(f, "no pending approval {id}"),
            DecideError::AlreadyDecided(o) => {
                let by = o.decided_by.map_or("fp".to_string(), |d| {
                    format!("uid {} via {}", d.uid, serde_plain(&d.surface))
                });
                write!(
                    f,
                    "approval {} was already decided: {} by {by}",
                    id_of(o),
                    serde_plain(&o.outcome)
                )
            }
            DecideError::RememberOnDeny => {
                write!(f, "--remember and --for apply to approvals only")
            }
        }
    }
}

fn id_of(o: &PromptOutcome) -> String {
    o.approval.map_or("-".to_string(), |id| id.to_string())
}

/// A unit enum's serde name (`timed-out`, `cli`).
pub(crate) fn serde_plain<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

impl std::error::Error for DecideError {}
