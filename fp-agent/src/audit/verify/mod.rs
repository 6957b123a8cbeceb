//! `fp audit verify`: walks every segment as one chain and locates the first problem
//! (docs/audit-format.md, "Verification").
//!
//! The walk is here, one record at a time through steps 1 to 5; beside it: the report it fills
//! (`report`), the lines of a segment (`lines`), naming a broken link (step 4, `links`), segment
//! structure and checkpoints (step 6, `kinds`) and the end-of-log checks (`end_of_log`).
mod end_of_log;
mod kinds;
mod lines;
mod links;
mod report;

use std::collections::VecDeque;
use std::path::PathBuf;

use anyhow::Context as _;

use super::chain::{self, GENESIS, Hash};
use super::checkpoint;
use super::schema;
use lines::{lines, name_seq};
pub use report::{Problem, ProblemClass, Report, SegmentReport, VerifyOptions};

/// How far back and ahead a broken link is looked up to tell insertions and reorders apart.
const WINDOW: usize = 64;

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
}
