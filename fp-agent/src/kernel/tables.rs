//! A session's compiled tables as map entries: the policy compiler's output plus the inode table,
//! which needs the filesystem (the identity of each rule's target, and of files hardlinked below
//! it before the session started).
use std::{
    collections::BTreeMap,
    os::unix::{ffi::OsStrExt as _, fs::MetadataExt as _},
    path::{Path, PathBuf},
};

use anyhow::Context as _;
use fp_common::policy::{InodeKey, InodeValue, OpEntry, ROOT_SCOPE, TableVerdict, device_bit};

use crate::policy::KernelTables;

/// Entries a hardlink scan below one subtree target visits at most: the scan is there for files
/// linked out of a protected tree before the session, and must not turn a rule on a large tree
/// into minutes of start-up.
const HARDLINK_SCAN_BUDGET: usize = 200_000;

/// The inode table of one session's tables (keys carry tables id 0), and what could not be
/// resolved completely.
#[derive(Debug, Default)]
pub struct InodeTable {
    pub entries: BTreeMap<(u32, u64), InodeValue>,
    /// Subtrees whose hardlink scan hit its budget or an unreadable directory: files hardlinked
    /// out of them before the session are protected by path only.
    pub incomplete: Vec<(PathBuf, String)>,
}

impl InodeTable {
    /// Resolves every anchor of `tables` that exists now. Targets that do not exist are covered
    /// by their path rules once created.
    pub fn resolve(tables: &KernelTables) -> Self {
        let mut table = InodeTable::default();
        for (anchor, entries) in tables.anchors() {
            let path = if anchor.path.is_empty() { b"/".as_slice() } else { &anchor.path };
            let path = Path::new(std::ffi::OsStr::from_bytes(path));
            // Follows symlinks: a rule on a symlinked directory protects what it points to.
            let Ok(md) = std::fs::metadata(path) else { continue };
            let dev = super::kernel_dev(md.dev());
            if anchor.subtree {
                table.offer(dev, md.ino(), |v| &mut v.below, entries);
                if md.is_dir()
                    && anchor.scan_hardlinks
                    && let Err(e) = table.hardlinks_below(path, md.dev(), entries)
                {
                    table.incomplete.push((path.to_path_buf(), format!("{e:#}")));
                }
            } else {
                table.offer(dev, md.ino(), |v| &mut v.this, entries);
            }
        }
        table
    }

    fn offer(
        &mut self,
        dev: u32,
        ino: u64,
        side: impl Fn(&mut InodeValue) -> &mut [OpEntry; 3],
        entries: &[OpEntry; 3],
    ) {
        let value = self.entries.entry((dev, ino)).or_default();
        for (dst, src) in side(value).iter_mut().zip(entries) {
            if src.outranks(dst) {
                *dst = *src;
            }
        }
    }

    /// Enters every non-directory below `dir` with more than one link as the file itself under
    /// the subtree's entries: a hardlink made before the session is another name for it, outside
    /// the path rule. Stays on `dir`'s filesystem (hardlinks cannot cross it) and does not follow
    /// symlinks.
    fn hardlinks_below(
        &mut self,
        dir: &Path,
        st_dev: u64,
        entries: &[OpEntry; 3],
    ) -> anyhow::Result<()> {
        let mut pending = vec![dir.to_path_buf()];
        let mut visited = 0usize;
        while let Some(dir) = pending.pop() {
            let listing =
                std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))?;
            for entry in listing {
                visited += 1;
                if visited > HARDLINK_SCAN_BUDGET {
                    anyhow::bail!("more than {HARDLINK_SCAN_BUDGET} entries");
                }
                let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
                let md = entry.metadata().with_context(|| entry.path().display().to_string())?;
                if md.dev() != st_dev {
                    continue;
                }
                if md.is_dir() {
                    pending.push(entry.path());
                } else if md.nlink() > 1 {
                    self.offer(super::kernel_dev(md.dev()), md.ino(), |v| &mut v.this, entries);
                }
            }
        }
        Ok(())
    }

    /// Keys and values for tables `id`.
    /// The devices of its entries, a bit each ([`SessionInfo::inode_devices`]).
    ///
    /// [`SessionInfo::inode_devices`]: fp_common::kernel::SessionInfo::inode_devices
    pub fn devices(&self) -> u64 {
        self.entries.keys().fold(0, |bits, &(dev, _)| bits | device_bit(dev))
    }

    pub fn keyed(&self, id: u64) -> impl Iterator<Item = (InodeKey, &InodeValue)> {
        self.entries
            .iter()
            .map(move |(&(dev, ino), v)| (InodeKey { session_id: id, ino, dev, _pad: 0 }, v))
    }
}

