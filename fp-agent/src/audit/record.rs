//! What a record says: the events producers fill in, the records the writer adds itself, and the
//! JSON shape of both (docs/audit-format.md, "Records").
use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::op::Op;

/// The record format version written in every record's `v`.
pub const FORMAT_VERSION: u32 = 1;

/// The outcome recorded for one file operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Allow,
    #[default]
    Deny,
    PromptApproved,
    PromptDenied,
    PromptTimedOut,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
            Verdict::PromptApproved => "prompt-approved",
            Verdict::PromptDenied => "prompt-denied",
            Verdict::PromptTimedOut => "prompt-timed-out",
        }
    }

    /// Whether the operation went ahead.
    pub fn permitted(self) -> bool {
        matches!(self, Verdict::Allow | Verdict::PromptApproved)
    }

    /// Whether the writer should sync at once when `sync_on_deny` is set.
    pub fn is_deny_or_prompt(self) -> bool {
        self != Verdict::Allow
    }
}

/// Path bytes exactly as the kernel saw them. Serialized as a JSON string when they are valid
/// UTF-8, otherwise as `{"b64": "<standard base64 with padding>"}`, so any bytes round-trip.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawPath(pub Vec<u8>);

impl RawPath {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// A display form for one line of text: valid UTF-8 as is, control characters escaped
    /// (`\n`), bytes that are not UTF-8 as `\xNN`.
    pub fn display(&self) -> String {
        let mut out = String::with_capacity(self.0.len());
        for chunk in self.0.utf8_chunks() {
            for c in chunk.valid().chars() {
                if c.is_control() {
                    out.extend(c.escape_default());
                } else {
                    out.push(c);
                }
            }
            for byte in chunk.invalid() {
                out.push_str(&format!("\\x{byte:02x}"));
            }
        }
        out
    }
}

impl From<&str> for RawPath {
    fn from(text: &str) -> Self {
        RawPath(text.as_bytes().to_vec())
    }
}

impl Serialize for RawPath {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(text) => serializer.serialize_str(text),
            Err(_) => {
                use serde::ser::SerializeMap as _;
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("b64", &BASE64.encode(&self.0))?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for RawPath {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Encoded<'a> {
            Text(Cow<'a, str>),
            Base64 { b64: Cow<'a, str> },
        }
        match Encoded::deserialize(deserializer)? {
            Encoded::Text(text) => Ok(RawPath(text.into_owned().into_bytes())),
            Encoded::Base64 { b64 } => {
                BASE64.decode(b64.as_bytes()).map(RawPath).map_err(serde::de::Error::custom)
            }
        }
    }
}

/// One decision on one file operation (kernel event or prompt answer).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDecision {
    pub session: String,
    pub agent: String,
    pub cgroup: u64,
    pub pid: u32,
    pub tgid: u32,
    pub uid: u32,
    pub gid: u32,
    pub comm: String,
    pub exe: RawPath,
    pub op: Op,
    /// The kernel hook that saw the operation, e.g. `file_open` or `inode_unlink`.
    pub hook: String,
    pub path: RawPath,
    /// Of a rename, exchange or link: the new name (`path` is the existing one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_path: Option<RawPath>,
    /// Of a rename, exchange or link: what moved is a directory.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub directory: bool,
    /// Of a rename: the new name existed (its file was to be replaced).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub target_exists: bool,
    /// Of a refusal at the session boundary (ptrace, signals, ... of a process outside the
    /// session): the tgid of the process it aimed at, and that process's cgroup id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_cgroup: Option<u64>,
    /// Of a refusal of the session boundary's floor: the kernel interface it names, in words
    /// (`perf event: kernel`, `lockdown reason 2`, `block device 7:0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// Of a refusal that names a device (a block device opened, a device node made): its
    /// number, `major:minor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    pub dev: u64,
    pub ino: u64,
    pub decision: Verdict,
    pub rule: String,
    /// Where the deciding rule comes from (file:line, floor, default).
    pub rule_source: String,
    pub policy_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStart {
    pub session: String,
    pub agent: String,
    pub cgroup: u64,
    pub pid: u32,
    pub uid: u32,
    /// Hash of the full effective policy (global and agent layers merged, floors included).
    pub policy_hash: String,
    /// Exceptions this session's policy carves out of the built-in floors.
    pub floor_exceptions: Vec<String>,
    /// The shipped profile layered under the policy (`fp run --profile`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The backend the kernel enforces the session through (`bpf_lsm`, `fmod_ret`); absent in
    /// the records of fp versions that had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    pub command: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionEnd {
    pub session: String,
    pub agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub reason: String,
}

/// A restarted agent took over a session its predecessor left running (still confined by the
/// pinned programs meanwhile).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionAdopt {
    pub session: String,
    pub agent: String,
    pub cgroup: u64,
    /// Processes in the session when it was taken over.
    pub pids: u32,
    pub policy_hash: String,
}

/// The host froze or thawed its sessions because the log could (not) be written
/// (`[audit] on_full = "freeze"`, docs/audit.md). A freeze is written once the log can be
/// written again, before the thaw that follows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionFreeze {
    /// The sessions whose state changed, by name.
    pub sessions: Vec<String>,
    /// `frozen` or `thawed`.
    pub state: String,
    /// Why, as the writer's health says it.
    pub reason: String,
}

