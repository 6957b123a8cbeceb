//! What the session manager needs from the kernel layer: [`kernel::Enforcer`] on a host, a fake
//! in the manager's tests; and the manager's calls passed through to it for the prompt broker and
//! the host's status.
use std::{collections::HashSet, path::Path};

use fp_common::{
    kernel::{GrantValue, PendingKey, SessionCounters, SessionInfo},
    policy::PrefixKeyData,
};

use anyhow::anyhow;

use super::Manager;
use crate::{
    kernel::{self, MapUsage, tables::InodeTable},
    policy::{Device, KernelTables, Peer},
};

/// The kernel's session and table maps, as [`kernel::Enforcer`] writes them (see there).
pub(super) trait Enforce: Send {
    /// Installs tables under the new id `id`; on error nothing of them stays behind.
    fn install_tables(
        &mut self,
        id: u64,
        tables: &KernelTables,
        inodes: &InodeTable,
    ) -> anyhow::Result<()>;
    /// Removes tables `id`; entries already gone are not an error.
    fn remove_tables(
        &mut self,
        id: u64,
        tables: &KernelTables,
        inodes: &InodeTable,
    ) -> anyhow::Result<()>;
    /// Attaches the checks of pending files to a session's cgroup, if they are not.
    fn attach_holds(&mut self, cgroup: u64, path: &Path) -> anyhow::Result<()>;
    /// Writes the session of a cgroup.
    fn set_session(&mut self, cgroup: u64, info: SessionInfo) -> anyhow::Result<()>;
    fn session(&mut self, cgroup: u64) -> anyhow::Result<SessionInfo>;
    /// The unix sockets served from outside the session of `cgroup` that it may use, exactly.
    fn set_unix_peers(&mut self, cgroup: u64, peers: &[Peer]) -> anyhow::Result<()>;
    /// The block devices the session of `cgroup` may open past the floor, exactly.
    fn set_block_devices(&mut self, cgroup: u64, devices: &[Device]) -> anyhow::Result<()>;
    /// Forgets a session and detaches its programs; what is already gone is not an error.
    fn end_session(&mut self, cgroup: u64) -> anyhow::Result<()>;
    fn sessions(&mut self) -> anyhow::Result<Vec<(u64, SessionInfo)>>;
    fn counters(&mut self, cgroup: u64) -> anyhow::Result<SessionCounters>;
    fn sweep(&mut self, tables: &HashSet<u64>, cgroups: &HashSet<u64>) -> anyhow::Result<usize>;
    fn unrecorded_pending(&mut self) -> anyhow::Result<Vec<PendingKey>>;
    fn settle(&mut self, cgroup: u64, st_dev: u64, st_ino: u64) -> anyhow::Result<()>;
    fn set_grants(&mut self, grants: &[(u32, PrefixKeyData, GrantValue)]) -> anyhow::Result<()>;
    fn usage(&mut self) -> anyhow::Result<Vec<MapUsage>>;
    fn hooks(&self) -> Vec<String>;
    fn backend(&self) -> kernel::Backend;
    fn unload(self: Box<Self>) -> anyhow::Result<()>;
}

