//! The control socket protocol (docs/api.md): JSON lines, one request per line, one reply per
//! request, every message carrying the protocol version `"v"`. One vocabulary for the daemon's
//! sessions and the prompt tier's approvals (docs/prompt.md), shared by the server and the client.
//!
//! A request is `{"v":1,"op":"<op>",...}`; a reply is `{"v":1,"type":"<type>",...}`, and an error
//! reply is `{"v":1,"type":"error","error":{"code":"<code>","message":"..."}}` whose `code` is
//! stable (clients match on it; humans read the message).
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{
    policy::UnreadableBase,
    prompt::{
        Approval, ApprovalEvent, ApprovalId, DecideError, Decision, PromptOutcome, Remember,
        Surface,
    },
};

/// The protocol version this build speaks.
pub const VERSION: u32 = 1;

/// The longest request line accepted, newline excluded (an inline policy fits many times over).
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// A request, as the `op` field names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    CreateSession(CreateSession),
    ListSessions,
    EndSession {
        id: String,
    },
    /// The session's command exited with `exit_code` (fp's exit status): its `session-end`
    /// record carries it. Sent by the `fp run` that created the session, which alone can wait
    /// for the command; the session still ends when its last process exits.
    CommandExited {
        id: String,
        exit_code: i32,
    },
    ReloadSession(Reload),
    Status,
    /// Turns the connection into an event stream: after the `subscribed` reply every line is an
    /// `event` until the client disconnects.
    Subscribe,
    /// The prompt tier's pending approvals.
    ListApprovals,
    DecideApproval(DecideApproval),
    /// Turns the connection into a stream of approvals: after the `watching` reply every line is
    /// an `approval_event` (or `missed`) until the client disconnects.
    WatchApprovals,
}

/// Approve or deny a pending approval (`fp approve`, `fp deny`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecideApproval {
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

pub use crate::session::Mode;

/// Where a session's policy comes from: a per-agent policy file, inline policy text, or neither
/// (the daemon's default policy), layered over an operator config.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicySource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PathBuf>,
    /// The text of a policy file, for clients whose policy is not on the daemon's filesystem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_text: Option<String>,
    /// The operator config layered under the policy [default: the daemon's session config].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<PathBuf>,
    /// A shipped profile layered under the policy's rules (`claude-code`, `codex`,
    /// `coding-agent`, `gemini-cli`); alone, the whole policy under `default = "deny"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

