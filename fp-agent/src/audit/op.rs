//! The op an audit record reports (a write may be a create, a link or an attribute change; a move
//! is one record), its names (the audit format's: a contract, docs/audit-format.md) and the
//! policy op that decides it.
use fp_common::kernel::{self, EVENT_EXCHANGE, Hook};
use fp_common::policy;
use fp_common::refer::MoveKind;
use serde::{Deserialize, Serialize};

/// A file operation as an audit record reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    #[default]
    Read,
    Write,
    Create,
    Delete,
    Rename,
    /// renameat2(RENAME_EXCHANGE): both names stay and swap their content.
    Exchange,
    Link,
    Exec,
    Setattr,
}

impl Op {
    pub const ALL: [Op; 9] = {
        use Op::*;
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
    pub fn of_event(hook: Option<Hook>, op: Option<kernel::KernelOp>, flags: u8) -> Op {
        use Hook::*;
        match (op, hook) {
            (_, Some(PathRename)) if flags & EVENT_EXCHANGE != 0 => Op::Exchange,
            (_, Some(PathRename)) => Op::Rename,
            (_, Some(PathLink)) => Op::Link,
            (Some(kernel::KernelOp::Read), _) => Op::Read,
            (Some(kernel::KernelOp::Exec), _) => Op::Exec,
            (Some(kernel::KernelOp::Delete), _) => Op::Delete,
            (_, Some(PathMknod | PathMkdir | PathSymlink)) => Op::Create,
            (
                _,
                Some(
                    PathChmod | PathChown | InodeSetattr | InodeSetxattr | InodeRemovexattr
                    | InodeSetAcl | InodeRemoveAcl,
                ),
            ) => Op::Setattr,
            _ => Op::Write,
        }
    }

    /// The move a rename, exchange or link record reports.
    pub fn move_kind(self) -> Option<MoveKind> {
        match self {
            Op::Rename => Some(MoveKind::Rename),
            Op::Exchange => Some(MoveKind::Exchange),
            Op::Link => Some(MoveKind::Link),
            _ => None,
        }
    }
}

/// The policy op that governs a recorded op: exec needs read; creating, renaming (the target),
/// linking and changing attributes are writes; delete is delete.
impl From<Op> for policy::Op {
    fn from(op: Op) -> policy::Op {
        use Op::*;
        match op {
            Read | Exec => policy::Op::Read,
            Write | Create | Rename | Exchange | Link | Setattr => policy::Op::Write,
            Delete => policy::Op::Delete,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_names_are_the_serde_names() {
        for (op, name) in Op::ALL.into_iter().zip(Op::NAMES) {
            assert_eq!(op.as_str(), name);
            assert_eq!(serde_json::to_value(op).unwrap(), name);
            assert_eq!(serde_json::from_value::<Op>(name.into()).unwrap(), op);
        }
    }

    #[test]
    fn recorded_ops_are_decided_by_their_policy_op() {
        assert_eq!(policy::Op::from(Op::Exec), policy::Op::Read);
        assert_eq!(policy::Op::from(Op::Setattr), policy::Op::Write);
        assert_eq!(policy::Op::from(Op::Delete), policy::Op::Delete);
        let moves = Op::ALL.into_iter().filter_map(Op::move_kind).count();
        assert_eq!(moves, 3);
    }
}
