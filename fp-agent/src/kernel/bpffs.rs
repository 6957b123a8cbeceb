//! bpffs at /sys/fs/bpf, where the pins that outlive fp live: mounted when missing, unmounted
//! when fp mounted it and nothing is pinned any more.

use std::path::Path;

use anyhow::Context as _;

const BPF_FS_MAGIC: i64 = 0xcafe4a11;

const BPFFS: &str = "/sys/fs/bpf";

/// Mounts bpffs at /sys/fs/bpf when nothing is mounted there (some hosts do not mount it at boot).
/// Returns whether it mounted it.
pub(super) fn ensure_bpffs() -> anyhow::Result<bool> {
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
    /// Call only once BPF LSM is known to work ([`super::probe`]): nothing is mounted before.
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

/// Removes `dir` and its ancestors below `stop` while they are empty.
pub(super) fn remove_empty_dirs(dir: &Path, stop: &Path) {
    let mut dir = Some(dir);
    while let Some(d) = dir.filter(|d| d.starts_with(stop) && *d != stop) {
        if std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}
