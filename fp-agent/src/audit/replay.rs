//! Forensic replay: which records match a question, a readable timeline, OCSF output, and the
//! "what if" re-evaluation of recorded decisions under another policy.
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Serialize;

use super::op::Op;
use super::record::{Body, FileDecision, Record, Verdict};
use crate::policy;

/// Which records a replay shows. Empty fields match everything.
#[derive(Default)]
pub struct Filter {
    pub session: Option<String>,
    pub agent: Option<String>,
    /// RFC 3339; compared after normalizing to the record time format.
    pub since: Option<String>,
    pub until: Option<String>,
    pub path: Option<globset::GlobMatcher>,
    pub decision: Option<Verdict>,
}

/// Normalizes an RFC 3339 time to the record form (UTC, nine fractional digits), so times
/// compare as strings.
pub fn normalize_time(text: &str) -> anyhow::Result<String> {
    let parsed = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .with_context(|| format!("{text:?} is not an RFC 3339 time (e.g. 2026-01-31T12:00:00Z)"))?
        .to_offset(time::UtcOffset::UTC);
    Ok(super::record::format_time(parsed))
}

fn session_and_agent(body: &Body) -> Option<(&str, &str)> {
    match body {
        Body::Decision(d) => Some((&d.session, &d.agent)),
        Body::SessionStart(s) => Some((&s.session, &s.agent)),
        Body::SessionEnd(s) => Some((&s.session, &s.agent)),
        Body::SessionAdopt(s) => Some((&s.session, &s.agent)),
        _ => None,
    }
}

impl Filter {
    pub fn matches(&self, record: &Record) -> bool {
        if self.since.as_ref().is_some_and(|since| record.stamp.time < *since)
            || self.until.as_ref().is_some_and(|until| record.stamp.time > *until)
        {
            return false;
        }
        let Some((session, agent)) = session_and_agent(&record.body) else {
            return self.session.is_none()
                && self.agent.is_none()
                && self.path.is_none()
                && self.decision.is_none();
        };
        if self.session.as_ref().is_some_and(|s| s != session)
            || self.agent.as_ref().is_some_and(|a| a != agent)
        {
            return false;
        }
        match &record.body {
            Body::Decision(d) => {
                let path = Path::new(std::ffi::OsStr::from_bytes(d.path.as_bytes()));
                self.path.as_ref().is_none_or(|glob| glob.is_match(path))
                    && self.decision.is_none_or(|want| want == d.decision)
            }
            _ => self.path.is_none() && self.decision.is_none(),
        }
    }
}

/// Reads every record of the given segments (already verified), skipping a torn last line.
pub fn read_records(segments: &[PathBuf]) -> anyhow::Result<Vec<Record>> {
    let mut records = Vec::new();
    for path in segments {
        let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        for (number, line) in data.split_inclusive(|&b| b == b'\n').enumerate() {
            let Some(line) = line.strip_suffix(b"\n") else { break };
            match serde_json::from_slice(line) {
                Ok(record) => records.push(record),
                Err(e) => {
                    tracing::warn!(
                        "{}:{}: skipping unreadable record: {e}",
                        path.display(),
                        number + 1
                    )
                }
            }
        }
    }
    Ok(records)
}

