//! What a rule is (its verdict, layer and rank per op) and what a decision says.
use super::{Source, TableVerdict};

/// A user-facing verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Allow,
    Prompt,
    Deny,
}

impl Verdict {
    /// Low two bits of a rank: stricter wins a tie, in the decision core's order
    /// ([`TableVerdict::strictness`]).
    pub(super) fn strictness(self) -> u32 {
        self.table().strictness() as u32
    }

    pub fn table(self) -> TableVerdict {
        match self {
            Verdict::Allow => TableVerdict::Allow,
            Verdict::Prompt => TableVerdict::Prompt,
            Verdict::Deny => TableVerdict::Deny,
        }
    }
}

/// Which layer a rule comes from; a higher layer outranks every rule of a lower one.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    /// What any program needs to start; decides only where no other rule matches.
    RuntimeBase = 1,
    /// What a shipped profile adds for an agent CLI (`--profile`); decides only where no policy
    /// rule matches.
    Profile = 2,
    /// The operator's global `[file_policy]` layered with the per-agent overlay.
    Policy = 3,
    /// Credentials and system configuration.
    SafetyFloor = 4,
    /// fp's own files.
    SelfProtection = 5,
}

/// One rule of a session's effective policy.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rule {
    /// Index in [`EffectivePolicy::rules`](super::EffectivePolicy::rules); the kernel tables name rules by it.
    pub id: u32,
    /// As written (`<workspace>/secrets/**`).
    pub text: String,
    /// Expanded and normalized: what is matched.
    pub glob: String,
    /// The list it came from (`deny_paths`, `write.prompt`, `safety floor ssh`, ...).
    pub tier: String,
    pub layer: Layer,
    pub source: Source,
    /// Verdict per op (indexed by `Op`); None: the rule says nothing about that op.
    pub verdicts: [Option<Verdict>; 3],
    /// Rank per op: the highest-ranked matching rule decides.
    pub ranks: [u32; 3],
}

/// How the kernel handles a (path, op).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelDisposition {
    /// The tables give the exact verdict.
    Exact,
    /// The tables defer to userspace.
    Defer,
}

/// A rule by id; [`EffectivePolicy::rule`](super::EffectivePolicy::rule) gives its text, tier and source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RuleRef(pub u32);

/// The decision for one (path, op).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    /// The deciding rule; None when the op's default decided.
    pub rule: Option<RuleRef>,
    pub kernel: KernelDisposition,
}
