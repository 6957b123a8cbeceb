//! Where the broker marks: the mounts of a session's own mount namespace (`FAN_MARK_MOUNT`), so
//! that opens by processes outside every session never raise a permission event, or, for a
//! session sharing the host's namespace, whole filesystems (docs/prompt.md, Marks).
use std::{
    fs::File,
    io::{Read as _, Seek as _, SeekFrom},
    os::{
        fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd},
        unix::ffi::OsStrExt as _,
    },
    path::{Path, PathBuf},
};

use anyhow::Context as _;
use nix::{fcntl::OFlag, sys::stat::Mode};

/// How the broker reaches the mounts a session's processes open files through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountView {
    /// The session shares the host's mount namespace (or this process's): only filesystem marks
    /// cover it.
    Shared,
    /// The session has a mount namespace of its own, the one `pid` is in.
    Own { pid: i32 },
}

impl MountView {
    /// The mount namespaces of `pids` (a session's processes), each once: a process that is gone
    /// is skipped. The host's namespace (PID 1's) and this process's (a daemon's private one under
    /// systemd's sandboxing) are shared: never bound into, only marked by filesystem.
    pub fn of(pids: &[i32]) -> Vec<MountView> {
        let shared = crate::mount_ns::shared();
        let mut seen = Vec::new();
        let mut views = Vec::new();
        for &pid in pids {
            let Some(ns) = crate::mount_ns::identity(pid) else { continue };
            if seen.contains(&ns) {
                continue;
            }
            seen.push(ns);
            views.push(match shared.contains(&Some(ns)) {
                true => MountView::Shared,
                false => MountView::Own { pid },
            });
        }
        views
    }
}

/// A session's own mount namespace, held open (its root and its mount table) for as long as the
/// broker watches it, whatever happens to the process it was found through.
pub struct Namespace {
    /// `/proc/<pid>/ns/mnt`, to enter it.
    ns: OwnedFd,
    /// `/proc/<pid>/root` (`O_PATH`): paths below `/proc/self/fd/<root>` are the session's.
    root: OwnedFd,
    /// `/proc/<pid>/mountinfo`: readable again from the start, and `POLLPRI` when a mount
    /// appears or goes.
    mountinfo: File,
    /// The directories (as the session sees them) below which its mounts are marked.
    scopes: Vec<PathBuf>,
    /// The scopes fp made mounts of their own ([`Namespace::bind_scopes`]).
    bound: Vec<PathBuf>,
}

