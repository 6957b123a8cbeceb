//! What a policy lets past the floor of the session boundary (docs/policy.md, "Devices and kernel
//! interfaces"): the block devices its sessions may open (`block_devices`), which the floor
//! refuses by any name otherwise, and the kernel interfaces it switches on
//! (`kernel_interfaces`). The floor's other refusals (device nodes, /dev/mem, /proc/kcore,
//! modules, kexec, bpf(), mounts, kernel settings) have no switch: each reaches past every
//! session, and fp's own protection with it.
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use fp_common::floor::{
    KERNEL_FILESYSTEMS, LOCKED_DOWN_DEVICES, PROC_SUPER_MAGIC, S_IFCHR, S_IFMT, filesystem_name,
};
use fp_common::kernel::SESSION_PERF;
use fp_common::policy::Op;

use super::glob::{self, Expansion};
use super::{ErrorKind, PolicyError, Source, Spanned};

/// Most block devices one resolution of a session's entries names.
const MAX_DEVICES: usize = 256;

/// One `block_devices` entry, expanded: a path glob of block device nodes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceRule {
    /// As written.
    pub text: String,
    /// An absolute path glob.
    pub pattern: String,
    pub source: Source,
}

/// A block device an entry names now: the node it was found by, and its number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub path: PathBuf,
    /// The kernel's encoding, major << 20 | minor.
    pub rdev: u32,
}

impl Device {
    /// Its number as `major:minor`.
    pub fn number(&self) -> String {
        device_number(self.rdev)
    }
}

/// A device number of the kernel's encoding (major << 20 | minor) as `major:minor`.
pub fn device_number(rdev: u32) -> String {
    format!("{}:{}", rdev >> 20, rdev & 0xfffff)
}

/// The kernel's `s_dev` encoding (`major << 20 | minor`) of a userspace `st_dev`.
pub fn kernel_dev(st_dev: u64) -> u32 {
    fp_common::floor::mkdev(libc::major(st_dev), libc::minor(st_dev))
}

/// `major:minor` in the kernel's encoding ([`device_number`]'s inverse).
pub fn parse_device_number(text: &str) -> Option<u32> {
    let (major, minor) = text.split_once(':')?;
    let (major, minor): (u32, u32) = (major.parse().ok()?, minor.parse().ok()?);
    (major < 1 << 12 && minor < 1 << 20).then_some(fp_common::floor::mkdev(major, minor))
}

/// The entry of `rules` that names the block device `rdev` now.
pub fn naming(rules: &[DeviceRule], rdev: u32) -> Option<&DeviceRule> {
    rules.iter().find(|r| r.devices().iter().any(|d| d.rdev == rdev))
}

impl DeviceRule {
    /// The block devices this entry names now (see [`resolve_devices`]).
    pub fn devices(&self) -> Vec<Device> {
        resolve_devices(std::slice::from_ref(self))
    }
}

/// The `block_devices` entries expanded and checked; an error names the entry's position.
pub fn build_devices(
    entries: &[Spanned<String>],
    expansion: Expansion<'_>,
) -> Result<Vec<DeviceRule>, PolicyError> {
    entries
        .iter()
        .map(|e| {
            let pattern = glob::prepare(&e.value, expansion).map_err(|(kind, message, help)| {
                PolicyError::new(kind, Some(e.source.clone()), message).with_help(help)
            })?;
            if pattern.contains("**") {
                return Err(PolicyError::new(
                    ErrorKind::InvalidGlob,
                    Some(e.source.clone()),
                    format!("block device entry \"{}\" has **", e.value),
                )
                .with_help("an entry names device nodes: globs match within one component"));
            }
            Ok(DeviceRule { text: e.value.clone(), pattern, source: e.source.clone() })
        })
        .collect()
}

/// The block devices `rules` name now: each block device node an entry's glob matches (a name
/// that leads elsewhere, a symlink such as `/dev/disk/by-label/data`, is followed), by number.
/// The scan stops at [`glob::MAX_SCANNED`] directory entries and [`MAX_DEVICES`] devices.
pub fn resolve_devices(rules: &[DeviceRule]) -> Vec<Device> {
    let mut devices: Vec<Device> = Vec::new();
    let mut budget = glob::MAX_SCANNED;
    for rule in rules {
        for path in glob::matching_paths(&rule.pattern, &mut budget) {
            let Ok(md) = std::fs::metadata(&path) else { continue };
            let rdev = kernel_dev(md.rdev());
            if md.file_type().is_block_device() && !devices.iter().any(|d| d.rdev == rdev) {
                devices.push(Device { path, rdev });
            }
        }
    }
    devices.truncate(MAX_DEVICES);
    devices
}

/// What the floor says of opening a file for an op, before the rules (fp-ebpf's `floor`).
#[derive(Debug, PartialEq, Eq)]
pub enum OpenFloor<'a> {
    /// Refused whatever the rules say: what it is, in the words of the kernel's event
    /// (`block device 7:0`, `kernel setting on sysfs`, `lockdown: /proc/kcore`).
    Refused { what: String },
    /// A block device an entry names: the floor lifts, the rules decide.
    Named { device: String, entry: &'a DeviceRule },
}

