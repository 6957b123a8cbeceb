//! Builds fp-ebpf for the BPF target and leaves the object in OUT_DIR for `include_bytes!`.
//!
//! `FP_EBPF_STUB=1` embeds an empty stub instead, so userspace code can be checked, linted and unit
//! tested on a machine without the BPF toolchain. A stub build can never load programs (the loader
//! refuses it) and `cargo xtask test`/CI never set it; `embedded_object_is_real` proves that.
use anyhow::{Context as _, anyhow};

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=FP_EBPF_STUB");
    println!("cargo::rustc-check-cfg=cfg(fp_ebpf_stub)");
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    if std::env::var_os("FP_EBPF_STUB").is_some_and(|v| v == "1") {
        println!("cargo:warning=FP_EBPF_STUB=1: embedding a stub instead of the BPF object");
        println!("cargo:rustc-cfg=fp_ebpf_stub");
        std::fs::write(out_dir.join("fp"), b"")?;
        return Ok(());
    }
    if which_bpf_linker().is_none() {
        return Err(anyhow!(
            "bpf-linker is not on PATH: run `cargo xtask setup` (or set FP_EBPF_STUB=1 to build \
             userspace only)"
        ));
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
    aya_build::build_ebpf(
        [aya_build::Package { name: "fp-ebpf", root_dir: root.as_str(), ..Default::default() }],
        aya_build::Toolchain::default(),
    )
}

fn which_bpf_linker() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("bpf-linker")).find(|p| p.is_file())
}
