//! Where the workspace and its build output live.
use anyhow::{Context as _, Result};
use std::path::PathBuf;

/// The workspace root (the parent of xtask's manifest directory).
pub fn workspace_root() -> PathBuf {
    let xtask = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().map(PathBuf::from).unwrap_or(xtask)
}

/// Cargo's target directory, as cargo itself resolves it (CARGO_TARGET_DIR, config, default).
pub fn target_dir() -> Result<PathBuf> {
    let metadata = cargo_metadata::MetadataCommand::new()
        .current_dir(workspace_root())
        .no_deps()
        .exec()
        .context("cargo metadata")?;
    Ok(metadata.target_directory.into_std_path_buf())
}

/// Everything the test VM keeps: downloaded kernels, initramfs images, per-run scripts.
pub fn vm_dir() -> Result<PathBuf> {
    Ok(target_dir()?.join("fp-vm"))
}
