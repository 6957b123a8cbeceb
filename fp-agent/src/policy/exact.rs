//! The exact evaluator: every rule's glob matched with globset. It is the reference semantics
//! (the kernel tables must agree with it or defer) and what `explain` reports.
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;

use globset::{GlobSet, GlobSetBuilder};

use super::error::{ErrorKind, PolicyError};
use super::{Op, Rule, glob};

#[derive(Clone, Debug)]
pub struct ExactEvaluator {
    set: GlobSet,
}

impl ExactEvaluator {
    pub fn new(rules: &[Rule]) -> Result<ExactEvaluator, PolicyError> {
        let mut builder = GlobSetBuilder::new();
        for rule in rules {
            let g = glob::build(&rule.glob).map_err(|e| {
                PolicyError::new(ErrorKind::InvalidGlob, Some(rule.source.clone()), e.to_string())
            })?;
            builder.add(g);
        }
        let set = builder.build().map_err(|e| {
            PolicyError::new(ErrorKind::Limit, None, format!("the rules do not compile: {e}"))
        })?;
        Ok(ExactEvaluator { set })
    }

    /// The deciding rule for (path, op): the highest rank among matching rules that speak about
    /// `op`, the lowest id on a tie. None: no rule matches, the default decides.
    pub fn decide<'r>(&self, rules: &'r [Rule], path: &[u8], op: Op) -> Option<&'r Rule> {
        let mut best: Option<&Rule> = None;
        for i in self.set.matches(OsStr::from_bytes(path)) {
            let Some(rule) = rules.get(i) else { continue };
            let rank = rule.ranks[op.index()];
            if rank != 0 && best.is_none_or(|b| rank > b.ranks[op.index()]) {
                best = Some(rule);
            }
        }
        best
    }
}
