//! Segment files: the active segment `<path>` and rotated ones `<path>.<first seq, 20 digits>`.
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

pub fn rotated_path(active: &Path, first_seq: u64) -> PathBuf {
    PathBuf::from(format!("{}.{first_seq:020}", active.display()))
}

/// Whether `path` is named like a rotated segment.
pub fn is_rotated(path: &Path) -> bool {
    rotation_of(path).is_some()
}

/// The rotation number of `path` if it is a rotated segment: `(active path, first seq)`.
fn rotation_of(path: &Path) -> Option<(PathBuf, u64)> {
    let name = path.file_name()?.to_str()?;
    let (base, digits) = name.rsplit_once('.')?;
    if digits.len() != 20 || !digits.bytes().all(|d| d.is_ascii_digit()) {
        return None;
    }
    Some((path.with_file_name(base), digits.parse().ok()?))
}

/// Rotated segments of the log whose active segment is `active`, oldest first.
pub fn rotated_segments(active: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let dir = active.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        // Named like the active path (not `./name`), so a segment also given explicitly is the
        // same path and is deduplicated.
        let path = active.with_file_name(entry?.file_name());
        if let Some((base, seq)) = rotation_of(&path)
            && base.file_name() == active.file_name()
        {
            found.push((seq, path));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, path)| path).collect())
}

/// The segments to verify for the paths given on the command line, in chain order: an active
/// segment brings its rotated segments along; rotated ones sort by first seq, before their active
/// segment. An active segment that does not exist but has rotated segments is left out: a writer
/// stopped between a rotation's rename and creating the next segment leaves that (it creates the
/// next one when it opens the log again).
pub fn expand(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut keyed = Vec::new();
    for path in paths {
        match rotation_of(path) {
            Some((base, seq)) => keyed.push(((base, seq), path.clone())),
            None => {
                let rotated = rotated_segments(path)?;
                let absent =
                    matches!(path.symlink_metadata(), Err(e) if e.kind() == ErrorKind::NotFound);
                if rotated.is_empty() || !absent {
                    keyed.push(((path.clone(), u64::MAX), path.clone()));
                }
                for rotated in rotated {
                    let key = rotation_of(&rotated).expect("listed as rotated");
                    keyed.push((key, rotated));
                }
            }
        }
    }
    keyed.sort();
    keyed.dedup();
    Ok(keyed.into_iter().map(|(_, path)| path).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_segment_brings_rotations_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let active = dir.path().join("audit.log");
        for seq in [200u64, 0, 1000] {
            std::fs::write(rotated_path(&active, seq), b"").unwrap();
        }
        std::fs::write(&active, b"").unwrap();
        std::fs::write(dir.path().join("audit.log.lock"), b"").unwrap();
        let expanded = expand(std::slice::from_ref(&active)).unwrap();
        let names: Vec<_> =
            expanded.iter().map(|p| p.file_name().unwrap().to_str().unwrap().to_owned()).collect();
        assert_eq!(
            names,
            [
                "audit.log.00000000000000000000",
                "audit.log.00000000000000000200",
                "audit.log.00000000000000001000",
                "audit.log"
            ]
        );
    }

    #[test]
    fn an_absent_active_segment_is_left_out_only_when_rotated_ones_exist() {
        let dir = tempfile::tempdir().unwrap();
        let active = dir.path().join("audit.log");
        let given = std::slice::from_ref(&active);
        assert_eq!(expand(given).unwrap(), given);
        let rotated = rotated_path(&active, 0);
        std::fs::write(&rotated, b"").unwrap();
        assert_eq!(expand(given).unwrap(), [rotated]);
    }
}
