//! The session boundary between processes: a session's processes ptrace, read the memory, environ
//! and `/proc/PID/{fd,cwd,root,exe,maps}` of, take fds from (pidfd_getfd) and signal only the
//! processes of their own session, and start no process in another cgroup
//! (docs/threat-model.md, "The session boundary"). Outsiders may still act on the session: the
//! rule is "current inside and target outside".
use aya_ebpf::{macros::map, maps::HashMap};
use fp_common::{
    kernel::{Hook, KernelOp, Reason, SESSION_AUDIT_ONLY},
    policy::{NO_RULE, TableVerdict},
};

use crate::{
    cgroups::cgroup_in_session,
    kernel::{
        EACCES, OFF_CSS_SET_DFL_CGRP, OFF_TASK_STRUCT_CGROUPS, OFF_TASK_STRUCT_TGID, off, read,
    },
    outcome::Outcome,
    protect::refuse_without_path,
    report::{Report, Target, report_process},
    session::{Session, unreadable},
};

/// fp's own processes (the daemon, `fp run`), by tgid: sessions may not signal or trace them.
#[map]
pub(crate) static PROTECTED: HashMap<u32, u8> = HashMap::with_max_entries(256, 0);

/// The process `task` belongs to, and whether its cgroup lies in the session's subtree.
#[inline(always)]
fn process(task: u64, session: u64) -> Result<(Target, bool), ()> {
    let tgid: u32 = read(task, off(&OFF_TASK_STRUCT_TGID))?;
    let css_set: u64 = read(task, off(&OFF_TASK_STRUCT_CGROUPS))?;
    let (cgroup, inside) = cgroup_in_session(read(css_set, off(&OFF_CSS_SET_DFL_CGRP))?, session)?;
    Ok((Target { cgroup, tgid: tgid as u64 }, inside))
}

/// Refuses `hook` on `task` when its process is outside the session (a process of fp's own is
/// named as self-protection); a task that cannot be read is refused (fail closed).
#[inline(always)]
pub(crate) fn refuse_outsider(session: &Session, hook: Hook, task: u64) -> i32 {
    let Ok((target, inside)) = process(task, session.id) else {
        return unreadable(session);
    };
    if inside {
        return 0;
    }
    // SAFETY: only tested for presence.
    let reason = match unsafe { PROTECTED.get(&(target.tgid as u32)) } {
        Some(_) => Reason::SelfProtection,
        None => Reason::Boundary,
    };
    let outcome = Outcome { verdict: TableVerdict::Deny, reason, rule_id: NO_RULE };
    let enforced = session.info.flags & SESSION_AUDIT_ONLY == 0;
    report_process(session, &outcome, &Report::new(hook, KernelOp::Write, enforced), &target);
    if enforced { -EACCES } else { 0 }
}

/// `clone3`'s flag for a child that starts in the cgroup its `cgroup` fd names.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Refuses a new task that would start in a cgroup given by fd (`clone3(CLONE_INTO_CGROUP)`):
/// an `O_PATH` fd of any cgroup directory is enough, and no file hook sees it. Refused whatever
/// the cgroup: the hook does not get the fd. A session moves its processes into cgroups of its
/// own by `cgroup.procs` (crate::cgroups); a plain fork puts the child in its parent's.
#[inline(always)]
pub(crate) fn refuse_clone_into_cgroup(session: &Session, clone_flags: u64) -> i32 {
    if clone_flags & CLONE_INTO_CGROUP == 0 {
        return 0;
    }
    refuse_without_path(session, Hook::TaskAlloc, KernelOp::Write, Reason::Boundary, (0, 0))
}
