//! `fp audit verify`: walks every segment as one chain and locates the first problem
//! (docs/audit-format.md, "Verification").
use std::borrow::Cow;
use std::collections::VecDeque;
use std::path::PathBuf;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use super::chain::{self, GENESIS, Hash};
use super::checkpoint::{self, NoteError, VerifierKey};
use super::record::{Body, Record};

/// How far back and ahead a broken link is looked up to tell insertions and reorders apart.
const WINDOW: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProblemClass {
    ModifiedRecord,
    DeletedRecord,
    InsertedRecord,
    ReorderedRecords,
    SeqGapOrDuplicate,
    MalformedLine,
    TornTail,
    BadSignature,
    MissingSignature,
    Truncated,
    Fork,
}

impl ProblemClass {
    /// A torn tail is what a crash leaves; everything else is evidence of tampering.
    pub fn is_tamper(self) -> bool {
        self != ProblemClass::TornTail
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Problem {
    pub class: ProblemClass,
    pub segment: PathBuf,
    /// 1-based line within the segment.
    pub line: u64,
    /// Byte offset of the line's start within the segment.
    pub offset: u64,
    /// The seq the verifier expected at this point.
    pub seq: u64,
    pub detail: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct SegmentReport {
    pub path: PathBuf,
    pub records: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub segments: Vec<SegmentReport>,
    pub records: u64,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    pub first_time: Option<String>,
    pub last_time: Option<String>,
    pub log_id: Option<String>,
    pub key_ids: Vec<String>,
    pub checkpoints: u64,
    pub checkpoints_verified: u64,
    /// Records after the last checkpoint: not yet covered by a signature.
    pub unsealed_tail: u64,
    pub trusted_checkpoint_size: Option<u64>,
    pub problem: Option<Problem>,
    pub warnings: Vec<String>,
}

/// Exit codes of `fp audit verify` (docs/audit.md).
pub const EXIT_INTACT: u8 = 0;
pub const EXIT_TAMPER: u8 = 1;
pub const EXIT_CANNOT_VERIFY: u8 = 2;
pub const EXIT_WARNINGS: u8 = 3;

impl Report {
    pub fn exit_code(&self) -> u8 {
        match &self.problem {
            Some(problem) if problem.class.is_tamper() => EXIT_TAMPER,
            Some(_) => EXIT_WARNINGS,
            None if !self.warnings.is_empty() => EXIT_WARNINGS,
            None => EXIT_INTACT,
        }
    }
}

#[derive(Default)]
pub struct VerifyOptions {
    pub key: Option<VerifierKey>,
    /// A checkpoint note kept outside the log (the checkpoint sink).
    pub trusted_checkpoint: Option<String>,
}

/// The chain fields of a line, parsed without building the whole record.
#[derive(Deserialize)]
struct ChainView<'a> {
    v: u32,
    seq: u64,
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    prev: Cow<'a, str>,
    #[serde(borrow)]
    time: Cow<'a, str>,
}

/// A line's claimed hash and prev, for the look-ahead.
fn peek(line: &[u8]) -> Option<(Hash, Hash)> {
    let (_, hash) = chain::split_line(line)?;
    let view: ChainView = serde_json::from_slice(line).ok()?;
    Some((hash, chain::parse_hex_hash(&view.prev)?))
}

/// Lines of a segment with their byte offsets; the last one may lack its newline.
fn lines(data: &[u8]) -> impl Iterator<Item = (usize, &[u8], bool)> {
    let mut offset = 0;
    std::iter::from_fn(move || {
        if offset >= data.len() {
            return None;
        }
        let start = offset;
        match data[start..].iter().position(|&b| b == b'\n') {
            Some(i) => {
                offset = start + i + 1;
                Some((start, &data[start..start + i], true))
            }
            None => {
                offset = data.len();
                Some((start, &data[start..], false))
            }
        }
    })
}

/// Where an accepted record is.
#[derive(Clone, Copy)]
struct Seen {
    hash: Hash,
    seq: u64,
    line: u64,
    offset: u64,
}

struct Walk<'k> {
    options: &'k VerifyOptions,
    trusted: Option<checkpoint::CheckpointNote>,
    report: Report,
    expected_seq: u64,
    head: Hash,
    /// Recent records of this segment, newest last.
    recent: VecDeque<Seen>,
    last_checkpoint_seq: Option<u64>,
    trusted_head: Option<Hash>,
}

/// Verifies the given segments, in chain order, as one log. `progress` gets byte counts.
pub fn verify(
    segments: &[PathBuf],
    options: &VerifyOptions,
    progress: &mut dyn FnMut(u64),
) -> anyhow::Result<Report> {
    if segments.is_empty() {
        anyhow::bail!("no audit log segments given");
    }
    let trusted = match (&options.trusted_checkpoint, &options.key) {
        (None, _) => None,
        (Some(_), None) => anyhow::bail!("--trusted-checkpoint needs --pubkey"),
        (Some(note), Some(key)) => Some(
            checkpoint::verify_note(note, key)
                .map_err(|e| anyhow::anyhow!("trusted checkpoint: {e}"))?,
        ),
    };
    let mut walk = Walk {
        options,
        trusted,
        report: Report::default(),
        expected_seq: 0,
        head: GENESIS,
        recent: VecDeque::with_capacity(WINDOW),
        last_checkpoint_seq: None,
        trusted_head: None,
    };
    walk.report.trusted_checkpoint_size = walk.trusted.as_ref().map(|t| t.size);
    if options.key.is_none() {
        walk.report.warnings.push("no public key given: checkpoint signatures not checked".into());
    }
    for (index, path) in segments.iter().enumerate() {
        let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        walk.report.segments.push(SegmentReport {
            path: path.clone(),
            records: 0,
            bytes: data.len() as u64,
        });
        let last_segment = index + 1 == segments.len();
        if let Some(problem) = walk.segment(path, &data, last_segment, progress) {
            walk.report.problem = Some(problem);
            return Ok(walk.report);
        }
    }
    walk.finish(segments.last().expect("not empty"));
    Ok(walk.report)
}

impl Walk<'_> {
    fn segment(
        &mut self,
        path: &std::path::Path,
        data: &[u8],
        last_segment: bool,
        progress: &mut dyn FnMut(u64),
    ) -> Option<Problem> {
        self.recent.clear();
        let mut reported = 0usize;
        for (number, (offset, line, terminated)) in lines(data).enumerate() {
            let number = number as u64 + 1;
            if offset - reported >= 1 << 20 {
                progress((offset - reported) as u64);
                reported = offset;
            }
            let expected_seq = self.expected_seq;
            let problem = |class, detail: String| Problem {
                class,
                segment: path.to_path_buf(),
                line: number,
                offset: offset as u64,
                seq: expected_seq,
                detail,
            };
            if !terminated {
                let class =
                    if last_segment { ProblemClass::TornTail } else { ProblemClass::MalformedLine };
                return Some(problem(
                    class,
                    format!("{} bytes without a final newline", line.len()),
                ));
            }
            let Some((sealed, claimed)) = chain::split_line(line) else {
                return Some(problem(ProblemClass::MalformedLine, "no hash suffix".into()));
            };
            if chain::seal_hash(sealed) != claimed {
                return Some(problem(
                    ProblemClass::ModifiedRecord,
                    "record bytes do not match their hash".into(),
                ));
            }
            let view: ChainView = match serde_json::from_slice(line) {
                Ok(view) => view,
                Err(e) => return Some(problem(ProblemClass::MalformedLine, format!("{e}"))),
            };
            if view.v != super::record::FORMAT_VERSION {
                let detail = format!("unsupported format version {}", view.v);
                return Some(problem(ProblemClass::MalformedLine, detail));
            }
            let Some(prev) = chain::parse_hex_hash(&view.prev) else {
                return Some(problem(ProblemClass::MalformedLine, "prev is not 64 hex".into()));
            };
            // Older segments may have been retired: start from a later segment's log-open,
            // trusting its link to what came before.
            if self.report.records == 0 && view.kind == "log-open" && view.seq > 0 {
                self.report.warnings.push(format!(
                    "the first segment given starts at seq {}: earlier segments were not checked",
                    view.seq
                ));
                self.head = prev;
                self.expected_seq = view.seq;
            }
            if prev != self.head {
                let (class, at, detail) =
                    self.classify_break(data, offset, line, &view, prev, claimed);
                return Some(match at {
                    Some(at) => Problem {
                        line: at.line,
                        offset: at.offset,
                        seq: at.seq,
                        ..problem(class, detail)
                    },
                    None => problem(class, detail),
                });
            }
            if view.seq != self.expected_seq {
                let detail = format!("seq {} where {} was expected", view.seq, self.expected_seq);
                return Some(problem(ProblemClass::SeqGapOrDuplicate, detail));
            }
            if let Some(detail) = self.check_kind(line, &view) {
                let (class, detail) = detail;
                return Some(problem(class, detail));
            }
            if let Some(trusted) = &self.trusted
                && trusted.size == view.seq + 1
            {
                self.trusted_head = Some(claimed);
            }
            if self.report.first_seq.is_none() {
                self.report.first_seq = Some(view.seq);
                self.report.first_time = Some(view.time.clone().into_owned());
            }
            self.report.last_seq = Some(view.seq);
            self.report.records += 1;
            self.report.segments.last_mut().expect("pushed").records += 1;
            self.head = claimed;
            self.expected_seq += 1;
            if self.recent.len() == WINDOW {
                self.recent.pop_front();
            }
            self.recent.push_back(Seen {
                hash: claimed,
                seq: view.seq,
                line: number,
                offset: offset as u64,
            });
            if view.kind == "checkpoint" {
                self.last_checkpoint_seq = Some(view.seq);
            }
            self.report.last_time = Some(view.time.into_owned());
        }
        progress((data.len() - reported) as u64);
        None
    }