impl PolicySource {
    /// What a client sends for `policy` and `config`: root names the files (the daemon reads
    /// them, and its errors name them); anyone else sends the policy's text, read here with the
    /// caller's own rights, since the daemon reads no file for them.
    pub fn for_caller(
        policy: Option<&Path>,
        config: Option<&Path>,
        profile: Option<&str>,
    ) -> std::io::Result<Self> {
        let profile = profile.map(str::to_owned);
        if nix::unistd::geteuid().is_root() {
            return Ok(PolicySource {
                policy: policy.map(std::path::absolute).transpose()?,
                policy_text: None,
                config: config.map(std::path::absolute).transpose()?,
                profile,
            });
        }
        if let Some(config) = config {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "--config {}: only root may layer a config file through the daemon (the \
                     daemon's own config is layered under the policy)",
                    config.display()
                ),
            ));
        }
        let policy_text = policy
            .map(|p| {
                crate::input::read_text(p, crate::input::POLICY_MAX).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("reading {}: {e}", p.display()))
                })
            })
            .transpose()?;
        Ok(PolicySource { policy: None, policy_text, config: None, profile })
    }

    pub fn validate(&self) -> Result<(), ApiError> {
        if self.policy.is_some() && self.policy_text.is_some() {
            return Err(ApiError::new(
                ErrorCode::BadRequest,
                "`policy` and `policy_text` are exclusive: send one of them",
            ));
        }
        let relative = [&self.policy, &self.config].into_iter().flatten().find(|p| p.is_relative());
        match relative {
            Some(p) => Err(ApiError::new(
                ErrorCode::BadRequest,
                format!("{} is relative: the daemon needs absolute paths", p.display()),
            )),
            None => Ok(()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateSession {
    /// The agent's name, as audit records and `fp sessions` show it.
    pub agent: String,
    #[serde(flatten)]
    pub source: PolicySource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// The user the session runs as (what `~` expands to).
    pub uid: u32,
    /// Absent: `[sessions] default_mode`. The server fills it in before the host sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// Record allowed decisions too, not only denials and prompts. Absent: `[sessions]
    /// full_audit`. The server fills it in before the host sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_audit: Option<bool>,
    /// The process to move into the session cgroup: a child of the connecting process, waiting
    /// to exec the session's command.
    pub pid: i32,
    /// What the session runs (argv, as given to `fp run`): recorded in its `session-start`.
    /// Informational; absent: `[]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reload {
    pub id: String,
    #[serde(flatten)]
    pub source: PolicySource,
}

/// A reply, as the `type` field names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    SessionCreated(SessionCreated),
    Sessions {
        sessions: Vec<SessionSummary>,
    },
    SessionEnded {
        id: String,
    },
    ExitNoted {
        id: String,
    },
    Reloaded(Reloaded),
    Status(Status),
    Subscribed,
    Event {
        event: Event,
    },
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
    /// This approvals watcher fell behind and missed `count` events (they are in the audit log).
    Missed {
        count: u64,
    },
    Error {
        error: ApiError,
    },
}

impl From<ApiError> for Reply {
    fn from(error: ApiError) -> Self {
        Reply::Error { error }
    }
}

/// One line on the wire: a reply with the protocol version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub v: u32,
    #[serde(flatten)]
    pub reply: Reply,
}

impl Message {
    /// The reply as a line, newline included.
    pub fn line(reply: Reply) -> Vec<u8> {
        let mut line = serde_json::to_vec(&Message { v: VERSION, reply })
            .unwrap_or_else(|e| internal_error_line(&e.to_string()));
        line.push(b'\n');
        line
    }
}

/// Serializing our own types cannot fail short of a bug; still, reply rather than panic.
fn internal_error_line(why: &str) -> Vec<u8> {
    let error = ApiError::new(ErrorCode::Internal, format!("cannot encode the reply: {why}"));
    serde_json::to_vec(&serde_json::json!({"v": VERSION, "type": "error", "error": error}))
        .unwrap_or_default()
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionCreated {
    pub id: String,
    pub cgroup_id: u64,
    /// sha256 of the effective policy, as the session-start audit record carries it.
    pub policy_hash: String,
    /// The runtime base's entries in the user's home that a safety floor makes unreadable in
    /// this session (absent when none is): `fp run` says so before the command starts.
    #[serde(default, skip_serializing_if = "UnreadableBase::is_empty")]
    pub unreadable_base: UnreadableBase,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reloaded {
    pub id: String,
    pub previous_policy_hash: String,
    pub policy_hash: String,
}

/// A running session as the daemon reports it: the session manager's own summary.
pub use crate::session::Summary as SessionSummary;

/// `fp status`: the daemon's own figures and what the session host reports of the kernel side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub daemon: DaemonInfo,
    #[serde(flatten)]
    pub host: HostStatus,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonInfo {
    pub pid: u32,
    pub version: String,
    pub protocol: u32,
    pub uptime_secs: u64,
    pub kernel_release: String,
}

/// The kernel side, as the [`SessionHost`](super::SessionHost) sees it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostStatus {
    /// Whether "bpf" is among the kernel's active LSMs.
    pub bpf_lsm: bool,
    /// The backend fp's programs enforce through (`bpf_lsm` or `fmod_ret`), and why
    /// (`fp kernel probe` says the same).
    #[serde(default)]
    pub backend: String,
    #[serde(default)]
    pub backend_why: String,
    pub attached_hooks: Vec<String>,
    pub maps: Vec<MapUsage>,
    pub sessions: u32,
    pub counters: Counters,
    /// Sessions of `fp run`s that were killed, kept confined while their processes live
    /// (docs/operations.md); the daemon removes them once those have exited. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orphans: Vec<Orphan>,
    /// The audit log's state (absent from a daemon that does not report it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditStatus>,
}

/// Whether the audit log can be written: while it cannot, new sessions are refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditStatus {
    pub log: std::path::PathBuf,
    /// `ok`, `no-space` or `read-only` (new sessions refused, records queued in memory) or
    /// `failed` (the writer stopped on an error; new sessions refused).
    pub health: String,
    /// Bytes free for the log on its filesystem (None: could not be read).
    pub free_bytes: Option<u64>,
    /// `[audit] space_left` in bytes (0: not looked at yet), and whether the free space is
    /// under it (the daemon's log warned).
    #[serde(default)]
    pub space_left: u64,
    #[serde(default)]
    pub low_space: bool,
    /// `[audit] on_full`: `refuse`, or `freeze` (the sessions are frozen while the health is
    /// not `ok`).
    #[serde(default)]
    pub on_full: crate::audit::OnFull,
}

/// A killed `fp run`'s session, still confined by the programs it left pinned: the last
/// `orphan-cleanup` record written of it (its outcome `kept`).
pub use crate::audit::OrphanCleanup as Orphan;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapUsage {
    pub name: String,
    pub used: u64,
    pub capacity: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Decision events read from the kernel.
    pub events: u64,
    /// Events the kernel could not deliver (counted by loss records in the audit log).
    pub losses: u64,
}

/// What subscribers receive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A decision, as its audit record (docs/audit-format.md).
    Decision {
        record: serde_json::Value,
    },
    SessionStarted {
        session: SessionSummary,
    },
    SessionEnded {
        id: String,
        reason: String,
    },
    PolicyReloaded(Reloaded),
    /// This subscriber fell behind and missed `count` events (they are in the audit log).
    Missed {
        count: u64,
    },
}

