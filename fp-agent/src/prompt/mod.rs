//! The prompt tier (docs/prompt.md): a fanotify broker holds a session's opens of prompt-tier
//! paths until a person, the approval API or `approval_command` decides; everything else is
//! answered at once. The daemon and `fp run`'s embedded agent both host it:
//!
//! ```ignore
//! let (broker, outcomes) = PromptBroker::start(BrokerConfig::new(cgroup2, filesystems), lookup)?;
//! // drain `outcomes` into the audit log; call broker.sessions_changed() when a session starts;
//! // the daemon's socket serves broker.approvals() (list_approvals, decide_approval, watch_approvals).
//! ```
mod approvals;
mod broker;
mod command;
pub mod host;
mod mounts;
mod opener;
mod setup;

pub(crate) use approvals::serde_plain;
pub use approvals::{
    Access, Answer, Approval, ApprovalEvent, ApprovalId, Approvals, DecideError, Decider, Decision,
    Grant, GrantsChanged, Open, OpenRequest, OutcomeKind, PromptOutcome, Remember, Surface,
    kernel_grants,
};
pub use broker::PromptBroker;
pub use command::{ApprovalCommand, CommandVerdict, parse_duration};
pub use host::{HostSettings, PromptHost, Surfaces};
pub use setup::{BrokerConfig, Heartbeat, SessionLookup};