impl Namespace {
    pub fn open(pid: i32, scopes: &[&Path]) -> anyhow::Result<Namespace> {
        let root_path = format!("/proc/{pid}/root");
        let root = nix::fcntl::open(
            root_path.as_str(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .with_context(|| format!("opening {root_path}"))?;
        let info = format!("/proc/{pid}/mountinfo");
        let mountinfo = File::open(&info).with_context(|| format!("opening {info}"))?;
        let ns_path = format!("/proc/{pid}/ns/mnt");
        let ns = OwnedFd::from(File::open(&ns_path).with_context(|| format!("opening {ns_path}"))?);
        let scopes = scopes.iter().map(|s| s.to_path_buf()).collect();
        Ok(Namespace { ns, root, mountinfo, scopes, bound: Vec::new() })
    }

    /// Makes each scope that is a directory (reached without symlinks, not `/`, not a mount point
    /// already) a mount of its own in the namespace, a recursive bind mount onto itself, so that
    /// marking it marks nothing else: opens elsewhere on the same mount (a build in the
    /// workspace, when the scope is `<workspace>/secrets`) never wait for the broker. A scope that
    /// cannot be bound is marked through the mount it is on, as one that does not exist yet.
    /// A process inside the scope (its working directory, an open directory) before the bind
    /// still reaches it through the mount below, unmarked: its prompt-tier opens there fail
    /// closed. So bind before the session's processes run (`fp run` moves the first one's
    /// working directory onto the new mounts before it runs the command).
    pub fn bind_scopes(&mut self) {
        let root = self.root();
        let mounted = self.points().unwrap_or_default();
        let targets: Vec<&PathBuf> = self
            .scopes
            .iter()
            .filter(|scope| *scope != Path::new("/") && !mounted.contains(scope))
            .filter(|scope| {
                scope.ancestors().all(|p| {
                    below(&root, p).symlink_metadata().is_ok_and(|m| !m.file_type().is_symlink())
                }) && below(&root, scope).is_dir()
            })
            .collect();
        if targets.is_empty() {
            return;
        }
        let paths: Vec<std::ffi::CString> = targets
            .iter()
            .filter_map(|scope| std::ffi::CString::new(scope.as_os_str().as_bytes()).ok())
            .collect();
        if let Err(e) = crate::mount_ns::bind_in(
            &self.ns,
            &paths.iter().map(|p| (p.clone(), p.clone())).collect::<Vec<_>>(),
        ) {
            tracing::warn!(
                "a session's prompt scopes stay on their mounts (every open there goes to the \
                 broker): {e:#}"
            );
        }
        // Those that are mount points now (all, unless a bind failed) are fp's.
        let mounted = self.points().unwrap_or_default();
        let bound = targets.into_iter().filter(|t| mounted.contains(t)).cloned().collect();
        self.bound = bound;
    }

    /// The mount table, polled for `POLLPRI` (a mount appeared or went).
    pub fn mount_table(&self) -> BorrowedFd<'_> {
        self.mountinfo.as_fd()
    }

    /// The paths to mark with `FAN_MARK_MOUNT`, as the mount table is now: the mount each
    /// scope's closest existing directory is on, and every mount below a scope; each with whether
    /// its files are worth caching: all but those of the scopes fp made mounts of their own,
    /// where only the scope's own opens raise events.
    pub fn mounts(&self) -> anyhow::Result<Vec<(PathBuf, bool)>> {
        let root = self.root();
        let points = self.points()?;
        let mut marks: Vec<(PathBuf, bool)> = Vec::new();
        for scope in &self.scopes {
            let cache = !self.bound.contains(scope);
            marks.push((existing_ancestor(&root, scope), cache));
            marks.extend(
                points.iter().filter(|m| m.starts_with(scope)).map(|m| (below(&root, m), cache)),
            );
        }
        // A mount marked for two scopes is cached if either says so (`true` sorts last).
        marks.sort();
        marks.reverse();
        marks.dedup_by(|a, b| a.0 == b.0);
        Ok(marks)
    }

    /// `path`, a path below [`Namespace::mounts`]' root, as the session sees it.
    pub fn inside(&self, path: &Path) -> PathBuf {
        Path::new("/").join(path.strip_prefix(self.root()).unwrap_or(path))
    }

    /// The namespace's root directory, as a path this process can resolve.
    fn root(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.root.as_raw_fd()))
    }

    /// The mount points of the mount table as it is now.
    fn points(&self) -> anyhow::Result<Vec<PathBuf>> {
        let mut table = Vec::new();
        (&self.mountinfo).seek(SeekFrom::Start(0)).context("rewinding a mount table")?;
        (&self.mountinfo).read_to_end(&mut table).context("reading a mount table")?;
        Ok(mount_points(&table).collect())
    }
}

/// `path` (absolute) as reached below `root`.
fn below(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// `path` below `root`, or its closest ancestor that exists (where a file created below it will
/// live).
pub fn existing_ancestor(root: &Path, path: &Path) -> PathBuf {
    let existing = path
        .ancestors()
        .find(|p| below(root, p).symlink_metadata().is_ok())
        .unwrap_or(Path::new("/"));
    below(root, existing)
}

/// The mount points of a `/proc/<pid>/mountinfo` table (its fifth field, octal escapes undone).
fn mount_points(table: &[u8]) -> impl Iterator<Item = PathBuf> + '_ {
    table.split(|b| *b == b'\n').filter_map(|line| {
        let field = line.split(|b| *b == b' ').nth(4)?;
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(&unescape(field))))
    })
}