/// One timeline line for a record.
pub fn describe(record: &Record) -> String {
    let what = match &record.body {
        Body::Decision(d) => {
            let mut line = format!(
                "{} pid {} ({}) {} {} -> {} [{} from {}]",
                d.session,
                d.tgid,
                d.comm,
                d.op.as_str(),
                d.path.display(),
                d.decision.as_str(),
                d.rule,
                d.rule_source
            );
            if let Some(approver) = &d.approver {
                line.push_str(&format!(" by {approver}"));
            }
            line
        }
        Body::SessionStart(s) => format!(
            "{} session start: agent {} pid {} policy {}{} command {:?}",
            s.session,
            s.agent,
            s.pid,
            s.policy_hash,
            s.profile.as_ref().map_or(String::new(), |p| format!(" profile {p}")),
            s.command
        ),
        Body::SessionEnd(s) => format!("{} session end: {}", s.session, s.reason),
        Body::SessionAdopt(s) => format!(
            "{} session taken over by a restarted agent: {} process(es), policy {}",
            s.session, s.pids, s.policy_hash
        ),
        Body::OrphanCleanup(o) => format!(
            "{} of a killed fp run (pid {}): {}, {} process(es){}",
            o.session,
            o.pid,
            o.outcome.as_str(),
            o.pids,
            o.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
        ),
        Body::SessionFreeze(f) => {
            format!("sessions {} ({}): {}", f.state, f.sessions.join(", "), f.reason)
        }
        Body::Enforcement(e) => {
            format!("ENFORCEMENT {} ({} backend): {}", e.state.to_uppercase(), e.backend, e.reason)
        }
        Body::PolicyReload(p) => {
            format!("policy reload {} -> {} ({})", p.old_policy_hash, p.policy_hash, p.source)
        }
        Body::Loss(l) => format!("LOSS: {} event(s) dropped at {}", l.count, l.at),
        Body::LogOpen(o) => format!("log open {} segment {} key {}", o.log_id, o.segment, o.key_id),
        Body::DaemonRestart(r) => format!("daemon restart ({})", r.writer),
        Body::Recovery(r) => {
            format!("crash recovery: torn tail of {} bytes moved to {}", r.torn_size, r.torn_file)
        }
        Body::Checkpoint(c) => format!("checkpoint size {}", c.size),
    };
    format!("{} #{} {}", record.stamp.time, record.seq, what)
}