/// What the floor says of opening `path` for `op` now, as the kernel would decide it: a block
/// device (unless an entry of `devices` names its number), a write of a kernel setting (a file of
/// [`KERNEL_FILESYSTEMS`], or a procfs file of the kernel's own rather than of a process), and the
/// files lockdown guards (/dev/mem, /dev/port, /proc/kcore). None when the rules alone decide: a
/// delete opens nothing, and a name that does not exist is no such file.
pub fn open_floor<'a>(devices: &'a [DeviceRule], path: &Path, op: Op) -> Option<OpenFloor<'a>> {
    let refused = |what: String| Some(OpenFloor::Refused { what });
    if op == Op::Delete {
        return None;
    }
    let md = std::fs::metadata(path).ok()?;
    let rdev = kernel_dev(md.rdev());
    if md.file_type().is_block_device() {
        let device = device_number(rdev);
        return match naming(devices, rdev) {
            Some(entry) => Some(OpenFloor::Named { device, entry }),
            None => refused(format!("block device {device}, which no block_devices entry names")),
        };
    }
    if md.mode() & S_IFMT == S_IFCHR
        && let Some((_, name)) = LOCKED_DOWN_DEVICES.iter().find(|(d, _)| *d == rdev)
    {
        return refused(format!("lockdown: {name}"));
    }
    let magic = nix::sys::statfs::statfs(path).ok()?.filesystem_type().0 as u64;
    if magic == PROC_SUPER_MAGIC {
        let inside = proc_components(path)?;
        let first = inside.first().map(String::as_str);
        if first == Some("kcore") {
            return refused("lockdown: /proc/kcore".to_owned());
        }
        // /proc/PID/... is a process's, but for its net/ (the kernel's tables, as /proc/net).
        let process = first.is_some_and(|c| c.bytes().all(|b| b.is_ascii_digit()))
            && !inside.iter().any(|c| c == "net");
        return (op == Op::Write && !process)
            .then(|| OpenFloor::Refused { what: "kernel setting on procfs".to_owned() });
    }
    (op == Op::Write && KERNEL_FILESYSTEMS.contains(&magic)).then(|| OpenFloor::Refused {
        what: format!("kernel setting on {}", filesystem_name(magic).unwrap_or("?")),
    })
}

/// The components of `path` (symlinks resolved: /proc/self is the process's number) below the
/// root of the procfs mount it lies on.
fn proc_components(path: &Path) -> Option<Vec<String>> {
    let canonical = std::fs::canonicalize(path).ok()?;
    let on_proc = |p: &Path| {
        nix::sys::statfs::statfs(p).is_ok_and(|s| s.filesystem_type().0 as u64 == PROC_SUPER_MAGIC)
    };
    let root = canonical.ancestors().take_while(|a| on_proc(a)).last()?;
    let below = canonical.strip_prefix(root).ok()?;
    Some(below.iter().map(|c| c.to_string_lossy().into_owned()).collect())
}

/// A kernel interface a policy can switch on past the floor (`kernel_interfaces`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelInterface {
    Perf,
}

impl KernelInterface {
    pub const ALL: [KernelInterface; 1] = [KernelInterface::Perf];

    pub fn name(self) -> &'static str {
        match self {
            KernelInterface::Perf => "perf",
        }
    }

    /// What the switch opens to the session, in words.
    pub fn opens(self) -> &'static str {
        match self {
            KernelInterface::Perf => {
                "perf events beyond the user-space counters of processes: CPU-wide events, \
                 counting and sampling the kernel, tracepoints (a profiler's perf stat and perf \
                 record); which processes it may watch stays the process boundary's"
            }
        }
    }

    /// The `SessionInfo::flags` bit that tells the kernel.
    pub fn session_flag(self) -> u64 {
        match self {
            KernelInterface::Perf => SESSION_PERF,
        }
    }
}

/// One `kernel_interfaces` entry.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InterfaceRule {
    pub interface: KernelInterface,
    pub source: Source,
}

