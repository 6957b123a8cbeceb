//! The attached programs of one enforcement scope and the pinned maps they consult: what a
//! session manager installs, switches and sweeps.

use std::{
    collections::{BTreeMap, HashSet},
    os::fd::AsFd as _,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, anyhow, bail};
use aya::{
    Ebpf,
    maps::{Array, CgroupStorageKey, HashMap, LpmTrie, MapData, RingBuf, lpm_trie::Key},
    programs::{LsmCgroup, Program, links::PinnedLink},
};
use fp_common::{
    kernel::{
        BlockDeviceKey, CgroupSession, GrantValue, Hook, PendingKey, SessionCounters, SessionInfo,
        UnixPeerKey, maps,
    },
    policy::{
        InodeKey, InodeValue, NameKey, NameValue, PrefixKeyData, PrefixValue, ScopeKey, ScopeValue,
        TableHeader,
    },
};

use super::bpffs::{ensure_bpffs, remove_empty_dirs};
use super::{
    btf,
    load::{SessionCgroups, attach_loaded, attach_to_cgroup, available_hooks, load, open},
    tables,
};
use crate::policy::{Device, KernelTables, Peer, kernel_dev};

/// The per-cgroup hooks whose programs only refuse reads, writes and maps of a file whose open a
/// prompt holds (fp-ebpf's `check_pending`): a session whose tables have no prompt or defer
/// verdict never holds one, and its reads and writes run none of fp's code
/// ([`Enforcer::attach_holds`]).
pub const HOLD_HOOKS: [&str; 2] = [Hook::FilePermission.name(), Hook::MmapFile.name()];

/// The LSM programs of one enforcement scope, with their maps, programs and links pinned under
/// `pin_dir` so enforcement survives the loader being paused or killed: the `#[lsm]` programs
/// attached for every task (`link_<hook>`), the `#[lsm_cgroup]` ones (`prog_<hook>`) attached to
/// each session's cgroup as the session starts ([`SESSION_LINKS`]`/<cgroup id>/link_<hook>`).
pub struct Enforcer {
    maps: BTreeMap<&'static str, aya::maps::Map>,
    pin_dir: PathBuf,
    links: Vec<(PathBuf, PinnedLink)>,
    per_session: Vec<(PathBuf, LsmCgroup)>,
}

/// The directory in a pin directory that holds each session's links, by cgroup id.
pub const SESSION_LINKS: &str = "sessions";

/// `bpf_attach_type::BPF_LSM_CGROUP`: the attach type of the `CGROUP_SESSION` storage's keys.
const BPF_LSM_CGROUP: u32 = 43;

/// The `INTERIOR` keys of tables `id`: each directory with its NUL, so that the longest-prefix
/// lookup of `dir\0` finds exactly it. Directories too long for a key are left out: the
/// programs count such a directory as anchored without looking.
fn interior_keys(
    id: u64,
    tables: &KernelTables,
) -> impl Iterator<Item = (u32, PrefixKeyData)> + '_ {
    tables.interior().filter_map(move |dir| {
        let mut bytes = dir.to_vec();
        bytes.push(0);
        PrefixKeyData::new(id, &bytes)
    })
}

/// How full one of the pinned hash maps is.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MapUsage {
    pub name: &'static str,
    pub used: u64,
    pub capacity: u64,
}

impl Enforcer {
    /// Loads the programs for sessions whose cgroups sit where `sessions` says and attaches those
    /// that every task runs; the per-cgroup ones wait for [`Self::attach_session`]. The session
    /// tables start empty, so attaching denies nothing yet.
    pub fn load(sessions: SessionCgroups, pin_dir: PathBuf) -> anyhow::Result<Self> {
        // Mounted for good if no caller holds a [`Bpffs`]: the pins must outlive this process.
        ensure_bpffs()?;
        std::fs::create_dir_all(&pin_dir)
            .with_context(|| format!("creating {}", pin_dir.display()))?;
        let (mut ebpf, btf, hooks) = open(sessions)?;
        let mut this = Self::empty(pin_dir);
        let attached = this.pin_and_attach(&mut ebpf, btf, &hooks);
        // The programs stay loaded through their links and pins; the maps are what userspace keeps.
        for name in maps::PINNED {
            if let Some(map) = ebpf.take_map(name) {
                this.maps.insert(name, map);
            }
        }
        if let Err(e) = attached {
            // Leave nothing half-attached behind.
            let _ = this.unload();
            return Err(e);
        }
        Ok(this)
    }

