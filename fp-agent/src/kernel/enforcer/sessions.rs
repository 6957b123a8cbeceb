//! Each session's entries: its settings (in `SESSIONS` and its cgroup's storage), its unix peers
//! and block devices, its counters, its end, and the sweep of what no live session owns.
use std::collections::HashSet;

use anyhow::Context as _;
use aya::maps::{Array, CgroupStorageKey, HashMap, LpmTrie, lpm_trie::Key};
use fp_common::{
    kernel::{
        BlockDeviceKey, CgroupSession, GrantValue, PendingKey, SessionCounters, SessionInfo,
        SessionSlot, UnixPeerKey, maps, session_slot,
    },
    policy::{
        InodeKey, InodeValue, NameKey, NameValue, PrefixKeyData, PrefixValue, ScopeKey, ScopeValue,
        TableHeader,
    },
};

use super::{Enforcer, SESSION_LINKS, gone, pinned_files, remove_pins};
use crate::policy::{Device, Peer};

/// `bpf_attach_type::BPF_LSM_CGROUP`: the attach type of the `CGROUP_SESSION` storage's keys.
const BPF_LSM_CGROUP: u32 = 43;

impl Enforcer {
    /// Points the session of cgroup `cgroup` at its tables and flags: confines it from now on, or
    /// (for a running session) swaps its tables in one map update.
    pub fn set_session(&mut self, cgroup: u64, info: SessionInfo) -> anyhow::Result<()> {
        let mut counters: HashMap<_, u64, SessionCounters> =
            HashMap::try_from(self.map_mut(maps::COUNTERS)?)?;
        if counters.get(&cgroup, 0).is_err() {
            counters.insert(cgroup, SessionCounters::default(), 0)?;
        }
        self.write_cgroup_session(cgroup, info)?;
        // Its slot first, which its tasks read it from (fp_common::kernel::SessionSlot).
        self.write_slots([session_slot(cgroup)], Some((cgroup, info)))?;
        let mut map: HashMap<_, u64, SessionInfo> =
            HashMap::try_from(self.map_mut(maps::SESSIONS)?)?;
        Ok(map.insert(cgroup, info, 0)?)
    }

    /// Writes `slots` of `SESSION_SLOTS` for the sessions in `SESSIONS` and `adding`
    /// (fp_common::kernel::SessionSlot): a session's own before its `SESSIONS` entry and after
    /// its removal; all of them as an agent takes over pins, whose slots a dead agent may have
    /// left half-done (naming a session that ended, which only sends its ids to the lookup, or
    /// the settings of a reload it did not finish).
    pub(super) fn write_slots(
        &mut self,
        slots: impl IntoIterator<Item = u32>,
        adding: Option<(u64, SessionInfo)>,
    ) -> anyhow::Result<()> {
        let sessions: Vec<(u64, SessionInfo)> =
            self.sessions()?.into_iter().chain(adding).collect();
        let mut map: Array<_, SessionSlot> = Array::try_from(self.map_mut(maps::SESSION_SLOTS)?)?;
        for slot in slots {
            let value = SessionSlot::of(slot, sessions.iter().copied());
            map.set(slot, value, 0).with_context(|| format!("writing session slot {slot}"))?;
        }
        Ok(())
    }

    /// The unix sockets served from outside the session of cgroup `cgroup` that it may use
    /// (fp-ebpf's `unix`): exactly `peers` from now on. Entries added before a failure stay
    /// until the session ends.
    pub fn set_unix_peers(&mut self, cgroup: u64, peers: &[Peer]) -> anyhow::Result<()> {
        let keys = peers
            .iter()
            .filter_map(|p| match p {
                Peer::File { ino, dev, .. } => Some(UnixPeerKey::file(cgroup, *ino, *dev)),
                Peer::Abstract(name) => UnixPeerKey::abstract_name(cgroup, name),
            })
            .collect();
        self.set_entries(maps::UNIX_PEERS, cgroup, keys, |k: &UnixPeerKey| k.session)
    }

    /// The block devices the session of cgroup `cgroup` may open past the floor (fp-ebpf's
    /// `floor`): exactly `devices` from now on, as [`Self::set_unix_peers`].
    pub fn set_block_devices(&mut self, cgroup: u64, devices: &[Device]) -> anyhow::Result<()> {
        let keys = devices
            .iter()
            .map(|d| BlockDeviceKey { session: cgroup, rdev: u64::from(d.rdev) })
            .collect();
        self.set_entries(maps::BLOCK_DEVICES, cgroup, keys, |k: &BlockDeviceKey| k.session)
    }

    /// Makes the entries of the session of cgroup `cgroup` in the map `name` (a set: values are
    /// 1) exactly `keys`; `session` reads a key's session.
    fn set_entries<K: aya::Pod + Eq + std::hash::Hash>(
        &mut self,
        name: &str,
        cgroup: u64,
        keys: HashSet<K>,
        session: fn(&K) -> u64,
    ) -> anyhow::Result<()> {
        let mut map: HashMap<_, K, u8> = HashMap::try_from(self.map_mut(name)?)?;
        let stale: Vec<K> = map
            .keys()
            .filter_map(Result::ok)
            .filter(|k| session(k) == cgroup && !keys.contains(k))
            .collect();
        for key in &keys {
            map.insert(key, 1, 0).with_context(|| format!("{name} is full"))?;
        }
        for key in &stale {
            gone(map.remove(key))?;
        }
        Ok(())
    }

