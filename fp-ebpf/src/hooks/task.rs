//! Hooks on tasks and bpf(): fp's self-protection.
use aya_ebpf::{macros::lsm, programs::LsmContext};
use fp_common::kernel::Hook;

use super::in_session;
use crate::protect::{refuse_bpf, refuse_if_protected};

/// bpf(2) before 6.14.
#[lsm(hook = "bpf")]
pub fn fp_bpf(ctx: LsmContext) -> i32 {
    // bpf(int cmd, union bpf_attr *attr, unsigned int size, int ret)
    in_session(ctx.arg(3), refuse_bpf)
}

/// bpf(2) with the `kernel` argument (6.14+).
#[lsm(hook = "bpf")]
pub fn fp_bpf_kernel(ctx: LsmContext) -> i32 {
    // bpf(int cmd, union bpf_attr *attr, unsigned int size, bool kernel, int ret)
    in_session(ctx.arg(4), refuse_bpf)
}

#[lsm(hook = "task_kill")]
pub fn fp_task_kill(ctx: LsmContext) -> i32 {
    // task_kill(struct task_struct *p, struct kernel_siginfo *info, int sig, const struct cred *cred, int ret)
    in_session(ctx.arg(4), |session| refuse_if_protected(session, Hook::TaskKill, ctx.arg(0)))
}

#[lsm(hook = "ptrace_access_check")]
pub fn fp_ptrace_access_check(ctx: LsmContext) -> i32 {
    // ptrace_access_check(struct task_struct *child, unsigned int mode, int ret)
    in_session(ctx.arg(2), |session| {
        refuse_if_protected(session, Hook::PtraceAccessCheck, ctx.arg(0))
    })
}
