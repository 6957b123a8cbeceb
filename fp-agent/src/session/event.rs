//! Kernel decision events as fp prints them and as audit records (the event reader's formatting:
//! the kernel layer only hands the events over).
use std::sync::Arc;

use fp_common::{
    floor::{PERF_SECURITY_CPU, PERF_SECURITY_KERNEL, PERF_SECURITY_TRACEPOINT},
    kernel::{
        DecisionEvent, EVENT_DENIED, EVENT_DEVICE, EVENT_KERNEL_SETTING, EVENT_MOVE_DIR,
        EVENT_PATH_FS_RELATIVE, EVENT_TARGET_EXISTS, Hook, KernelOp, PATH_MAX, Reason,
    },
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

/// The process a refusal at the session boundary aimed at: (tgid, cgroup id).
pub fn target_process(ev: &DecisionEvent) -> Option<(u32, u64)> {
    (ev.target_pid != 0).then_some((ev.target_pid, ev.target_cgroup))
}

/// The kernel interface a refusal of the floor names (fp-ebpf's `floor`), from the event's inode
/// field: the kernel's `enum lockdown_reason` (with its name, from the running kernel's BTF), or what was handed to the kernel (`enum
/// kernel_load_data_id`, the same numbers as `kernel_read_file_id`), the check of a perf event
/// (`PERF_SECURITY_*`), a module request, the terminal ioctl (`TIOCSTI`, `TIOCLINUX`).
pub fn kernel_interface(ev: &DecisionEvent) -> Option<String> {
    const LOADED: [&str; 7] = [
        "unknown",
        "firmware",
        "module",
        "kexec image",
        "kexec initramfs",
        "policy",
        "certificate",
    ];
    if ev.flags & EVENT_KERNEL_SETTING != 0 {
        let fs = fp_common::floor::filesystem_name(u64::from(ev.fs_magic))
            .unwrap_or("a kernel filesystem");
        return Some(format!("kernel setting on {fs} (inode {})", ev.ino));
    }
    if let Some(number) = device(ev) {
        return Some(match Hook::from_u8(ev.hook) {
            Some(Hook::PathMknod) => format!("device node {number}"),
            _ => format!("block device {number}"),
        });
    }
    match Hook::from_u8(ev.hook)? {
        Hook::LockedDown => Some(match crate::kernel::lockdown_reason(ev.ino) {
            Some(name) => format!("lockdown reason {} ({name})", ev.ino),
            None => format!("lockdown reason {}", ev.ino),
        }),
        Hook::PerfEventOpen => Some(match u32::try_from(ev.ino).unwrap_or(u32::MAX) {
            PERF_SECURITY_CPU => "perf event: cpu-wide".to_owned(),
            PERF_SECURITY_KERNEL => "perf event: kernel".to_owned(),
            PERF_SECURITY_TRACEPOINT => "perf event: tracepoint".to_owned(),
            check => format!("perf event: check {check}"),
        }),
        Hook::KernelModuleRequest => Some("module request".to_owned()),
        Hook::FileIoctl | Hook::FileIoctlCompat => Some(match ev.ino {
            0x5412 => "ioctl TIOCSTI".to_owned(),
            0x541C => "ioctl TIOCLINUX".to_owned(),
            cmd => format!("ioctl {cmd:#x}"),
        }),
        Hook::KernelLoadData | Hook::KernelReadFile => Some(match LOADED.get(ev.ino as usize) {
            Some(what) => format!("kernel load of a {what}"),
            None => format!("kernel load id {}", ev.ino),
        }),
        _ => None,
    }
}

/// The device a refusal of the floor names (`EVENT_DEVICE`), as `major:minor`.
pub fn device(ev: &DecisionEvent) -> Option<String> {
    (ev.flags & EVENT_DEVICE != 0).then(|| crate::policy::device_number(ev.ino as u32))
}

/// The unix socket a refusal at the session boundary names (fp-ebpf's `unix`): its address as
/// its server bound it (a path, or an abstract name, shown with `@` for its leading NUL; empty
/// for an unbound socket).
pub fn socket_address(ev: &DecisionEvent) -> Option<Vec<u8>> {
    matches!(Hook::from_u8(ev.hook), Some(Hook::UnixStreamConnect | Hook::UnixMaySend)).then(|| {
        let mut address = path(ev).to_vec();
        match address.first_mut() {
            Some(first @ 0) => *first = b'@',
            // A path's address as bound ends with its NUL.
            _ => address.truncate(address.iter().position(|&b| b == 0).unwrap_or(address.len())),
        }
        address
    })
}

/// The new name of a rename's or link's event (None for other events).
pub fn target(ev: &DecisionEvent) -> Option<&[u8]> {
    is_move(ev).then(|| &ev.target[..(ev.target_len as usize).min(PATH_MAX)])
}

fn is_move(ev: &DecisionEvent) -> bool {
    matches!(Hook::from_u8(ev.hook), Some(Hook::PathRename | Hook::PathLink))
}

fn comm(ev: &DecisionEvent) -> String {
    String::from_utf8_lossy(ev.comm.split(|&b| b == 0).next().unwrap_or_default()).into_owned()
}

fn names(ev: &DecisionEvent) -> (&'static str, &'static str) {
    (
        Hook::from_u8(ev.hook).map_or("unknown", Hook::name),
        KernelOp::from_u8(ev.op).map_or("unknown", KernelOp::name),
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
    if ev.reason == Reason::Refer as u8 {
        reason.push_str(
            "; the content would gain this access under its new name, or a prompt or defer \
             verdict cannot hold a move (EXDEV: mv copies instead)",
        );
    }
    if ev.flags & EVENT_DENIED == 0 && TableVerdict::from_u8(ev.verdict) != TableVerdict::Allow {
        reason.push_str("; audit mode: not enforced");
    }
    // Refusals decided without a file (bpf(), the session boundary) identify none; the floor's
    // name a kernel interface instead.
    if ev.flags & EVENT_PATH_FS_RELATIVE != 0
        && (ev.dev, ev.ino) != (0, 0)
        && kernel_interface(ev).is_none()
    {
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
    let mut shown = audit::RawPath(path(ev).to_vec()).display();
    if let Some(target) = target(ev) {
        shown = format!("{shown} -> {}", audit::RawPath(target.to_vec()).display());
    }
    if let Some((pid, cgroup)) = target_process(ev) {
        shown = format!("process {pid} (cgroup {cgroup})");
    }
    if let Some(interface) = kernel_interface(ev) {
        shown = interface;
    }
    if let Some(address) = socket_address(ev) {
        let server = match target_process(ev) {
            Some((pid, cgroup)) => format!("process {pid} (cgroup {cgroup})"),
            None => format!("cgroup {}", ev.target_cgroup),
        };
        let address = match address.is_empty() {
            true => "(unbound)".to_owned(),
            false => audit::RawPath(address).display(),
        };
        shown = format!("socket {address} served by {server}");
    }
    format!(
        "fp: {action} {hook} {shown} by {} ({op}, pid {}, uid {}): {}{rule}\n",
        comm(ev),
        ev.tgid,
        ev.uid,
        reason(ev),
    )
}

/// The line `fp run` prints for a decision of a session a daemon hosts, from its audit record as
/// the daemon's event stream carries it: what [`line`] says of the kernel's event, but for the op,
/// which is the record's (`create` where the event says `write`).
pub fn record_line(d: &audit::FileDecision) -> String {
    let action = if d.decision == audit::Verdict::Allow { "allowed" } else { "denied" };
    let process = |pid: u32| format!("process {pid} (cgroup {})", d.target_cgroup.unwrap_or(0));
    let shown = match (&d.interface, d.target_pid, &d.target_path) {
        _ if matches!(d.hook.as_str(), "unix_stream_connect" | "unix_may_send") => {
            let server = match d.target_pid {
                Some(pid) => process(pid),
                None => format!("cgroup {}", d.target_cgroup.unwrap_or(0)),
            };
            let address = if d.path.0.is_empty() { "(unbound)".into() } else { d.path.display() };
            format!("socket {address} served by {server}")
        }
        (Some(interface), _, _) => interface.clone(),
        (None, Some(pid), _) => process(pid),
        (None, None, Some(target)) => format!("{} -> {}", d.path.display(), target.display()),
        (None, None, None) => d.path.display(),
    };
    let rule = match d.rule_source.as_str() {
        "default" | "kernel" => String::new(),
        source => format!(" by rule \"{}\" ({source})", d.rule),
    };
    format!(
        "fp: {action} {} {shown} by {} ({}, pid {}, uid {}): {}{rule}\n",
        d.hook,
        d.comm,
        d.op.as_str(),
        d.tgid,
        d.uid,
        d.reason.as_deref().unwrap_or(d.decision.as_str()),
    )
}

/// Who decided and under which policy, for the records of one session.
#[derive(Clone)]
pub struct SessionContext {
    pub session: String,
    pub agent: String,
    /// The session's cgroup id (its key in the kernel maps).
    pub cgroup: u64,
    pub policy: Arc<EffectivePolicy>,
    pub policy_hash: String,
}

impl SessionContext {
    pub fn new(session: String, agent: String, cgroup: u64, policy: Arc<EffectivePolicy>) -> Self {
        let policy_hash = policy_hash(&policy);
        SessionContext { session, agent, cgroup, policy, policy_hash }
    }

    /// The same session under another policy.
    pub fn with_policy(&self, policy: Arc<EffectivePolicy>) -> Self {
        Self::new(self.session.clone(), self.agent.clone(), self.cgroup, policy)
    }

    fn rule(&self, ev: &DecisionEvent) -> Option<&Rule> {
        (ev.rule_id != NO_RULE).then(|| self.policy.rule(RuleRef(ev.rule_id))).flatten()
    }
}

/// A policy's hash as records name it.
pub fn policy_hash(policy: &EffectivePolicy) -> String {
    format!("sha256:{}", hex::encode(policy.hash()))
}

/// The audit record of a decision event.
pub fn audit_record(ev: &DecisionEvent, ctx: &SessionContext) -> audit::FileDecision {
    let (hook, _) = names(ev);
    let (rule, rule_source) = match ctx.rule(ev) {
        Some(r) => (r.text.clone(), r.source.to_string()),
        None if ev.reason == Reason::Unresolved as u8 => {
            ("(unresolved path)".into(), "kernel".into())
        }
        None if ev.reason == Reason::Boundary as u8 => {
            ("(session boundary)".into(), "kernel".into())
        }
        None if ev.reason == Reason::LinksPending as u8 => {
            ("(hardlinks below read-only trees not yet recorded)".into(), "kernel".into())
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
        op: audit::Op::of_event(Hook::from_u8(ev.hook), KernelOp::from_u8(ev.op), ev.flags),
        hook: hook.to_owned(),
        path: audit::RawPath(socket_address(ev).unwrap_or_else(|| path(ev).to_vec())),
        target_path: target(ev).map(|t| audit::RawPath(t.to_vec())),
        directory: is_move(ev) && ev.flags & EVENT_MOVE_DIR != 0,
        target_exists: is_move(ev) && ev.flags & EVENT_TARGET_EXISTS != 0,
        target_pid: target_process(ev).map(|(pid, _)| pid),
        target_cgroup: (ev.target_cgroup != 0).then_some(ev.target_cgroup),
        interface: kernel_interface(ev),
        device: device(ev),
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
    use fp_common::kernel::EVENT_EXCHANGE;

    use super::*;

    fn event(hook: Hook, op: KernelOp, path: &[u8]) -> DecisionEvent {
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
        let l = line(&event(Hook::FileOpen, KernelOp::Read, b"/a/new\nline\xff"), &ctx());
        assert_eq!(
            l,
            "fp: denied file_open /a/new\\nline\\xff by cat (read, pid 0, uid 0): path-rule \
             by rule \"/srv/x\" (<builtin --deny>)\n"
        );
    }

    #[test]
    fn moves_show_and_record_both_names() {
        let mut ev = event(Hook::PathRename, KernelOp::Read, b"/w/c.secret");
        ev.target[..8].copy_from_slice(b"/w/c.txt");
        ev.target_len = 8;
        ev.reason = Reason::Refer as u8;
        ev.flags |= EVENT_EXCHANGE;
        let l = line(&ev, &ctx());
        assert!(
            l.starts_with("fp: denied path_rename /w/c.secret -> /w/c.txt by cat (read, "),
            "{l}"
        );
        assert!(l.contains("refer"), "{l}");
        let record = audit_record(&ev, &ctx());
        assert_eq!(record.op, audit::Op::Exchange);
        assert_eq!(record.target_path, Some(audit::RawPath(b"/w/c.txt".to_vec())));
        let open = audit_record(&event(Hook::FileOpen, KernelOp::Read, b"/x"), &ctx());
        assert_eq!(open.target_path, None, "only moves have a second name");
    }

    #[test]
    fn boundary_refusals_name_the_process_they_aimed_at() {
        let mut ev = event(Hook::TaskKill, KernelOp::Write, b"");
        ev.reason = Reason::Boundary as u8;
        ev.rule_id = NO_RULE;
        (ev.target_pid, ev.target_cgroup) = (4242, 77);
        let l = line(&ev, &ctx());
        assert!(
            l.starts_with("fp: denied task_kill process 4242 (cgroup 77) by cat (write, ")
                && l.contains("session-boundary"),
            "{l}"
        );
        let record = audit_record(&ev, &ctx());
        assert_eq!((record.target_pid, record.target_cgroup), (Some(4242), Some(77)));
        assert_eq!(
            (record.rule.as_str(), record.rule_source.as_str()),
            ("(session boundary)", "kernel")
        );
        let open = audit_record(&event(Hook::FileOpen, KernelOp::Read, b"/x"), &ctx());
        assert_eq!((open.target_pid, open.target_cgroup), (None, None), "only boundary refusals");
    }

    #[test]
    fn floor_refusals_name_the_kernel_interface() {
        let mut ev = event(Hook::LockedDown, KernelOp::Write, b"");
        ev.reason = Reason::Boundary as u8;
        ev.ino = 22;
        ev.flags |= EVENT_PATH_FS_RELATIVE;
        let l = line(&ev, &ctx());
        // Named as this kernel names reason 22, if its BTF says.
        let named = match crate::kernel::lockdown_reason(22) {
            Some(name) => format!("lockdown reason 22 ({name}) by cat"),
            None => "lockdown reason 22 by cat".to_owned(),
        };
        assert!(l.starts_with(&format!("fp: denied locked_down {named}")), "{l}");
        assert!(!l.contains("within filesystem"), "{l}");
        ev.hook = Hook::KernelReadFile as u8;
        ev.ino = 2;
        assert!(line(&ev, &ctx()).contains("kernel_read_file kernel load of a module by"));
        ev.ino = 99;
        assert!(line(&ev, &ctx()).contains("kernel load id 99 by"));
        (ev.hook, ev.ino) = (Hook::PerfEventOpen as u8, 2);
        assert!(line(&ev, &ctx()).contains("perf_event_open perf event: kernel by"));
        (ev.hook, ev.ino) = (Hook::FileIoctl as u8, 0x5412);
        assert!(line(&ev, &ctx()).contains("file_ioctl ioctl TIOCSTI by"));
        (ev.hook, ev.ino) = (Hook::FileIoctlCompat as u8, 0x541C);
        assert!(line(&ev, &ctx()).contains("file_ioctl_compat ioctl TIOCLINUX by"));
        // Devices by number, in the line and as the record's own members.
        (ev.hook, ev.ino, ev.flags) = (Hook::FileOpen as u8, 7 << 20 | 3, ev.flags | EVENT_DEVICE);
        assert!(line(&ev, &ctx()).contains("file_open block device 7:3 by"));
        let record = audit_record(&ev, &ctx());
        assert_eq!(record.device.as_deref(), Some("7:3"));
        assert_eq!(record.interface.as_deref(), Some("block device 7:3"));
        ev.hook = Hook::PathMknod as u8;
        assert!(line(&ev, &ctx()).contains("path_mknod device node 7:3 by"));
        // A kernel setting by its filesystem and inode, without the filesystem-relative path note.
        (ev.hook, ev.ino, ev.fs_magic) = (Hook::FileOpen as u8, 42, 0x6265_6572);
        ev.flags = ev.flags & !EVENT_DEVICE | EVENT_KERNEL_SETTING;
        let l = line(&ev, &ctx());
        assert!(l.contains("file_open kernel setting on sysfs (inode 42) by"), "{l}");
        assert!(!l.contains("within filesystem"), "{l}");
    }

    /// A daemon session's line from the record says what the embedded agent's says of the event.
    #[test]
    fn record_lines_say_what_event_lines_say() {
        let ev = event(Hook::FileOpen, KernelOp::Read, b"/srv/x");
        let from_event = line(&ev, &ctx());
        let from_record = record_line(&audit_record(&ev, &ctx()));
        assert_eq!(from_record, from_event);
        let mut ev = event(Hook::TaskKill, KernelOp::Write, b"");
        (ev.reason, ev.rule_id, ev.target_cgroup, ev.target_pid) =
            (Reason::Boundary as u8, NO_RULE, 7, 42);
        assert_eq!(record_line(&audit_record(&ev, &ctx())), line(&ev, &ctx()));
    }

    #[test]
    fn socket_refusals_name_the_address_and_its_server() {
        let mut ev = event(Hook::UnixStreamConnect, KernelOp::Write, b"\0helper");
        (ev.reason, ev.rule_id, ev.target_cgroup, ev.target_pid) =
            (Reason::Boundary as u8, NO_RULE, 7, 42);
        let l = line(&ev, &ctx());
        assert!(
            l.starts_with("fp: denied unix_stream_connect socket @helper served by process 42 (cgroup 7) by cat"),
            "{l}"
        );
        let record = audit_record(&ev, &ctx());
        assert_eq!(record.path.as_bytes(), b"@helper");
        assert_eq!((record.target_pid, record.target_cgroup), (Some(42), Some(7)));
        // A datagram socket has no listener: its server is named by cgroup alone.
        (ev.hook, ev.target_pid) = (Hook::UnixMaySend as u8, 0);
        ev.path[..9].copy_from_slice(b"/dev/log\0");
        ev.path_len = 9;
        let l = line(&ev, &ctx());
        assert!(l.contains("unix_may_send socket /dev/log served by cgroup 7 by"), "{l}");
        let record = audit_record(&ev, &ctx());
        assert_eq!((record.target_pid, record.target_cgroup), (None, Some(7)));
        assert_eq!(record.path.as_bytes(), b"/dev/log");
    }

    #[test]
    fn unanswerable_verdicts_and_audit_mode_say_so() {
        let mut ev = event(Hook::FileOpen, KernelOp::Read, b"/x");
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
        assert_eq!(op(Hook::FileOpen, KernelOp::Read), audit::Op::Read);
        assert_eq!(op(Hook::PathMknod, KernelOp::Write), audit::Op::Create);
        assert_eq!(op(Hook::PathRename, KernelOp::Delete), audit::Op::Rename, "one record a move");
        assert_eq!(op(Hook::PathRename, KernelOp::Write), audit::Op::Rename);
        assert_eq!(op(Hook::PathLink, KernelOp::Read), audit::Op::Link);
        assert_eq!(op(Hook::PathChmod, KernelOp::Write), audit::Op::Setattr);
        assert_eq!(op(Hook::BprmCheckSecurity, KernelOp::Exec), audit::Op::Exec);
        assert_eq!(op(Hook::PathTruncate, KernelOp::Write), audit::Op::Write);
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
            cgroup: 1,
            policy: Arc::new(policy),
            policy_hash: "sha256:00".into(),
        }
    }
}
