//! Hooks on kernel interfaces (crate::floor): lockdown's, what is loaded into the kernel, perf
//! events.
use aya_ebpf::{macros::lsm, programs::LsmContext};
use fp_common::kernel::Hook;

use super::in_session;
use crate::floor::{
    refuse_kernel_load, refuse_locked_down, refuse_module_request, refuse_perf_event,
};

/// Every check of the kernel's lockdown (`security_locked_down`), whether or not the lockdown
/// LSM is active: asked by the task using the interface.
#[lsm(hook = "locked_down")]
pub fn fp_locked_down(ctx: LsmContext) -> i32 {
    // locked_down(enum lockdown_reason what, int ret)
    in_session(ctx.arg(1), |session| refuse_locked_down(session, ctx.arg(0)))
}

/// Data handed to the kernel from memory: `init_module`, `kexec_load`.
#[lsm(hook = "kernel_load_data")]
pub fn fp_kernel_load_data(ctx: LsmContext) -> i32 {
    // kernel_load_data(enum kernel_load_data_id id, bool contents, int ret)
    in_session(ctx.arg(2), |session| refuse_kernel_load(session, Hook::KernelLoadData, ctx.arg(0)))
}

/// A file the kernel reads for itself: `finit_module`, `kexec_file_load`, firmware.
#[lsm(hook = "kernel_read_file")]
pub fn fp_kernel_read_file(ctx: LsmContext) -> i32 {
    // kernel_read_file(struct file *file, enum kernel_read_file_id id, bool contents, int ret)
    in_session(ctx.arg(3), |session| refuse_kernel_load(session, Hook::KernelReadFile, ctx.arg(1)))
}

/// Every perf_event_open(2), once per check it makes of the event (until 6.11).
#[lsm(hook = "perf_event_open")]
pub fn fp_perf_event_open(ctx: LsmContext) -> i32 {
    // perf_event_open(struct perf_event_attr *attr, int type, int ret)
    in_session(ctx.arg(2), |session| refuse_perf_event(session, ctx.arg(1)))
}

/// [`fp_perf_event_open`] with the check's type alone (6.12).
#[lsm(hook = "perf_event_open")]
pub fn fp_perf_event_open_type(ctx: LsmContext) -> i32 {
    // perf_event_open(int type, int ret)
    in_session(ctx.arg(1), |session| refuse_perf_event(session, ctx.arg(0)))
}

/// A module the kernel asks modprobe for (`request_module`), in the requesting task.
#[lsm(hook = "kernel_module_request")]
pub fn fp_kernel_module_request(ctx: LsmContext) -> i32 {
    // kernel_module_request(char *kmod_name, int ret)
    in_session(ctx.arg(1), refuse_module_request)
}
