//! The session boundary between processes: a session's processes ptrace, read the memory, environ
//! and `/proc/PID/{fd,cwd,root,exe,maps}` of, take fds from (pidfd_getfd) and signal only the
//! processes of their own session, and start no process in another cgroup
//! (docs/threat-model.md, "The session boundary"). Outsiders may still act on the session: the
//! rule is "current inside and target outside".
use fp_common::{
    kernel::{Hook, Op, Reason, SESSION_AUDIT_ONLY},
    policy::{NO_RULE, TableVerdict},
};

use crate::{
    decide::Outcome,
    kernel::{
        EACCES, OFF_CGROUP_ANCESTORS, OFF_CGROUP_KN, OFF_CGROUP_LEVEL, OFF_CSS_SET_DFL_CGRP,
        OFF_KERNFS_NODE_ID, OFF_TASK_STRUCT_CGROUPS, OFF_TASK_STRUCT_TGID, SESSION_CGROUP_LEVEL,
        off, read,
    },
    maps::PROTECTED,
    protect::refuse_without_path,
    report::{Report, Target, report_process},
    session::{Session, unreadable},
};

/// The id of a `struct cgroup *` (its kernfs node's, the `st_ino` of its directory).
#[inline(always)]
fn cgroup_id(cgroup: u64) -> Result<u64, ()> {
    read(read::<u64>(cgroup, off(&OFF_CGROUP_KN))?, off(&OFF_KERNFS_NODE_ID))
}

/// The id of the `struct cgroup *` `cgroup` (a cgroup v2), and whether it lies in the subtree of
/// the session cgroup `session`: its ancestor at the session level is that cgroup
/// (`cgroup_is_descendant`). Read with helper calls: `ancestors` is an array of pointers past the
/// struct's end, which the verifier's typed loads do not reach.
#[inline(always)]
pub(crate) fn cgroup_in_session(cgroup: u64, session: u64) -> Result<(u64, bool), ()> {
    let id = cgroup_id(cgroup)?;
    let level = off(&SESSION_CGROUP_LEVEL);
    if read::<i32>(cgroup, off(&OFF_CGROUP_LEVEL))? < level as i32 {
        return Ok((id, false));
    }
    let ancestor: u64 = read(cgroup, off(&OFF_CGROUP_ANCESTORS) + level * 8)?;
    Ok((id, cgroup_id(ancestor)? == session))
}

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
    report_process(session, &outcome, &Report::new(hook, Op::Write, enforced), &target);
    if enforced { -EACCES } else { 0 }
}

/// `clone3`'s flag for a child that starts in the cgroup its `cgroup` fd names.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Refuses a new task that would start in a cgroup given by fd (`clone3(CLONE_INTO_CGROUP)`):
/// an `O_PATH` fd of any cgroup directory is enough, and no file hook sees it. Refused whatever
/// the cgroup: the hook does not get the fd, and a session has no cgroup of its own to start a
/// child in (cgroupfs is read-only to it), so every target is outside the session or its own
/// cgroup, where a plain fork puts the child anyway.
#[inline(always)]
pub(crate) fn refuse_clone_into_cgroup(session: &Session, clone_flags: u64) -> i32 {
    if clone_flags & CLONE_INTO_CGROUP == 0 {
        return 0;
    }
    refuse_without_path(session, Hook::TaskAlloc, Op::Write, Reason::Boundary, (0, 0))
}
