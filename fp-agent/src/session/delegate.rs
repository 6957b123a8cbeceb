//! A session's own cgroups (docs/threat-model.md, "Sub-cgroups"): `fp run` starts the session's
//! first process in a cgroup namespace rooted at the session's cgroup, where the kernel keeps its
//! processes' moves between cgroups (fp-ebpf's `cgroups` lets it write there); here the session
//! is shown that cgroup where cgroupfs is mounted, so that tools which read `/proc/self/cgroup`
//! (`0::/` in the namespace) find it.
use std::{ffi::CString, os::unix::ffi::OsStrExt as _, path::Path};

use super::Manager;

impl Manager {
    /// Bind-mounts the session cgroup `cgroup` over the hierarchy's mount point in the mount
    /// namespace of `first` (the session's first process), when that namespace is its own: a
    /// session sharing the host's gets nothing (its processes see the whole hierarchy, read-only).
    pub fn show_own_cgroup(&self, cgroup: &Path, first: i32) -> anyhow::Result<()> {
        let Some(ns) = crate::mount_ns::own(first)? else { return Ok(()) };
        let path = |p: &Path| CString::new(p.as_os_str().as_bytes());
        let bind = (path(cgroup)?, path(&self.hierarchy.mount)?);
        crate::mount_ns::bind_in(&ns, &[bind])
    }
}
