//! Step 6: segment structure, `log-open`, `checkpoint`, and the kinds that warn.
use super::super::chain;
use super::super::checkpoint::{self, NoteError};
use super::super::record::{Body, Record};
use super::super::schema;
use super::{ProblemClass, Walk};

impl Walk<'_> {
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
    pub(super) fn check_kind(
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
            "log-open" | "checkpoint" | "recovery" | "loss" | "daemon-restart" | "enforcement"
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
                        Err(NoteError::MissingSignature)
                            if !self.report.key_ids.contains(&key.key_id()) =>
                        {
                            return Some((
                                ProblemClass::WrongKey,
                                format!(
                                    "the log is signed by key {}, not by the given public key \
                                     {}: verify with the log's public key (a log re-signed with \
                                     another key would read the same)",
                                    self.report.key_ids.join(", "),
                                    key.key_id()
                                ),
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
            Body::Enforcement(e) if e.state == "off" => self.report.warnings.push(format!(
                "seq {}: enforcement off ({} backend): {}",
                record.seq, e.backend, e.reason
            )),
            _ => {}
        }
        None
    }
}