/// The policy outcome a recorded verdict came from.
fn policy_outcome(verdict: Verdict) -> policy::Verdict {
    match verdict {
        Verdict::Allow => policy::Verdict::Allow,
        Verdict::Deny => policy::Verdict::Deny,
        Verdict::PromptApproved | Verdict::PromptDenied | Verdict::PromptTimedOut => {
            policy::Verdict::Prompt
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reevaluation {
    pub verdict: policy::Verdict,
    pub rule: String,
}

/// Whether a record is the refusal of a unix socket served from outside the session.
fn is_socket(decision: &FileDecision) -> bool {
    use fp_common::kernel::Hook;
    [Hook::UnixStreamConnect, Hook::UnixMaySend].iter().any(|h| h.name() == decision.hook)
}

/// A recorded refusal of the floor that a policy can lift, re-decided under `policy`: a perf
/// event (`kernel_interfaces`), a block device (`block_devices`, by the number its entries name
/// now); None for every other record.
fn floor_exception(
    policy: &policy::EffectivePolicy,
    decision: &FileDecision,
) -> Option<Reevaluation> {
    use fp_common::kernel::Hook;
    use policy::KernelInterface;
    let decided = |entry: Option<String>, refusal: &str| match entry {
        Some(rule) => Reevaluation { verdict: policy::Verdict::Allow, rule },
        None => Reevaluation {
            verdict: policy::Verdict::Deny,
            rule: format!("session boundary: {refusal}"),
        },
    };
    if decision.hook == Hook::PerfEventOpen.name() {
        let entry = policy.interface(KernelInterface::Perf);
        return Some(decided(
            entry.map(|i| format!("perf (kernel_interfaces, {})", i.source)),
            "a perf event beyond the counters of processes, which `kernel_interfaces` does not \
             switch on",
        ));
    }
    let device = decision.device.as_ref().filter(|_| decision.hook == Hook::FileOpen.name())?;
    let entry = policy::parse_device_number(device).and_then(|d| policy.device_entry(d));
    Some(decided(
        entry.map(|r| {
            format!(
                "{} (block_devices, {}); the rules for the name it was opened by decide next",
                r.text, r.source
            )
        }),
        "a block device that `block_devices` does not name",
    ))
}

/// The decision core as replay needs it.
pub trait Reevaluate {
    fn decide(&self, path: &[u8], op: Op) -> Reevaluation;

    /// A recorded decision re-decided: by its path and op, or for a rename, exchange or link
    /// that names its target, as the move it was.
    fn decide_record(&self, decision: &FileDecision) -> Reevaluation {
        self.decide(decision.path.as_bytes(), decision.op)
    }
}

/// Replay re-evaluates with the very decision core sessions are compiled from.
impl Reevaluate for policy::EffectivePolicy {
    fn decide(&self, path: &[u8], op: Op) -> Reevaluation {
        // A recorded path that is not absolute (e.g. one the kernel could not resolve) is denied,
        // as the kernel denies it.
        let Some(path) = policy::normalize_path(path) else {
            return Reevaluation {
                verdict: policy::Verdict::Deny,
                rule: "unresolved path".to_owned(),
            };
        };
        let d = policy::EffectivePolicy::decide(self, &path, op.into());
        let verdict = d.verdict;
        let rule = match d.rule.and_then(|r| self.rule(r)) {
            Some(r) => format!("{} ({}, {})", r.text, r.tier, r.source),
            None => "default".to_owned(),
        };
        Reevaluation { verdict, rule }
    }

    fn decide_record(&self, decision: &FileDecision) -> Reevaluation {
        use fp_common::refer::{MoveKind, MoveVerdict};
        if is_socket(decision) {
            // The refusal of a socket served from outside (fp-ebpf's `unix`): allowed where the
            // policy's `sockets` names its address.
            let address = String::from_utf8_lossy(decision.path.as_bytes());
            return match self.sockets().iter().find(|s| s.names(&address)) {
                Some(s) => Reevaluation {
                    verdict: policy::Verdict::Allow,
                    rule: format!("{} (sockets, {})", s.text, s.source),
                },
                None => Reevaluation {
                    verdict: policy::Verdict::Deny,
                    rule: "session boundary: a socket served from outside that `sockets` does \
                           not name"
                        .to_owned(),
                },
            };
        }
        if let Some(lifted) = floor_exception(self, decision) {
            return lifted;
        }
        if decision.target_pid.is_some() {
            // Not the policy's to decide: every policy keeps a session inside its boundary.
            return Reevaluation {
                verdict: policy::Verdict::Deny,
                rule: "session boundary: the target process is outside the session".to_owned(),
            };
        }
        if let Some(interface) = &decision.interface {
            return Reevaluation {
                verdict: policy::Verdict::Deny,
                rule: format!("session boundary: {interface}, which no policy lifts"),
            };
        }
        let Some(kind) = decision.op.move_kind() else {
            return Reevaluate::decide(self, decision.path.as_bytes(), decision.op);
        };
        let Some(target) = &decision.target_path else {
            return Reevaluate::decide(self, decision.path.as_bytes(), decision.op);
        };
        let normalized = |p: &super::record::RawPath| policy::normalize_path(p.as_bytes());
        let (Some(src), Some(dst)) = (normalized(&decision.path), normalized(target)) else {
            return Reevaluation {
                verdict: policy::Verdict::Deny,
                rule: "unresolved path".to_owned(),
            };
        };
        let dir = decision.directory;
        let source = policy::Name { path: &src, exists: true, dir };
        let target = policy::Name {
            path: &dst,
            exists: decision.target_exists || kind == MoveKind::Exchange,
            dir: dir && kind == MoveKind::Exchange,
        };
        let (verdict, rule) = match self.decide_move(kind, source, target) {
            MoveVerdict::Allow => (policy::Verdict::Allow, "refer: no access gained".to_owned()),
            MoveVerdict::Denied { op, target } => (
                policy::Verdict::Deny,
                format!("{} denied at the {}", op.name(), if target { "target" } else { "source" }),
            ),
            MoveVerdict::Refused { op } => {
                (policy::Verdict::Deny, format!("refer: {} would be gained (EXDEV)", op.name()))
            }
        };
        Reevaluation { verdict, rule }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Difference {
    pub seq: u64,
    pub time: String,
    pub session: String,
    pub op: Op,
    pub path: super::record::RawPath,
    pub recorded: Verdict,
    pub recorded_rule: String,
    pub now: Reevaluation,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct WhatIf {
    pub evaluated: u64,
    pub unchanged: u64,
    pub would_now_allow: u64,
    pub would_now_deny: u64,
    pub would_now_prompt: u64,
    /// The first differences, in log order.
    pub examples: Vec<Difference>,
}

/// Re-decides every matching file decision under `policy` and counts what would change.
pub fn what_if<'a>(
    decisions: impl IntoIterator<Item = (&'a Record, &'a FileDecision)>,
    policy: &dyn Reevaluate,
    max_examples: usize,
) -> WhatIf {
    let mut result = WhatIf::default();
    for (record, decision) in decisions {
        result.evaluated += 1;
        let now = policy.decide_record(decision);
        if now.verdict == policy_outcome(decision.decision) {
            result.unchanged += 1;
            continue;
        }
        *match now.verdict {
            policy::Verdict::Allow => &mut result.would_now_allow,
            policy::Verdict::Deny => &mut result.would_now_deny,
            policy::Verdict::Prompt => &mut result.would_now_prompt,
        } += 1;
        if result.examples.len() < max_examples {
            result.examples.push(Difference {
                seq: record.seq,
                time: record.stamp.time.clone(),
                session: decision.session.clone(),
                op: decision.op,
                path: decision.path.clone(),
                recorded: decision.decision,
                recorded_rule: decision.rule.clone(),
                now,
            });
        }
    }
    result
}

/// An OCSF 1.1 File System Activity (class 1001) event for a decision record.
pub fn to_ocsf(record: &Record, decision: &FileDecision) -> serde_json::Value {
    // OCSF activity ids: 1 Create, 2 Read, 3 Update, 4 Delete, 5 Rename, 6 Set Attributes, 99 Other.
    let activity_id = match decision.op {
        Op::Create => 1,
        Op::Read => 2,
        Op::Write => 3,
        Op::Delete => 4,
        Op::Rename | Op::Exchange => 5,
        Op::Setattr => 6,
        Op::Link | Op::Exec => 99,
    };
    let permitted = decision.decision.permitted();
    let time_ms = time::OffsetDateTime::parse(
        &record.stamp.time,
        &time::format_description::well_known::Rfc3339,
    )
    .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
    .unwrap_or_default();
    serde_json::json!({
        "class_uid": 1001,
        "class_name": "File System Activity",
        "category_uid": 1,
        "category_name": "System Activity",
        "activity_id": activity_id,
        "type_uid": 1001 * 100 + activity_id,
        "time": time_ms,
        "severity_id": if permitted { 1 } else { 3 },
        "status_id": if permitted { 1 } else { 2 },
        "disposition_id": if permitted { 1 } else { 2 },
        "disposition": decision.decision.as_str(),
        "actor": {
            "process": {
                "pid": decision.tgid,
                "tid": decision.pid,
                "name": decision.comm,
                "file": { "path": decision.exe.display() },
                "user": { "uid": decision.uid.to_string(), "gid": decision.gid },
            },
            "session": { "uid": decision.session },
            "app_name": decision.agent,
        },
        "file": {
            "path": decision.path.display(),
            "uid": format!("{}:{}", decision.dev, decision.ino),
        },
        "device": { "hostname": record.stamp.host },
        "metadata": {
            "version": "1.1.0",
            "product": { "name": "fp", "vendor_name": "fp" },
            "uid": format!("{}", record.seq),
            "log_name": "fp-audit",
        },
        "unmapped": {
            "hook": decision.hook,
            "rule": decision.rule,
            "rule_source": decision.rule_source,
            "policy_hash": decision.policy_hash,
            "approver": decision.approver,
            "record_hash": record.hash,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::Stamp;

    fn decision_record(seq: u64, path: &[u8], op: Op, verdict: Verdict) -> Record {
        Record {
            v: 1,
            seq,
            body: Body::Decision(FileDecision {
                session: "s1".into(),
                agent: "coder".into(),
                op,
                path: super::super::record::RawPath(path.to_vec()),
                decision: verdict,
                rule: "r".into(),
                ..Default::default()
            }),
            stamp: Stamp {
                time: format!("2026-01-01T00:00:{seq:02}.000000000Z"),
                mono_ns: 0,
                boot_id: String::new(),
                host: String::new(),
            },
            prev: String::new(),
            hash: String::new(),
        }
    }

    /// Denies anything under /secret, prompts for deletes, allows the rest.
    struct TestPolicy;

    impl Reevaluate for TestPolicy {
        fn decide(&self, path: &[u8], op: Op) -> Reevaluation {
            let verdict = if path.starts_with(b"/secret") {
                policy::Verdict::Deny
            } else if op == Op::Delete {
                policy::Verdict::Prompt
            } else {
                policy::Verdict::Allow
            };
            Reevaluation { verdict, rule: "test".into() }
        }
    }

    #[test]
    fn what_if_counts_each_kind_of_change() {
        let records = [
            decision_record(1, b"/secret/key", Op::Read, Verdict::Allow),
            decision_record(2, b"/work/a", Op::Read, Verdict::Deny),
            decision_record(3, b"/work/b", Op::Delete, Verdict::Allow),
            decision_record(4, b"/work/c", Op::Delete, Verdict::PromptApproved),
            decision_record(5, b"/work/d", Op::Write, Verdict::Allow),
            decision_record(6, b"/secret/\xff", Op::Write, Verdict::PromptTimedOut),
        ];
        let decisions = records.iter().filter_map(|r| match &r.body {
            Body::Decision(d) => Some((r, d)),
            _ => None,
        });
        let result = what_if(decisions, &TestPolicy, 2);
        assert_eq!(result.evaluated, 6);
        assert_eq!(result.unchanged, 2);
        assert_eq!(result.would_now_deny, 2);
        assert_eq!(result.would_now_allow, 1);
        assert_eq!(result.would_now_prompt, 1);
        assert_eq!(result.examples.iter().map(|d| d.seq).collect::<Vec<_>>(), [1, 2]);
    }

    /// A default-write policy with `extra` lines in its `[file_policy]` (`<request>:3:` on).
    fn writable_and(extra: &str) -> policy::EffectivePolicy {
        let text = format!("[file_policy]\ndefault = \"write\"\n{extra}\n");
        let options = crate::policy::LoadOptions {
            policy_text: Some(text),
            user: Some("root".into()),
            ..Default::default()
        };
        policy::EffectivePolicy::load(&options).unwrap()
    }

    /// A socket refused as served from outside is allowed under a policy whose `sockets` names
    /// its address, and refused under any other, whatever its path rules.
    #[test]
    fn socket_refusals_are_decided_by_sockets() {
        let policy = |sockets: &str| writable_and(&format!("sockets = [{sockets}]"));
        let mut record = decision_record(1, b"@helper", Op::Write, Verdict::Deny);
        let Body::Decision(d) = &mut record.body else { unreachable!() };
        d.hook = "unix_stream_connect".into();
        let named = policy("\"@helper\"").decide_record(d);
        assert_eq!(named.verdict, policy::Verdict::Allow, "{}", named.rule);
        assert!(named.rule.starts_with("@helper (sockets, <request>:3:"), "{}", named.rule);
        assert_eq!(policy("\"@other\"").decide_record(d).verdict, policy::Verdict::Deny);
        d.path = super::super::record::RawPath(b"/tmp/ssh-Ab/agent.7".to_vec());
        assert_eq!(
            policy("\"/tmp/ssh-*/agent.*\"").decide_record(d).verdict,
            policy::Verdict::Allow
        );
    }

    /// A refusal of the floor is allowed under a policy that lifts it (a perf event by
    /// `kernel_interfaces`, a block device by a `block_devices` entry that names its number now)
    /// and refused under any other; the floor's other refusals under every policy.
    #[test]
    fn floor_refusals_are_decided_by_its_exceptions() {
        use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
        let policy = writable_and;
        let mut record = decision_record(1, b"", Op::Write, Verdict::Deny);
        let Body::Decision(d) = &mut record.body else { unreachable!() };
        d.hook = "perf_event_open".into();
        d.interface = Some("perf event: kernel".into());
        let switched = policy("kernel_interfaces = [\"perf\"]").decide_record(d);
        assert_eq!(switched.verdict, policy::Verdict::Allow, "{}", switched.rule);
        assert!(
            switched.rule.starts_with("perf (kernel_interfaces, <request>:3:"),
            "{}",
            switched.rule
        );
        assert_eq!(policy("").decide_record(d).verdict, policy::Verdict::Deny);
        d.hook = "locked_down".into();
        d.interface = Some("lockdown reason 22".into());
        let kcore = policy("kernel_interfaces = [\"perf\"]").decide_record(d);
        assert_eq!(kcore.verdict, policy::Verdict::Deny);
        assert!(kcore.rule.contains("lockdown reason 22"), "{}", kcore.rule);
        let Some((node, md)) = ["/dev/loop0", "/dev/vda", "/dev/sda"].into_iter().find_map(|p| {
            std::fs::metadata(p).ok().filter(|m| m.file_type().is_block_device()).map(|m| (p, m))
        }) else {
            return; // No block device on this machine to name.
        };
        d.hook = "file_open".into();
        d.device = Some(crate::policy::device_number(crate::policy::kernel_dev(md.rdev())));
        d.interface = Some(format!("block device {}", d.device.as_deref().unwrap_or_default()));
        let named = policy(&format!("block_devices = [\"{node}\"]")).decide_record(d);
        assert_eq!(named.verdict, policy::Verdict::Allow, "{}", named.rule);
        assert_eq!(
            policy("block_devices = [\"/dev/null\"]").decide_record(d).verdict,
            policy::Verdict::Deny
        );
    }

    #[test]
    fn filter_matches_path_glob_decision_and_time() {
        let record = decision_record(5, b"/work/src/main.rs", Op::Write, Verdict::Deny);
        let glob = |g: &str| Some(globset::Glob::new(g).unwrap().compile_matcher());
        assert!(Filter { path: glob("/work/**/*.rs"), ..Default::default() }.matches(&record));
        assert!(!Filter { path: glob("/etc/**"), ..Default::default() }.matches(&record));
        assert!(!Filter { decision: Some(Verdict::Allow), ..Default::default() }.matches(&record));
        let since = normalize_time("2026-01-01T01:00:04+01:00").unwrap();
        assert_eq!(since, "2026-01-01T00:00:04.000000000Z");
        assert!(Filter { since: Some(since), ..Default::default() }.matches(&record));
        let until = normalize_time("2026-01-01T00:00:04.5Z").unwrap();
        assert!(!Filter { until: Some(until), ..Default::default() }.matches(&record));
        assert!(!Filter { session: Some("other".into()), ..Default::default() }.matches(&record));
    }

    #[test]
    fn ocsf_event_has_class_and_disposition() {
        let record = decision_record(1, b"/etc/shadow", Op::Read, Verdict::Deny);
        let Body::Decision(d) = &record.body else { unreachable!() };
        let event = to_ocsf(&record, d);
        assert_eq!(event["class_uid"], 1001);
        assert_eq!(event["type_uid"], 100102);
        assert_eq!(event["disposition_id"], 2);
        assert_eq!(event["file"]["path"], "/etc/shadow");
    }
}
