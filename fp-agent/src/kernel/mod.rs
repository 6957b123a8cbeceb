//! The kernel side as userspace sees it: the embedded BPF object, kernel struct offsets from BTF,
//! loading and attaching the LSM programs, pinning, and the maps the programs consult.
pub mod btf;
pub mod tables;

use std::{
    collections::{BTreeMap, HashSet},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, anyhow, bail};
use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap, LpmTrie, MapData, RingBuf, lpm_trie::Key},
    programs::{Lsm, links::FdLink, links::PinnedLink},
};
use fp_common::{
    kernel::{
        ABI_VERSION, GrantValue, Hook, KERNEL_FIELDS, SESSION_CGROUP_LEVEL, SessionCounters,
        SessionInfo, maps, programs,
    },
    policy::{
        InodeKey, InodeValue, NameKey, NameValue, PrefixKeyData, PrefixValue, ScopeKey, ScopeValue,
        TableHeader,
    },
};

use crate::policy::KernelTables;

/// The BPF object built from fp-ebpf by build.rs.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/fp"));

/// The embedded BPF object, or an error if this binary was built with `FP_EBPF_STUB=1`.
pub fn object() -> anyhow::Result<&'static [u8]> {
    if cfg!(fp_ebpf_stub) || OBJECT.is_empty() {
        bail!(
            "this fp was built with FP_EBPF_STUB=1 and carries no BPF programs; rebuild without it"
        );
    }
    Ok(OBJECT)
}

/// Where fp pins maps and links: versioned so an fp with another ABI never reuses them.
pub fn pin_root() -> PathBuf {
    PathBuf::from(format!("/sys/fs/bpf/fp/v{ABI_VERSION}"))
}

/// A resolved kernel struct offset, passed to the programs as a read-only global.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Offset {
    pub global: &'static str,
    pub strukt: &'static str,
    pub field: &'static str,
    pub offset: u32,
}

/// Resolves every field the programs read from the running kernel's BTF. Any field that cannot be
/// resolved stops the load, naming the field and the kernel.
pub fn resolve_offsets(btf: &btf::Btf) -> anyhow::Result<Vec<Offset>> {
    KERNEL_FIELDS
        .iter()
        .map(|f| {
            let offset = btf.member_offset(f.strukt, f.field).with_context(|| {
                format!(
                    "cannot resolve struct {}.{} (global {}) on kernel {}",
                    f.strukt,
                    f.field,
                    f.global,
                    kernel_release()
                )
            })?;
            Ok(Offset { global: f.global, strukt: f.strukt, field: f.field, offset })
        })
        .collect()
}

