//! The attached programs of one enforcement scope and the pinned maps they consult: what a
//! session manager installs, switches and sweeps. Here the programs, their pins and links;
//! a session's tables in `tables.rs`, its entries and storage in `sessions.rs`, the prompt
//! broker's maps in `prompt.rs`.

use std::{
    collections::BTreeMap,
    os::fd::AsFd as _,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, anyhow, bail};
use aya::{
    Ebpf,
    maps::{HashMap, LpmTrie, MapData, RingBuf},
    programs::{
        FModRet, LsmCgroup, Program,
        links::{FdLink, PinnedLink},
    },
};
use fp_common::{
    kernel::{GrantValue, Hook, PendingKey, SESSION_SLOT_COUNT, SessionInfo, maps},
    policy::{
        InodeKey, InodeValue, NameKey, NameValue, PrefixKeyData, PrefixValue, ScopeKey, ScopeValue,
        TableHeader,
    },
};

mod prompt;
mod sessions;
mod table_maps;

pub use prompt::BrokerClock;

use super::bpffs::{ensure_bpffs, remove_empty_dirs};
use super::{
    backend::{BACKEND_ENV, Backend, chosen, security_function},
    btf,
    load::{
        SessionCgroups, attach_loaded, attach_to_cgroup, available_hooks, load, open, trampoline,
    },
};

/// The hooks whose programs only refuse reads, writes and maps of a file whose open a prompt
/// holds (fp-ebpf's `check_pending`): a session whose tables have no prompt or defer verdict never
/// holds one, and its reads and writes run none of fp's code ([`Enforcer::attach_holds`]); on
/// the fmod_ret backend, no task's reads and writes do until some session's can.
pub const HOLD_HOOKS: [&str; 2] = [Hook::FilePermission.name(), Hook::MmapFile.name()];

/// The LSM programs of one enforcement scope, with their maps, programs and links pinned under
/// `pin_dir` so enforcement survives the loader being paused or killed: the `#[lsm]` programs
/// attached for every task (`link_<hook>`), the `#[lsm_cgroup]` ones (`prog_<hook>`: the
/// [`HOLD_HOOKS`]') attached to the cgroup of each session that can hold an open
/// ([`SESSION_LINKS`]`/<cgroup id>/link_<hook>`). On the fmod_ret backend every program is
/// attached for every task, the [`HOLD_HOOKS`]' ones (`hold_<hook>`) once a session can hold an
/// open.
pub struct Enforcer {
    maps: BTreeMap<&'static str, aya::maps::Map>,
    pin_dir: PathBuf,
    links: Vec<(PathBuf, PinnedLink)>,
    /// The BPF LSM backend's [`HOLD_HOOKS`] programs, attached per session cgroup by
    /// [`Enforcer::attach_holds`] (fp-ebpf has no other `#[lsm_cgroup]` programs).
    per_session: Vec<(PathBuf, LsmCgroup)>,
    /// The fmod_ret backend's [`HOLD_HOOKS`] programs, attached by [`Enforcer::attach_holds`].
    holds: Vec<(PathBuf, FModRet)>,
}

/// The directory in a pin directory that holds each session's links, by cgroup id.
pub const SESSION_LINKS: &str = "sessions";

/// How full one of the pinned hash maps is.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MapUsage {
    pub name: &'static str,
    pub used: u64,
    pub capacity: u64,
}

