//! Crash recovery: a torn tail is moved aside, and where an existing log (or its newest rotated
//! segment) left off is read back.
use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use sha2::{Digest as _, Sha256};

use super::super::chain::{self, Hash};
use super::super::checkpoint;
use super::super::record::{Body, Record, Recovery};
use super::super::segments;

/// Where an existing log left off.
pub(super) struct Resume {
    pub(super) log_id: String,
    pub(super) segment: u64,
    pub(super) segment_first_seq: u64,
    pub(super) next_seq: u64,
    pub(super) head: Hash,
}

/// Bytes read from the end of a segment to find its last record.
const TAIL_WINDOW: u64 = 1 << 20;

fn read_tail(file: &mut File) -> std::io::Result<(u64, Vec<u8>)> {
    let len = file.metadata()?.len();
    let start = len.saturating_sub(TAIL_WINDOW);
    file.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::with_capacity((len - start) as usize);
    file.read_to_end(&mut tail)?;
    Ok((start, tail))
}

/// Parses and checks the seal of one line (without its `\n`).
pub(crate) fn parse_sealed_record(line: &[u8]) -> Option<Record> {
    let (sealed, hash) = chain::split_line(line)?;
    if chain::seal_hash(sealed) != hash {
        return None;
    }
    serde_json::from_slice(line).ok()
}

/// Moves a torn tail (the bytes after the last newline: what a crash in the middle of a write
/// leaves) to `<path>.<size>.torn`, then truncates the segment to its last whole line. A whole
/// last line that does not verify is not a crash artifact: it stays for `fp audit verify` to
/// report, and opening the log fails (see `read_resume`).
pub(super) fn recover_torn_tail(path: &Path, file: &mut File) -> anyhow::Result<Option<Recovery>> {
    let (start, tail) = read_tail(file)?;
    let keep = match tail.iter().rposition(|&b| b == b'\n') {
        Some(i) => i + 1,
        None if start == 0 => 0,
        None => bail!("{}: last 1 MiB holds no record boundary", path.display()),
    };
    if keep == tail.len() {
        return Ok(None);
    }
    let torn = &tail[keep..];
    let keep_len = start + keep as u64;
    let torn_path = PathBuf::from(format!("{}.{keep_len}.torn", path.display()));
    checkpoint::write_atomic(&torn_path, torn, 0o600)?;
    file.set_len(keep_len)?;
    file.sync_all()?;
    tracing::warn!(
        "audit log {}: moved a torn tail of {} bytes to {}",
        path.display(),
        torn.len(),
        torn_path.display()
    );
    Ok(Some(Recovery {
        torn_file: torn_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        torn_size: torn.len() as u64,
        torn_sha256: hex::encode(Sha256::digest(torn)),
    }))
}

/// Reads where a non-empty segment left off: its first record (the `log-open`) and its last.
pub(super) fn read_resume(file: &mut File) -> anyhow::Result<Option<Resume>> {
    let (_, tail) = read_tail(file)?;
    if tail.is_empty() {
        return Ok(None);
    }
    let body = &tail[..tail.len() - 1];
    let last_line = &body[body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)..];
    let last = parse_sealed_record(last_line).ok_or_else(|| {
        anyhow!(
            "last record does not verify (not a torn write); run `fp audit verify` and move the \
             log aside to start a new one"
        )
    })?;
    file.seek(SeekFrom::Start(0))?;
    let mut head = Vec::new();
    file.take(TAIL_WINDOW).read_to_end(&mut head)?;
    let first_line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let first = parse_sealed_record(first_line)
        .ok_or_else(|| anyhow!("first record is damaged; move the log aside to start a new one"))?;
    let Body::LogOpen(open) = first.body else {
        bail!("first record is not log-open; move the log aside to start a new one");
    };
    let head = chain::parse_hex_hash(&last.hash).ok_or_else(|| anyhow!("bad hash"))?;
    Ok(Some(Resume {
        log_id: open.log_id,
        segment: open.segment,
        segment_first_seq: first.seq,
        next_seq: last.seq + 1,
        head,
    }))
}

/// Where the newest rotated segment next to `path` left off, if there is one.
pub(super) fn resume_from_rotated(path: &Path) -> anyhow::Result<Option<Resume>> {
    let Some(newest) = segments::rotated_segments(path)?.pop() else { return Ok(None) };
    let mut file = File::open(&newest).with_context(|| format!("opening {}", newest.display()))?;
    read_resume(&mut file).with_context(|| format!("resuming from {}", newest.display()))
}