pub fn kernel_release() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// The hooks to attach on a kernel, each with the name of its BPF program.
type HookPrograms = Vec<(&'static str, Hook)>;

/// Loads the object with offsets and the session cgroup level set, and picks the hooks to attach;
/// programs are not yet loaded into the kernel (see [`attach`]).
fn open(session_cgroup_level: u32) -> anyhow::Result<(Ebpf, aya::Btf, HookPrograms)> {
    let raw = btf::Btf::from_sys()?;
    let offsets = resolve_offsets(&raw)?;
    let hooks = available_hooks(&raw)?;
    let btf = aya::Btf::from_sys_fs().context("reading kernel BTF")?;
    let mut loader = EbpfLoader::new();
    loader.btf(Some(&btf));
    for o in &offsets {
        loader.override_global(o.global, &o.offset, true);
    }
    loader.override_global(SESSION_CGROUP_LEVEL, &session_cgroup_level, true);
    let ebpf = loader.load(object()?).context("loading the fp BPF object")?;
    Ok((ebpf, btf, hooks))
}

/// The hooks to attach on this kernel, with the program matching each hook's prototype: all of
/// them, except optional hooks it does not have (their operations go through other hooks there).
/// A missing mandatory hook stops the load.
fn available_hooks(btf: &btf::Btf) -> anyhow::Result<HookPrograms> {
    let mut hooks = Vec::new();
    for &hook in Hook::ALL {
        if let Some(params) = btf.func_params(&format!("bpf_lsm_{}", hook.name())) {
            hooks.push((hook.program(&params), hook));
        } else if !hook.is_optional() {
            bail!("kernel {} has no LSM hook {}", kernel_release(), hook.name());
        }
    }
    Ok(hooks)
}

fn attach(ebpf: &mut Ebpf, btf: &aya::Btf, program: &str, hook: &str) -> anyhow::Result<FdLink> {
    let prog: &mut Lsm = ebpf
        .program_mut(program)
        .ok_or_else(|| anyhow!("program {program} missing from the BPF object"))?
        .try_into()?;
    let started = std::time::Instant::now();
    prog.load(hook, btf)
        .with_context(|| format!("loading {program} (lsm/{hook}) into the kernel"))?;
    // Most of a session's start is the verifier's: where it goes, per program (FP_LOG=debug).
    tracing::debug!("loaded {program} in {:.2?}", started.elapsed());
    let id = prog.attach().with_context(|| format!("attaching {program} to lsm/{hook}"))?;
    Ok(prog.take_link(id)?.into())
}

/// Proves BPF LSM works here: loads and attaches the pass-through probe program (it cannot deny
/// anything), then detaches it. Reading `/sys/kernel/security/lsm` is not enough: some kernels
/// list `bpf` and still refuse LSM programs.
pub fn probe() -> anyhow::Result<()> {
    // Nor is loading enough: a kernel booted without `bpf` in its LSM list (lsm=...) loads and
    // attaches LSM programs but never runs them. The list is read where securityfs shows it.
    if let Ok(active) = std::fs::read_to_string("/sys/kernel/security/lsm")
        && !active.trim().split(',').any(|l| l == "bpf")
    {
        bail!(
            "BPF LSM is not usable on this kernel: `bpf` is not in the active LSM list (active \
             now: {}); it needs CONFIG_BPF_LSM=y and `bpf` in that list (boot with lsm=...,bpf, \
             e.g. lsm=lockdown,capability,landlock,yama,apparmor,bpf)",
            active.trim()
        );
    }
    let (mut ebpf, btf, _) = open(0)?;
    let link = attach(&mut ebpf, &btf, programs::PROBE, Hook::FileOpen.name()).map_err(|e| {
        // The kernel's reason (EPERM, ...), without the loader's empty verifier log.
        let cause = e.root_cause().to_string();
        let active = std::fs::read_to_string("/sys/kernel/security/lsm")
            .map(|l| format!(" (active now: {})", l.trim()))
            .unwrap_or_default();
        anyhow!(
            "BPF LSM is not usable on this kernel: it needs CONFIG_BPF_LSM=y and `bpf` in the \
             active LSM list{active} (boot with lsm=...,bpf, e.g. \
             lsm=lockdown,capability,landlock,yama,apparmor,bpf); the kernel refused a \
             pass-through LSM program: {cause}"
        )
    })?;
    drop(link);
    Ok(())
}

/// The LSM programs of one enforcement scope, attached, with their maps and links pinned under
/// `pin_dir` so enforcement survives the loader being paused or killed.
pub struct Enforcer {
    maps: BTreeMap<&'static str, aya::maps::Map>,
    pin_dir: PathBuf,
    links: Vec<(PathBuf, PinnedLink)>,
}

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
    /// Loads and attaches the programs for sessions whose cgroups sit at `session_cgroup_level`.
    /// The session tables start empty, so attaching denies nothing yet.
    pub fn load(session_cgroup_level: u32, pin_dir: PathBuf) -> anyhow::Result<Self> {
        // Mounted for good if no caller holds a [`Bpffs`]: the pins must outlive this process.
        ensure_bpffs()?;
        std::fs::create_dir_all(&pin_dir)
            .with_context(|| format!("creating {}", pin_dir.display()))?;
        let (mut ebpf, btf, hooks) = open(session_cgroup_level)?;
        let mut this = Self { maps: BTreeMap::new(), pin_dir, links: Vec::new() };
        let attached = this.pin_and_attach(&mut ebpf, &btf, &hooks);
        // The programs stay loaded through their links; the maps are what userspace keeps.
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
        let hooks = available_hooks(&btf::Btf::from_sys()?)?;
        let mut pinned: Vec<String> = std::fs::read_dir(&pin_dir)
            .with_context(|| format!("reading {}", pin_dir.display()))?
            .filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("link_").map(Into::into))
            .collect();
        pinned.sort();
        let mut expected: Vec<String> = hooks.iter().map(|(_, h)| h.name().to_owned()).collect();
        expected.sort();
        if pinned != expected {
            bail!(
                "the programs pinned under {} attach {} hook(s), this fp attaches {}: they come \
                 from another fp build",
                pin_dir.display(),
                pinned.len(),
                expected.len()
            );
        }
        let mut this = Self { maps: BTreeMap::new(), pin_dir, links: Vec::new() };
        for name in maps::PINNED {
            let path = this.pin_dir.join(name);
            let data = MapData::from_pin(&path)
                .with_context(|| format!("opening the pinned map {}", path.display()))?;
            this.maps.insert(name, aya::maps::Map::from_map_data(data)?);
        }
        for hook in expected {
            let path = this.pin_dir.join(format!("link_{hook}"));
            let link = PinnedLink::from_pin(&path)
                .with_context(|| format!("opening the pinned link {}", path.display()))?;
            this.links.push((path, link));
        }
        Ok(Some(this))
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
        for (program, hook) in hooks.iter().map(|(p, h)| (p, h.name())) {
            let link = attach(ebpf, btf, program, hook)?;
            let path = self.pin_dir.join(format!("link_{hook}"));
            let pinned = link.pin(&path).with_context(|| format!("pinning {}", path.display()))?;
            self.links.push((path, pinned));
        }
        Ok(())
    }

    /// The hooks whose programs are attached.
    pub fn hooks(&self) -> Vec<String> {
        self.links
            .iter()
            .filter_map(|(path, _)| {
                path.file_name()?.to_str()?.strip_prefix("link_").map(Into::into)
            })
            .collect()
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
                _ => count::<InodeKey, u64>(map)?,
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
            names.insert(NameKey { session_id: id, ..*key }, value, 0)?;
        }
        let mut scopes: HashMap<_, ScopeKey, ScopeValue> =
            HashMap::try_from(self.map_mut(maps::SCOPES)?)?;
        for (scope_id, value) in tables.scopes().iter().enumerate().skip(1) {
            scopes.insert(
                ScopeKey { session_id: id, scope_id: scope_id as u16, _pad: [0; 6] },
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
            gone(names.remove(&NameKey { session_id: id, ..*key }))?;
        }
        let mut scopes: HashMap<_, ScopeKey, ScopeValue> =
            HashMap::try_from(self.map_mut(maps::SCOPES)?)?;
        for scope_id in 1..tables.scopes().len() {
            gone(scopes.remove(&ScopeKey {
                session_id: id,
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
        let mut map: HashMap<_, u64, SessionInfo> =
            HashMap::try_from(self.map_mut(maps::SESSIONS)?)?;
        map.insert(cgroup, info, 0)?;
        Ok(())
    }

    pub fn session(&mut self, cgroup: u64) -> anyhow::Result<SessionInfo> {
        let map: HashMap<_, u64, SessionInfo> = HashMap::try_from(self.map_mut(maps::SESSIONS)?)?;
        Ok(map.get(&cgroup, 0)?)
    }

    /// Forgets the session of cgroup `cgroup` (its tables are removed separately).
    pub fn end_session(&mut self, cgroup: u64) -> anyhow::Result<()> {
        let mut map: HashMap<_, u64, SessionInfo> =
            HashMap::try_from(self.map_mut(maps::SESSIONS)?)?;
        map.remove(&cgroup)?;
        let mut counters: HashMap<_, u64, SessionCounters> =
            HashMap::try_from(self.map_mut(maps::COUNTERS)?)?;
        counters.remove(&cgroup)?;
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
        sweep_trie::<PrefixValue>(self.map_mut(maps::PREFIXES)?, |k| {
            !tables.contains(&k.session_id)
        })?;
        sweep_trie::<u8>(self.map_mut(maps::INTERIOR)?, |k| !tables.contains(&k.session_id))?;
        sweep_trie::<GrantValue>(self.map_mut(maps::GRANTS)?, |k| {
            !cgroups.contains(&k.session_id)
        })?;
        sweep::<NameKey, NameValue>(self.map_mut(maps::NAMES)?, |k| {
            !tables.contains(&k.session_id)
        })?;
        sweep::<ScopeKey, ScopeValue>(self.map_mut(maps::SCOPES)?, |k| {
            !tables.contains(&k.session_id)
        })?;
        sweep::<InodeKey, InodeValue>(self.map_mut(maps::INODES)?, |k| {
            !tables.contains(&k.session_id)
        })?;
        sweep::<u64, SessionCounters>(self.map_mut(maps::COUNTERS)?, |c| !cgroups.contains(c))?;
        sweep::<InodeKey, u64>(self.map_mut(maps::PENDING)?, |k| !cgroups.contains(&k.session_id))?;
        Ok(removed.len())
    }

    /// Opens the broker never answered (it died) that no agent has recorded yet: each is
    /// returned once, and its reads stay refused until a broker answers a new open of the file.
    pub fn unrecorded_pending(&mut self) -> anyhow::Result<Vec<InodeKey>> {
        let mut map: HashMap<_, InodeKey, u64> = HashMap::try_from(self.map_mut(maps::PENDING)?)?;
        let fresh: Vec<InodeKey> =
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
        let mut map: HashMap<_, InodeKey, u64> = HashMap::try_from(self.map_mut(maps::PENDING)?)?;
        let key = InodeKey { session_id: cgroup, ino: st_ino, dev: kernel_dev(st_dev), _pad: 0 };
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
        let Self { maps, pin_dir, links } = self;
        for (path, link) in links {
            link.unpin().with_context(|| format!("unpinning {}", path.display()))?;
        }
        for name in maps::PINNED {
            let path = pin_dir.join(name);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("unpinning {}", path.display()));
                }
                _ => {}
            }
        }
        drop(maps);
        remove_empty_dirs(&pin_dir, Path::new("/sys/fs/bpf"));
        Ok(())
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
fn gone(r: Result<(), aya::maps::MapError>) -> Result<(), aya::maps::MapError> {
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

/// Removes `dir` and its ancestors below `stop` while they are empty.
fn remove_empty_dirs(dir: &Path, stop: &Path) {
    let mut dir = Some(dir);
    while let Some(d) = dir.filter(|d| d.starts_with(stop) && *d != stop) {
        if std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

/// The kernel's `s_dev` encoding (`major << 20 | minor`) of a userspace `st_dev`.
pub fn kernel_dev(st_dev: u64) -> u32 {
    let (major, minor) = (libc::major(st_dev), libc::minor(st_dev));
    (major << 20) | minor
}

const BPF_FS_MAGIC: i64 = 0xcafe4a11;

const BPFFS: &str = "/sys/fs/bpf";

/// Mounts bpffs at /sys/fs/bpf when nothing is mounted there (some hosts do not mount it at boot).
/// Returns whether it mounted it.
fn ensure_bpffs() -> anyhow::Result<bool> {
    let target = Path::new(BPFFS);
    let statfs = nix::sys::statfs::statfs(target).context("statfs /sys/fs/bpf")?;
    if statfs.filesystem_type().0 as i64 == BPF_FS_MAGIC {
        return Ok(false);
    }
    tracing::info!("bpffs is not mounted; mounting it at /sys/fs/bpf");
    nix::mount::mount(Some("bpf"), target, Some("bpf"), nix::mount::MsFlags::empty(), None::<&str>)
        .context("mounting bpffs at /sys/fs/bpf")?;
    Ok(true)
}

/// bpffs at /sys/fs/bpf for the life of this value. Mounted if nothing was mounted there; then,
/// when dropped, the empty directories left in it are removed and it is unmounted, unless
/// something is still pinned in it (e.g. the programs of a daemon that was killed, still
/// enforcing, or another fp's session): that stays.
pub struct Bpffs {
    mounted_here: bool,
}

impl Bpffs {
    /// Call only once BPF LSM is known to work ([`probe`]): nothing is mounted before.
    pub fn mount() -> anyhow::Result<Self> {
        Ok(Bpffs { mounted_here: ensure_bpffs()? })
    }
}

impl Drop for Bpffs {
    fn drop(&mut self) {
        if !self.mounted_here {
            return;
        }
        let root = Path::new(BPFFS);
        if !remove_empty_tree(root) {
            tracing::info!("leaving bpffs mounted at {BPFFS}: objects are pinned in it");
            return;
        }
        if let Err(e) = nix::mount::umount(root) {
            tracing::warn!("unmounting bpffs from {BPFFS}: {e}");
        }
    }
}

/// Removes the directories under `dir` that hold nothing but empty directories; whether `dir`
/// itself is empty now.
fn remove_empty_tree(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    let mut empty = true;
    for entry in entries {
        let Ok(entry) = entry else { return false };
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !(is_dir && remove_empty_tree(&path) && std::fs::remove_dir(&path).is_ok()) {
            empty = false;
        }
    }
    empty
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real build embeds a real BPF object: an ELF file with fp's LSM program sections.
    #[test]
    #[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
    fn embedded_object_is_real() {
        let obj = object().expect("a real BPF object is embedded");
        assert_eq!(&obj[..4], b"\x7fELF");
        let text = String::from_utf8_lossy(obj);
        for hook in Hook::ALL {
            let section = format!("lsm/{}", hook.name());
            assert!(text.contains(&section), "object lacks section {section}");
        }
        assert!(text.contains("license"));
        for f in KERNEL_FIELDS {
            assert!(text.contains(f.global), "object lacks the global {}", f.global);
        }
        assert!(
            text.contains(SESSION_CGROUP_LEVEL),
            "object lacks the global {SESSION_CGROUP_LEVEL}"
        );
    }

    /// The embedded object, parsed as aya parses it to load it.
    fn parsed_object() -> aya_obj::Object {
        let obj = object().expect("a real BPF object is embedded");
        aya_obj::Object::parse(obj).expect("the embedded BPF object parses")
    }

    /// The object's maps are exactly the ones userspace names (fp_common::kernel::maps): the
    /// `#[map]` statics of fp-ebpf cannot take their names from those consts, so a renamed,
    /// added or removed map shows here rather than when a session fails to start.
    #[test]
    #[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
    fn object_maps_are_the_named_ones() {
        use aya_obj::EbpfSectionKind;
        let obj = parsed_object();
        // Not the .rodata/.bss/.data sections aya also lists as maps: the globals are checked
        // by `embedded_object_is_real`.
        let mut found: Vec<&str> = obj
            .maps
            .iter()
            .filter(|(_, m)| {
                matches!(m.section_kind(), EbpfSectionKind::Maps | EbpfSectionKind::BtfMaps)
            })
            .map(|(name, _)| name.as_str())
            .collect();
        found.sort_unstable();
        let mut named = maps::ALL.to_vec();
        named.sort_unstable();
        assert_eq!(found, named, "the maps of fp-ebpf/src/maps.rs against fp_common::kernel::maps");
        assert!(maps::PINNED.iter().all(|m| maps::ALL.contains(m)));
    }

    /// The object's programs are exactly those userspace attaches by name: one per hook and
    /// kernel prototype ([`Hook::program`]) and the probe.
    #[test]
    #[cfg_attr(fp_ebpf_stub, ignore = "built with FP_EBPF_STUB=1")]
    fn object_programs_are_the_named_ones() {
        let obj = parsed_object();
        let mut found: Vec<&str> = obj.programs.keys().map(String::as_str).collect();
        found.sort_unstable();
        let mut named: Vec<&str> = Hook::ALL.iter().map(|h| h.program(&[])).collect();
        named.extend([programs::INODE_SETATTR_IDMAP, programs::BPF_KERNEL, programs::PROBE]);
        named.sort_unstable();
        assert_eq!(found, named, "the #[lsm] programs of fp-ebpf/src/hooks against fp_common");
    }

    #[test]
    fn kernel_dev_matches_the_kernel_encoding() {
        assert_eq!(kernel_dev(libc::makedev(8, 1)), (8 << 20) | 1);
        assert_eq!(kernel_dev(libc::makedev(259, 70000)), (259 << 20) | 70000);
    }

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
