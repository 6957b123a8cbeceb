//! fp-agent's own op shapes, their names and every conversion between them and the decision
//! core's ops ([`fp_common::op`]), in one place as Landlock keeps its access rights in one
//! `access.h`:
//!
//! - [`audit::Op`]: what an audit record says happened (a write may be a create, a link or an
//!   attribute change; a move is one record). Its names are the audit format's (a contract:
//!   docs/audit-format.md).
//! - [`Access`]: how a held open opens its file (the prompt tier's approvals carry it).
//! - [`ExplainOp`]: what `fp policy explain --op` decides (a contract: its accepted values).
//!
//! Each shape keeps its own enum where it means something of its own; what decides it is always
//! a policy [`Op`].
use fp_common::kernel::{self, EVENT_EXCHANGE, Hook};
use fp_common::policy::Op;
use fp_common::refer::MoveKind;

use crate::audit;
use crate::prompt::Access;

impl audit::Op {
    pub const ALL: [audit::Op; 9] = {
        use audit::Op::*;
        [Read, Write, Create, Delete, Rename, Exchange, Link, Exec, Setattr]
    };
    /// The names of [`Self::ALL`], in order: the audit format's (its serde names, tested).
    pub const NAMES: [&'static str; 9] =
        ["read", "write", "create", "delete", "rename", "exchange", "link", "exec", "setattr"];

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The audit op of a kernel event: the hook says more than the op (a write may be a create,
    /// a link or an attribute change; a rename is one record whatever op decided it).
    pub fn of_event(hook: Option<Hook>, op: Option<kernel::Op>, flags: u8) -> audit::Op {
        use Hook::*;
        match (op, hook) {
            (_, Some(PathRename)) if flags & EVENT_EXCHANGE != 0 => audit::Op::Exchange,
            (_, Some(PathRename)) => audit::Op::Rename,
            (_, Some(PathLink)) => audit::Op::Link,
            (Some(kernel::Op::Read), _) => audit::Op::Read,
            (Some(kernel::Op::Exec), _) => audit::Op::Exec,
            (Some(kernel::Op::Delete), _) => audit::Op::Delete,
            (_, Some(PathMknod | PathMkdir | PathSymlink)) => audit::Op::Create,
            (
                _,
                Some(
                    PathChmod | PathChown | InodeSetattr | InodeSetxattr | InodeRemovexattr
                    | InodeSetAcl | InodeRemoveAcl,
                ),
            ) => audit::Op::Setattr,
            _ => audit::Op::Write,
        }
    }

    /// The move a rename, exchange or link record reports.
    pub fn move_kind(self) -> Option<MoveKind> {
        match self {
            audit::Op::Rename => Some(MoveKind::Rename),
            audit::Op::Exchange => Some(MoveKind::Exchange),
            audit::Op::Link => Some(MoveKind::Link),
            _ => None,
        }
    }
}

/// The policy op that governs a recorded op: exec needs read; creating, renaming (the target),
/// linking and changing attributes are writes; delete is delete.
impl From<audit::Op> for Op {
    fn from(op: audit::Op) -> Op {
        use audit::Op::*;
        match op {
            Read | Exec => Op::Read,
            Write | Create | Rename | Exchange | Link | Setattr => Op::Write,
            Delete => Op::Delete,
        }
    }
}

/// The audit op of a prompt's outcome: an open for reading and writing is recorded as a write.
impl From<Access> for audit::Op {
    fn from(access: Access) -> audit::Op {
        match access {
            Access::Read => audit::Op::Read,
            Access::Write | Access::ReadWrite => audit::Op::Write,
            Access::Exec => audit::Op::Exec,
        }
    }
}

impl Access {
    /// The policy ops that decide this access; exec decides as read, as the kernel does.
    pub fn policy_ops(self) -> &'static [Op] {
        match self {
            Access::Read | Access::Exec => &[Op::Read],
            Access::Write => &[Op::Write],
            Access::ReadWrite => &[Op::Read, Op::Write],
        }
    }

    /// [`Op::bit`] mask of [`Self::policy_ops`].
    pub fn op_bits(self) -> u8 {
        self.policy_ops().iter().fold(0, |bits, op| bits | op.bit())
    }

    /// The access in a sentence (`fp: approved read and write /path ...`).
    pub fn verb(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::ReadWrite => "read and write",
            Access::Exec => "execute",
        }
    }
}

