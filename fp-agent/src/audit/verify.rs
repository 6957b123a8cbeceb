//! `fp audit verify`: walks every segment as one chain and locates the first problem
//! (docs/audit-format.md, "Verification").
use std::borrow::Cow;
use std::collections::VecDeque;
use std::path::PathBuf;

use anyhow::Context as _;
use serde::Serialize;

use super::chain::{self, GENESIS, Hash};
use super::checkpoint::{self, NoteError, VerifierKey};
use super::record::{Body, Record};
use super::schema;
use crate::exit;

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

impl Report {
    /// The exit code of `fp audit verify` (docs/audit.md).
    pub fn exit_code(&self) -> u8 {
        match &self.problem {
            Some(problem) if problem.class.is_tamper() => exit::TAMPER,
            Some(_) => exit::WARNINGS,
            None if !self.warnings.is_empty() => exit::WARNINGS,
            None => exit::INTACT,
        }
    }
}

#[derive(Default)]
pub struct VerifyOptions {
    pub key: Option<VerifierKey>,
    /// A checkpoint note kept outside the log (the checkpoint sink).
    pub trusted_checkpoint: Option<String>,
}

/// A look-ahead line that passes steps 1 and 3 (not step 2): its stored hash (not recomputed)
/// and its prev.
fn peek(line: &[u8], terminated: bool) -> Option<(Hash, Hash)> {
    let (_, hash) = chain::split_line(line).filter(|_| terminated)?;
    let value = schema::parse_line(line).ok()?;
    let common = schema::common(&value).ok()?;
    if common.v != u64::from(super::record::FORMAT_VERSION) {
        return None;
    }
    schema::kind(&value, common.kind).ok()?;
    Some((hash, chain::parse_hex_hash(common.prev)?))
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

/// The seq a rotated segment's file name claims: `<base>.<20 digits>`.
fn name_seq(path: &std::path::Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let (_, digits) = name.rsplit_once('.')?;
    if digits.len() != 20 || !digits.bytes().all(|d| d.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Where an accepted record is.
#[derive(Clone, Copy)]
struct Seen {
    hash: Hash,
    seq: u64,
    /// Index into the segment list.
    segment: usize,
    line: u64,
    offset: u64,
}

struct Walk<'k> {
    options: &'k VerifyOptions,
    segments: &'k [PathBuf],
    trusted: Option<checkpoint::CheckpointNote>,
    report: Report,
    expected_seq: u64,
    head: Hash,
    /// The seq and head the walk started from (0 and zeros unless older segments are retired).
    start: Option<(u64, Hash)>,
    /// The last accepted records, newest last, across segments.
    recent: VecDeque<Seen>,
    last_checkpoint_seq: Option<u64>,
    last_was_checkpoint: bool,
    last_segment_number: Option<u64>,
    /// Record `size - 1` of the trusted checkpoint, once seen.
    trusted_at: Option<Seen>,
    /// Key ids and unknown kinds already warned about.
    warned: Vec<String>,
}

enum Flow {
    Next,
    Stop(Problem),
    /// A torn tail: the walk ends, the end-of-log checks still run.
    Torn(Problem),
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
        (Some(text), Some(key)) => Some(
            checkpoint::verify_note(&checkpoint::note_from_sink(text), key)
                .map_err(|e| anyhow::anyhow!("trusted checkpoint: {e}"))?,
        ),
    };
    let mut walk = Walk {
        options,
        segments,
        trusted,
        report: Report::default(),
        expected_seq: 0,
        head: GENESIS,
        start: None,
        recent: VecDeque::with_capacity(WINDOW),
        last_checkpoint_seq: None,
        last_was_checkpoint: false,
        last_segment_number: None,
        trusted_at: None,
        warned: Vec::new(),
    };
    walk.report.trusted_checkpoint_size = walk.trusted.as_ref().map(|t| t.size);
    if options.key.is_none() {
        walk.report.warnings.push("no public key given: checkpoint signatures not checked".into());
    }
    let mut torn = None;
    for (index, path) in segments.iter().enumerate() {
        let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        walk.report.segments.push(SegmentReport {
            path: path.clone(),
            records: 0,
            bytes: data.len() as u64,
        });
        if data.is_empty() {
            walk.report.warnings.push(format!("segment {} holds no records", path.display()));
        }
        match walk.segment(index, &data, progress) {
            Flow::Next => {}
            Flow::Stop(problem) => {
                walk.report.problem = Some(problem);
                return Ok(walk.report);
            }
            Flow::Torn(problem) => {
                torn = Some(problem);
                break;
            }
        }
    }
    walk.finish(torn.as_ref());
    if walk.report.problem.is_none() {
        walk.report.problem = torn;
    }
    Ok(walk.report)
}

impl Walk<'_> {
    fn segment(&mut self, index: usize, data: &[u8], progress: &mut dyn FnMut(u64)) -> Flow {
        let path = &self.segments[index];
        let last_segment = index + 1 == self.segments.len();
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
            // Step 1: a whole line with the hash suffix.
            if !terminated {
                let detail = format!("{} bytes without a final newline", line.len());
                return if last_segment {
                    Flow::Torn(problem(ProblemClass::TornTail, detail))
                } else {
                    Flow::Stop(problem(ProblemClass::MalformedLine, detail))
                };
            }
            let Some((sealed, claimed)) = chain::split_line(line) else {
                return Flow::Stop(problem(ProblemClass::MalformedLine, "no hash suffix".into()));
            };
            // Step 2: the seal.
            if chain::seal_hash(sealed) != claimed {
                return Flow::Stop(problem(
                    ProblemClass::ModifiedRecord,
                    "record bytes do not match their hash".into(),
                ));
            }
            // Step 3: a record: JSON, common members, the members of its kind.
            let value = match schema::parse_line(line) {
                Ok(value) => value,
                Err(e) => return Flow::Stop(problem(ProblemClass::MalformedLine, e)),
            };
            let common = match schema::common(&value) {
                Ok(common) => common,
                Err(e) => return Flow::Stop(problem(ProblemClass::MalformedLine, e)),
            };
            if common.v != u64::from(super::record::FORMAT_VERSION) {
                let detail = format!("unsupported format version {}", common.v);
                return Flow::Stop(problem(ProblemClass::MalformedLine, detail));
            }
            let known = match schema::kind(&value, common.kind) {
                Ok(known) => known,
                Err(e) => return Flow::Stop(problem(ProblemClass::MalformedLine, e)),
            };
            let prev = chain::parse_hex_hash(common.prev).expect("checked by schema");
            // Older segments may have been retired: start from a later segment's log-open,
            // trusting its link to what came before.
            if self.start.is_none() {
                if common.kind == "log-open" && common.seq > 0 {
                    self.report.warnings.push(format!(
                        "the first segment given starts at seq {}: earlier segments were not \
                         checked",
                        common.seq
                    ));
                    self.head = prev;
                    self.expected_seq = common.seq;
                }
                self.start = Some((self.expected_seq, self.head));
            }
            // Step 4: the link.
            if prev != self.head {
                let (class, at, detail) =
                    self.classify_break(index, data, offset, line, common.seq, prev, claimed);
                return Flow::Stop(match at {
                    Some(at) => self.located(at, class, detail),
                    None => problem(class, detail),
                });
            }
            // Step 5: the seq.
            if common.seq != self.expected_seq {
                let detail = format!("seq {} where {} was expected", common.seq, self.expected_seq);
                return Flow::Stop(problem(ProblemClass::SeqGapOrDuplicate, detail));
            }
            // Step 6: segments, log-open, checkpoints.
            if number == 1
                && let Some(named) = name_seq(path)
                && named != common.seq
            {
                self.report.warnings.push(format!(
                    "{} is named for seq {named} but starts at seq {}",
                    path.display(),
                    common.seq
                ));
            }
            if let Some((class, detail)) = self.check_kind(line, number, &common, known) {
                return Flow::Stop(problem(class, detail));
            }
            if let Some(trusted) = &self.trusted
                && trusted.size == common.seq + 1
            {
                self.trusted_at = Some(Seen {
                    hash: claimed,
                    seq: common.seq,
                    segment: index,
                    line: number,
                    offset: offset as u64,
                });
            }
            if self.report.first_seq.is_none() {
                self.report.first_seq = Some(common.seq);
                self.report.first_time = Some(common.time.to_owned());
            }
            self.report.last_seq = Some(common.seq);
            self.report.records += 1;
            self.report.segments.last_mut().expect("pushed").records += 1;
            self.head = claimed;
            self.expected_seq += 1;
            if self.recent.len() == WINDOW {
                self.recent.pop_front();
            }
            self.recent.push_back(Seen {
                hash: claimed,
                seq: common.seq,
                segment: index,
                line: number,
                offset: offset as u64,
            });
            self.last_was_checkpoint = common.kind == "checkpoint";
            if self.last_was_checkpoint {
                self.last_checkpoint_seq = Some(common.seq);
            }
            self.report.last_time = Some(common.time.to_owned());
        }
        progress((data.len() - reported) as u64);
        Flow::Next
    }

    fn located(&self, at: Seen, class: ProblemClass, detail: String) -> Problem {
        Problem {
            class,
            segment: self.segments[at.segment].clone(),
            line: at.line,
            offset: at.offset,
            seq: at.seq,
            detail,
        }
    }

    /// Up to [`WINDOW`] lines after the current one, in walk order (into the following segments),
    /// up to the first that is not a whole record line: `(stored hash, prev)`.
    fn look_ahead(&self, index: usize, rest: &[u8]) -> Vec<(Hash, Hash)> {
        let mut ahead = Vec::new();
        let mut data = Cow::Borrowed(rest);
        let mut next = index + 1;
        loop {
            for (_, line, terminated) in lines(&data) {
                if ahead.len() == WINDOW {
                    return ahead;
                }
                match peek(line, terminated) {
                    Some(entry) => ahead.push(entry),
                    None => return ahead,
                }
            }
            let Some(path) = self.segments.get(next) else { return ahead };
            let Ok(read) = std::fs::read(path) else { return ahead };
            data = Cow::Owned(read);
            next += 1;
        }
    }

    /// Names a broken link (this line's prev is not the previous record's hash) and where the
    /// damage starts: `(class, the earlier record where it starts if not this line, detail)`.
    #[allow(clippy::too_many_arguments)]
    fn classify_break(
        &self,
        index: usize,
        data: &[u8],
        offset: usize,
        line: &[u8],
        seq: u64,
        prev: Hash,
        claimed: Hash,
    ) -> (ProblemClass, Option<Seen>, String) {
        let expected = self.expected_seq;
        if self.recent.iter().any(|seen| seen.hash == claimed) {
            return (
                ProblemClass::SeqGapOrDuplicate,
                None,
                format!("duplicate of the record with seq {seq}"),
            );
        }
        if let Some(i) = self.recent.iter().rposition(|seen| seen.hash == prev) {
            let count = self.recent.len() - i - 1;
            return (
                ProblemClass::InsertedRecord,
                Some(self.recent[i + 1]),
                format!("{count} record(s) not in the chain before seq {seq}"),
            );
        }
        let ahead = self.look_ahead(index, &data[offset + line.len() + 1..]);
        if ahead.iter().any(|(hash, _)| *hash == prev) {
            return (
                ProblemClass::ReorderedRecords,
                None,
                format!("seq {seq} appears before its predecessor"),
            );
        }
        if ahead.first().is_some_and(|(_, next_prev)| *next_prev == self.head) {
            return (
                ProblemClass::InsertedRecord,
                None,
                format!("record claiming seq {seq} is not in the chain"),
            );
        }
        if seq > expected {
            return (
                ProblemClass::DeletedRecord,
                None,
                format!(
                    "{} record(s) missing before seq {seq} (expected {expected})",
                    seq - expected,
                ),
            );
        }
        match self.recent.back() {
            Some(&last) => (
                ProblemClass::ModifiedRecord,
                Some(last),
                format!(
                    "record seq {} was rewritten: its successor links to another hash",
                    last.seq
                ),
            ),
            None => (
                ProblemClass::ModifiedRecord,
                None,
                "the first record does not link to where the walk starts".into(),
            ),
        }
    }

    fn warn_once(&mut self, key: String, warning: String) {
        if !self.warned.contains(&key) {
            self.warned.push(key);
            self.report.warnings.push(warning);
        }
    }

    fn note_key_id(&mut self, key_id: &str, seq: u64) {
        if !self.report.key_ids.iter().any(|k| k == key_id) {
            self.report.key_ids.push(key_id.to_owned());
        }
        let reference = match &self.options.key {
            Some(key) => key.key_id(),
            None => self.report.key_ids[0].clone(),
        };
        if key_id != reference {
            self.warn_once(
                format!("key {key_id}"),
                format!("seq {seq}: the log names key {key_id}, not {reference}"),
            );
        }
    }

    /// Step 6: segment structure, `log-open`, `checkpoint`, and the kinds that warn.
    fn check_kind(
        &mut self,
        line: &[u8],
        number: u64,
        common: &schema::Common,
        known: bool,
    ) -> Option<(ProblemClass, String)> {
        let malformed = |detail: &str| Some((ProblemClass::MalformedLine, detail.to_owned()));
        let is_open = common.kind == "log-open";
        if number == 1 && !is_open {
            return malformed("a segment's first record is not log-open");
        }
        if number > 1 && is_open {
            return malformed("log-open inside a segment");
        }
        if is_open && self.report.records > 0 && !self.last_was_checkpoint {
            return malformed("the previous segment does not end with a checkpoint");
        }
        if !known {
            self.warn_once(
                format!("kind {}", common.kind),
                format!(
                    "seq {}: records of unknown kind {:?} not interpreted",
                    common.seq, common.kind
                ),
            );
            return None;
        }
        if !matches!(
            common.kind,
            "log-open" | "checkpoint" | "recovery" | "loss" | "daemon-restart"
        ) {
            return None;
        }
        let record: Record = match serde_json::from_slice(line) {
            Ok(record) => record,
            Err(e) => return Some((ProblemClass::MalformedLine, e.to_string())),
        };
        match record.body {
            Body::LogOpen(open) => {
                let want = match self.last_segment_number {
                    Some(n) => Some(n + 1),
                    None if record.seq == 0 => Some(0),
                    None => None,
                };
                if want.is_some_and(|want| want != open.segment) {
                    return malformed(&format!(
                        "segment number {} where {} was expected",
                        open.segment,
                        want.unwrap_or_default()
                    ));
                }
                self.last_segment_number = Some(open.segment);
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
                self.note_key_id(&open.key_id, record.seq);
            }
            Body::DaemonRestart(restart) => self.note_key_id(&restart.key_id, record.seq),
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

    /// End-of-log checks: empty log, unsealed tail, the trusted checkpoint.
    fn finish(&mut self, torn: Option<&Problem>) {
        let total = self.expected_seq;
        if self.report.records == 0 {
            self.report.warnings.push("the log holds no records".into());
        }
        self.report.unsealed_tail = match self.last_checkpoint_seq {
            Some(seq) => total - seq - 1,
            None => total - self.start.map_or(0, |(seq, _)| seq),
        };
        if self.report.unsealed_tail > 0 {
            self.report.warnings.push(format!(
                "{} record(s) after the last checkpoint are not covered by a signature",
                self.report.unsealed_tail
            ));
        }
        let Some(trusted) = self.trusted.clone() else { return };
        let last = self.report.segments.last().expect("at least one segment");
        // The end of the log: after the last whole record of the last segment walked.
        let end = Problem {
            class: ProblemClass::Truncated,
            segment: last.path.clone(),
            line: last.records + 1,
            offset: torn.map_or(last.bytes, |t| t.offset),
            seq: total,
            detail: String::new(),
        };
        let origin = checkpoint::origin(self.report.log_id.as_deref().unwrap_or(""));
        let start_seq = self.start.map_or(0, |(seq, _)| seq);
        self.report.problem = if trusted.origin != origin {
            Some(Problem {
                class: ProblemClass::Fork,
                detail: format!("trusted checkpoint is for {}, not {origin}", trusted.origin),
                ..end
            })
        } else if trusted.size > total {
            Some(Problem {
                detail: format!(
                    "log has {total} records, the trusted checkpoint covers {}",
                    trusted.size
                ),
                ..end
            })
        } else if trusted.size == 0 {
            None
        } else if trusted.size - 1 < start_seq {
            // The walk starts after record size - 1: the checkpoint covers records not given.
            Some(Problem {
                class: ProblemClass::DeletedRecord,
                segment: self.segments[0].clone(),
                line: 1,
                offset: 0,
                seq: start_seq,
                detail: format!(
                    "the trusted checkpoint covers seq {} but the walk starts at seq {start_seq}",
                    trusted.size - 1
                ),
            })
        } else {
            match self.trusted_at {
                Some(at) if at.hash == trusted.root => None,
                Some(at) => Some(self.located(
                    at,
                    ProblemClass::Fork,
                    format!("record {} differs from the trusted checkpoint's head", at.seq),
                )),
                None => Some(Problem {
                    class: ProblemClass::Fork,
                    detail: format!("record {} was not found", trusted.size - 1),
                    ..end
                }),
            }
        };
    }
}