/// Undoes mountinfo's `\ooo` escapes (space, tab, newline, backslash).
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field.get(i + 1..i + 4).filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (field[i], octal) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |n, b| n.wrapping_mul(8) + (b - b'0')));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::{collections::HashSet, fs};

    use super::*;

    /// The packaged unit's sandbox lets the broker enter a session's mount namespace
    /// (`bind_in`): `setns(CLONE_NEWNS)` needs mount namespaces allowed, `CAP_SYS_ADMIN` and
    /// `CAP_SYS_CHROOT`. Without them no scope becomes a mount of its own.
    #[test]
    fn the_packaged_unit_lets_the_broker_enter_session_namespaces() {
        let unit = include_str!("../../../packaging/fp.service");
        let value = |key: &str| unit.lines().find_map(|l| l.strip_prefix(key)).unwrap_or("");
        let namespaces = value("RestrictNamespaces=");
        assert!(namespaces.split_whitespace().any(|t| t == "mnt"), "{namespaces}");
        let caps = value("CapabilityBoundingSet=");
        for cap in ["CAP_SYS_ADMIN", "CAP_SYS_CHROOT"] {
            assert!(caps.split_whitespace().any(|c| c == cap), "{cap} missing: {caps}");
        }
    }

    const TABLE: &[u8] = b"\
22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
23 22 0:22 / /home rw shared:2 - ext4 /dev/vda2 rw
24 23 0:23 / /home/u/my\\040work rw - tmpfs tmpfs rw
25 22 0:24 / /proc rw - proc proc rw
";

    #[test]
    fn mount_points_are_the_fifth_field_unescaped() {
        let points: Vec<PathBuf> = mount_points(TABLE).collect();
        let expected = ["/", "/home", "/home/u/my work", "/proc"];
        assert_eq!(points, expected.map(PathBuf::from));
    }

    #[test]
    fn a_backslash_without_three_octal_digits_stays() {
        assert_eq!(unescape(b"a\\b\\0"), b"a\\b\\0");
        assert_eq!(unescape(b"\\134x"), b"\\x");
    }

    #[test]
    fn this_process_and_pid_1_share_and_a_gone_process_is_skipped() {
        let me = std::process::id() as i32;
        assert_eq!(MountView::of(&[me, me, i32::MAX]), vec![MountView::Shared]);
        // Unreadable in some containers: then skipped.
        let host = MountView::of(&[1]);
        assert!(host.iter().all(|v| *v == MountView::Shared), "{host:?}");
    }

    /// Root, natively: the bind mounts live in a throwaway namespace that dies with its process.
    #[test]
    fn an_existing_scope_becomes_a_mount_of_its_own_in_the_namespace_only() {
        let dir = tempfile::tempdir().unwrap();
        let (scope, missing) = (dir.path().join("secrets"), dir.path().join("later"));
        std::fs::create_dir(&scope).unwrap();
        let mut session = std::process::Command::new("unshare")
            .args(["--mount", "--propagation", "slave", "sleep", "60"])
            .spawn()
            .unwrap();
        let pid = session.id() as i32;
        let ours = fs::read_link("/proc/self/ns/mnt").unwrap();
        while fs::read_link(format!("/proc/{pid}/ns/mnt")).is_ok_and(|ns| ns == ours) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let mut ns = Namespace::open(pid, &[&scope, &missing]).unwrap();
        ns.bind_scopes();
        assert_eq!(ns.bound, vec![scope.clone()]);
        let cached: Vec<(PathBuf, bool)> =
            ns.mounts().unwrap().into_iter().filter(|(p, _)| p.ends_with("secrets")).collect();
        assert_eq!(cached, vec![(ns.root().join(scope.strip_prefix("/").unwrap()), false)]);
        let theirs = fs::read(format!("/proc/{pid}/mountinfo")).unwrap();
        let points: Vec<PathBuf> = mount_points(&theirs).collect();
        let ours: Vec<PathBuf> = mount_points(&fs::read("/proc/self/mountinfo").unwrap()).collect();
        session.kill().unwrap();
        session.wait().unwrap();
        assert!(points.contains(&scope), "{points:?}");
        assert!(!points.contains(&missing) && !ours.contains(&scope));
    }

    #[test]
    fn a_scope_marks_its_own_mount_and_every_mount_below_it() {
        let me = std::process::id() as i32;
        let ns = Namespace::open(me, &[Path::new("/proc/self/no/such/dir")]).unwrap();
        let root = ns.root().display().to_string();
        // The closest existing directory (/proc/self) is on /proc: nothing is mounted below a
        // directory that does not exist.
        let wider = vec![(PathBuf::from(format!("{root}/proc/self")), true)];
        assert_eq!(ns.mounts().unwrap(), wider);
        // `/`: every mount, each once, and again when read again.
        let ns = Namespace::open(me, &[Path::new("/")]).unwrap();
        let table = fs::read("/proc/self/mountinfo").unwrap();
        let all = ns.mounts().unwrap();
        assert_eq!(all.len(), mount_points(&table).collect::<HashSet<_>>().len(), "{all:?}");
        assert_eq!(ns.mounts().unwrap(), all);
    }
}
