//! Sessions as cgroup v2 directories: every process of a session (and everything it spawns) lives
//! in the session's cgroup, whose id keys the kernel tables. The [`Manager`] hosts them:
//! `manager` (lifecycle, the one install path), `takeover` (after an agent restart), `saved` (the
//! state a restarted agent reads), `parent` (the cgroup sessions are created in, which every
//! agent shares), `orphans` (what a killed `fp run` left behind), `reader` and `event` (the
//! kernel's decision events, read and formatted as lines and audit records), `enforce` (what the
//! manager needs from the kernel), `freeze` (sessions frozen while the audit log cannot be
//! written), `fmod_ret` (the watch on `kernel.ftrace_enabled` and the preemption mode, on the
//! fmod_ret backend), `delegate` (the cgroups a session makes of its own), `links` (the
//! hardlinks looked for after a session starts).
mod delegate;
mod enforce;
pub mod event;
mod fmod_ret;
mod freeze;
mod links;
pub mod manager;
#[cfg(test)]
mod manager_tests;
pub mod orphans;
mod parent;
mod reader;
mod saved;
mod takeover;

pub use event::SessionContext;
pub use manager::{Ended, Manager, SessionSpec, Summary};
pub use reader::{Observer, Sink};

use std::{
    io::Write as _,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context as _, anyhow, bail};

/// Whether a session's denials are enforced.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Deny what the policy denies.
    #[default]
    Enforce,
    /// Decide and record everything, deny nothing.
    Audit,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Audit => "audit",
        }
    }
}

/// The cgroup v2 hierarchy: where it is mounted and which cgroup path its mount root is (not `/`
/// inside a cgroup namespace). Works on unified (`/sys/fs/cgroup`) and hybrid
/// (`/sys/fs/cgroup/unified`) layouts.
#[derive(Debug, Clone)]
pub struct Cgroup2 {
    pub mount: PathBuf,
    pub root: PathBuf,
    /// Mounted `nsdelegate`: the kernel keeps the moves of a cgroup namespace's processes inside
    /// it, and a session may then manage cgroups of its own (docs/threat-model.md, Sub-cgroups).
    pub nsdelegate: bool,
}

impl Cgroup2 {
    pub fn find() -> anyhow::Result<Self> {
        let mountinfo =
            std::fs::read_to_string("/proc/self/mountinfo").context("reading mountinfo")?;
        Self::from_mountinfo(&mountinfo).ok_or_else(|| {
            anyhow!("no cgroup2 filesystem is mounted (mount -t cgroup2 none /sys/fs/cgroup)")
        })
    }

    fn from_mountinfo(mountinfo: &str) -> Option<Self> {
        mountinfo.lines().find_map(|line| {
            // id parent major:minor root mountpoint options... - fstype source superoptions
            let (left, right) = line.split_once(" - ")?;
            if right.split(' ').next()? != "cgroup2" {
                return None;
            }
            let fields: Vec<&str> = left.split(' ').collect();
            let superoptions = right.split(' ').nth(2).unwrap_or_default();
            Some(Self {
                root: unescape(fields.get(3)?).into(),
                mount: unescape(fields.get(4)?).into(),
                nsdelegate: superoptions.split(',').any(|o| o == "nsdelegate"),
            })
        })
    }

    /// The cgroup level (root = 0) of a directory inside this hierarchy.
    pub fn level_of(&self, dir: &Path) -> anyhow::Result<u32> {
        let rel = dir
            .strip_prefix(&self.mount)
            .with_context(|| format!("{} is not inside {}", dir.display(), self.mount.display()))?;
        let depth = |p: &Path| {
            p.components().filter(|c| matches!(c, std::path::Component::Normal(_))).count()
        };
        Ok((depth(&self.root) + depth(rel)) as u32)
    }
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Cgroups a session may make below its own (`cgroup.max.descendants`).
const MAX_OWN_CGROUPS: u32 = 64;

/// A session's cgroup. Removing it kills whatever still runs inside.
#[derive(Debug)]
pub struct SessionCgroup {
    pub path: PathBuf,
    /// cgroup id (the inode number of the directory), as `bpf_get_current_cgroup_id` reports it.
    pub id: u64,
    pub level: u32,
}

impl SessionCgroup {
    /// Creates `parent/name` in the cgroup `parent`.
    pub fn create(hierarchy: &Cgroup2, parent: &Path, name: &str) -> anyhow::Result<Self> {
        let path = parent.join(name);
        std::fs::create_dir(&path)
            .with_context(|| format!("creating cgroup {}", path.display()))?;
        let id = std::fs::metadata(&path)?.ino();
        let level = hierarchy.level_of(&path)?;
        // Bounds on the cgroups the session may make of its own (docs/threat-model.md,
        // "Sub-cgroups"), which fp walks to count and end its processes; the session cannot
        // change them (the root of its cgroup namespace).
        for (file, bound) in [("cgroup.max.descendants", MAX_OWN_CGROUPS), ("cgroup.max.depth", 8)]
        {
            let set = std::fs::OpenOptions::new()
                .write(true)
                .open(path.join(file))
                .and_then(|mut f| f.write_all(bound.to_string().as_bytes()));
            if let Err(e) = set {
                tracing::warn!("cgroup {}: setting {file}: {e}", path.display());
            }
        }
        Ok(Self { path, id, level })
    }

