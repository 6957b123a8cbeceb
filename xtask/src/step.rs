//! What every setup step shares, `cargo xtask setup`'s own and the test kernels': how it reports,
//! and the root and apt it may need.
use crate::cmd;
use anyhow::{Result, bail};
use std::process::Command;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// Print a line for every step, `ok: ...` when it was already done.
    Everything,
    /// Print only the steps that change something.
    ChangesOnly,
}

impl Report {
    pub fn ok(self, what: &str) {
        if self == Report::Everything {
            println!("ok: {what}");
        }
    }
}

pub fn apt_get_update() -> Result<()> {
    println!("setup: apt-get update");
    cmd::run(Command::new("apt-get").args(["update", "-q"]))
}

pub fn require_root(why: &str) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("setup must run as root to {why}");
    }
    Ok(())
}