/// A refused request: a stable code and a message for humans.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError { code, message: message.into() }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code.as_str())
    }
}

impl std::error::Error for ApiError {}

/// A policy or config that does not load, with its file:line:col.
impl From<crate::policy::PolicyError> for ApiError {
    fn from(e: crate::policy::PolicyError) -> Self {
        ApiError::new(ErrorCode::InvalidPolicy, e.to_string())
    }
}

/// A decision the approval store refuses.
impl From<DecideError> for ApiError {
    fn from(e: DecideError) -> Self {
        let code = match e {
            DecideError::UnknownId(_) => ErrorCode::NotFound,
            DecideError::AlreadyDecided(_) => ErrorCode::AlreadyDecided,
            DecideError::RememberOnDeny => ErrorCode::BadRequest,
        };
        ApiError::new(code, e.to_string())
    }
}

/// Stable error codes; never renamed, only added to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not JSON.
    InvalidJson,
    /// The line exceeds [`MAX_REQUEST_BYTES`]; the daemon closes the connection after replying.
    LineTooLong,
    /// `v` is missing or a version this daemon does not speak.
    UnsupportedVersion,
    /// Valid JSON but not a valid request (unknown op, missing or unexpected field).
    BadRequest,
    /// The peer may not use the socket, or may not do this.
    PermissionDenied,
    /// No session, or no pending approval, with that id.
    NotFound,
    /// The policy or config does not load (the message carries file:line:col).
    InvalidPolicy,
    /// The daemon cannot serve this now (shutting down, audit log unavailable, kernel refused).
    Unavailable,
    /// A bug in fp.
    Internal,
    /// Another surface or the timeout decided the approval first; the message says who and how.
    AlreadyDecided,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidJson => "invalid_json",
            ErrorCode::LineTooLong => "line_too_long",
            ErrorCode::UnsupportedVersion => "unsupported_version",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::NotFound => "not_found",
            ErrorCode::InvalidPolicy => "invalid_policy",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal => "internal",
            ErrorCode::AlreadyDecided => "already_decided",
        }
    }
}

