//! Verdicts: what the tables say about a (path, op), the decision one entry carries for one op,
//! and the tables' answer.
/// What the tables say about a (path, op).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TableVerdict {
    Allow = 0,
    Prompt = 1,
    Deny = 2,
    /// The kernel cannot decide exactly: ask userspace.
    Defer = 3,
}

impl TableVerdict {
    /// Order of strictness: Allow < Prompt < Defer < Deny. Defer ranks above Prompt because the
    /// exact evaluator may still deny what the kernel could not decide.
    pub const fn strictness(self) -> u8 {
        match self {
            TableVerdict::Allow => 0,
            TableVerdict::Prompt => 1,
            TableVerdict::Defer => 2,
            TableVerdict::Deny => 3,
        }
    }

    /// The stricter of two verdicts: what one operation that needs both accesses gets (an open
    /// for reading and writing needs read and write).
    pub const fn stricter(self, other: TableVerdict) -> TableVerdict {
        if other.strictness() > self.strictness() { other } else { self }
    }

    pub const fn name(self) -> &'static str {
        match self {
            TableVerdict::Allow => "allow",
            TableVerdict::Prompt => "prompt",
            TableVerdict::Deny => "deny",
            TableVerdict::Defer => "defer",
        }
    }

    /// Decodes a map byte; anything unknown is Deny (fail closed).
    pub const fn from_u8(v: u8) -> Self {
        match v {
            0 => TableVerdict::Allow,
            1 => TableVerdict::Prompt,
            3 => TableVerdict::Defer,
            _ => TableVerdict::Deny,
        }
    }
}

/// The decision one entry carries for one op.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpEntry {
    /// 0 means "no rule for this op here".
    pub rank: u32,
    pub rule_id: u32,
    /// A `TableVerdict` byte.
    pub verdict: u8,
    pub _pad: [u8; 3],
}

impl OpEntry {
    /// Whether this entry beats `other`: higher rank wins; on equal rank a decided verdict beats
    /// Defer (equal rank means equal specificity and strictness, so both give the same verdict).
    pub fn outranks(&self, other: &OpEntry) -> bool {
        let defer = TableVerdict::Defer as u8;
        self.rank > other.rank
            || (self.rank == other.rank
                && self.rank != 0
                && other.verdict == defer
                && self.verdict != defer)
    }
}

/// The tables' answer for one (path, op).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableDecision {
    pub verdict: TableVerdict,
    /// The deciding rule, or [`NO_RULE`](super::NO_RULE) for the session default.
    pub rule_id: u32,
}

/// The tables' answer for all three ops of one path.
pub type Decisions = [TableDecision; 3];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_verdict_byte_is_deny() {
        assert_eq!(TableVerdict::from_u8(7), TableVerdict::Deny);
    }
}
