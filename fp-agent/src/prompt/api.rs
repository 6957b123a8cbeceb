//! The approval requests and replies of the control socket (JSON lines, each with `"v": 1`, as
//! the daemon's protocol): `list_approvals`, `decide_approval`, `watch_approvals`. The daemon
//! routes them here after checking that the peer may decide (root or the approvers' group, never
//! a session process).
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use super::approvals::{
    Approval, ApprovalEvent, ApprovalId, Approvals, DecideError, Decider, Decision, PromptOutcome,
    Remember, Surface,
};
use super::command::parse_duration;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ApprovalRequest {
    ListApprovals,
    DecideApproval(DecideRequest),
    /// After the `watching` reply, every line is an `approval_event` (or `missed`).
    WatchApprovals,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecideRequest {
    pub id: ApprovalId,
    pub decision: Decision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remember: Option<Remember>,
    /// How long the remembered grant lasts (`10m`); without it, until the session ends.
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// What the client is: `cli` for `fp approve`/`fp deny` [default: socket].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface: Option<Surface>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ApprovalReply {
    Approvals {
        approvals: Vec<Approval>,
    },
    Decided {
        outcome: PromptOutcome,
    },
    Watching,
    ApprovalEvent {
        event: ApprovalEvent,
    },
    /// The watcher fell behind and missed `count` events (they are in the audit log).
    Missed {
        count: u64,
    },
    Error {
        error: ApprovalError,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalError {
    pub code: ApprovalErrorCode,
    pub message: String,
}

/// Stable codes; the first three share the daemon's spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalErrorCode {
    BadRequest,
    PermissionDenied,
    NotFound,
    /// Another surface or the timeout decided first; the message says who and how.
    AlreadyDecided,
}

fn error(code: ApprovalErrorCode, message: impl Into<String>) -> ApprovalReply {
    ApprovalReply::Error { error: ApprovalError { code, message: message.into() } }
}

/// Serves a list or decide request from a peer allowed to decide (uid `peer_uid`).
/// `watch_approvals` is the daemon's to stream: reply `watching`, then forward
/// [`Approvals::subscribe`] through [`watch_reply`].
pub fn handle(approvals: &Approvals, request: ApprovalRequest, peer_uid: u32) -> ApprovalReply {
    match request {
        ApprovalRequest::ListApprovals => ApprovalReply::Approvals { approvals: approvals.list() },
        ApprovalRequest::WatchApprovals => ApprovalReply::Watching,
        ApprovalRequest::DecideApproval(d) => {
            let duration = match d.duration.as_deref().map(parse_duration).transpose() {
                Ok(duration) => duration,
                Err(e) => return error(ApprovalErrorCode::BadRequest, format!("for: {e}")),
            };
            let decider = Decider { uid: peer_uid, surface: d.surface.unwrap_or(Surface::Socket) };
            match approvals.decide(d.id, d.decision, d.remember, duration, decider) {
                Ok(outcome) => ApprovalReply::Decided { outcome },
                Err(e) => {
                    let code = match e {
                        DecideError::UnknownId(_) => ApprovalErrorCode::NotFound,
                        DecideError::AlreadyDecided(_) => ApprovalErrorCode::AlreadyDecided,
                        DecideError::RememberOnDeny => ApprovalErrorCode::BadRequest,
                    };
                    error(code, e.to_string())
                }
            }
        }
    }
}

/// One streamed line of a watcher; None when the store is gone (end the stream).
pub fn watch_reply(
    received: Result<ApprovalEvent, broadcast::error::RecvError>,
) -> Option<ApprovalReply> {
    match received {
        Ok(event) => Some(ApprovalReply::ApprovalEvent { event }),
        Err(broadcast::error::RecvError::Lagged(count)) => Some(ApprovalReply::Missed { count }),
        Err(broadcast::error::RecvError::Closed) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_shapes() {
        let r: ApprovalRequest = serde_json::from_str(
            r#"{"op":"decide_approval","id":3,"decision":"approve","remember":"dir","for":"10m"}"#,
        )
        .unwrap();
        assert_eq!(
            r,
            ApprovalRequest::DecideApproval(DecideRequest {
                id: 3,
                decision: Decision::Approve,
                remember: Some(Remember::Dir),
                duration: Some("10m".into()),
                surface: None,
            })
        );
        let list: ApprovalRequest = serde_json::from_str(r#"{"op":"list_approvals"}"#).unwrap();
        assert_eq!(list, ApprovalRequest::ListApprovals);
        let reply = serde_json::to_value(error(ApprovalErrorCode::AlreadyDecided, "x")).unwrap();
        assert_eq!(reply["type"], "error");
        assert_eq!(reply["error"]["code"], "already_decided");
    }
}
