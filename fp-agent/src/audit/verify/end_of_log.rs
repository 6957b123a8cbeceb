//! The end-of-log checks: an empty log, the unsealed tail, the trusted checkpoint.
use super::super::{checkpoint, segments};
use super::{Problem, ProblemClass, Walk};

impl Walk<'_> {
    /// End-of-log checks: empty log, unsealed tail, the trusted checkpoint.
    pub(super) fn finish(&mut self, torn: Option<&Problem>) {
        let total = self.expected_seq;
        if self.report.records == 0 {
            self.report.warnings.push("the log holds no records".into());
        }
        let last = self.segments.last().expect("at least one segment");
        if segments::is_rotated(last) {
            self.report.warnings.push(format!(
                "the walk ends with rotated segment {}: no active segment follows it (a writer \
                 stopped while rotating, or only rotated segments were given)",
                last.display()
            ));
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