    /// Takes over the programs a previous agent left pinned under `pin_dir` (still attached and
    /// enforcing): its links and maps, checked against the hooks this kernel and this fp attach.
    /// `None` when nothing is pinned there.
    pub fn adopt(pin_dir: PathBuf) -> anyhow::Result<Option<Self>> {
        if !pin_dir.join(maps::SESSIONS).exists() {
            return Ok(None);
        }
        let hooks = available_hooks(btf::Btf::from_sys()?)?;
        let this = Self::open_pinned(pin_dir)?;
        let mut pinned = this.hooks();
        pinned.sort();
        let mut expected: Vec<String> = hooks.iter().map(|(_, h)| h.name().to_owned()).collect();
        expected.sort();
        if pinned != expected {
            bail!(
                "the programs pinned under {} attach {} hook(s), this fp attaches {}: they come \
                 from another fp build",
                this.pin_dir.display(),
                pinned.len(),
                expected.len()
            );
        }
        if let Some(name) = maps::PINNED.iter().find(|name| !this.maps.contains_key(*name)) {
            bail!("the pinned map {} is missing", this.pin_dir.join(name).display());
        }
        Ok(Some(this))
    }

    /// What an agent left pinned under `pin_dir`, as it is: the links found there and those of
    /// its maps that are pinned (an agent killed while loading pins its maps, then its links).
    /// Dropping it changes nothing; [`Enforcer::unload`] removes it all.
    pub fn open_pinned(pin_dir: PathBuf) -> anyhow::Result<Self> {
        let mut this = Self::empty(pin_dir);
        for name in maps::PINNED {
            let path = this.pin_dir.join(name);
            if !path.exists() {
                continue;
            }
            let data = MapData::from_pin(&path)
                .with_context(|| format!("opening the pinned map {}", path.display()))?;
            this.maps.insert(name, aya::maps::Map::from_map_data(data)?);
        }
        for path in pinned_files(&this.pin_dir, "link_")? {
            let link = PinnedLink::from_pin(&path)
                .with_context(|| format!("opening the pinned link {}", path.display()))?;
            this.links.push((path, link));
        }
        for path in pinned_files(&this.pin_dir, "prog_")? {
            let program = LsmCgroup::from_pin(&path)
                .with_context(|| format!("opening the pinned program {}", path.display()))?;
            this.per_session.push((path, program));
        }
        Ok(this)
    }

    fn empty(pin_dir: PathBuf) -> Self {
        Self { maps: BTreeMap::new(), pin_dir, links: Vec::new(), per_session: Vec::new() }
    }

    fn pin_and_attach(
        &mut self,
        ebpf: &mut Ebpf,
        btf: &aya::Btf,
        hooks: &[(&str, Hook)],
    ) -> anyhow::Result<()> {
        for name in maps::PINNED {
            let path = self.pin_dir.join(name);
            ebpf.map(name)
                .ok_or_else(|| anyhow!("map {name} missing from the BPF object"))?
                .pin(&path)
                .with_context(|| format!("pinning {}", path.display()))?;
        }
        let programs: Vec<(&str, &str)> = hooks.iter().map(|(p, h)| (*p, h.name())).collect();
        load(ebpf, btf, &programs)?;
        let (global, per_session): (Vec<_>, Vec<_>) = programs
            .into_iter()
            .partition(|(p, _)| !matches!(ebpf.program(p), Some(Program::LsmCgroup(_))));
        for (program, hook) in per_session {
            let path = self.pin_dir.join(format!("prog_{hook}"));
            let Some(Program::LsmCgroup(prog)) = ebpf.program_mut(program) else {
                bail!("program {program} missing from the BPF object");
            };
            prog.pin(&path).with_context(|| format!("pinning {}", path.display()))?;
            // A handle of its own (aya 0.14 cannot take a program out of its `Ebpf`), as an agent
            // that adopts the pins gets.
            let pinned = LsmCgroup::from_pin(&path)
                .with_context(|| format!("opening the pinned program {}", path.display()))?;
            self.per_session.push((path, pinned));
        }
        for ((_, hook), link) in global.iter().zip(attach_loaded(ebpf, &global, None)?) {
            let path = self.pin_dir.join(format!("link_{hook}"));
            let pinned = link.pin(&path).with_context(|| format!("pinning {}", path.display()))?;
            self.links.push((path, pinned));
        }
        Ok(())
    }

