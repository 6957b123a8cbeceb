//! A session's compiled tables as map entries: the policy compiler's output plus the inode table,
//! which needs the filesystem (the identity of each rule's target, and of files hardlinked below
//! it before the session started).
//!
//! Looking for hardlinks means listing every entry below a subtree target, which takes seconds on
//! a tree like `~/.rustup`. Trees whose reads the policy withholds are listed before the session
//! starts (another name of one of their files would read it); trees that only withhold writes are
//! listed after it has started ([`InodeTable::deferred`]), while the kernel refuses writes to
//! every file with several links (`SESSION_LINKS_PENDING`); trees that only withhold deletes are
//! not listed (removing another name of a file removes only that name).
use std::{
    collections::BTreeMap,
    os::unix::{ffi::OsStrExt as _, fs::MetadataExt as _},
    path::{Path, PathBuf},
};

use anyhow::Context as _;
use fp_common::policy::{InodeKey, InodeValue, Op, OpEntry, ROOT_SCOPE, TableVerdict, device_bit};

use crate::policy::KernelTables;

/// Entries a hardlink scan below one subtree target visits at most: the scan is there for files
/// linked out of a protected tree before the session, and must not turn a rule on a large tree
/// into minutes of start-up.
const HARDLINK_SCAN_BUDGET: usize = 200_000;

/// When the files hardlinked below a rule's target are looked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Listing {
    /// Before the session starts: the subtree withholds reads.
    Now,
    /// After it started: the subtree withholds writes, not reads.
    Later,
    /// Never: no subtree of the policy's own, or it withholds only deletes.
    Never,
}

fn listing(anchor: &crate::policy::Anchor, entries: &[OpEntry; 3]) -> Listing {
    let withheld = |op: Op| op.of(entries).rank != 0;
    match (anchor.subtree && anchor.scan_hardlinks, withheld(Op::Read), withheld(Op::Write)) {
        (false, ..) => Listing::Never,
        (true, true, _) => Listing::Now,
        (true, false, true) => Listing::Later,
        (true, false, false) => Listing::Never,
    }
}

/// The subtrees of `tables` listed for hardlinks after a session starts (while writes to files
/// with several links are refused), as their rules name them.
pub fn listed_later(tables: &KernelTables) -> impl Iterator<Item = &[u8]> {
    tables
        .anchors()
        .filter(|(anchor, entries)| listing(anchor, entries) == Listing::Later)
        .map(|(anchor, _)| anchor.path.as_slice())
}

/// The inode table of one session's tables (keys carry tables id 0), and the subtrees whose
/// hardlinks are still to be looked for.
#[derive(Clone, Debug, Default)]
pub struct InodeTable {
    pub entries: BTreeMap<(u32, u64), InodeValue>,
    /// Subtrees withholding writes but not reads, whose hardlinks are still to be looked for
    /// ([`InodeTable::complete`]).
    pub deferred: Vec<Subtree>,
}

/// A subtree target whose hardlinks are looked for, with its restrictive entries.
#[derive(Clone, Debug)]
pub struct Subtree {
    pub dir: PathBuf,
    st_dev: u64,
    entries: [OpEntry; 3],
}

impl InodeTable {
    /// Resolves every anchor of `tables` that exists now, and looks for the hardlinks below the
    /// subtrees that withhold reads; those below subtrees that withhold only writes are left in
    /// [`InodeTable::deferred`]. Targets that do not exist are covered by their path rules once
    /// created.
    pub fn resolve(tables: &KernelTables) -> Self {
        let mut table = InodeTable::default();
        for (anchor, entries) in tables.anchors() {
            let path = if anchor.path.is_empty() { b"/".as_slice() } else { &anchor.path };
            let path = Path::new(std::ffi::OsStr::from_bytes(path));
            // Follows symlinks: a rule on a symlinked directory protects what it points to.
            let Ok(md) = std::fs::metadata(path) else { continue };
            let dev = crate::policy::kernel_dev(md.dev());
            if !anchor.subtree {
                table.offer(dev, md.ino(), |v| &mut v.this, entries);
                continue;
            }
            table.offer(dev, md.ino(), |v| &mut v.below, entries);
            if !md.is_dir() {
                continue;
            }
            let subtree = Subtree { dir: path.to_path_buf(), st_dev: md.dev(), entries: *entries };
            match listing(anchor, entries) {
                Listing::Now => table.scan(&subtree),
                Listing::Later => table.deferred.push(subtree),
                Listing::Never => {}
            }
        }
        table
    }