    /// An existing session cgroup (left behind by an agent that died).
    pub fn existing(hierarchy: &Cgroup2, path: &Path) -> anyhow::Result<Self> {
        let id =
            std::fs::metadata(path).with_context(|| format!("cgroup {}", path.display()))?.ino();
        let level = hierarchy.level_of(path)?;
        Ok(Self { path: path.to_path_buf(), id, level })
    }

    /// The processes of the session: in its cgroup and in those it made below it.
    pub fn pids(&self) -> Vec<i32> {
        self.subtree()
            .iter()
            .flat_map(|dir| {
                std::fs::read_to_string(dir.join("cgroup.procs"))
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect()
    }

    /// The session's cgroup directory, then those below it, each before its children.
    fn subtree(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.path.clone()];
        let mut next = 0;
        while next < dirs.len() && dirs.len() <= MAX_OWN_CGROUPS as usize {
            if let Ok(entries) = std::fs::read_dir(&dirs[next]) {
                let below = entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir()));
                dirs.extend(below.map(|e| e.path()));
            }
            next += 1;
        }
        dirs
    }

    /// Kills every remaining process and removes the cgroup.
    pub fn remove(self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let pids = self.pids();
            if pids.is_empty() {
                break;
            }
            // cgroup.kill (Linux 5.14+) also catches processes forking while we kill.
            let killed = std::fs::OpenOptions::new()
                .write(true)
                .open(self.path.join("cgroup.kill"))
                .and_then(|mut f| f.write_all(b"1"));
            if killed.is_err() {
                for pid in pids {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::SIGKILL,
                    );
                }
            }
            if Instant::now() > deadline {
                bail!("processes remain in {} after SIGKILL", self.path.display());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.remove_empty()
    }

    /// Removes the cgroup once no process is left in it, killing none: the kernel refuses to
    /// remove a cgroup that still holds one (after a short wait, an error).
    pub fn remove_empty(self) -> anyhow::Result<()> {
        // rmdir fails with EBUSY until the last exited task is released: retry briefly. The
        // cgroups the session made go first, children before their parents.
        let deadline = Instant::now() + Duration::from_secs(5);
        for dir in self.subtree().iter().rev() {
            while let Err(e) = std::fs::remove_dir(dir) {
                if Instant::now() > deadline {
                    return Err(e).with_context(|| format!("removing cgroup {}", dir.display()));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Ok(())
    }
}

/// The cgroup directory below `dir`, at any depth, whose cgroup id is `id`.
fn find_cgroup(dir: &Path, id: u64) -> Option<PathBuf> {
    let subdirs: Vec<(PathBuf, u64)> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            meta.is_dir().then(|| (e.path(), meta.ino()))
        })
        .collect();
    if let Some((path, _)) = subdirs.iter().find(|(_, ino)| *ino == id) {
        return Some(path.clone());
    }
    subdirs.iter().find_map(|(path, _)| find_cgroup(path, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cgroup2_on_unified_and_hybrid_layouts() {
        let hybrid = "30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro\n\
                      31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n";
        let c = Cgroup2::from_mountinfo(hybrid).unwrap();
        assert_eq!(c.mount, Path::new("/sys/fs/cgroup/unified"));
        assert!(!c.nsdelegate);
        assert_eq!(c.level_of(Path::new("/sys/fs/cgroup/unified/fp/s1")).unwrap(), 2);

        let namespaced =
            "31 30 0:27 /user.slice/x /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let c = Cgroup2::from_mountinfo(namespaced).unwrap();
        assert!(c.nsdelegate);
        assert_eq!(c.level_of(Path::new("/sys/fs/cgroup/fp")).unwrap(), 3);
        assert!(c.level_of(Path::new("/elsewhere")).is_err());
        assert!(Cgroup2::from_mountinfo("1 0 0:1 / / rw - ext4 /dev/vda rw\n").is_none());
    }

    #[test]
    fn unescapes_mountinfo_paths() {
        assert_eq!(unescape(r"/a\134b"), "/a\\b");
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape(r"/trailing\04"), r"/trailing\04");
    }
}