/// Whether a table verdict leaves an open to the prompt broker.
fn brokered(verdict: u8) -> bool {
    verdict == TableVerdict::Prompt as u8 || verdict == TableVerdict::Defer as u8
}

/// The directory (no trailing `/`; empty for `/`) of every entry of `tables` that can leave an
/// open to the prompt broker (a prompt or defer verdict), unsorted: each rule's longest literal
/// directory prefix (its LPM key or name-table scope), `/` for a prompt default or an unscoped
/// name.
pub fn brokered_dirs(tables: &KernelTables) -> impl Iterator<Item = &[u8]> {
    const ROOT: &[u8] = b"/";
    let default = tables.header().defaults.iter().any(|v| brokered(*v)).then_some(ROOT);
    let prefixes = tables
        .prefixes()
        .filter(|(_, value)| value.ops.iter().any(|e| e.rank != 0 && brokered(e.verdict)))
        // `P/` (below P) or `P\0` (P itself).
        .map(|(key, _)| &key[..key.len() - 1]);
    let names = tables.names().flat_map(move |(_, value)| {
        value.slots.iter().take(value.count as usize).filter(|slot| brokered(slot.verdict)).map(
            move |slot| match tables.scopes().get(slot.scope_id as usize) {
                Some(s) if slot.scope_id != ROOT_SCOPE => &s.path[..s.len as usize],
                _ => ROOT,
            },
        )
    });
    default.into_iter().chain(prefixes).chain(names)
}

/// Whether `tables`, with their inode table `inodes`, can leave any open to the prompt broker:
/// only then can a file of the session be pending, and its reads, writes and maps need the
/// kernel's check of pending files ([`super::HOLD_HOOKS`]).
pub fn can_hold(tables: &KernelTables, inodes: &InodeTable) -> bool {
    let held = |e: &OpEntry| e.rank != 0 && brokered(e.verdict);
    brokered_dirs(tables).next().is_some()
        || inodes.entries.values().any(|v| v.this.iter().chain(&v.below).any(held))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{EffectivePolicy, LoadOptions};

    #[test]
    fn targets_and_prior_hardlinks_enter_the_inode_table() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::create_dir(&secret).unwrap();
        std::fs::write(secret.join("key"), b"k").unwrap();
        std::fs::write(secret.join("plain"), b"p").unwrap();
        std::fs::hard_link(secret.join("key"), dir.path().join("alias")).unwrap();
        let policy = EffectivePolicy::from_deny_paths(
            std::slice::from_ref(&secret),
            &LoadOptions { workspace: Some(dir.path().into()), ..LoadOptions::default() },
        )
        .unwrap();
        let table = InodeTable::resolve(policy.tables());
        let id = |p: &Path| {
            let md = std::fs::metadata(p).unwrap();
            (super::super::kernel_dev(md.dev()), md.ino())
        };
        let dir_entry = table.entries[&id(&secret)];
        assert_ne!(dir_entry.this[0].rank, 0, "the directory itself");
        assert_ne!(dir_entry.below[0].rank, 0, "everything below it");
        assert_ne!(table.entries[&id(&dir.path().join("alias"))].this[0].rank, 0, "the hardlink");
        assert!(!table.entries.contains_key(&id(&secret.join("plain"))), "single-link files");
        assert!(table.incomplete.is_empty(), "{:?}", table.incomplete);
    }

    /// The devices filter admits the device of every entry (the programs skip the lookups it
    /// refuses), and refuses some devices: an empty table refuses all.
    #[test]
    fn the_devices_filter_admits_every_entrys_device() {
        let mut table = InodeTable::default();
        assert_eq!(table.devices(), 0);
        let devs = [1u32 << 20 | 3, 8 << 20 | 1, 0x25, 259 << 20 | 7];
        for (i, dev) in devs.into_iter().enumerate() {
            table.entries.insert((dev, i as u64 + 2), InodeValue::default());
        }
        let devices = table.devices();
        assert!(devs.iter().all(|&dev| fp_common::policy::may_have_inode(devices, dev)));
        assert!((0..64).any(|dev| !fp_common::policy::may_have_inode(devices, dev)));
    }
}