    /// Forgets the sockets and devices of the sessions not in `live`.
    fn forget_session_entries(&mut self, live: &HashSet<u64>) -> anyhow::Result<()> {
        self.forget_entries(maps::UNIX_PEERS, live, |k: &UnixPeerKey| k.session)?;
        self.forget_entries(maps::BLOCK_DEVICES, live, |k: &BlockDeviceKey| k.session)
    }

    fn forget_entries<K: aya::Pod>(
        &mut self,
        name: &str,
        live: &HashSet<u64>,
        session: fn(&K) -> u64,
    ) -> anyhow::Result<()> {
        let mut map: HashMap<_, K, u8> = HashMap::try_from(self.map_mut(name)?)?;
        let doomed: Vec<K> =
            map.keys().filter_map(Result::ok).filter(|k| !live.contains(&session(k))).collect();
        for key in &doomed {
            gone(map.remove(key))?;
        }
        Ok(())
    }

    /// The per-cgroup programs' copy of the session, in its cgroup's storage, which exists while
    /// they are attached there: the checks of pending files, attached only to sessions whose
    /// tables can hold an open ([`Self::attach_holds`], which comes first), and never on the
    /// fmod_ret backend. Its successor, `BPF_MAP_TYPE_CGRP_STORAGE`, needs Linux 6.2.
    fn write_cgroup_session(&mut self, cgroup: u64, info: SessionInfo) -> anyhow::Result<()> {
        if !self.attached_to(cgroup) {
            return Ok(());
        }
        self.store_cgroup_session(cgroup, CgroupSession { cgroup, info })?
            .with_context(|| format!("writing the session of cgroup {cgroup} (not attached?)"))
    }

    /// [`Self::write_cgroup_session`]'s value zeroed; a storage already gone (the programs
    /// detached) is not an error.
    fn clear_cgroup_session(&mut self, cgroup: u64) -> anyhow::Result<()> {
        if !self.attached_to(cgroup) {
            return Ok(());
        }
        gone(self.store_cgroup_session(cgroup, CgroupSession::default())?)
            .with_context(|| format!("clearing the session of cgroup {cgroup}"))
    }

    /// Writes the storage of cgroup `cgroup`: the outer error says the map is not there, the
    /// inner one is the update's own (which [`gone`] may excuse).
    #[expect(deprecated, reason = "the storage lsm_cgroup programs can read on Linux 6.1")]
    fn store_cgroup_session(
        &mut self,
        cgroup: u64,
        value: CgroupSession,
    ) -> anyhow::Result<Result<(), aya::maps::MapError>> {
        let mut here: aya::maps::CgroupStorage<_, CgroupSession> =
            aya::maps::CgroupStorage::try_from(self.map_mut(maps::CGROUP_SESSION)?)?;
        Ok(here.insert(CgroupStorageKey::new(cgroup, BPF_LSM_CGROUP), value, 0))
    }

    pub fn session(&mut self, cgroup: u64) -> anyhow::Result<SessionInfo> {
        let map: HashMap<_, u64, SessionInfo> = HashMap::try_from(self.map_mut(maps::SESSIONS)?)?;
        Ok(map.get(&cgroup, 0)?)
    }

    /// Forgets the session of cgroup `cgroup` and detaches its programs (its tables are removed
    /// separately). What is already gone is not an error.
    pub fn end_session(&mut self, cgroup: u64) -> anyhow::Result<()> {
        // Cleared first: a per-cgroup program still deciding reads its tables id from here to
        // know they are going (`interference` in fp-ebpf), and a new one finds the session as
        // the global programs do, until it is forgotten below.
        // The rest of the teardown goes on if that fails, and the failure is reported after it.
        let cleared = self.clear_cgroup_session(cgroup);
        let links = self.session_links(cgroup);
        remove_pins(&links)?;
        let mut map: HashMap<_, u64, SessionInfo> =
            HashMap::try_from(self.map_mut(maps::SESSIONS)?)?;
        gone(map.remove(&cgroup))?;
        self.write_slots([session_slot(cgroup)], None)?;
        let mut counters: HashMap<_, u64, SessionCounters> =
            HashMap::try_from(self.map_mut(maps::COUNTERS)?)?;
        gone(counters.remove(&cgroup))?;
        let live: HashSet<u64> = self.sessions()?.into_iter().map(|(id, _)| id).collect();
        self.forget_owners(&live)?;
        self.forget_session_entries(&live)?;
        cleared
    }

