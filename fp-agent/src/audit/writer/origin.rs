//! Host facts and clocks stamped on every record.
use super::super::record::{Stamp, format_time};

/// Host facts stamped on every record.
pub(super) struct Origin {
    boot_id: String,
    host: String,
}

impl Origin {
    pub(super) fn current() -> Self {
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        Origin { boot_id, host }
    }

    pub(super) fn stamp(&self) -> Stamp {
        Stamp {
            time: format_time(time::OffsetDateTime::now_utc()),
            mono_ns: monotonic_ns(),
            boot_id: self.boot_id.clone(),
            host: self.host.clone(),
        }
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