/// Parses one request line (newline excluded). The version is checked before the request so a
/// client of another version learns that first.
pub fn parse_request(line: &[u8]) -> Result<Request, ApiError> {
    let value: serde_json::Value = serde_json::from_slice(line)
        .map_err(|e| ApiError::new(ErrorCode::InvalidJson, format!("invalid JSON: {e}")))?;
    let serde_json::Value::Object(mut object) = value else {
        return Err(ApiError::new(ErrorCode::BadRequest, "a request is a JSON object"));
    };
    match object.remove("v") {
        Some(v) if v == VERSION => {}
        Some(v) => {
            return Err(ApiError::new(
                ErrorCode::UnsupportedVersion,
                format!("protocol version {v} is not supported; this daemon speaks v{VERSION}"),
            ));
        }
        None => {
            return Err(ApiError::new(
                ErrorCode::UnsupportedVersion,
                format!("missing \"v\": every request carries the protocol version ({VERSION})"),
            ));
        }
    }
    let request: Request = serde_json::from_value(serde_json::Value::Object(object.clone()))
        .map_err(|e| ApiError::new(ErrorCode::BadRequest, format!("invalid request: {e}")))?;
    reject_unknown_fields(&request, &object)?;
    Ok(request)
}

/// serde's `deny_unknown_fields` does not work with the flattened [`PolicySource`]: a field is
/// known when the parsed request serializes it back (unset optional fields may be sent as null).
fn reject_unknown_fields(
    request: &Request,
    sent: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), ApiError> {
    let serde_json::Value::Object(known) = serde_json::to_value(request).unwrap_or_default() else {
        return Ok(());
    };
    match sent.iter().find(|(key, value)| !known.contains_key(*key) && !value.is_null()) {
        Some((key, _)) => Err(ApiError::new(
            ErrorCode::BadRequest,
            format!(
                "unknown field `{key}` in a {} request",
                known.get("op").and_then(|op| op.as_str()).unwrap_or("")
            ),
        )),
        None => Ok(()),
    }
}