/// What `fp policy explain --op` decides: one op on each path, a move from one path to
/// another, a connection to a unix socket served from outside the session, or a kind of perf
/// event. Its values are the ops' names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExplainOp {
    File(Op),
    Move(MoveKind),
    Connect,
    Perf,
}

impl ExplainOp {
    const ALL: [ExplainOp; 8] = [
        ExplainOp::File(Op::Read),
        ExplainOp::File(Op::Write),
        ExplainOp::File(Op::Delete),
        ExplainOp::Move(MoveKind::Rename),
        ExplainOp::Move(MoveKind::Exchange),
        ExplainOp::Move(MoveKind::Link),
        ExplainOp::Connect,
        ExplainOp::Perf,
    ];
}

impl clap::ValueEnum for ExplainOp {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let value = match self {
            ExplainOp::File(op) => clap::builder::PossibleValue::new(op.name()),
            ExplainOp::Move(kind) => clap::builder::PossibleValue::new(kind.name()),
            ExplainOp::Connect => clap::builder::PossibleValue::new("connect"),
            ExplainOp::Perf => clap::builder::PossibleValue::new("perf"),
        };
        Some(match self {
            ExplainOp::File(_) => value,
            ExplainOp::Connect => {
                value.help("connect(2) or send to a unix socket (PATH or @NAME) served from outside the session")
            }
            ExplainOp::Perf => value.help(
                "perf_event_open(2) of each KIND: user (a process's user-space counters), \
                 cpu-wide, kernel, tracepoint",
            ),
            ExplainOp::Move(MoveKind::Rename) => value.help("rename(SRC, DST)"),
            ExplainOp::Move(MoveKind::Exchange) => {
                value.help("renameat2(SRC, DST, RENAME_EXCHANGE)")
            }
            ExplainOp::Move(MoveKind::Link) => value.help("link(SRC, DST)"),
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum as _;

    use super::*;

    #[test]
    fn audit_names_are_the_serde_names() {
        for (op, name) in audit::Op::ALL.into_iter().zip(audit::Op::NAMES) {
            assert_eq!(op.as_str(), name);
            assert_eq!(serde_json::to_value(op).unwrap(), name);
            assert_eq!(serde_json::from_value::<audit::Op>(name.into()).unwrap(), op);
        }
    }

    #[test]
    fn explain_accepts_the_op_names() {
        let names: Vec<_> = ExplainOp::ALL
            .iter()
            .map(|op| op.to_possible_value().unwrap().get_name().to_owned())
            .collect();
        assert_eq!(
            names,
            ["read", "write", "delete", "rename", "exchange", "link", "connect", "perf"]
        );
        assert_eq!(ExplainOp::from_str("link", false), Ok(ExplainOp::Move(MoveKind::Link)));
        assert_eq!(ExplainOp::from_str("read", false), Ok(ExplainOp::File(Op::Read)));
    }

    #[test]
    fn recorded_ops_are_decided_by_their_policy_op() {
        assert_eq!(Op::from(audit::Op::Exec), Op::Read);
        assert_eq!(Op::from(audit::Op::Setattr), Op::Write);
        assert_eq!(Op::from(audit::Op::Delete), Op::Delete);
        for access in [Access::Read, Access::Write, Access::ReadWrite, Access::Exec] {
            let recorded = Op::from(audit::Op::from(access));
            assert!(access.policy_ops().contains(&recorded), "{access:?}");
        }
        let moves = audit::Op::ALL.into_iter().filter_map(audit::Op::move_kind).count();
        assert_eq!(moves, 3);
    }
}
