//! Kernel decision events as fp prints them and as audit records.
use std::sync::Arc;

use fp_common::{
    kernel::{DecisionEvent, EVENT_DENIED, EVENT_PATH_FS_RELATIVE, Hook, Op, PATH_MAX, Reason},
    policy::{NO_RULE, TableVerdict},
};

use crate::{
    audit,
    policy::{EffectivePolicy, Rule, RuleRef},
};

/// The path bytes of an event (empty when the kernel could not resolve it).
pub fn path(ev: &DecisionEvent) -> &[u8] {
    &ev.path[..(ev.path_len as usize).min(PATH_MAX)]
}

fn comm(ev: &DecisionEvent) -> String {
    String::from_utf8_lossy(ev.comm.split(|&b| b == 0).next().unwrap_or_default()).into_owned()
}

fn names(ev: &DecisionEvent) -> (&'static str, &'static str) {
    (
        Hook::from_u8(ev.hook).map_or("unknown", Hook::name),
        Op::from_u8(ev.op).map_or("unknown", Op::name),
    )
}

/// Why the kernel decided as it did, in words: the match, and what became of a verdict the
/// kernel cannot answer by itself.
fn reason(ev: &DecisionEvent) -> String {
    let mut reason = Reason::from_u8(ev.reason).map_or("unknown", Reason::name).to_owned();
    match TableVerdict::from_u8(ev.verdict) {
        TableVerdict::Prompt => reason.push_str("; prompt tier: no broker answered, denied"),
        TableVerdict::Defer => {
            reason.push_str("; deferred to userspace: no userspace path answered, denied")
        }
        _ => {}
    }
    if ev.flags & EVENT_DENIED == 0 && TableVerdict::from_u8(ev.verdict) != TableVerdict::Allow {
        reason.push_str("; audit mode: not enforced");
    }
    if ev.flags & EVENT_PATH_FS_RELATIVE != 0 {
        reason.push_str(&format!("; path within filesystem {}:{}", ev.dev >> 20, ev.dev & 0xfffff));
    }
    reason
}

/// One line for a terminal: control characters and bytes that are not UTF-8 escaped, so a
/// decision is one line and no name is lost.
pub fn line(ev: &DecisionEvent, ctx: &SessionContext) -> String {
    let (hook, op) = names(ev);
    let action = if ev.flags & EVENT_DENIED != 0 { "denied" } else { "allowed" };
    let rule =
        ctx.rule(ev).map(|r| format!(" by rule \"{}\" ({})", r.text, r.source)).unwrap_or_default();
    format!(
        "fp: {action} {hook} {} by {} ({op}, pid {}, uid {}): {}{rule}\n",
        audit::RawPath(path(ev).to_vec()).display(),
        comm(ev),
        ev.tgid,
        ev.uid,
        reason(ev),
    )
}

/// The audit op of an event: the hook says more than the policy op (a write may be a create, a
/// rename's target, a link or an attribute change).
fn audit_op(hook: Option<Hook>, op: Option<Op>) -> audit::Op {
    use Hook::*;
    match (op, hook) {
        (Some(Op::Read), _) => audit::Op::Read,
        (Some(Op::Exec), _) => audit::Op::Exec,
        (Some(Op::Delete), _) => audit::Op::Delete,
        (_, Some(PathMknod | PathMkdir | PathSymlink)) => audit::Op::Create,
        (_, Some(PathLink)) => audit::Op::Link,
        (_, Some(PathRename)) => audit::Op::Rename,
        (
            _,
            Some(
                PathChmod | PathChown | InodeSetattr | InodeSetxattr | InodeRemovexattr
                | InodeSetAcl | InodeRemoveAcl,
            ),
        ) => audit::Op::Setattr,
        _ => audit::Op::Write,
    }
}

/// Who decided and under which policy, for the records of one session.
#[derive(Clone)]
pub struct SessionContext {
    pub session: String,
    pub agent: String,
    pub policy: Arc<EffectivePolicy>,
    pub policy_hash: String,
}

impl SessionContext {
    fn rule(&self, ev: &DecisionEvent) -> Option<&Rule> {
        (ev.rule_id != NO_RULE).then(|| self.policy.rule(RuleRef(ev.rule_id))).flatten()
    }
}