    /// The hooks fp's programs are on: attached for every task, or to each session's cgroup.
    pub fn hooks(&self) -> Vec<String> {
        let links = self.links.iter().filter_map(|(path, _)| hook_of(path, "link_"));
        let per_session = self.per_session.iter().filter_map(|(path, _)| hook_of(path, "prog_"));
        links.chain(per_session).map(Into::into).collect()
    }

    /// Where the links of the session of cgroup `cgroup` are pinned.
    fn session_links(&self, cgroup: u64) -> PathBuf {
        self.pin_dir.join(SESSION_LINKS).join(cgroup.to_string())
    }

    /// Attaches the per-cgroup programs to the cgroup `path` (id `cgroup`) of a session about to
    /// start, before any task joins it: from then on its tasks run them, and until
    /// [`Self::set_session`] writes the cgroup's session they deny. All but the [`HOLD_HOOKS`]'
    /// ([`Self::attach_holds`]). On error nothing of it stays attached.
    pub fn attach_session(&mut self, cgroup: u64, path: &Path) -> anyhow::Result<()> {
        let dir = self.session_links(cgroup);
        let attached = self.attach_to(path, &dir, |hook| !HOLD_HOOKS.contains(&hook));
        if attached.is_err() {
            // attach_to removed its links; the directory is this session's, and empty.
            let _ = std::fs::remove_dir(&dir);
        }
        attached
    }

    /// Attaches the [`HOLD_HOOKS`]' programs to the attached session cgroup `path` (id `cgroup`),
    /// unless they are already: before the session gets tables that can hold an open for the
    /// prompt broker. Once attached they stay (files may be pending after a reload to tables that
    /// cannot hold one). On error, nothing this call attached stays.
    pub fn attach_holds(&mut self, cgroup: u64, path: &Path) -> anyhow::Result<()> {
        let dir = self.session_links(cgroup);
        self.attach_to(path, &dir, |hook| HOLD_HOOKS.contains(&hook))
    }

    /// Attaches to `cgroup` the per-cgroup programs whose hook `wanted` names and that have no
    /// link pinned in `dir` yet, pinning each link there. On error, the links it pinned are
    /// removed again.
    fn attach_to(
        &mut self,
        cgroup: &Path,
        dir: &Path,
        wanted: impl Fn(&str) -> bool,
    ) -> anyhow::Result<()> {
        let fd = std::fs::File::open(cgroup)
            .with_context(|| format!("opening cgroup {}", cgroup.display()))?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut pinned_now = Vec::new();
        let mut attach = || -> anyhow::Result<()> {
            for (pinned, program) in &mut self.per_session {
                let hook = hook_of(pinned, "prog_").unwrap_or_default();
                let path = dir.join(format!("link_{hook}"));
                if !wanted(hook) || path.exists() {
                    continue;
                }
                let what = format!("the lsm_cgroup/{hook} program to {}", cgroup.display());
                let link = attach_to_cgroup(program, fd.as_fd(), &what)?;
                link.pin(&path).with_context(|| format!("pinning {}", path.display()))?;
                pinned_now.push(path);
            }
            Ok(())
        };
        let attached = attach();
        if attached.is_err() {
            for path in &pinned_now {
                let _ = remove_pins(path);
            }
        }
        attached
    }

