//! Refusals decided without a path: fp's self-protection (bpf(), the mount table) and the event
//! of such a refusal (also of the session boundary's, crate::boundary).
use fp_common::{
    kernel::{EVENT_DEVICE, EVENT_KERNEL_SETTING, Hook, KernelOp, Reason, SESSION_AUDIT_ONLY},
    policy::{NO_RULE, TableVerdict},
};

use crate::{
    kernel::EACCES,
    outcome::Outcome,
    report::{Report, report},
    session::Session,
    state::{
        SCRATCH,
        walk::{NO_MOUNT, UNRESOLVED},
    },
};

/// Reports and refuses an operation decided without resolving a path (the event names the file
/// by identity, if any); audit-mode sessions are only reported.
#[inline(always)]
pub(crate) fn refuse_without_path(
    session: &Session,
    hook: Hook,
    op: KernelOp,
    reason: Reason,
    file: (u64, u32),
) -> i32 {
    refuse(session, &Report::new(hook, op, false), reason, file)
}

/// [`refuse_without_path`] of an operation on a device (the session boundary's floor): the event
/// names the device by its number, `rdev` (`EVENT_DEVICE`).
#[inline(always)]
pub(crate) fn refuse_device(session: &Session, hook: Hook, op: KernelOp, rdev: u32) -> i32 {
    let what = Report { flags: EVENT_DEVICE, ..Report::new(hook, op, false) };
    refuse(session, &what, Reason::Boundary, (rdev as u64, 0))
}

/// [`refuse_without_path`] of an open for writing of a kernel setting (the session boundary's
/// floor): the event names the file by identity and its filesystem by `s_magic`
/// (`EVENT_KERNEL_SETTING`).
#[inline(always)]
pub(crate) fn refuse_kernel_setting_write(session: &Session, file: (u64, u32), magic: u64) -> i32 {
    let what = Report {
        flags: EVENT_KERNEL_SETTING,
        fs_magic: magic as u32,
        ..Report::new(Hook::FileOpen, KernelOp::Write, false)
    };
    refuse(session, &what, Reason::Boundary, file)
}

#[inline(always)]
fn refuse(session: &Session, what: &Report, reason: Reason, file: (u64, u32)) -> i32 {
    let Some(s) = SCRATCH.get_ptr_mut(0) else {
        return -EACCES;
    };
    // SAFETY: this CPU's scratch value.
    unsafe {
        (*s).walk.ino = file.0;
        (*s).walk.dev = file.1 as u64;
        (*s).walk.vfsmount = NO_MOUNT;
        (*s).walk.state = UNRESOLVED;
    }
    let verdict =
        if reason == Reason::PromptPending { TableVerdict::Prompt } else { TableVerdict::Deny };
    let outcome = Outcome { verdict, reason, rule_id: NO_RULE };
    let enforced = session.info.flags & SESSION_AUDIT_ONLY == 0;
    report(session, &outcome, &Report { denied: enforced, ..*what });
    if enforced { -EACCES } else { 0 }
}

/// Sessions may not use bpf(): with it, root could detach fp's programs or rewrite its maps.
#[inline(always)]
pub(crate) fn refuse_bpf(session: &Session) -> i32 {
    refuse_without_path(session, Hook::Bpf, KernelOp::Write, Reason::SelfProtection, (0, 0))
}

/// Sessions may not change the mount table, in any namespace: a mount, bind mount, move or
/// umount could hide a path behind another tree or show a tree under another name, and the walk
/// would then name what the session sees. The event names the mountpoint (or the filesystem) by
/// identity, `(0, 0)` when it cannot be read: the refusal never depends on it.
#[inline(always)]
pub(crate) fn refuse_mount(
    session: &Session,
    hook: Hook,
    identity: impl FnOnce() -> Result<(u64, u32), ()>,
) -> i32 {
    let file = identity().unwrap_or((0, 0));
    refuse_without_path(session, hook, KernelOp::Write, Reason::SelfProtection, file)
}
