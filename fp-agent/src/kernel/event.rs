//! Kernel denial events as fp prints them and as audit records.
use fp_common::kernel::{DenyEvent, DenyReason, EVENT_PATH_FS_RELATIVE, Hook, Op, PATH_MAX};

use crate::audit;

/// The path bytes of an event (empty when the kernel could not resolve it).
pub fn path(ev: &DenyEvent) -> &[u8] {
    &ev.path[..(ev.path_len as usize).min(PATH_MAX)]
}

fn comm(ev: &DenyEvent) -> String {
    String::from_utf8_lossy(ev.comm.split(|&b| b == 0).next().unwrap_or_default()).into_owned()
}

fn names(ev: &DenyEvent) -> (&'static str, &'static str, &'static str) {
    (
        Hook::from_u8(ev.hook).map_or("unknown", Hook::name),
        Op::from_u8(ev.op).map_or("unknown", Op::name),
        DenyReason::from_u8(ev.reason).map_or("unknown", DenyReason::name),
    )
}

/// Inode hooks see no mount: their path starts at the root of the file's filesystem.
fn within_filesystem(ev: &DenyEvent) -> Option<String> {
    (ev.flags & EVENT_PATH_FS_RELATIVE != 0)
        .then(|| format!("within filesystem {}:{}", ev.dev >> 20, ev.dev & 0xfffff))
}

/// One line for a terminal: control characters and bytes that are not UTF-8 escaped, so a
/// denial is one line and no name is lost.
pub fn line(ev: &DenyEvent) -> String {
    let (hook, op, reason) = names(ev);
    let within = within_filesystem(ev).map(|w| format!(" ({w})")).unwrap_or_default();
    format!(
        "fp: denied {hook} {}{within} by {} ({op}, pid {}, uid {}): {reason}\n",
        audit::RawPath(path(ev).to_vec()).display(),
        comm(ev),
        ev.tgid,
        ev.uid
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

/// Who decided and under which policy, for the audit records of one session.
#[derive(Clone)]
pub struct SessionContext {
    pub session: String,
    pub agent: String,
    pub rule: String,
    pub rule_source: String,
    pub policy_hash: String,
}

/// The audit record of a denial.
pub fn audit_record(ev: &DenyEvent, ctx: &SessionContext) -> audit::FileDecision {
    let (hook, _, reason) = names(ev);
    let reason = match within_filesystem(ev) {
        Some(w) => format!("{reason}; path {w}"),
        None => reason.to_owned(),
    };
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
        decision: audit::Verdict::Deny,
        rule: ctx.rule.clone(),
        rule_source: ctx.rule_source.clone(),
        policy_hash: ctx.policy_hash.clone(),
        approver: None,
        reason: Some(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(hook: Hook, op: Op, path: &[u8]) -> DenyEvent {
        // SAFETY: DenyEvent is plain old data; all-zero is a valid value.
        let mut ev: DenyEvent = unsafe { std::mem::zeroed() };
        ev.hook = hook as u8;
        ev.op = op as u8;
        ev.reason = DenyReason::PathRule as u8;
        ev.path[..path.len()].copy_from_slice(path);
        ev.path_len = path.len() as u32;
        ev.comm[..3].copy_from_slice(b"cat");
        ev
    }

    #[test]
    fn lines_escape_what_a_terminal_would_split() {
        let l = line(&event(Hook::FileOpen, Op::Read, b"/a/new\nline\xff"));
        assert_eq!(
            l,
            "fp: denied file_open /a/new\\nline\\xff by cat (read, pid 0, uid 0): path-rule\n"
        );
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
        SessionContext {
            session: "run-1".into(),
            agent: "fp-run".into(),
            rule: "--deny".into(),
            rule_source: "command line".into(),
            policy_hash: "sha256:00".into(),
        }
    }
}
