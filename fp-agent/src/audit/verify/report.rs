//! What verification finds: the report, its problem classes and exit code, and the options.
use std::path::PathBuf;

use serde::Serialize;

use super::super::checkpoint::VerifierKey;
use crate::exit;

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
    /// The given public key is none the log names: a key mix-up (or a log re-signed with
    /// another key), which the given key cannot tell apart: the log cannot be verified with it.
    WrongKey,
}

impl ProblemClass {
    /// A torn tail is what a crash leaves, a wrong key says nothing of the log; everything else
    /// is evidence of tampering.
    pub fn is_tamper(self) -> bool {
        !matches!(self, ProblemClass::TornTail | ProblemClass::WrongKey)
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
            Some(problem) if problem.class == ProblemClass::WrongKey => exit::CANNOT_VERIFY,
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
