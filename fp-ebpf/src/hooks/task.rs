//! Hooks on tasks and bpf(): fp's self-protection and the session boundary between processes.
use fp_common::kernel::Hook;

use crate::{
    boundary::{refuse_clone_into_cgroup, refuse_outsider},
    protect::refuse_bpf,
};

hook! {
    /// bpf(2) before 6.14.
    lsm("bpf", ret = 3) fp_bpf;
    fmod_ret("security_bpf") fp_fmod_ret_bpf;
    // bpf(int cmd, union bpf_attr *attr, unsigned int size, int ret)
    |session, _ctx| refuse_bpf(session)
}

hook! {
    /// bpf(2) with the `kernel` argument (6.14+).
    lsm("bpf", ret = 4) fp_bpf_kernel;
    fmod_ret("security_bpf") fp_fmod_ret_bpf_kernel;
    // bpf(int cmd, union bpf_attr *attr, unsigned int size, bool kernel, int ret)
    |session, _ctx| refuse_bpf(session)
}

hook! {
    /// Every signal a process sends (kill, tgkill, sigqueue, pidfd_send_signal), signal 0 too;
    /// the kernel's own (SIGCHLD, a terminal's ^C and ^Z, SIGPIPE) never reach the hook. (A USB
    /// async I/O completion signals with the requester's `cred` from whatever task runs then:
    /// when that task is a session's, its boundary applies.)
    lsm("task_kill", ret = 4) fp_task_kill;
    fmod_ret("security_task_kill") fp_fmod_ret_task_kill;
    // task_kill(struct task_struct *p, struct kernel_siginfo *info, int sig,
    //           const struct cred *cred, int ret)
    |session, ctx| refuse_outsider(session, Hook::TaskKill, ctx.arg(0))
}

hook! {
    /// Every ptrace-mode access check: ptrace attach, `/proc/PID/{mem,environ,fd,cwd,root,exe,
    /// maps}`, process_vm_readv/writev, pidfd_getfd, kcmp, setns through a pidfd.
    lsm("ptrace_access_check", ret = 2) fp_ptrace_access_check;
    fmod_ret("security_ptrace_access_check") fp_fmod_ret_ptrace_access_check;
    // ptrace_access_check(struct task_struct *child, unsigned int mode, int ret)
    |session, ctx| refuse_outsider(session, Hook::PtraceAccessCheck, ctx.arg(0))
}

hook! {
    /// Every new task (fork, clone, clone3, vfork, a new thread), before it joins a cgroup.
    lsm("task_alloc", ret = 2) fp_task_alloc;
    fmod_ret("security_task_alloc") fp_fmod_ret_task_alloc;
    // task_alloc(struct task_struct *task, unsigned long clone_flags, int ret)
    |session, ctx| refuse_clone_into_cgroup(session, ctx.arg(1))
}
