//! What a policy lets past the floor of the session boundary (docs/policy.md, "Devices and kernel
//! interfaces"): the block devices its sessions may open (`block_devices`), which the floor
//! refuses by any name otherwise, and the kernel interfaces it switches on
//! (`kernel_interfaces`). The floor's other refusals (device nodes, /dev/mem, /proc/kcore,
//! modules, kexec, bpf(), mounts, kernel settings) have no switch: each reaches past every
//! session, and fp's own protection with it.
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::PathBuf;

use fp_common::kernel::SESSION_PERF;

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
            let rdev = crate::kernel::kernel_dev(md.rdev());
            if md.file_type().is_block_device() && !devices.iter().any(|d| d.rdev == rdev) {
                devices.push(Device { path, rdev });
            }
        }
    }
    devices.truncate(MAX_DEVICES);
    devices
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
        let rdev = crate::kernel::kernel_dev(std::fs::metadata(loop0).unwrap().rdev());
        assert_eq!(found, [Device { path: PathBuf::from(loop0), rdev }]);
        assert_eq!(r[1].devices()[0].rdev, rdev);
        std::fs::remove_dir_all(&dir).unwrap();
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
