//! The audit log: hash-chained JSON Lines records, signed checkpoints, crash recovery,
//! verification and forensic replay. The format is specified in docs/audit-format.md.
//!
//! Producers (kernel events, prompts, sessions) hold an [`AuditHandle`] from [`start`] and call
//! [`AuditHandle::record`], which never blocks; one writer thread owns the file.
pub mod chain;
pub mod checkpoint;
pub mod op;
pub mod record;
pub mod replay;
pub mod schema;
pub mod segments;
pub mod tail;
pub mod verify;
pub mod writer;

pub use op::Op;
pub use record::{
    Body, Enforcement, Event, FileDecision, Loss, OrphanCleanup, OrphanOutcome, PolicyReload,
    RawPath, Record, SessionAdopt, SessionEnd, SessionFreeze, SessionStart, Verdict,
};
pub use writer::{
    AuditHandle, AuditWriter, CheckpointSink, Health, HealthObserver, LogWriter, OnFull, SpaceLeft,
    WriterConfig, start,
};
