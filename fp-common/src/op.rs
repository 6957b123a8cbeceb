//! The ops of the decision core in one place, as Landlock keeps its access rights in one
//! `access.h`: what a rule decides ([`Op`], also `fp_common::policy::Op`), what a hook reports
//! ([`KernelOp`], also `fp_common::kernel::KernelOp`) and what moves content ([`MoveKind`], also
//! `fp_common::refer::MoveKind`), with their encodings, their names and the conversions between
//! them. fp-agent's own op shapes (the audit record's, the prompt's, the CLI's) are defined with
//! their conversion to these, each beside its type.
//!
//! The names are contracts: policy files (`[file_policy.read]`), audit records (`"op": "read"`)
//! and the CLI (`--op read`) use them.
use core::str::FromStr;

/// A file operation as a rule decides it. Delete is its own op in schema v2; schema v1 treats it
/// as a write.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Read = 0,
    Write = 1,
    Delete = 2,
}

impl Op {
    pub const ALL: [Op; 3] = [Op::Read, Op::Write, Op::Delete];

    /// The names of [`Self::ALL`], in order.
    pub const NAMES: [&'static str; 3] = ["read", "write", "delete"];

    /// Bit of this op in a [`crate::policy::NameSlot::ops`] mask.
    pub const fn bit(self) -> u8 {
        1 << (self as u8)
    }

    pub const fn index(self) -> usize {
        self as usize
    }

    /// `read`, `write` or `delete`.
    pub fn name(self) -> &'static str {
        self.of(&Self::NAMES)
    }

    /// This op's value in a per-op array: a match, not an index, so that the BPF programs never
    /// carry a bounds check (a panic path the verifier refuses).
    #[inline(always)]
    pub fn of<T: Copy>(self, values: &[T; 3]) -> T {
        let [read, write, delete] = *values;
        match self {
            Op::Read => read,
            Op::Write => write,
            Op::Delete => delete,
        }
    }

    /// This op's element of a per-op array, borrowed (see [`Op::of`]).
    #[inline(always)]
    pub fn at<T>(self, values: &[T; 3]) -> &T {
        let [read, write, delete] = values;
        match self {
            Op::Read => read,
            Op::Write => write,
            Op::Delete => delete,
        }
    }

    /// This op's slot in a per-op array (see [`Op::of`]).
    #[inline(always)]
    pub fn of_mut<T>(self, values: &mut [T; 3]) -> &mut T {
        let [read, write, delete] = values;
        match self {
            Op::Read => read,
            Op::Write => write,
            Op::Delete => delete,
        }
    }
}

/// A name that is not an op's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownOp;

impl FromStr for Op {
    type Err = UnknownOp;

    /// The op named `read`, `write` or `delete`.
    fn from_str(name: &str) -> Result<Op, UnknownOp> {
        Op::ALL.into_iter().find(|op| op.name() == name).ok_or(UnknownOp)
    }
}

/// What an operation does to the file it touches, as hooks report it (`DecisionEvent::op`). Read,
/// write and delete share their encoding with [`Op`]; exec is decided as a read
/// ([`KernelOp::policy_op`]).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelOp {
    Read = 0,
    Write = 1,
    Delete = 2,
    Exec = 3,
}

impl KernelOp {
    pub fn from_u8(v: u8) -> Option<Self> {
        [Self::Read, Self::Write, Self::Delete, Self::Exec].into_iter().find(|o| *o as u8 == v)
    }

    /// The operation of a policy op (they share their encoding).
    pub const fn of_policy(op: Op) -> KernelOp {
        match op {
            Op::Read => Self::Read,
            Op::Write => Self::Write,
            Op::Delete => Self::Delete,
        }
    }

    /// The policy op that decides this operation.
    pub const fn policy_op(self) -> Op {
        match self {
            Self::Read | Self::Exec => Op::Read,
            Self::Write => Op::Write,
            Self::Delete => Op::Delete,
        }
    }

    /// The policy op's name, or `exec`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Exec => "exec",
            op => op.policy_op().name(),
        }
    }
}

/// Which operation moves content from one name to another ([`crate::refer`]).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoveKind {
    /// rename(A, B): A's content is at B afterwards; what B named is gone.
    Rename = 0,
    /// renameat2(A, B, RENAME_EXCHANGE): both names stay and swap their content.
    Exchange = 1,
    /// link(A, B): the content is at A and at B.
    Link = 2,
}

impl MoveKind {
    /// `rename`, `exchange` or `link`.
    pub fn name(self) -> &'static str {
        match self {
            MoveKind::Rename => "rename",
            MoveKind::Exchange => "exchange",
            MoveKind::Link => "link",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (op, name) in Op::ALL.into_iter().zip(Op::NAMES) {
            assert_eq!(op.name(), name);
            assert_eq!(name.parse(), Ok(op));
            assert_eq!(KernelOp::of_policy(op).name(), name);
        }
        assert_eq!("exec".parse::<Op>(), Err(UnknownOp));
        assert_eq!("Read".parse::<Op>(), Err(UnknownOp));
        assert_eq!(KernelOp::Exec.name(), "exec");
        let moves = [MoveKind::Rename, MoveKind::Exchange, MoveKind::Link].map(MoveKind::name);
        assert_eq!(moves, ["rename", "exchange", "link"]);
    }
}