    /// Entries in use and capacity of each pinned hash map (what fills up as sessions start).
    pub fn usage(&mut self) -> anyhow::Result<Vec<MapUsage>> {
        fn count<K: aya::Pod, V: aya::Pod>(map: &mut aya::maps::Map) -> anyhow::Result<u64> {
            let map: HashMap<_, K, V> = HashMap::try_from(map)?;
            Ok(map.keys().filter(Result::is_ok).count() as u64)
        }
        let mut usage = Vec::new();
        for name in [
            maps::SESSIONS,
            maps::HEADERS,
            maps::PREFIXES,
            maps::INTERIOR,
            maps::NAMES,
            maps::SCOPES,
            maps::INODES,
            maps::PENDING,
            maps::GRANTS,
        ] {
            let map = self.map_mut(name)?;
            let capacity = match &*map {
                aya::maps::Map::HashMap(d) | aya::maps::Map::LpmTrie(d) => {
                    d.info()?.max_entries() as u64
                }
                _ => continue,
            };
            let used = match name {
                maps::SESSIONS => count::<u64, SessionInfo>(map)?,
                maps::HEADERS => count::<u64, TableHeader>(map)?,
                maps::PREFIXES => {
                    let trie: LpmTrie<_, PrefixKeyData, PrefixValue> = LpmTrie::try_from(map)?;
                    trie.keys().filter(Result::is_ok).count() as u64
                }
                maps::INTERIOR => {
                    let trie: LpmTrie<_, PrefixKeyData, u8> = LpmTrie::try_from(map)?;
                    trie.keys().filter(Result::is_ok).count() as u64
                }
                maps::NAMES => count::<NameKey, NameValue>(map)?,
                maps::SCOPES => count::<ScopeKey, ScopeValue>(map)?,
                maps::INODES => count::<InodeKey, InodeValue>(map)?,
                maps::GRANTS => {
                    let trie: LpmTrie<_, PrefixKeyData, GrantValue> = LpmTrie::try_from(map)?;
                    trie.keys().filter(Result::is_ok).count() as u64
                }
                _ => count::<PendingKey, u64>(map)?,
            };
            usage.push(MapUsage { name, used, capacity });
        }
        Ok(usage)
    }

    fn map_mut(&mut self, name: &str) -> anyhow::Result<&mut aya::maps::Map> {
        self.maps.get_mut(name).ok_or_else(|| anyhow!("map {name} missing from the BPF object"))
    }

    /// Installs `tables` under the new id `id`, the header last (evaluations of an id without a
    /// header deny). On error nothing of them stays behind.
    pub fn install_tables(
        &mut self,
        id: u64,
        tables: &KernelTables,
        inodes: &tables::InodeTable,
    ) -> anyhow::Result<()> {
        let written = self.write_tables(id, tables, inodes);
        if written.is_err() {
            let _ = self.remove_tables(id, tables, inodes);
        }
        written.context("writing the session's tables into the kernel maps (full?)")
    }