    /// Whether hardlinks are still to be looked for ([`InodeTable::complete`]).
    pub fn pending(&self) -> bool {
        !self.deferred.is_empty()
    }

    /// The table with the hardlinks below its deferred subtrees entered too.
    pub fn complete(mut self) -> Self {
        for subtree in std::mem::take(&mut self.deferred) {
            self.scan(&subtree);
        }
        self
    }

    /// [`InodeTable::hardlinks_below`] `subtree`; what stops it is logged: files hardlinked out
    /// of the subtree before the session are then protected by path only (docs/threat-model.md).
    fn scan(&mut self, subtree: &Subtree) {
        if let Err(e) = self.hardlinks_below(&subtree.dir, subtree.st_dev, &subtree.entries) {
            tracing::warn!(
                "hardlinks below {} not all recorded ({e:#}): files linked out of it before the \
                 session are protected by path only",
                subtree.dir.display()
            );
        }
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
                    self.offer(
                        crate::policy::kernel_dev(md.dev()),
                        md.ino(),
                        |v| &mut v.this,
                        entries,
                    );
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
            .map(move |(&(dev, ino), v)| (InodeKey { tables_id: id, ino, dev, _pad: 0 }, v))
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
            (crate::policy::kernel_dev(md.dev()), md.ino())
        };
        let dir_entry = table.entries[&id(&secret)];
        assert_ne!(dir_entry.this[0].rank, 0, "the directory itself");
        assert_ne!(dir_entry.below[0].rank, 0, "everything below it");
        assert_ne!(table.entries[&id(&dir.path().join("alias"))].this[0].rank, 0, "the hardlink");
        assert!(!table.entries.contains_key(&id(&secret.join("plain"))), "single-link files");
        assert!(!table.pending(), "a tree whose reads are denied is listed at once");
    }

    /// A tree that withholds writes only is listed later: its hardlinks enter the table once
    /// complete; one that withholds deletes only is never listed.
    #[test]
    fn hardlinks_below_read_only_trees_wait_for_the_complete_table() {
        let dir = tempfile::tempdir().unwrap();
        for tree in ["registry", "trash"] {
            std::fs::create_dir(dir.path().join(tree)).unwrap();
            std::fs::write(dir.path().join(tree).join("file"), b"f").unwrap();
            let alias = dir.path().join(format!("{tree}-alias"));
            std::fs::hard_link(dir.path().join(tree).join("file"), alias).unwrap();
        }
        let d = dir.path().display();
        let text = format!(
            "[file_policy.defaults]\nread = \"silent\"\nwrite = \"silent\"\n\
             delete = \"silent\"\n[file_policy.write]\ndeny = [\"{d}/registry/**\"]\n\
             [file_policy.delete]\ndeny = [\"{d}/trash/**\"]\n"
        );
        let options = LoadOptions {
            policy_text: Some(text),
            workspace: Some(dir.path().into()),
            ..LoadOptions::default()
        };
        let policy = EffectivePolicy::load(&options).unwrap();
        let id = |p: &str| {
            let md = std::fs::metadata(dir.path().join(p)).unwrap();
            (crate::policy::kernel_dev(md.dev()), md.ino())
        };
        let table = InodeTable::resolve(policy.tables());
        assert_eq!(table.deferred.len(), 1, "{:?}", table.deferred);
        assert!(table.deferred[0].dir.ends_with("registry"));
        assert!(!table.entries.contains_key(&id("registry-alias")), "listed later");
        let table = table.complete();
        assert!(!table.pending());
        let alias = table.entries[&id("registry-alias")];
        assert_ne!(Op::Write.of(&alias.this).rank, 0, "the hardlink, once complete");
        assert_eq!(Op::Read.of(&alias.this).rank, 0, "reads stay allowed");
        assert!(!table.entries.contains_key(&id("trash-alias")), "deletes withheld only");
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
