//! The outcome of a decision, the one type every refusal and event uses.
use fp_common::{
    kernel::Reason,
    policy::{NO_RULE, OpEntry, TableVerdict},
};

/// The outcome of one decision, for the event.
#[derive(Clone, Copy)]
pub(crate) struct Outcome {
    pub(crate) verdict: TableVerdict,
    pub(crate) reason: Reason,
    pub(crate) rule_id: u32,
}

impl Outcome {
    pub(crate) const UNRESOLVED: Outcome =
        Outcome { verdict: TableVerdict::Deny, reason: Reason::Unresolved, rule_id: NO_RULE };
    pub(crate) const REFER: Outcome =
        Outcome { verdict: TableVerdict::Deny, reason: Reason::Refer, rule_id: NO_RULE };
    pub(crate) const ALLOWED: Outcome =
        Outcome { verdict: TableVerdict::Allow, reason: Reason::Default, rule_id: NO_RULE };
    pub(crate) const RELOADED: Outcome =
        Outcome { verdict: TableVerdict::Deny, reason: Reason::Reloaded, rule_id: NO_RULE };
    pub(crate) const LINKS_PENDING: Outcome =
        Outcome { verdict: TableVerdict::Deny, reason: Reason::LinksPending, rule_id: NO_RULE };

    /// A write's outcome while the session's hardlinks are being recorded, for a file with
    /// several links: refused if the tables allow it (one of its other names may lie in a tree
    /// the policy keeps read-only).
    #[inline(always)]
    pub(crate) fn links_pending(self) -> Outcome {
        if self.verdict == TableVerdict::Allow { Outcome::LINKS_PENDING } else { self }
    }
}

/// The outcome of an inode hook ([`crate::state::walk::NO_MOUNT`]) for one op, from the best inode-table hit of the
/// file's filesystem: the rule's verdict, or allowed without one.
#[inline(always)]
pub(crate) fn by_identity(hit: &OpEntry) -> Outcome {
    match hit.rank {
        0 => Outcome { verdict: TableVerdict::Allow, reason: Reason::Default, rule_id: NO_RULE },
        _ => Outcome {
            verdict: TableVerdict::from_u8(hit.verdict),
            reason: Reason::InodeRule,
            rule_id: hit.rule_id,
        },
    }
}