    fn write_tables(
        &mut self,
        id: u64,
        tables: &KernelTables,
        inodes: &tables::InodeTable,
    ) -> anyhow::Result<()> {
        let mut prefixes: LpmTrie<_, PrefixKeyData, PrefixValue> =
            LpmTrie::try_from(self.map_mut(maps::PREFIXES)?)?;
        for (bytes, value) in tables.prefixes() {
            let (bits, key) = PrefixKeyData::new(id, bytes)
                .ok_or_else(|| anyhow!("compiled prefix longer than an LPM key"))?;
            prefixes.insert(&Key::new(bits, key), value, 0)?;
        }
        let mut interior: LpmTrie<_, PrefixKeyData, u8> =
            LpmTrie::try_from(self.map_mut(maps::INTERIOR)?)?;
        for (bits, key) in interior_keys(id, tables) {
            interior.insert(&Key::new(bits, key), 1, 0)?;
        }
        let mut names: HashMap<_, NameKey, NameValue> =
            HashMap::try_from(self.map_mut(maps::NAMES)?)?;
        for (key, value) in tables.names() {
            names.insert(NameKey { tables_id: id, ..*key }, value, 0)?;
        }
        let mut scopes: HashMap<_, ScopeKey, ScopeValue> =
            HashMap::try_from(self.map_mut(maps::SCOPES)?)?;
        for (scope_id, value) in tables.scopes().iter().enumerate().skip(1) {
            scopes.insert(
                ScopeKey { tables_id: id, scope_id: scope_id as u16, _pad: [0; 6] },
                value,
                0,
            )?;
        }
        let mut map: HashMap<_, InodeKey, InodeValue> =
            HashMap::try_from(self.map_mut(maps::INODES)?)?;
        for (key, value) in inodes.keyed(id) {
            map.insert(key, value, 0)?;
        }
        let mut headers: HashMap<_, u64, TableHeader> =
            HashMap::try_from(self.map_mut(maps::HEADERS)?)?;
        headers.insert(id, tables.header(), 0)?;
        Ok(())
    }

    /// Removes tables `id`, the header first. Entries already gone are not an error.
    pub fn remove_tables(
        &mut self,
        id: u64,
        tables: &KernelTables,
        inodes: &tables::InodeTable,
    ) -> anyhow::Result<()> {
        let mut headers: HashMap<_, u64, TableHeader> =
            HashMap::try_from(self.map_mut(maps::HEADERS)?)?;
        gone(headers.remove(&id))?;
        let mut prefixes: LpmTrie<_, PrefixKeyData, PrefixValue> =
            LpmTrie::try_from(self.map_mut(maps::PREFIXES)?)?;
        for (bytes, _) in tables.prefixes() {
            if let Some((bits, key)) = PrefixKeyData::new(id, bytes) {
                gone(prefixes.remove(&Key::new(bits, key)))?;
            }
        }
        let mut interior: LpmTrie<_, PrefixKeyData, u8> =
            LpmTrie::try_from(self.map_mut(maps::INTERIOR)?)?;
        for (bits, key) in interior_keys(id, tables) {
            gone(interior.remove(&Key::new(bits, key)))?;
        }
        let mut names: HashMap<_, NameKey, NameValue> =
            HashMap::try_from(self.map_mut(maps::NAMES)?)?;
        for (key, _) in tables.names() {
            gone(names.remove(&NameKey { tables_id: id, ..*key }))?;
        }
        let mut scopes: HashMap<_, ScopeKey, ScopeValue> =
            HashMap::try_from(self.map_mut(maps::SCOPES)?)?;
        for scope_id in 1..tables.scopes().len() {
            gone(scopes.remove(&ScopeKey {
                tables_id: id,
                scope_id: scope_id as u16,
                _pad: [0; 6],
            }))?;
        }
        let mut map: HashMap<_, InodeKey, InodeValue> =
            HashMap::try_from(self.map_mut(maps::INODES)?)?;
        for (key, _) in inodes.keyed(id) {
            gone(map.remove(&key))?;
        }
        Ok(())
    }