    /// Names a broken link (this line's prev is not the previous record's hash) and where the
    /// damage starts: `(class, the earlier record where it starts if not this line, detail)`.
    fn classify_break(
        &self,
        data: &[u8],
        offset: usize,
        line: &[u8],
        view: &ChainView,
        prev: Hash,
        claimed: Hash,
    ) -> (ProblemClass, Option<Seen>, String) {
        let expected = self.expected_seq;
        if self.recent.iter().any(|seen| seen.hash == claimed) {
            return (
                ProblemClass::SeqGapOrDuplicate,
                None,
                format!("duplicate of the record with seq {}", view.seq),
            );
        }
        if let Some(i) = self.recent.iter().rposition(|seen| seen.hash == prev) {
            let count = self.recent.len() - i - 1;
            return (
                ProblemClass::InsertedRecord,
                Some(self.recent[i + 1]),
                format!("{count} record(s) not in the chain before seq {}", view.seq),
            );
        }
        let ahead: Vec<(Hash, Hash)> = lines(&data[offset + line.len() + 1..])
            .take(WINDOW)
            .map_while(|(_, l, _)| peek(l))
            .collect();
        if ahead.iter().any(|(hash, _)| *hash == prev) {
            return (
                ProblemClass::ReorderedRecords,
                None,
                format!("seq {} appears before its predecessor", view.seq),
            );
        }
        if ahead.first().is_some_and(|(_, next_prev)| *next_prev == self.head) {
            return (
                ProblemClass::InsertedRecord,
                None,
                format!("record claiming seq {} is not in the chain", view.seq),
            );
        }
        if view.seq > expected {
            return (
                ProblemClass::DeletedRecord,
                None,
                format!(
                    "{} record(s) missing before seq {} (expected {expected})",
                    view.seq - expected,
                    view.seq
                ),
            );
        }
        match self.recent.back() {
            Some(&last) => (
                ProblemClass::ModifiedRecord,
                Some(last),
                format!(
                    "record seq {} was rewritten: its successor links to another hash",
                    expected - 1
                ),
            ),
            None => (
                ProblemClass::DeletedRecord,
                None,
                "segment does not link to the previous segment's last record".into(),
            ),
        }
    }

