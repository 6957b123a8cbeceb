//! Hooks on kernel interfaces (crate::floor): lockdown's, what is loaded into the kernel, perf
//! events.
use fp_common::kernel::Hook;

use crate::floor::{
    refuse_kernel_load, refuse_locked_down, refuse_module_request, refuse_perf_event,
};

hook! {
    /// Every check of the kernel's lockdown (`security_locked_down`), whether or not the lockdown
    /// LSM is active: asked by the task using the interface.
    lsm("locked_down", ret = 1) fp_locked_down;
    fmod_ret("security_locked_down") fp_fmod_ret_locked_down;
    // locked_down(enum lockdown_reason what, int ret)
    |session, ctx| refuse_locked_down(session, ctx.arg(0))
}

hook! {
    /// Data handed to the kernel from memory: `init_module`, `kexec_load`.
    lsm("kernel_load_data", ret = 2) fp_kernel_load_data;
    fmod_ret("security_kernel_load_data") fp_fmod_ret_kernel_load_data;
    // kernel_load_data(enum kernel_load_data_id id, bool contents, int ret)
    |session, ctx| refuse_kernel_load(session, Hook::KernelLoadData, ctx.arg(0))
}

hook! {
    /// A file the kernel reads for itself: `finit_module`, `kexec_file_load`, firmware.
    lsm("kernel_read_file", ret = 3) fp_kernel_read_file;
    fmod_ret("security_kernel_read_file") fp_fmod_ret_kernel_read_file;
    // kernel_read_file(struct file *file, enum kernel_read_file_id id, bool contents, int ret)
    |session, ctx| refuse_kernel_load(session, Hook::KernelReadFile, ctx.arg(1))
}

hook! {
    /// Every perf_event_open(2), once per check it makes of the event (until 6.11).
    lsm("perf_event_open", ret = 2) fp_perf_event_open;
    fmod_ret("security_perf_event_open") fp_fmod_ret_perf_event_open;
    // perf_event_open(struct perf_event_attr *attr, int type, int ret)
    |session, ctx| refuse_perf_event(session, ctx.arg(1))
}

hook! {
    /// [`fp_perf_event_open`] with the check's type alone (6.12).
    lsm("perf_event_open", ret = 1) fp_perf_event_open_type;
    fmod_ret("security_perf_event_open") fp_fmod_ret_perf_event_open_type;
    // perf_event_open(int type, int ret)
    |session, ctx| refuse_perf_event(session, ctx.arg(0))
}

hook! {
    /// A module the kernel asks modprobe for (`request_module`), in the requesting task.
    lsm("kernel_module_request", ret = 1) fp_kernel_module_request;
    fmod_ret("security_kernel_module_request") fp_fmod_ret_kernel_module_request;
    // kernel_module_request(char *kmod_name, int ret)
    |session, _ctx| refuse_module_request(session)
}