    /// Points the session of cgroup `cgroup` at its tables and flags: confines it from now on, or
    /// (for a running session) swaps its tables in one map update.
    pub fn set_session(&mut self, cgroup: u64, info: SessionInfo) -> anyhow::Result<()> {
        let mut counters: HashMap<_, u64, SessionCounters> =
            HashMap::try_from(self.map_mut(maps::COUNTERS)?)?;
        if counters.get(&cgroup, 0).is_err() {
            counters.insert(cgroup, SessionCounters::default(), 0)?;
        }
        self.write_cgroup_session(cgroup, info)?;
        let mut map: HashMap<_, u64, SessionInfo> =
            HashMap::try_from(self.map_mut(maps::SESSIONS)?)?;
        map.insert(cgroup, info, 0)?;
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
    /// they are attached there. Its successor, `BPF_MAP_TYPE_CGRP_STORAGE`, needs Linux 6.2.
    fn write_cgroup_session(&mut self, cgroup: u64, info: SessionInfo) -> anyhow::Result<()> {
        self.store_cgroup_session(cgroup, CgroupSession { cgroup, info })?
            .with_context(|| format!("writing the session of cgroup {cgroup} (not attached?)"))
    }

    /// [`Self::write_cgroup_session`]'s value zeroed; a storage already gone (the programs
    /// detached) is not an error.
    fn clear_cgroup_session(&mut self, cgroup: u64) -> anyhow::Result<()> {
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
        // know they are going (`interference` in fp-ebpf), and a new one denies until detached.
        // The rest of the teardown goes on if that fails, and the failure is reported after it.
        let cleared = self.clear_cgroup_session(cgroup);
        let links = self.session_links(cgroup);
        remove_pins(&links)?;
        let mut map: HashMap<_, u64, SessionInfo> =
            HashMap::try_from(self.map_mut(maps::SESSIONS)?)?;
        gone(map.remove(&cgroup))?;
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

    /// Opens the broker never answered (it died) that no agent has recorded yet: each is
    /// returned once, and its reads stay refused until a broker answers a new open of the file.
    pub fn unrecorded_pending(&mut self) -> anyhow::Result<Vec<PendingKey>> {
        let mut map: HashMap<_, PendingKey, u64> = HashMap::try_from(self.map_mut(maps::PENDING)?)?;
        let fresh: Vec<PendingKey> =
            map.iter().filter_map(Result::ok).filter(|(_, v)| *v == 1).map(|(k, _)| k).collect();
        for key in &fresh {
            // Present means pending to the programs, whatever the value: 2 marks it recorded.
            map.insert(key, 2, 0)?;
        }
        Ok(fresh)
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

    /// Takes the prompt broker's heartbeat map (once), so that beats never wait behind a session
    /// start holding the enforcer.
    pub fn take_broker_clock(&mut self) -> anyhow::Result<BrokerClock> {
        let map = self
            .maps
            .remove(maps::BROKER)
            .ok_or_else(|| anyhow!("{} already taken", maps::BROKER))?;
        Ok(BrokerClock(aya::maps::Array::try_from(map)?))
    }

    /// The broker answered the open of (`st_dev`, `st_ino`) by the session of cgroup `cgroup`:
    /// its reads are no longer refused as pending.
    pub fn settle(&mut self, cgroup: u64, st_dev: u64, st_ino: u64) -> anyhow::Result<()> {
        let mut map: HashMap<_, PendingKey, u64> = HashMap::try_from(self.map_mut(maps::PENDING)?)?;
        let key = PendingKey { session: cgroup, ino: st_ino, dev: kernel_dev(st_dev), _pad: 0 };
        Ok(gone(map.remove(&key))?)
    }

    /// Makes the `GRANTS` map hold exactly `grants` (prefix length in bits, key, value; see
    /// `fp_common::kernel::GrantScope::key`): the new ones are written first, then the others
    /// removed. Prompt verdicts of opens they cover are allowed in the kernel until they expire.
    pub fn set_grants(
        &mut self,
        grants: &[(u32, PrefixKeyData, GrantValue)],
    ) -> anyhow::Result<()> {
        let mut map: LpmTrie<_, PrefixKeyData, GrantValue> =
            LpmTrie::try_from(self.map_mut(maps::GRANTS)?)?;
        for (bits, key, value) in grants {
            map.insert(&Key::new(*bits, *key), value, 0)?;
        }
        let wanted = |k: &Key<PrefixKeyData>| {
            grants.iter().any(|(bits, key, _)| k.prefix_len() == *bits && k.data() == *key)
        };
        let stale: Vec<_> = map.keys().collect::<Result<_, _>>()?;
        for key in stale.iter().filter(|k| !wanted(k)) {
            gone(map.remove(key))?;
        }
        Ok(())
    }

    pub fn counters(&mut self, cgroup: u64) -> anyhow::Result<SessionCounters> {
        let map: HashMap<_, u64, SessionCounters> =
            HashMap::try_from(self.map_mut(maps::COUNTERS)?)?;
        Ok(map.get(&cgroup, 0)?)
    }

    /// Takes the ring buffer of decision events (once). It is pinned: events queued while no
    /// agent read them are still there for the next one.
    pub fn take_events(&mut self) -> anyhow::Result<RingBuf<MapData>> {
        let map = self
            .maps
            .remove(maps::EVENTS)
            .ok_or_else(|| anyhow!("{} already taken", maps::EVENTS))?;
        Ok(RingBuf::try_from(map)?)
    }

    /// Unpins and detaches everything and removes the pin directory. Links detach asynchronously
    /// once their last reference is gone.
    pub fn unload(self) -> anyhow::Result<()> {
        let Self { maps, pin_dir, links, per_session } = self;
        for (path, link) in links {
            link.unpin().with_context(|| format!("unpinning {}", path.display()))?;
        }
        remove_pins(&pin_dir.join(SESSION_LINKS))?;
        for (path, _) in per_session {
            remove_pins(&path)?;
        }
        for name in maps::PINNED {
            remove_pins(&pin_dir.join(name))?;
        }
        drop(maps);
        remove_empty_dirs(&pin_dir, Path::new("/sys/fs/bpf"));
        Ok(())
    }
}

/// The hook a pin is for, by its name: `<prefix><hook>`.
fn hook_of<'a>(pin: &'a Path, prefix: &str) -> Option<&'a str> {
    pin.file_name()?.to_str()?.strip_prefix(prefix)
}

/// The entries of `dir` whose names start with `prefix`, sorted; none if `dir` does not exist.
fn pinned_files(dir: &Path, prefix: &str) -> anyhow::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        entries => entries.with_context(|| format!("reading {}", dir.display()))?,
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix)))
        .collect();
    found.sort();
    Ok(found)
}