/// The kernel stopped or resumed running fp's programs while the agent runs: on the fmod_ret
/// backend, `kernel.ftrace_enabled` went to 0 (no session is confined then, and new sessions
/// are refused) or back to 1.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforcement {
    /// `bpf_lsm` or `fmod_ret`.
    pub backend: String,
    /// `off` or `on`.
    pub state: String,
    pub reason: String,
}

/// What a starting agent did with what a killed `fp run` left behind: the embedded agent's pins
/// and its session (docs/operations.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrphanCleanup {
    /// The dead agent's session, also the name of its pin directory.
    pub session: String,
    /// The dead `fp run`'s pid.
    pub pid: u32,
    /// The session's cgroup id; absent when the dead agent had no session then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<u64>,
    /// Processes still in the session.
    pub pids: u32,
    pub outcome: OrphanOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OrphanOutcome {
    /// Its pins were removed (its programs detached) and its session cgroup, empty, removed.
    Removed,
    /// Left pinned: its session's processes live on, still confined.
    #[default]
    Kept,
}

impl OrphanOutcome {
    pub const NAMES: [&str; 2] = ["removed", "kept"];

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyReload {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    pub old_policy_hash: String,
    pub policy_hash: String,
    pub source: String,
}

/// Events that never became records: `count` of them, lost at `at` (e.g. `audit-channel`,
/// `kernel-ringbuf`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loss {
    pub count: u64,
    pub at: String,
}

/// First record of every segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogOpen {
    pub log_id: String,
    /// Signed-note key id of the checkpoint key: `<name>+<8 hex>`.
    pub key_id: String,
    /// 0 for the first segment, then one more per rotation.
    pub segment: u64,
    pub writer: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonRestart {
    pub key_id: String,
    pub writer: String,
}

/// A torn tail found at start, moved aside to `torn_file` instead of being truncated silently.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovery {
    pub torn_file: String,
    pub torn_size: u64,
    pub torn_sha256: String,
}

/// A signed checkpoint over the `size` records before it (seq 0..size), whose head is `root`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub size: u64,
    pub root: String,
    /// The C2SP signed note, verbatim.
    pub note: String,
}

/// What producers send: the events that come from outside the writer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Decision(FileDecision),
    SessionStart(SessionStart),
    SessionEnd(SessionEnd),
    PolicyReload(PolicyReload),
    Loss(Loss),
    SessionAdopt(SessionAdopt),
    OrphanCleanup(OrphanCleanup),
    SessionFreeze(SessionFreeze),
    Enforcement(Enforcement),
}