impl Enforce for kernel::Enforcer {
    fn install_tables(
        &mut self,
        id: u64,
        tables: &KernelTables,
        inodes: &InodeTable,
    ) -> anyhow::Result<()> {
        kernel::Enforcer::install_tables(self, id, tables, inodes)
    }
    fn remove_tables(
        &mut self,
        id: u64,
        tables: &KernelTables,
        inodes: &InodeTable,
    ) -> anyhow::Result<()> {
        kernel::Enforcer::remove_tables(self, id, tables, inodes)
    }
    fn attach_holds(&mut self, cgroup: u64, path: &Path) -> anyhow::Result<()> {
        kernel::Enforcer::attach_holds(self, cgroup, path)
    }
    fn set_session(&mut self, cgroup: u64, info: SessionInfo) -> anyhow::Result<()> {
        kernel::Enforcer::set_session(self, cgroup, info)
    }
    fn session(&mut self, cgroup: u64) -> anyhow::Result<SessionInfo> {
        kernel::Enforcer::session(self, cgroup)
    }
    fn set_unix_peers(&mut self, cgroup: u64, peers: &[Peer]) -> anyhow::Result<()> {
        kernel::Enforcer::set_unix_peers(self, cgroup, peers)
    }
    fn set_block_devices(&mut self, cgroup: u64, devices: &[Device]) -> anyhow::Result<()> {
        kernel::Enforcer::set_block_devices(self, cgroup, devices)
    }
    fn end_session(&mut self, cgroup: u64) -> anyhow::Result<()> {
        kernel::Enforcer::end_session(self, cgroup)
    }
    fn sessions(&mut self) -> anyhow::Result<Vec<(u64, SessionInfo)>> {
        kernel::Enforcer::sessions(self)
    }
    fn counters(&mut self, cgroup: u64) -> anyhow::Result<SessionCounters> {
        kernel::Enforcer::counters(self, cgroup)
    }
    fn sweep(&mut self, tables: &HashSet<u64>, cgroups: &HashSet<u64>) -> anyhow::Result<usize> {
        kernel::Enforcer::sweep(self, tables, cgroups)
    }
    fn unrecorded_pending(&mut self) -> anyhow::Result<Vec<PendingKey>> {
        kernel::Enforcer::unrecorded_pending(self)
    }
    fn settle(&mut self, cgroup: u64, st_dev: u64, st_ino: u64) -> anyhow::Result<()> {
        kernel::Enforcer::settle(self, cgroup, st_dev, st_ino)
    }
    fn set_grants(&mut self, grants: &[(u32, PrefixKeyData, GrantValue)]) -> anyhow::Result<()> {
        kernel::Enforcer::set_grants(self, grants)
    }
    fn usage(&mut self) -> anyhow::Result<Vec<MapUsage>> {
        kernel::Enforcer::usage(self)
    }
    fn hooks(&self) -> Vec<String> {
        kernel::Enforcer::hooks(self)
    }
    fn backend(&self) -> kernel::Backend {
        kernel::Enforcer::backend(self)
    }
    fn unload(self: Box<Self>) -> anyhow::Result<()> {
        kernel::Enforcer::unload(*self)
    }
}

impl Manager {
    /// Refreshes the prompt broker's heartbeat in the kernel.
    pub fn broker_heartbeat(&self) -> anyhow::Result<()> {
        match &mut *self.broker_clock.lock().unwrap() {
            Some(clock) => clock.beat(),
            None => Err(anyhow!("no broker heartbeat map")),
        }
    }

    /// The broker answered an open of (`st_dev`, `st_ino`) by the session of cgroup `id`: its
    /// reads of the file are no longer pending.
    pub fn settle(&self, id: u64, st_dev: u64, st_ino: u64) -> anyhow::Result<()> {
        self.with_enforcer(|e| e.settle(id, st_dev, st_ino))
    }

    /// Replaces the remembered prompt grants in the kernel (see `kernel::Enforcer::set_grants`).
    pub fn set_grants(&self, grants: &[(u32, PrefixKeyData, GrantValue)]) -> anyhow::Result<()> {
        self.with_enforcer(|e| e.set_grants(grants))
    }

    /// How full the kernel maps are (empty if they cannot be read).
    pub fn map_usage(&self) -> Vec<kernel::MapUsage> {
        self.with_enforcer(|e| e.usage()).unwrap_or_else(|e| {
            tracing::warn!("reading map usage: {e:#}");
            Vec::new()
        })
    }

    /// The backend the programs enforce through (None before they are loaded).
    pub fn backend(&self) -> Option<kernel::Backend> {
        self.enforcer.lock().unwrap().as_ref().map(|e| e.backend())
    }

    /// The hooks the programs are attached to.
    pub fn attached_hooks(&self) -> Vec<String> {
        self.enforcer.lock().unwrap().as_ref().map(|e| e.hooks()).unwrap_or_default()
    }
}