/// The `kernel_interfaces` entries, each a known switch; an error names the entry's position
/// and the switches there are.
pub fn build_interfaces(entries: &[Spanned<String>]) -> Result<Vec<InterfaceRule>, PolicyError> {
    entries
        .iter()
        .map(|e| match KernelInterface::ALL.iter().find(|i| i.name() == e.value) {
            Some(&interface) => Ok(InterfaceRule { interface, source: e.source.clone() }),
            None => {
                let names: Vec<&str> = KernelInterface::ALL.iter().map(|i| i.name()).collect();
                Err(PolicyError::new(
                    ErrorKind::BadValue,
                    Some(e.source.clone()),
                    format!("unknown kernel interface \"{}\" in kernel_interfaces", e.value),
                )
                .with_help(format!(
                    "kernel interfaces a policy can switch on: {}; the floor's other refusals \
                     have no switch (docs/policy.md, Devices and kernel interfaces)",
                    names.join(", ")
                )))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn spanned(entries: &[&str]) -> Vec<Spanned<String>> {
        let source = Source::Builtin { builtin: "test".into() };
        entries.iter().map(|e| Spanned { value: e.to_string(), source: source.clone() }).collect()
    }

    fn devices(entries: &[&str]) -> Result<Vec<DeviceRule>, PolicyError> {
        let expansion = Expansion { workspace: Some(Path::new("/ws")), home: Path::new("/home/u") };
        build_devices(&spanned(entries), expansion)
    }

    #[test]
    fn device_entries_expand_and_bad_ones_name_why() {
        let r = devices(&["/dev/loop[0-3]", "<workspace>/disk"]).unwrap();
        let patterns: Vec<&str> = r.iter().map(|r| r.pattern.as_str()).collect();
        assert_eq!(patterns, ["/dev/loop[0-3]", "/ws/disk"]);
        assert_eq!(devices(&["/dev/**"]).unwrap_err().kind, ErrorKind::InvalidGlob);
        assert_eq!(devices(&["dev/sda"]).unwrap_err().kind, ErrorKind::RelativePath);
    }

    /// Only block devices are named, by number, through symlinks, once each.
    #[test]
    fn resolution_names_block_devices_by_number() {
        let Some(loop0) = ["/dev/loop0", "/dev/vda", "/dev/sda"]
            .into_iter()
            .find(|p| std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device()))
        else {
            return; // No block device on this machine to name.
        };
        let dir = std::env::temp_dir().join(format!("fp-devices-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(loop0, dir.join("disk")).unwrap();
        let d = dir.display();
        let r = devices(&[loop0, &format!("{d}/disk"), "/dev/null"]).unwrap();
        let found = resolve_devices(&r);
        let rdev = kernel_dev(std::fs::metadata(loop0).unwrap().rdev());
        assert_eq!(found, [Device { path: PathBuf::from(loop0), rdev }]);
        assert_eq!(r[1].devices()[0].rdev, rdev);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The floor as the kernel decides it on this machine's own files.
    #[test]
    fn the_floor_of_opens_names_what_it_refuses() {
        let refused = |path: &str, op: Op| match open_floor(&[], Path::new(path), op) {
            Some(OpenFloor::Refused { what }) => Some(what),
            _ => None,
        };
        let pid = std::process::id();
        assert_eq!(
            refused("/proc/sys/kernel/core_pattern", Op::Write).as_deref(),
            Some("kernel setting on procfs")
        );
        assert_eq!(refused("/proc/sys/kernel/core_pattern", Op::Read), None);
        assert_eq!(refused("/proc/self/oom_score_adj", Op::Write), None);
        assert_eq!(refused(&format!("/proc/{pid}/comm"), Op::Write), None);
        assert!(refused("/proc/self/net/dev", Op::Write).is_some());
        // Where this kernel has them.
        if Path::new("/proc/kcore").exists() {
            let kcore = refused("/proc/kcore", Op::Read);
            assert_eq!(kcore.as_deref(), Some("lockdown: /proc/kcore"));
        }
        if Path::new("/dev/mem").exists() {
            assert_eq!(refused("/dev/mem", Op::Read).as_deref(), Some("lockdown: /dev/mem"));
        }
        assert_eq!(
            refused("/sys/kernel/mm/transparent_hugepage/enabled", Op::Write).as_deref(),
            Some("kernel setting on sysfs")
        );
        assert_eq!(refused("/sys/kernel/mm/transparent_hugepage/enabled", Op::Read), None);
        assert_eq!(refused("/dev/null", Op::Write), None);
        assert_eq!(refused("/proc/sys/kernel/core_pattern", Op::Delete), None);
        assert_eq!(refused("/nonexistent", Op::Write), None);
    }

    #[test]
    fn kernel_dev_matches_the_kernel_encoding() {
        assert_eq!(kernel_dev(libc::makedev(8, 1)), (8 << 20) | 1);
        assert_eq!(kernel_dev(libc::makedev(259, 70000)), (259 << 20) | 70000);
    }

    #[test]
    fn device_numbers_read_back() {
        assert_eq!(device_number(7 << 20 | 3), "7:3");
        assert_eq!(parse_device_number("7:3"), Some(7 << 20 | 3));
        assert_eq!(parse_device_number("259:1048575"), Some(259 << 20 | 0xfffff));
        assert_eq!(parse_device_number("7"), None);
        assert_eq!(parse_device_number("4096:0"), None);
        assert_eq!(parse_device_number("x:1"), None);
    }

    #[test]
    fn interfaces_are_known_switches() {
        let r = build_interfaces(&spanned(&["perf"])).unwrap();
        assert_eq!(r[0].interface, KernelInterface::Perf);
        assert_eq!(r[0].interface.session_flag(), SESSION_PERF);
        let e = build_interfaces(&spanned(&["bpf"])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadValue);
        assert!(e.to_string().contains("\"bpf\""), "{e}");
    }
}