/// A request as a line, version and newline included.
pub fn request_line(request: &Request) -> Vec<u8> {
    let mut value = serde_json::to_value(request).unwrap_or_default();
    if let serde_json::Value::Object(object) = &mut value {
        object.insert("v".to_owned(), VERSION.into());
    }
    let mut line = serde_json::to_vec(&value).unwrap_or_default();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &str) -> ErrorCode {
        parse_request(line.as_bytes()).unwrap_err().code
    }

    #[test]
    fn requests_round_trip_through_their_lines() {
        let create = Request::CreateSession(CreateSession {
            agent: "claude".into(),
            source: PolicySource { policy: Some("/etc/fp/a.toml".into()), ..Default::default() },
            workspace: Some("/home/u/ws".into()),
            uid: 1000,
            mode: Some(Mode::Audit),
            full_audit: Some(true),
            pid: 42,
            command: vec!["make".into(), "-j4".into()],
        });
        let requests = [
            create,
            Request::ListSessions,
            Request::EndSession { id: "s1".into() },
            Request::CommandExited { id: "s1".into(), exit_code: 130 },
            Request::ReloadSession(Reload { id: "s1".into(), source: PolicySource::default() }),
            Request::Status,
            Request::Subscribe,
            Request::ListApprovals,
            Request::DecideApproval(DecideApproval {
                id: 3,
                decision: Decision::Approve,
                remember: Some(Remember::Dir),
                duration: Some("10m".into()),
                surface: Some(Surface::Cli),
            }),
            Request::WatchApprovals,
        ];
        for request in requests {
            let line = request_line(&request);
            assert_eq!(line.last(), Some(&b'\n'));
            assert_eq!(parse_request(&line[..line.len() - 1]).unwrap(), request);
        }
    }

    #[test]
    fn documented_examples_parse() {
        let line = r#"{"v":1,"op":"create_session","agent":"claude","policy":"/etc/fp/agents/claude.toml","workspace":"/home/alice/project","uid":1000,"mode":"enforce","pid":4242}"#;
        let Request::CreateSession(c) = parse_request(line.as_bytes()).unwrap() else { panic!() };
        assert_eq!((c.agent.as_str(), c.mode, c.full_audit), ("claude", Some(Mode::Enforce), None));
        assert_eq!(parse_request(br#"{"op":"status","v":1}"#).unwrap(), Request::Status);
    }

    #[test]
    fn approval_requests_have_their_wire_shapes() {
        let line = r#"{"v":1,"op":"decide_approval","id":3,"decision":"approve","remember":"dir","for":"10m"}"#;
        assert_eq!(
            parse_request(line.as_bytes()).unwrap(),
            Request::DecideApproval(DecideApproval {
                id: 3,
                decision: Decision::Approve,
                remember: Some(Remember::Dir),
                duration: Some("10m".into()),
                surface: None,
            })
        );
        let list = parse_request(br#"{"v":1,"op":"list_approvals"}"#).unwrap();
        assert_eq!(list, Request::ListApprovals);
        let reply = ApiError::new(ErrorCode::AlreadyDecided, "x");
        let reply: serde_json::Value =
            serde_json::from_slice(&Message::line(reply.into())).unwrap();
        assert_eq!(reply["type"], "error");
        assert_eq!(reply["error"]["code"], "already_decided");
        let missed: serde_json::Value =
            serde_json::from_slice(&Message::line(Reply::Missed { count: 4 })).unwrap();
        assert_eq!(missed, serde_json::json!({"v": 1, "type": "missed", "count": 4}));
    }

    /// Approval requests are versioned like every other request (they used to get `bad_request`).
    #[test]
    fn approval_requests_of_another_version_are_unsupported() {
        assert_eq!(code(r#"{"op":"list_approvals"}"#), ErrorCode::UnsupportedVersion);
        assert_eq!(code(r#"{"v":2,"op":"watch_approvals"}"#), ErrorCode::UnsupportedVersion);
        let decide = r#"{"v":0,"op":"decide_approval","id":1,"decision":"deny"}"#;
        assert_eq!(code(decide), ErrorCode::UnsupportedVersion);
        assert_eq!(code(r#"{"v":1,"op":"decide_approval","id":1}"#), ErrorCode::BadRequest);
        let unknown = r#"{"v":1,"op":"decide_approval","id":1,"decision":"deny","x":1}"#;
        assert_eq!(code(unknown), ErrorCode::BadRequest);
        assert_eq!(code(r#"{"v":1,"op":"list_approvals","x":1}"#), ErrorCode::BadRequest);
    }

    #[test]
    fn bad_lines_get_typed_errors() {
        assert_eq!(code("{"), ErrorCode::InvalidJson);
        assert_eq!(code("[1]"), ErrorCode::BadRequest);
        assert_eq!(code(r#"{"op":"status"}"#), ErrorCode::UnsupportedVersion);
        assert_eq!(code(r#"{"v":2,"op":"status"}"#), ErrorCode::UnsupportedVersion);
        assert_eq!(code(r#"{"v":"1","op":"status"}"#), ErrorCode::UnsupportedVersion);
        assert_eq!(code(r#"{"v":1,"op":"launch"}"#), ErrorCode::BadRequest);
        assert_eq!(code(r#"{"v":1,"op":"end_session"}"#), ErrorCode::BadRequest);
        assert_eq!(code(r#"{"v":1,"op":"status","x":1}"#), ErrorCode::BadRequest);
        let typo = r#"{"v":1,"op":"create_session","agent":"a","uid":0,"pid":1,"worksapce":"/w"}"#;
        assert_eq!(code(typo), ErrorCode::BadRequest);
        let nulls = r#"{"v":1,"op":"reload_session","id":"s1","policy":null,"config":null}"#;
        assert!(parse_request(nulls.as_bytes()).is_ok());
        assert_eq!(
            code(r#"{"v":1,"op":"create_session","agent":"a","uid":-1,"pid":1}"#),
            ErrorCode::BadRequest
        );
    }

    #[test]
    fn policy_errors_are_invalid_policy_with_their_position() {
        let text = "[file_policy]\ndefault = \"sometimes\"\n";
        let file = std::path::Path::new("/etc/fp/a.toml");
        let e = crate::policy::parse_str(file, text, crate::policy::FileKind::Policy).unwrap_err();
        let e = ApiError::from(e);
        assert_eq!(e.code, ErrorCode::InvalidPolicy);
        assert!(e.message.starts_with("/etc/fp/a.toml:2:11: error: invalid value"), "{e}");
    }

    #[test]
    fn policy_sources_are_checked() {
        let both = PolicySource {
            policy: Some("/a".into()),
            policy_text: Some(String::new()),
            ..Default::default()
        };
        assert_eq!(both.validate().unwrap_err().code, ErrorCode::BadRequest);
        let relative = PolicySource { config: Some("c.toml".into()), ..Default::default() };
        assert_eq!(relative.validate().unwrap_err().code, ErrorCode::BadRequest);
        assert!(PolicySource::default().validate().is_ok());
    }

    #[test]
    fn replies_carry_the_version_and_a_stable_code() {
        let line = Message::line(ApiError::new(ErrorCode::NotFound, "no session s9").into());
        let text = std::str::from_utf8(&line).unwrap();
        assert_eq!(
            text,
            "{\"v\":1,\"type\":\"error\",\"error\":{\"code\":\"not_found\",\"message\":\"no session s9\"}}\n"
        );
        let back: Message = serde_json::from_slice(&line).unwrap();
        assert!(matches!(back.reply, Reply::Error { error } if error.code == ErrorCode::NotFound));
        for code in [ErrorCode::InvalidJson, ErrorCode::LineTooLong, ErrorCode::Internal] {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
    }

    /// Every `>` line of docs/api.md is a request this parser reads as documented, and every `<`
    /// line a reply; where the parser itself refuses the request, its reply is the documented one.
    #[test]
    fn the_documented_examples_are_what_the_code_does() {
        let doc = include_str!("../../../docs/api.md");
        let mut request: Option<Result<Request, ApiError>> = None;
        let mut checked = 0;
        for line in doc.lines() {
            if let Some(line) = line.strip_prefix("> ") {
                request = Some(parse_request(line.as_bytes()));
            } else if let Some(reply) = line.strip_prefix("< ") {
                let message: Message = serde_json::from_str(reply).expect(reply);
                assert_eq!(message.v, VERSION);
                match &request {
                    Some(Err(error)) => {
                        assert_eq!(
                            Message::line(error.clone().into()),
                            format!("{reply}\n").into_bytes()
                        );
                    }
                    Some(Ok(_)) => {}
                    None => panic!("a reply before any request: {reply}"),
                }
                // What is serialized again is what the doc shows.
                assert_eq!(
                    serde_json::to_value(&message).unwrap(),
                    serde_json::from_str::<serde_json::Value>(reply).unwrap()
                );
                checked += 1;
            }
        }
        assert!(checked >= 15, "{checked} examples");
    }

    proptest::proptest! {
        #[test]
        fn the_parser_never_panics(line in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = parse_request(&line);
        }

        #[test]
        fn the_parser_never_panics_on_near_requests(
            op in "(create_session|list_sessions|end_session|command_exited|reload_session|status|subscribe|list_approvals|decide_approval|watch_approvals|x)",
            fields in proptest::collection::vec(("[a-z_]{1,12}", "(1|-1|\"[a-z/]{0,8}\"|null|true|\\[\\]|\\{\\})"), 0..6),
        ) {
            let body: Vec<String> = fields.iter().map(|(k, v)| format!(",\"{k}\":{v}")).collect();
            let line = format!("{{\"v\":1,\"op\":\"{op}\"{}}}", body.concat());
            let _ = parse_request(line.as_bytes());
        }
    }
}
