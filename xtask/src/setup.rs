//! `cargo xtask setup`: installs the toolchain, the test kernels and the agent CLIs the tests run
//! on a fresh Debian bookworm machine.
//!
//! Every step checks first and prints `ok: ...` when there is nothing to do, so a second run changes
//! nothing. The other commands call [`run`] with [`Report::ChangesOnly`] so they set up what is
//! missing without repeating the `ok` lines.
use crate::{
    agent_clis, cmd, kernels,
    step::{Report, apt_get_update, require_root},
};
use anyhow::{Context as _, Result, bail};
use std::process::Command;

/// The Debian packages the build, the VM and the tests need.
const PACKAGES: &[&str] = &[
    // bpf-linker links against LLVM 22; clang and bpftool are used by the BPF build and tests.
    "llvm-22-dev",
    "clang-22",
    "bpftool",
    // The test VM: QEMU, a static shell for its initramfs, depmod/insmod, the archive tools.
    "qemu-system-x86",
    "busybox-static",
    "kmod",
    "cpio",
    "xz-utils",
    "zstd",
    // Used by other tests (the audit log's independent verifier; the escape suite's `awk -i inplace`).
    "python3",
    "openssl",
    "gawk",
];

const BPF_LINKER_VERSION: &str = "0.13.0";
const LLVM_PREFIX: &str = "/usr/lib/llvm-22";

/// Every step, in order.
pub fn run(report: Report) -> Result<()> {
    packages(report)?;
    rust_nightly(report)?;
    bpf_linker(report)?;
    kernels::ensure_all(report)?;
    agent_clis::ensure_all(report)?;
    Ok(())
}

/// Only what booting the test VM needs (no BPF toolchain, no agent CLIs).
pub fn for_vm(report: Report) -> Result<()> {
    packages(report)?;
    kernels::ensure_all(report)?;
    Ok(())
}

fn packages(report: Report) -> Result<()> {
    let missing: Vec<&str> = PACKAGES.iter().copied().filter(|p| !package_installed(p)).collect();
    if missing.is_empty() {
        report.ok(&format!("Debian packages installed ({})", PACKAGES.join(" ")));
        return Ok(());
    }
    require_root("install Debian packages")?;
    println!("setup: installing Debian packages: {}", missing.join(" "));
    apt_get_update()?;
    cmd::run(
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}

fn package_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|out| out.status.success() && out.stdout.ends_with(b" installed"))
}

fn rust_nightly(report: Report) -> Result<()> {
    let toolchains = cmd::output(Command::new("rustup").args(["toolchain", "list"]))?;
    if !toolchains.lines().any(|l| l.starts_with("nightly")) {
        println!("setup: installing the Rust nightly toolchain (builds the BPF programs)");
        cmd::run(Command::new("rustup").args([
            "toolchain",
            "install",
            "nightly",
            "--profile",
            "minimal",
        ]))?;
    } else {
        report.ok("Rust nightly toolchain installed");
    }
    let components = cmd::output(Command::new("rustup").args([
        "component",
        "list",
        "--toolchain",
        "nightly",
        "--installed",
    ]))?;
    if components.lines().any(|l| l.starts_with("rust-src")) {
        report.ok("rust-src installed for nightly");
        return Ok(());
    }
    println!("setup: adding rust-src to nightly (the BPF target's core library is built from it)");
    cmd::run(Command::new("rustup").args([
        "component",
        "add",
        "rust-src",
        "--toolchain",
        "nightly",
    ]))
}

fn bpf_linker(report: Report) -> Result<()> {
    let wanted = format!("bpf-linker {BPF_LINKER_VERSION}");
    let installed = cmd::try_output(Command::new("bpf-linker").arg("--version"))
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
    if installed.as_deref() == Some(wanted.as_str()) {
        report.ok(&format!("{wanted} on PATH"));
        return Ok(());
    }
    println!(
        "setup: building {wanted} against LLVM 22 (was: {}; takes about a minute)",
        installed.as_deref().unwrap_or("not installed")
    );
    // Without LLVM_PREFIX its build finds Debian's default llvm-config (14) and fails to link.
    cmd::run(
        Command::new("cargo")
            .args(["install", &format!("bpf-linker@{BPF_LINKER_VERSION}"), "--locked"])
            .args(["--no-default-features", "--features", "llvm-22"])
            .env("LLVM_PREFIX", LLVM_PREFIX),
    )?;
    let after = cmd::output(Command::new("bpf-linker").arg("--version"))
        .context("bpf-linker was installed but is not on PATH (add ~/.cargo/bin to PATH)")?;
    if after.trim() != wanted {
        bail!("bpf-linker on PATH reports `{}`, expected `{wanted}`", after.trim());
    }
    Ok(())
}
