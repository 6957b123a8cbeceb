//! The floor of the session boundary for devices and kernel interfaces, as facts both sides use:
//! fp-ebpf's `floor` refuses by them, `fp policy explain` answers by them (docs/threat-model.md,
//! "The session boundary"). Files are told apart by what they are (a device's number, a
//! filesystem's `s_magic`), never by name: a root session can mount a fresh proc or sysfs anywhere.

/// `S_IFMT`, and the kinds of file the floor looks at.
pub const S_IFMT: u32 = 0o170000;
pub const S_IFBLK: u32 = 0o060000;
pub const S_IFCHR: u32 = 0o020000;

/// procfs's `s_magic`.
pub const PROC_SUPER_MAGIC: u64 = 0x9fa0;

/// Filesystems whose files are the kernel's own settings (`s_magic`): sysfs (uevent_helper, module
/// parameters, devices), tracefs and debugfs (kernel memory), securityfs (LSM policies), efivarfs
/// (firmware variables), configfs. No session process opens one of their files for writing.
pub const KERNEL_FILESYSTEMS: [u64; 6] =
    [0x6265_6572, 0x7472_6163, 0x6462_6720, 0x7363_6673, 0xde5e_81e4, 0x6265_6570];

/// The name of a filesystem of [`KERNEL_FILESYSTEMS`] (or procfs), for people.
pub fn filesystem_name(magic: u64) -> Option<&'static str> {
    Some(match magic {
        0x6265_6572 => "sysfs",
        0x7472_6163 => "tracefs",
        0x6462_6720 => "debugfs",
        0x7363_6673 => "securityfs",
        0xde5e_81e4 => "efivarfs",
        0x6265_6570 => "configfs",
        PROC_SUPER_MAGIC => "procfs",
        _ => return None,
    })
}

/// A device number in the kernel's encoding (`MKDEV`).
pub const fn mkdev(major: u32, minor: u32) -> u32 {
    major << 20 | minor
}

/// The device mknod(2) was given (`new_encode_dev`'s form: major in bits 8-19, minor in bits 0-7
/// and 20-31) in the kernel's encoding; `security_path_mknod` sees it before the kernel decodes it.
pub const fn mknod_device(dev: u32) -> u32 {
    mkdev((dev & 0xfff00) >> 8, (dev & 0xff) | ((dev >> 12) & 0xfff00))
}

/// Character devices the kernel's lockdown guards at open (`LOCKDOWN_DEV_MEM`): /dev/mem and
/// /dev/port; with /proc/kcore (`LOCKDOWN_KCORE`) the files whose open the floor refuses
/// through lockdown, read or write.
pub const LOCKED_DOWN_DEVICES: [(u32, &str); 2] =
    [(mkdev(1, 1), "/dev/mem"), (mkdev(1, 4), "/dev/port")];

/// `perf_event_open`'s checks of an event (`PERF_SECURITY_*`): every open, then one of a CPU-wide
/// event, one that counts or samples the kernel, one of a tracepoint.
pub const PERF_SECURITY_OPEN: u32 = 0;
pub const PERF_SECURITY_CPU: u32 = 1;
pub const PERF_SECURITY_KERNEL: u32 = 2;
pub const PERF_SECURITY_TRACEPOINT: u32 = 3;

/// `enum kernel_read_file_id` and `enum kernel_load_data_id` (the same numbers in both): a driver
/// asks for its firmware in whatever task triggers it, which may be a session's.
pub const LOAD_FIRMWARE: u32 = 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mknod_devices_decode_as_the_kernel_does() {
        // `makedev(7, 0)` and `makedev(1, 1)` as glibc passes them, and a minor over 255.
        assert_eq!(mknod_device(0x700), mkdev(7, 0));
        assert_eq!(mknod_device(0x101), mkdev(1, 1));
        assert_eq!(mknod_device(0x0010_0701), mkdev(7, 257));
        assert_eq!(mknod_device(0), 0);
    }

    #[test]
    fn kernel_filesystems_have_names() {
        for magic in KERNEL_FILESYSTEMS {
            assert!(filesystem_name(magic).is_some(), "{magic:#x}");
        }
        assert_eq!(filesystem_name(0xef53), None);
    }
}