/// Everything a record can say; `kind` in JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Body {
    Decision(FileDecision),
    SessionStart(SessionStart),
    SessionEnd(SessionEnd),
    PolicyReload(PolicyReload),
    Loss(Loss),
    SessionAdopt(SessionAdopt),
    OrphanCleanup(OrphanCleanup),
    SessionFreeze(SessionFreeze),
    Enforcement(Enforcement),
    LogOpen(LogOpen),
    DaemonRestart(DaemonRestart),
    Recovery(Recovery),
    Checkpoint(Checkpoint),
}

impl From<Event> for Body {
    fn from(event: Event) -> Self {
        match event {
            Event::Decision(e) => Body::Decision(e),
            Event::SessionStart(e) => Body::SessionStart(e),
            Event::SessionEnd(e) => Body::SessionEnd(e),
            Event::PolicyReload(e) => Body::PolicyReload(e),
            Event::Loss(e) => Body::Loss(e),
            Event::SessionAdopt(e) => Body::SessionAdopt(e),
            Event::OrphanCleanup(e) => Body::OrphanCleanup(e),
            Event::SessionFreeze(e) => Body::SessionFreeze(e),
            Event::Enforcement(e) => Body::Enforcement(e),
        }
    }
}

/// Fields every record carries besides its body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    /// Wall time, RFC 3339 UTC with nanoseconds.
    pub time: String,
    /// CLOCK_MONOTONIC in ns (meaningful within one `boot_id`).
    pub mono_ns: u64,
    pub boot_id: String,
    pub host: String,
}

/// The sealed part of a record as the writer serializes it; `hash` is appended by the chain.
#[derive(Serialize)]
pub(crate) struct SealedOut<'a> {
    pub v: u32,
    pub seq: u64,
    #[serde(flatten)]
    pub body: &'a Body,
    #[serde(flatten)]
    pub stamp: &'a Stamp,
    pub prev: &'a str,
}

/// A whole record as read back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub v: u32,
    pub seq: u64,
    #[serde(flatten)]
    pub body: Body,
    #[serde(flatten)]
    pub stamp: Stamp,
    pub prev: String,
    pub hash: String,
}

/// A UTC time in the record form: RFC 3339 with exactly nine fractional digits and `Z`.
pub fn format_time(utc: time::OffsetDateTime) -> String {
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z",
        utc.year(),
        u8::from(utc.month()),
        utc.day(),
        utc.hour(),
        utc.minute(),
        utc.second(),
        utc.nanosecond()
    )
}

/// Serializes the sealed part (the record without `,"hash":...}`) into `out`.
pub(crate) fn write_sealed(out: &mut Vec<u8>, seq: u64, body: &Body, stamp: &Stamp, prev: &str) {
    let sealed = SealedOut { v: FORMAT_VERSION, seq, body, stamp, prev };
    serde_json::to_writer(&mut *out, &sealed).expect("records serialize to memory");
    let brace = out.pop();
    debug_assert_eq!(brace, Some(b'}'));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_utf8_path_round_trips() {
        let path = RawPath(b"/tmp/\xff\xfeodd".to_vec());
        let json = serde_json::to_string(&path).unwrap();
        assert_eq!(json, r#"{"b64":"L3RtcC///m9kZA=="}"#);
        assert_eq!(serde_json::from_str::<RawPath>(&json).unwrap(), path);
        let plain = RawPath::from("/home/a b/é");
        let json = serde_json::to_string(&plain).unwrap();
        assert_eq!(json, r#""/home/a b/é""#);
        assert_eq!(serde_json::from_str::<RawPath>(&json).unwrap(), plain);
    }

    #[test]
    fn body_serializes_with_kind_tag() {
        let body = Body::Loss(Loss { count: 3, at: "audit-channel".into() });
        let stamp = Stamp {
            time: "2026-01-01T00:00:00.000000000Z".into(),
            mono_ns: 5,
            boot_id: "b".into(),
            host: "h".into(),
        };
        let mut out = Vec::new();
        write_sealed(&mut out, 7, &body, &stamp, "00");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"v":1,"seq":7,"kind":"loss","count":3,"at":"audit-channel","time":"2026-01-01T00:00:00.000000000Z","mono_ns":5,"boot_id":"b","host":"h","prev":"00""#
        );
    }
}
