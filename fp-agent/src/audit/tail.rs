//! `fp audit tail`: the last records of the active segment, then (with follow) new ones as they
//! are written, across rotations.
use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;

const POLL: Duration = Duration::from_millis(200);

/// Calls `on_line` with each of the last `last` complete lines of `path` (without `\n`), then,
/// when `follow` is set, with every line appended later; reopens the path when it is rotated.
/// Returns when `on_line` returns false.
pub fn tail(
    path: &Path,
    last: usize,
    follow: bool,
    on_line: &mut dyn FnMut(&[u8]) -> bool,
) -> anyhow::Result<()> {
    let open = || File::open(path).with_context(|| format!("opening {}", path.display()));
    let mut file = open()?;
    let mut data = Vec::new();
    file.read_to_end(&mut data)?;
    let complete = data.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let lines: Vec<&[u8]> =
        data[..complete].split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    for line in &lines[lines.len().saturating_sub(last)..] {
        if !on_line(line) {
            return Ok(());
        }
    }
    if !follow {
        return Ok(());
    }
    let mut partial = data[complete..].to_vec();
    let mut inode = file.metadata()?.ino();
    loop {
        let before = partial.len();
        file.read_to_end(&mut partial)?;
        if partial.len() == before {
            std::thread::sleep(POLL);
            match std::fs::metadata(path) {
                // Rotated: drain what the old file got last, then start the new one from its top.
                Ok(meta) if meta.ino() != inode => {
                    file.read_to_end(&mut partial)?;
                    if !emit_complete(&mut partial, on_line) {
                        return Ok(());
                    }
                    partial.clear();
                    file = open()?;
                    inode = meta.ino();
                }
                Ok(meta) if meta.len() < file.stream_position()? => {
                    file.seek(SeekFrom::Start(0))?;
                    partial.clear();
                }
                _ => {}
            }
            continue;
        }
        if !emit_complete(&mut partial, on_line) {
            return Ok(());
        }
    }
}

/// Passes the complete lines of `partial` to `on_line` and keeps the incomplete rest.
fn emit_complete(partial: &mut Vec<u8>, on_line: &mut dyn FnMut(&[u8]) -> bool) -> bool {
    let complete = partial.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    for line in partial[..complete].split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if !on_line(line) {
            return false;
        }
    }
    partial.drain(..complete);
    true
}