impl Enforcer {
    /// Loads the programs for sessions whose cgroups sit where `sessions` says and attaches those
    /// that every task runs; the per-cgroup ones wait for [`Self::attach_holds`]. The session
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
        let backend = chosen()?.backend;
        let mut this = Self::open_pinned(pin_dir)?;
        if this.backend() != backend {
            bail!(
                "the programs pinned under {} enforce through the {} backend, this fp chose {} \
                 ({}): run it with {BACKEND_ENV}={} to take their sessions over",
                this.pin_dir.display(),
                this.backend().name(),
                backend.name(),
                chosen()?.why,
                this.backend().name()
            );
        }
        let hooks = available_hooks(btf::Btf::from_sys()?, backend)?;
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
        this.write_slots(0..SESSION_SLOT_COUNT, None)?;
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
        for path in pinned_files(&this.pin_dir, "hold_")? {
            let program = FModRet::from_pin(&path)
                .with_context(|| format!("opening the pinned program {}", path.display()))?;
            this.holds.push((path, program));
        }
        Ok(this)
    }

    fn empty(pin_dir: PathBuf) -> Self {
        Self {
            maps: BTreeMap::new(),
            pin_dir,
            links: Vec::new(),
            per_session: Vec::new(),
            holds: Vec::new(),
        }
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
        // On fmod_ret, the checks of pending files wait for a session that can hold an open.
        let (holds, global): (Vec<_>, Vec<_>) = global.into_iter().partition(|(p, h)| {
            HOLD_HOOKS.contains(h) && matches!(ebpf.program(p), Some(Program::FModRet(_)))
        });
        for (program, hook) in holds {
            let path = self.pin_dir.join(format!("hold_{hook}"));
            let pinned = pin_program(ebpf, program, &path, |p| FModRet::from_pin(p))?;
            self.holds.push((path, pinned));
        }
        for (program, hook) in per_session {
            let path = self.pin_dir.join(format!("prog_{hook}"));
            let pinned = pin_program(ebpf, program, &path, |p| LsmCgroup::from_pin(p))?;
            self.per_session.push((path, pinned));
        }
        for ((_, hook), link) in global.iter().zip(attach_loaded(ebpf, &global, None)?) {
            let path = self.pin_dir.join(format!("link_{hook}"));
            let pinned = link.pin(&path).with_context(|| format!("pinning {}", path.display()))?;
            self.links.push((path, pinned));
        }
        Ok(())
    }

    /// The backend the programs enforce through: on the BPF LSM's, the checks of pending files
    /// are per session cgroup; on fmod_ret's, every program is attached for every task.
    pub fn backend(&self) -> Backend {
        match self.per_session.is_empty() {
            true => Backend::FModRet,
            false => Backend::BpfLsm,
        }
    }

    /// The hooks fp's programs are on: attached for every task, or to each session's cgroup
    /// (or, for the fmod_ret backend's checks of pending files, to be attached for every task).
    pub fn hooks(&self) -> Vec<String> {
        let links = self.links.iter().filter_map(|(path, _)| hook_of(path, "link_"));
        let per_session = self.per_session.iter().filter_map(|(path, _)| hook_of(path, "prog_"));
        let holds = self.holds.iter().filter_map(|(path, _)| hook_of(path, "hold_"));
        let mut hooks: Vec<String> =
            links.chain(per_session).chain(holds).map(Into::into).collect();
        hooks.sort();
        hooks.dedup();
        hooks
    }

    /// Where the links of the session of cgroup `cgroup` are pinned.
    fn session_links(&self, cgroup: u64) -> PathBuf {
        self.pin_dir.join(SESSION_LINKS).join(cgroup.to_string())
    }

    /// Whether per-cgroup programs are attached to the session cgroup `cgroup` (the
    /// [`HOLD_HOOKS`]', [`Self::attach_holds`]): its links are pinned.
    fn attached_to(&self, cgroup: u64) -> bool {
        std::fs::read_dir(self.session_links(cgroup)).is_ok_and(|mut links| links.next().is_some())
    }

    /// Attaches the [`HOLD_HOOKS`]' programs to the session cgroup `path` (id `cgroup`), unless
    /// they are already: before the session gets tables that can hold an open for the prompt
    /// broker. They find the session in its slot until [`Self::set_session`] writes their
    /// cgroup's storage. Once attached they stay (files may be pending after a reload to tables
    /// that cannot hold one). On error, nothing this call attached stays. On the fmod_ret backend
    /// they are attached for every task, once, and stay until the programs are unloaded.
    pub fn attach_holds(&mut self, cgroup: u64, path: &Path) -> anyhow::Result<()> {
        if self.backend() == Backend::FModRet {
            return self.attach_global_holds();
        }
        let dir = self.session_links(cgroup);
        self.attach_to(path, &dir)
    }

    /// [`Self::attach_holds`] on the fmod_ret backend: each hold program without a link yet is
    /// attached and its link pinned (`link_<hook>`).
    fn attach_global_holds(&mut self) -> anyhow::Result<()> {
        for (pinned, program) in &mut self.holds {
            let hook = hook_of(pinned, "hold_").unwrap_or_default();
            let path = self.pin_dir.join(format!("link_{hook}"));
            if path.exists() {
                continue;
            }
            let attaching =
                || trampoline(&format!("hold_{hook}"), "fmod_ret", &security_function(hook));
            let id = program.attach().with_context(attaching)?;
            let link: FdLink = program.take_link(id).with_context(attaching)?.into();
            let link = link.pin(&path).with_context(|| format!("pinning {}", path.display()))?;
            self.links.push((path, link));
        }
        Ok(())
    }

    /// Attaches to `cgroup` the per-cgroup programs that have no link pinned in `dir` yet,
    /// pinning each link there. On error, the links it pinned are removed again.
    fn attach_to(&mut self, cgroup: &Path, dir: &Path) -> anyhow::Result<()> {
        let fd = std::fs::File::open(cgroup)
            .with_context(|| format!("opening cgroup {}", cgroup.display()))?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut pinned_now = Vec::new();
        let mut attach = || -> anyhow::Result<()> {
            for (pinned, program) in &mut self.per_session {
                let hook = hook_of(pinned, "prog_").unwrap_or_default();
                let path = dir.join(format!("link_{hook}"));
                if path.exists() {
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

    /// Takes the ring buffer of decision events (once). It is pinned: events queued while no
    /// agent read them are still there for the next one.
    pub fn take_events(&mut self) -> anyhow::Result<RingBuf<MapData>> {
        let map = self
            .maps
            .remove(maps::EVENTS)
            .ok_or_else(|| anyhow!("{} already taken", maps::EVENTS))?;
        Ok(RingBuf::try_from(map)?)
    }

    /// Unpins and detaches everything and removes the pin directory. Each link's last reference
    /// is its pin, never a descriptor: the kernel detaches a link whose last descriptor closes
    /// inside close(2), where a trampoline's update waits for RCU-tasks grace periods under
    /// ftrace's lock (about 0.1 s a link under TCG), and one whose last pin goes from a workqueue
    /// where the kernel defers that release (6.12; 6.1 detaches within the unlink).
    pub fn unload(self) -> anyhow::Result<()> {
        let Self { maps, pin_dir, links, per_session, holds } = self;
        // Every descriptor closes here, before any pin goes.
        let pins: Vec<PathBuf> = links.into_iter().map(|(path, _)| path).collect();
        for path in &pins {
            remove_pins(path)?;
        }
        remove_pins(&pin_dir.join(SESSION_LINKS))?;
        let programs = per_session.into_iter().map(|(p, _)| p);
        for path in programs.chain(holds.into_iter().map(|(p, _)| p)) {
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

/// Pins the loaded, unattached `program` at `path` and opens the pin with `open`: a handle of its
/// own (aya 0.14 cannot take a program out of its `Ebpf`), as an agent that adopts the pins gets.
fn pin_program<P>(
    ebpf: &mut Ebpf,
    program: &str,
    path: &Path,
    open: impl FnOnce(&Path) -> Result<P, aya::programs::ProgramError>,
) -> anyhow::Result<P> {
    ebpf.program_mut(program)
        .ok_or_else(|| anyhow!("program {program} missing from the BPF object"))?
        .pin(path)
        .with_context(|| format!("pinning {}", path.display()))?;
    open(path).with_context(|| format!("opening the pinned program {}", path.display()))
}

/// The hook a pin is for, by its name: `<prefix><hook>`.
fn hook_of<'a>(pin: &'a Path, prefix: &str) -> Option<&'a str> {
    pin.file_name()?.to_str()?.strip_prefix(prefix)
}

/// The entries of `dir` whose names start with `prefix`, sorted; none if `dir` does not exist.
pub(super) fn pinned_files(dir: &Path, prefix: &str) -> anyhow::Result<Vec<PathBuf>> {
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

/// A removal of an entry already gone is not an error. aya 0.14's `remove` reports a missing key
/// as the `bpf_map_delete_elem` syscall failing with ENOENT, not as `KeyNotFound`.
pub(in crate::kernel) fn gone(
    r: Result<(), aya::maps::MapError>,
) -> Result<(), aya::maps::MapError> {
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