/// Unpins `path`: a pinned file, or a directory of them (removed with it). Whatever a pin held
/// (a link: its attachment) goes with its last reference. Already gone is not an error.
pub fn remove_pins(path: &Path) -> anyhow::Result<()> {
    let removed = match path.is_dir() {
        true => std::fs::remove_dir_all(path),
        false => std::fs::remove_file(path),
    };
    match removed {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("unpinning {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// The prompt broker's heartbeat in the kernel.
pub struct BrokerClock(aya::maps::Array<MapData, u64>);

impl BrokerClock {
    /// The prompt broker is alive now: opens with prompt or defer verdicts are left to it for
    /// the next `BROKER_HEARTBEAT_TIMEOUT_NS`.
    pub fn beat(&mut self) -> anyhow::Result<()> {
        let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)?;
        self.0.set(0, now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64, 0)?;
        Ok(())
    }
}

/// A removal of an entry already gone is not an error. aya 0.14's `remove` reports a missing key
/// as the `bpf_map_delete_elem` syscall failing with ENOENT, not as `KeyNotFound`.
pub(super) fn gone(r: Result<(), aya::maps::MapError>) -> Result<(), aya::maps::MapError> {
    use aya::{maps::MapError, sys::SyscallError};
    match r {
        Ok(()) | Err(MapError::KeyNotFound) => Ok(()),
        Err(MapError::SyscallError(SyscallError { io_error, .. }))
            if io_error.raw_os_error() == Some(libc::ENOENT) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::gone;

    /// aya 0.14's `remove` of a missing key fails as the delete syscall with ENOENT.
    #[test]
    fn a_missing_key_is_gone_already() {
        use aya::{maps::MapError, sys::SyscallError};
        let syscall = |errno| {
            Err(MapError::SyscallError(SyscallError {
                call: "bpf_map_delete_elem",
                io_error: std::io::Error::from_raw_os_error(errno),
            }))
        };
        assert!(gone(Ok(())).is_ok());
        assert!(gone(Err(MapError::KeyNotFound)).is_ok());
        assert!(gone(syscall(libc::ENOENT)).is_ok());
        assert!(gone(syscall(libc::EPERM)).is_err(), "other failures stay errors");
    }
}