    /// Checks of `log-open` and `checkpoint` records.
    fn check_kind(&mut self, line: &[u8], view: &ChainView) -> Option<(ProblemClass, String)> {
        if view.kind != "log-open"
            && view.kind != "checkpoint"
            && view.kind != "recovery"
            && view.kind != "loss"
        {
            return None;
        }
        let record: Record = match serde_json::from_slice(line) {
            Ok(record) => record,
            Err(e) => return Some((ProblemClass::MalformedLine, e.to_string())),
        };
        match record.body {
            Body::LogOpen(open) => {
                match &self.report.log_id {
                    None => self.report.log_id = Some(open.log_id),
                    Some(id) if *id != open.log_id => {
                        return Some((
                            ProblemClass::Fork,
                            format!("log id changes to {}", open.log_id),
                        ));
                    }
                    Some(_) => {}
                }
                if !self.report.key_ids.contains(&open.key_id) {
                    self.report.key_ids.push(open.key_id);
                }
            }
            Body::Checkpoint(cp) => {
                self.report.checkpoints += 1;
                if cp.size != record.seq || chain::parse_hex_hash(&cp.root) != Some(self.head) {
                    return Some((
                        ProblemClass::Fork,
                        format!("checkpoint for size {} names another head", cp.size),
                    ));
                }
                let parsed = match &self.options.key {
                    Some(key) => match checkpoint::verify_note(&cp.note, key) {
                        Ok(note) => {
                            self.report.checkpoints_verified += 1;
                            note
                        }
                        Err(NoteError::BadSignature) => {
                            return Some((
                                ProblemClass::BadSignature,
                                "checkpoint signature does not verify".into(),
                            ));
                        }
                        Err(NoteError::MissingSignature) => {
                            return Some((
                                ProblemClass::MissingSignature,
                                "checkpoint has no signature by the given key".into(),
                            ));
                        }
                        Err(e) => return Some((ProblemClass::MalformedLine, e.to_string())),
                    },
                    None => match checkpoint::parse_note(&cp.note) {
                        Ok((note, ..)) => note,
                        Err(e) => return Some((ProblemClass::MalformedLine, e.to_string())),
                    },
                };
                let origin = checkpoint::origin(self.report.log_id.as_deref().unwrap_or(""));
                if parsed.origin != origin || parsed.size != cp.size || parsed.root != self.head {
                    return Some((
                        ProblemClass::Fork,
                        "checkpoint note disagrees with its record".into(),
                    ));
                }
            }
            Body::Recovery(r) => self.report.warnings.push(format!(
                "seq {}: crash recovery moved a torn tail of {} bytes to {}",
                record.seq, r.torn_size, r.torn_file
            )),
            Body::Loss(loss) => self
                .report
                .warnings
                .push(format!("seq {}: {} event(s) lost at {}", record.seq, loss.count, loss.at)),
            _ => {}
        }
        None
    }