    /// Forgets the file owners (fp-ebpf's `sigio`) set by sessions not in `live`, and,
    /// once no session is left, the count of owners the map had no room for: its files signal
    /// no process until then (docs/threat-model.md, "The session boundary").
    fn forget_owners(&mut self, live: &HashSet<u64>) -> anyhow::Result<()> {
        let mut owners: HashMap<_, u64, u64> = HashMap::try_from(self.map_mut(maps::FOWNERS)?)?;
        let doomed: Vec<u64> = owners
            .iter()
            .filter_map(Result::ok)
            .filter(|(_, session)| !live.contains(session))
            .map(|(file, _)| file)
            .collect();
        for file in &doomed {
            gone(owners.remove(file))?;
        }
        if live.is_empty() {
            let mut lost: Array<_, u64> = Array::try_from(self.map_mut(maps::FOWNERS_LOST)?)?;
            lost.set(0, 0, 0)?;
        }
        Ok(())
    }

    /// Every session the programs confine now, by cgroup id.
    pub fn sessions(&mut self) -> anyhow::Result<Vec<(u64, SessionInfo)>> {
        let map: HashMap<_, u64, SessionInfo> = HashMap::try_from(self.map_mut(maps::SESSIONS)?)?;
        Ok(map.iter().filter_map(Result::ok).collect())
    }

    /// Removes every table entry whose tables id is not in `tables`, and the counters, pending
    /// opens and grants of cgroups not in `cgroups`: what an agent that died left behind. Returns the tables ids removed.
    pub fn sweep(
        &mut self,
        tables: &HashSet<u64>,
        cgroups: &HashSet<u64>,
    ) -> anyhow::Result<usize> {
        fn sweep<K: aya::Pod, V: aya::Pod>(
            map: &mut aya::maps::Map,
            stale: impl Fn(&K) -> bool,
        ) -> anyhow::Result<Vec<K>> {
            let mut map: HashMap<_, K, V> = HashMap::try_from(map)?;
            let doomed: Vec<K> = map.keys().filter_map(Result::ok).filter(|k| stale(k)).collect();
            for key in &doomed {
                gone(map.remove(key))?;
            }
            Ok(doomed)
        }
        fn sweep_trie<V: aya::Pod>(
            map: &mut aya::maps::Map,
            stale: impl Fn(&PrefixKeyData) -> bool,
        ) -> anyhow::Result<()> {
            let mut trie: LpmTrie<_, PrefixKeyData, V> = LpmTrie::try_from(map)?;
            let doomed: Vec<Key<PrefixKeyData>> =
                trie.keys().filter_map(Result::ok).filter(|k| stale(&k.data())).collect();
            for key in &doomed {
                gone(trie.remove(key))?;
            }
            Ok(())
        }
        let removed =
            sweep::<u64, TableHeader>(self.map_mut(maps::HEADERS)?, |id| !tables.contains(id))?;
        sweep_trie::<PrefixValue>(self.map_mut(maps::PREFIXES)?, |k| !tables.contains(&k.id))?;
        sweep_trie::<u8>(self.map_mut(maps::INTERIOR)?, |k| !tables.contains(&k.id))?;
        sweep_trie::<GrantValue>(self.map_mut(maps::GRANTS)?, |k| !cgroups.contains(&k.id))?;
        sweep::<NameKey, NameValue>(self.map_mut(maps::NAMES)?, |k| {
            !tables.contains(&k.tables_id)
        })?;
        sweep::<ScopeKey, ScopeValue>(self.map_mut(maps::SCOPES)?, |k| {
            !tables.contains(&k.tables_id)
        })?;
        sweep::<InodeKey, InodeValue>(self.map_mut(maps::INODES)?, |k| {
            !tables.contains(&k.tables_id)
        })?;
        sweep::<u64, SessionCounters>(self.map_mut(maps::COUNTERS)?, |c| !cgroups.contains(c))?;
        sweep::<PendingKey, u64>(self.map_mut(maps::PENDING)?, |k| !cgroups.contains(&k.session))?;
        self.forget_owners(cgroups)?;
        self.forget_session_entries(cgroups)?;
        for dir in pinned_files(&self.pin_dir.join(SESSION_LINKS), "")? {
            let id = dir.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse().ok());
            if id.is_none_or(|id| !cgroups.contains(&id)) {
                remove_pins(&dir)?;
            }
        }
        Ok(removed.len())
    }

    pub fn counters(&mut self, cgroup: u64) -> anyhow::Result<SessionCounters> {
        let map: HashMap<_, u64, SessionCounters> =
            HashMap::try_from(self.map_mut(maps::COUNTERS)?)?;
        Ok(map.get(&cgroup, 0)?)
    }

    /// Sessions may not signal or trace the process `tgid` (the agent): it replaces whatever
    /// process an earlier agent protected.
    pub fn protect(&mut self, tgid: u32) -> anyhow::Result<()> {
        let mut map: HashMap<_, u32, u8> = HashMap::try_from(self.map_mut(maps::PROTECTED)?)?;
        let earlier: Vec<u32> = map.keys().filter_map(Result::ok).collect();
        map.insert(tgid, 1, 0)?;
        for old in earlier.into_iter().filter(|&t| t != tgid) {
            map.remove(&old)?;
        }
        Ok(())
    }
}
