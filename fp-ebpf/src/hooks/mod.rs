//! The programs, by the object they guard (docs/hooks.md has the hook -> op table).
//!
//! The checks of pending files on reads, writes and maps (`file_permission`, `mmap_file`) are
//! `#[lsm_cgroup]` programs, attached only to the cgroups of sessions whose tables can prompt:
//! the kernel runs them only for the tasks in those sessions, and a session's task finds its
//! session in its cgroup's storage. The kernel has 10 such hooks for the whole host
//! (`CGROUP_LSM_NUM`). The other hooks are `#[lsm]` programs, which every task runs and which
//! return at once outside sessions: their session check costs an outsider less than the kernel's
//! per-cgroup dispatch would (docs/performance.md).
//!
//! Each hook's decision also has an fmod_ret program on the kernel function that calls the hook's
//! LSM chain (`security_<hook>`; an fentry program where that function returns nothing): the
//! same decision for kernels that run no BPF LSM program ([`hook!`]). There every task runs it,
//! and finds its session as an `#[lsm]` program does.

/// One hook's programs, each running `$decision` with the session of the task (`|$session,
/// $ctx|`: the context is the program's): `$lsm`, the BPF LSM program (`lsm`: run for every task,
/// [`in_session`]; `lsm_cgroup`: attached per session cgroup, [`in_session_cgroup`]), and
/// `$fmod_ret`, an fmod_ret program on `$function`, the kernel function that calls the hook's LSM
/// chain, for every task ([`in_session`]; a return other than 0 skips the function and is its
/// result). `ret` is the index of the hook's last argument, the verdict of the programs before;
/// the function's arguments are the hook's, or its own `ret` says where they end. A hook with
/// two prototypes has two invocations; one whose function has one prototype on every kernel fp
/// supports gives the other no fmod_ret program.
macro_rules! hook {
    (
        $(#[$doc:meta])*
        $kind:ident($hook:literal, ret = $ret:literal) $lsm:ident;
        $(fmod_ret($function:literal $(, ret = $function_ret:literal)?) $fmod_ret:ident;)?
        |$session:ident, $ctx:ident| $decision:expr
    ) => {
        $(#[$doc])*
        #[aya_ebpf::macros::$kind(hook = $hook)]
        pub fn $lsm($ctx: aya_ebpf::programs::LsmContext) -> i32 {
            hook!(@entry $kind)($ctx.arg($ret), |$session| $decision)
        }
        $(
            #[doc = concat!("[`", stringify!($lsm), "`] as an fmod_ret program on ", $function, ".")]
            #[aya_ebpf::macros::fmod_ret(function = $function)]
            pub fn $fmod_ret($ctx: aya_ebpf::programs::FEntryContext) -> i32 {
                $crate::hooks::in_session($ctx.arg(hook!(@ret $ret $($function_ret)?)), |$session| {
                    $decision
                })
            }
        )?
    };
    (@entry lsm) => { $crate::hooks::in_session };
    (@entry lsm_cgroup) => { $crate::hooks::in_session_cgroup };
    (@ret $ret:literal) => { $ret };
    (@ret $ret:literal $function_ret:literal) => { $function_ret };
}

mod file;
mod floor;
mod inode;
mod mount;
mod path;
mod sigio;
mod task;
mod terminal;
mod unix;

use aya_ebpf::helpers::generated::bpf_set_retval;

use crate::session::{Session, attached_session, current_session};

/// The first work of every program: keeps the denial of an earlier BPF LSM program on the same
/// hook (`ret`: fp never turns another program's denial into an allow), then finds the session of
/// the current task (one cgroup-ancestor helper call and one read of its slot of the sessions'
/// slot table, which holds a session's settings; a `SESSIONS` lookup only for sessions sharing a
/// slot). A task outside every session returns here, before any read of the hook's arguments; a
/// session task's `decision` gets the session and never looks it up again.
#[inline(always)]
pub(crate) fn in_session(ret: i32, decision: impl FnOnce(&Session) -> i32) -> i32 {
    if ret != 0 {
        return ret;
    }
    match current_session() {
        Some(session) => decision(&session),
        None => 0,
    }
}

/// [`in_session`] for an `#[lsm_cgroup]` program: the kernel runs it only for the tasks of the
/// session whose cgroup it is attached to, and the session is read from that cgroup's storage,
/// or found as [`in_session`] finds it while the storage is not written (the programs are
/// attached to a running session by the reload that lets its tables hold an open, before its
/// storage is written, and it is zeroed first at the session's end); and the verdict (0 or
/// -errno, as an `#[lsm]` program returns it) is given as the kernel takes it from these
/// programs: 1 to allow, 0 to deny with the errno set by `bpf_set_retval`.
#[inline(always)]
pub(crate) fn in_session_cgroup(ret: i32, decision: impl FnOnce(&Session) -> i32) -> i32 {
    let verdict = match ret {
        0 => attached_session().or_else(current_session).map_or(0, |session| decision(&session)),
        denied => denied,
    };
    if verdict == 0 {
        return 1;
    }
    // SAFETY: a helper call with a plain integer argument.
    unsafe { bpf_set_retval(verdict) };
    0
}