/// The audit record of a decision event.
pub fn audit_record(ev: &DecisionEvent, ctx: &SessionContext) -> audit::FileDecision {
    let (hook, _) = names(ev);
    let (rule, rule_source) = match ctx.rule(ev) {
        Some(r) => (r.text.clone(), r.source.to_string()),
        None if ev.reason == Reason::Unresolved as u8 => {
            ("(unresolved path)".into(), "kernel".into())
        }
        None => ("(default)".into(), "default".into()),
    };
    let allowed = TableVerdict::from_u8(ev.verdict) == TableVerdict::Allow;
    audit::FileDecision {
        session: ctx.session.clone(),
        agent: ctx.agent.clone(),
        cgroup: ev.session,
        pid: ev.pid,
        tgid: ev.tgid,
        uid: ev.uid,
        gid: ev.gid,
        comm: comm(ev),
        exe: audit::RawPath(Vec::new()),
        op: audit_op(Hook::from_u8(ev.hook), Op::from_u8(ev.op)),
        hook: hook.to_owned(),
        path: audit::RawPath(path(ev).to_vec()),
        dev: u64::from(ev.dev),
        ino: ev.ino,
        decision: if allowed { audit::Verdict::Allow } else { audit::Verdict::Deny },
        rule,
        rule_source,
        policy_hash: ctx.policy_hash.clone(),
        approver: None,
        reason: Some(reason(ev)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(hook: Hook, op: Op, path: &[u8]) -> DecisionEvent {
        // SAFETY: DecisionEvent is plain old data; all-zero is a valid value.
        let mut ev: DecisionEvent = unsafe { std::mem::zeroed() };
        ev.hook = hook as u8;
        ev.op = op as u8;
        ev.reason = Reason::PathRule as u8;
        ev.verdict = TableVerdict::Deny as u8;
        ev.flags = EVENT_DENIED;
        ev.rule_id = ctx().policy.rules().iter().find(|r| r.text == "/srv/x").unwrap().id;
        ev.path[..path.len()].copy_from_slice(path);
        ev.path_len = path.len() as u32;
        ev.comm[..3].copy_from_slice(b"cat");
        ev
    }

    #[test]
    fn lines_escape_what_a_terminal_would_split() {
        let l = line(&event(Hook::FileOpen, Op::Read, b"/a/new\nline\xff"), &ctx());
        assert_eq!(
            l,
            "fp: denied file_open /a/new\\nline\\xff by cat (read, pid 0, uid 0): path-rule \
             by rule \"/srv/x\" (<builtin --deny>)\n"
        );
    }

    #[test]
    fn unanswerable_verdicts_and_audit_mode_say_so() {
        let mut ev = event(Hook::FileOpen, Op::Read, b"/x");
        ev.verdict = TableVerdict::Prompt as u8;
        assert!(reason(&ev).contains("prompt tier: no broker answered, denied"));
        ev.verdict = TableVerdict::Defer as u8;
        assert!(reason(&ev).contains("deferred to userspace"));
        ev.flags = 0;
        assert!(reason(&ev).ends_with("audit mode: not enforced"));
        ev.verdict = TableVerdict::Allow as u8;
        let record = audit_record(&ev, &ctx());
        assert_eq!(record.decision, audit::Verdict::Allow);
    }

    #[test]
    fn audit_ops_follow_the_hook() {
        let op = |h, o| audit_record(&event(h, o, b"/x"), &ctx()).op;
        assert_eq!(op(Hook::FileOpen, Op::Read), audit::Op::Read);
        assert_eq!(op(Hook::PathMknod, Op::Write), audit::Op::Create);
        assert_eq!(op(Hook::PathRename, Op::Delete), audit::Op::Delete);
        assert_eq!(op(Hook::PathRename, Op::Write), audit::Op::Rename);
        assert_eq!(op(Hook::PathChmod, Op::Write), audit::Op::Setattr);
        assert_eq!(op(Hook::BprmCheckSecurity, Op::Exec), audit::Op::Exec);
        assert_eq!(op(Hook::PathTruncate, Op::Write), audit::Op::Write);
    }

    fn ctx() -> SessionContext {
        let policy = EffectivePolicy::from_deny_paths(
            &[std::path::PathBuf::from("/srv/x")],
            &crate::policy::LoadOptions::default(),
        )
        .unwrap();
        SessionContext {
            session: "run-1".into(),
            agent: "fp-run".into(),
            policy: Arc::new(policy),
            policy_hash: "sha256:00".into(),
        }
    }
}
