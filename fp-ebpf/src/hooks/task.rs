//! Hooks on tasks and bpf(): fp's self-protection and the session boundary between processes.
use aya_ebpf::{macros::lsm, programs::LsmContext};
use fp_common::kernel::Hook;

use super::in_session;
use crate::{
    boundary::{refuse_clone_into_cgroup, refuse_outsider},
    protect::refuse_bpf,
};

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

/// Every signal a process sends (kill, tgkill, sigqueue, pidfd_send_signal), signal 0 too; the
/// kernel's own (SIGCHLD, a terminal's ^C and ^Z, SIGPIPE) never reach the hook. (A USB async
/// I/O completion signals with the requester's `cred` from whatever task runs then: when that
/// task is a session's, its boundary applies.)
#[lsm(hook = "task_kill")]
pub fn fp_task_kill(ctx: LsmContext) -> i32 {
    // task_kill(struct task_struct *p, struct kernel_siginfo *info, int sig, const struct cred *cred, int ret)
    in_session(ctx.arg(4), |session| refuse_outsider(session, Hook::TaskKill, ctx.arg(0)))
}

/// Every ptrace-mode access check: ptrace attach, `/proc/PID/{mem,environ,fd,cwd,root,exe,maps}`,
/// process_vm_readv/writev, pidfd_getfd, kcmp, setns through a pidfd.
#[lsm(hook = "ptrace_access_check")]
pub fn fp_ptrace_access_check(ctx: LsmContext) -> i32 {
    // ptrace_access_check(struct task_struct *child, unsigned int mode, int ret)
    in_session(ctx.arg(2), |session| refuse_outsider(session, Hook::PtraceAccessCheck, ctx.arg(0)))
}

/// Every new task (fork, clone, clone3, vfork, a new thread), before it joins a cgroup.
#[lsm(hook = "task_alloc")]
pub fn fp_task_alloc(ctx: LsmContext) -> i32 {
    // task_alloc(struct task_struct *task, unsigned long clone_flags, int ret)
    in_session(ctx.arg(2), |session| refuse_clone_into_cgroup(session, ctx.arg(1)))
}
