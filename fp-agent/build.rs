//! Builds fp-ebpf for the BPF target and leaves the object in OUT_DIR for `include_bytes!`.
//!
//! The inner `cargo build` (nightly, `-Z build-std=core`, bpf-linker) runs with its output
//! captured: a successful build shows one line, a failed one shows the inner cargo's output in
//! full. (aya-build, which this replaces, relayed every line of it as a `cargo:warning`.)
//!
//! `FP_EBPF_STUB=1` embeds an empty stub instead, so userspace code can be checked, linted and unit
//! tested on a machine without the BPF toolchain. A stub build can never load programs (the loader
//! refuses it) and `cargo xtask test`/CI never set it; `embedded_object_is_real` proves that.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, anyhow, bail};
use cargo_metadata::Message;

/// The toolchain the BPF programs are built with (`cargo xtask setup` installs it).
const TOOLCHAIN: &str = "nightly";

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=FP_EBPF_STUB");
    println!("cargo::rustc-check-cfg=cfg(fp_ebpf_stub)");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    if std::env::var_os("FP_EBPF_STUB").is_some_and(|v| v == "1") {
        println!("cargo:warning=FP_EBPF_STUB=1: embedding a stub instead of the BPF object");
        println!("cargo:rustc-cfg=fp_ebpf_stub");
        std::fs::write(out_dir.join("fp"), b"")?;
        std::fs::write(out_dir.join("fp-noop"), b"")?;
        return Ok(());
    }
    if which("bpf-linker").is_none() {
        bail!(
            "bpf-linker is not on PATH: run `cargo xtask setup` (or set FP_EBPF_STUB=1 to build \
             userspace only)"
        );
    }
    let metadata =
        cargo_metadata::MetadataCommand::new().no_deps().exec().context("cargo metadata")?;
    let ebpf = metadata
        .packages
        .iter()
        .find(|p| p.name.as_str() == "fp-ebpf")
        .ok_or_else(|| anyhow!("fp-ebpf package not found"))?;
    let root =
        ebpf.manifest_path.parent().ok_or_else(|| anyhow!("fp-ebpf manifest has no parent"))?;
    // fp-ebpf is a build-dependency, so its library changes rerun this; its binaries need this.
    println!("cargo:rerun-if-changed={root}");
    build_ebpf(&out_dir, &metadata.target_directory.join("fp-ebpf").into_std_path_buf())
}

/// `cargo build` of fp-ebpf's binaries for the BPF target in `target_dir`; each is copied to
/// `OUT_DIR/<name>`.
fn build_ebpf(out_dir: &Path, target_dir: &Path) -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=FP_EBPF_VERBOSE");
    let started = Instant::now();
    let env = |key: &str| std::env::var(key).with_context(|| format!("{key} is not set"));
    let target = match env("CARGO_CFG_TARGET_ENDIAN")?.as_str() {
        "big" => "bpfeb-unknown-none",
        _ => "bpfel-unknown-none",
    };
    let arch = env("CARGO_CFG_TARGET_ARCH")?;
    let mut cmd = match which("rustup") {
        Some(rustup) => {
            let mut cmd = Command::new(rustup);
            cmd.args(["run", TOOLCHAIN, "cargo"]);
            cmd
        }
        None => Command::new("cargo"),
    };
    // One target directory (`target/fp-ebpf`) for every profile and feature set of the outer
    // build: the object does not depend on them, so only the first build script to run compiles
    // it (about a minute) and the others find it fresh. It is apart from the outer build's
    // directories, which cargo locks; two build scripts running at once wait on its own lock.
    cmd.args(["build", "--package", "fp-ebpf", "--bins", "--message-format=json", "--release"])
        .args(["--target", target, "-Z", "build-std=core", "--target-dir"])
        .arg(target_dir)
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            [
                &format!("--cfg=bpf_target_arch=\"{arch}\""),
                "-Cdebuginfo=2",
                "-Clink-arg=--btf",
                // Global BPF functions: verified once per program (docs/architecture.md).
                "-Clink-arg=--export=fp_check,fp_move_side,fp_move_below,fp_dir_resolve,fp_dir_fill,fp_created_remember",
                // With the in-order expansion of memcpy, LLVM lowers every memset to a call of
                // aya-ebpf's byte loop (4.5% of an uncached decision when this flag came in:
                // `git log -S disable-expand-memcpy-in-order`).
                "-Clink-arg=--disable-expand-memcpy-in-order",
            ]
            .join("\x1f"),
        )
        // The outer build's compiler is the stable one: the inner build must pick nightly's.
        .env_remove("RUSTC")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    let mut executables = Vec::new();
    let mut diagnostics = String::new();
    let mut warnings = 0;
    for message in Message::parse_stream(output.stdout.as_slice()) {
        match message.context("the BPF build's cargo printed invalid JSON")? {
            Message::CompilerArtifact(artifact) => {
                if let Some(exe) = artifact.executable {
                    executables.push((artifact.target.name, exe.into_std_path_buf()));
                }
            }
            Message::CompilerMessage(m) => {
                if m.message.level == cargo_metadata::diagnostic::DiagnosticLevel::Warning {
                    warnings += 1;
                }
                diagnostics.push_str(m.message.rendered.as_deref().unwrap_or_default());
            }
            Message::TextLine(line) => {
                diagnostics.push_str(&line);
                diagnostics.push('\n');
            }
            _ => {}
        }
    }
    if !output.status.success() {
        // A failed build script's stderr is shown in full by cargo.
        eprintln!("{diagnostics}{}", String::from_utf8_lossy(&output.stderr));
        bail!("building the BPF programs (fp-ebpf) failed: {cmd:?} exited with {}", output.status);
    }
    for (name, exe) in &executables {
        let dst = out_dir.join(name);
        std::fs::copy(exe, &dst)
            .with_context(|| format!("copying {} to {}", exe.display(), dst.display()))?;
    }
    // FP_EBPF_VERBOSE=1 relays the compiler's messages (as warnings: the only output cargo
    // shows of a successful build script).
    if std::env::var_os("FP_EBPF_VERBOSE").is_some_and(|v| v == "1") {
        for line in diagnostics.lines() {
            println!("cargo:warning={line}");
        }
    }
    // Otherwise one line.
    let warned = match warnings {
        0 => String::new(),
        n => format!("; {n} compiler warning(s), shown with FP_EBPF_VERBOSE=1"),
    };
    println!(
        "cargo:warning=built the BPF programs (fp-ebpf for {target}) in {:.1} s{warned}",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
}
