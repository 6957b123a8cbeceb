//! `[audit] space_left`: the free space on the log's filesystem under which the writer warns,
//! before the wall where new sessions are refused (docs/audit.md, "Disk full"), as auditd's
//! `space_left` does. Given in bytes or as a percentage of the filesystem.
use std::path::Path;
use std::time::{Duration, Instant};

/// How often the writer looks at the free space.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// What the host does at the wall, while the log cannot be written (`[audit] on_full`): new
/// sessions are refused either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnFull {
    /// The running sessions go on, enforced, their records queued in memory up to a bound.
    #[default]
    Refuse,
    /// Every session is frozen (cgroup v2 `cgroup.freeze`) until the log can be written again,
    /// so that none of its processes acts without a record.
    Freeze,
}

/// A threshold of free space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpaceLeft {
    Bytes(u64),
    /// Of the filesystem's size, 0 to 100.
    Percent(u8),
}

impl Default for SpaceLeft {
    fn default() -> Self {
        SpaceLeft::Percent(5)
    }
}

impl SpaceLeft {
    /// The threshold in bytes on a filesystem of `total` bytes.
    pub fn bytes(self, total: u64) -> u64 {
        match self {
            SpaceLeft::Bytes(b) => b,
            SpaceLeft::Percent(p) => total / 100 * u64::from(p),
        }
    }

    /// `5%`, a byte count, or one with a binary unit (`512MiB`, `2GiB`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let wrong = || {
            format!(
                "invalid space_left \"{text}\": expected bytes (an integer, or with KiB, MiB or \
                 GiB: \"512MiB\") or a percentage of the log's filesystem (\"5%\")"
            )
        };
        if let Some(p) = text.strip_suffix('%') {
            return match p.trim().parse::<u8>() {
                Ok(p) if p <= 100 => Ok(SpaceLeft::Percent(p)),
                _ => Err(wrong()),
            };
        }
        let units = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("", 1)];
        let (number, unit) = units
            .iter()
            .find_map(|(u, m)| text.strip_suffix(u).map(|n| (n, *m)))
            .ok_or_else(wrong)?;
        let n: u64 = number.trim().parse().map_err(|_| wrong())?;
        n.checked_mul(unit).map(SpaceLeft::Bytes).ok_or_else(wrong)
    }
}

impl<'de> serde::Deserialize<'de> for SpaceLeft {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Given {
            Bytes(u64),
            Text(String),
        }
        match Given::deserialize(d)? {
            Given::Bytes(b) => Ok(SpaceLeft::Bytes(b)),
            Given::Text(t) => SpaceLeft::parse(&t).map_err(serde::de::Error::custom),
        }
    }
}

/// Free space on a filesystem, as the writer last saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    /// Bytes an unprivileged writer may still use.
    pub free: u64,
    /// The filesystem's size in bytes.
    pub total: u64,
    /// It is mounted read-only now (`ST_RDONLY`).
    pub read_only: bool,
}

/// The free space on the filesystem of `dir` (None: unreadable).
pub fn space(dir: &Path) -> Option<Space> {
    let stat = nix::sys::statvfs::statvfs(dir).ok()?;
    let unit = stat.fragment_size() as u64;
    Some(Space {
        free: stat.blocks_available() as u64 * unit,
        total: stat.blocks() as u64 * unit,
        read_only: stat.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY),
    })
}

/// Watches the free space against the threshold, at most every [`CHECK_EVERY`]: says when it
/// goes under (a warning) or back over.
pub struct SpaceWatch {
    threshold: SpaceLeft,
    checked: Option<Instant>,
    /// The threshold in bytes at the last look.
    bytes: u64,
    low: bool,
    /// The filesystem was read-only at the last look. A write through a file opened before a
    /// filesystem went read-only may still succeed, into the page cache only (ext4 after a
    /// forced remount; its fsync then succeeds too): the writer must not count on an error.
    read_only: bool,
}

/// What changed at a check.
#[derive(Debug, PartialEq, Eq)]
pub enum Crossing {
    /// Free space went under the threshold (bytes).
    Under { free: u64, threshold: u64 },
    /// It is back over.
    Over { free: u64, threshold: u64 },
}

impl SpaceWatch {
    pub fn new(threshold: SpaceLeft) -> Self {
        SpaceWatch { threshold, checked: None, bytes: 0, low: false, read_only: false }
    }

    /// The threshold in bytes at the last look (0 before it), and whether the free space was
    /// under it.
    pub fn state(&self) -> (u64, bool) {
        (self.bytes, self.low)
    }

    /// Looks at `dir`'s filesystem if it is time to; the crossing, if any.
    pub fn check(&mut self, dir: &Path) -> Option<Crossing> {
        if self.checked.is_some_and(|t| t.elapsed() < CHECK_EVERY) {
            return None;
        }
        self.checked = Some(Instant::now());
        self.observe(space(dir)?)
    }

    /// Whether the filesystem was read-only at the last look.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    fn observe(&mut self, space: Space) -> Option<Crossing> {
        let threshold = self.threshold.bytes(space.total);
        self.bytes = threshold;
        self.read_only = space.read_only;
        let low = space.free < threshold;
        if low == self.low {
            return None;
        }
        self.low = low;
        let free = space.free;
        Some(if low {
            Crossing::Under { free, threshold }
        } else {
            Crossing::Over { free, threshold }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_parse_in_bytes_units_and_percent() {
        assert_eq!(SpaceLeft::parse("5%"), Ok(SpaceLeft::Percent(5)));
        assert_eq!(SpaceLeft::parse("512MiB"), Ok(SpaceLeft::Bytes(512 << 20)));
        assert_eq!(SpaceLeft::parse("2 GiB"), Ok(SpaceLeft::Bytes(2 << 30)));
        assert_eq!(SpaceLeft::parse("4096"), Ok(SpaceLeft::Bytes(4096)));
        for bad in ["101%", "5 MB", "-1", "", "99999999999999999999GiB", "x%"] {
            let e = SpaceLeft::parse(bad).unwrap_err();
            assert!(e.contains("expected bytes"), "{bad}: {e}");
        }
        assert_eq!(SpaceLeft::Percent(10).bytes(1000), 100);
    }

    #[test]
    fn a_watch_says_each_crossing_once() {
        let mut w = SpaceWatch::new(SpaceLeft::Percent(10));
        let at = |free| Space { free, total: 1000, read_only: false };
        assert_eq!(w.observe(at(500)), None);
        assert_eq!(w.observe(at(50)), Some(Crossing::Under { free: 50, threshold: 100 }));
        assert_eq!(w.observe(at(40)), None);
        assert_eq!(w.observe(at(200)), Some(Crossing::Over { free: 200, threshold: 100 }));
    }
}