    fn finish(&mut self, last_segment: &std::path::Path) {
        let total = self.expected_seq;
        if self.report.records == 0 {
            self.report.warnings.push("the log holds no records".into());
        }
        self.report.unsealed_tail = match self.last_checkpoint_seq {
            Some(seq) => total - seq - 1,
            None => total,
        };
        if self.report.unsealed_tail > 0 {
            self.report.warnings.push(format!(
                "{} record(s) after the last checkpoint are not covered by a signature",
                self.report.unsealed_tail
            ));
        }
        let Some(trusted) = &self.trusted else { return };
        let end = self.report.segments.last().map_or(0, |s| s.bytes);
        let located = |class, detail| Problem {
            class,
            segment: last_segment.to_path_buf(),
            line: self.report.segments.last().map_or(0, |s| s.records) + 1,
            offset: end,
            seq: total,
            detail,
        };
        let origin = checkpoint::origin(self.report.log_id.as_deref().unwrap_or(""));
        if trusted.origin != origin {
            self.report.problem = Some(located(
                ProblemClass::Fork,
                format!("trusted checkpoint is for {}, not {origin}", trusted.origin),
            ));
        } else if trusted.size > total {
            self.report.problem = Some(located(
                ProblemClass::Truncated,
                format!("log has {total} records, the trusted checkpoint covers {}", trusted.size),
            ));
        } else if trusted.size > 0 && self.trusted_head != Some(trusted.root) {
            self.report.problem = Some(located(
                ProblemClass::Fork,
                format!("record {} differs from the trusted checkpoint's head", trusted.size - 1),
            ));
        }
    }
}
