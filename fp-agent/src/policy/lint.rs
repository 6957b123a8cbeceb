//! What `fp policy check` warns of in a policy that loads: rules that are valid but probably do
//! not say what their author meant. A glob that matches every path, one glob in several tiers, a
//! workspace the policy denies, and a rule a floor overrides where it allows.
use std::{collections::BTreeMap, path::Path};

use super::{EffectivePolicy, Layer, Op, Rule, Verdict, glob};

/// Paths of unrelated trees: a glob that matches all of them matches every path.
const EVERYWHERE: [&str; 4] =
    ["/etc/hostname", "/usr/bin/env", "/var/tmp/a/b", "/home/u/.config/c"];

/// The warnings for `policy`, checked with `workspace` as `<workspace>`.
pub fn warnings(policy: &EffectivePolicy, workspace: &Path) -> Vec<String> {
    let own: Vec<&Rule> = policy.rules().iter().filter(|r| r.layer == Layer::Policy).collect();
    let mut out = Vec::new();
    for rule in &own {
        let matcher = glob::build(&rule.glob).map(|g| g.compile_matcher());
        if matcher.is_ok_and(|m| EVERYWHERE.iter().all(|p| m.is_match(p))) {
            out.push(format!(
                "rule \"{}\" ({}) matches every path: its {} applies to the whole filesystem",
                rule.text, rule.source, rule.tier
            ));
        }
    }
    let mut tiers: BTreeMap<&str, Vec<&Rule>> = BTreeMap::new();
    for rule in &own {
        tiers.entry(rule.glob.as_str()).or_default().push(rule);
    }
    // Per-op lists (schema v2) set different ops of one glob: only two verdicts for one op count.
    let conflict = |rules: &&Vec<&Rule>| {
        Op::ALL
            .iter()
            .any(|op| rules.iter().filter(|r| r.verdicts[op.index()].is_some()).count() > 1)
    };
    for rules in tiers.values().filter(conflict) {
        let mut names: Vec<&str> = rules.iter().map(|r| r.tier.as_str()).collect();
        names.dedup();
        if names.len() < 2 {
            continue;
        }
        out.push(format!(
            "\"{}\" is in {}: for each op the strictest of them decides",
            rules[0].text,
            names.join(", ")
        ));
    }
    out.extend(denied_workspace(policy, workspace));
    for rule in &own {
        out.extend(overridden(policy, rule));
    }
    out
}

/// The workspace, or a file in it, denied for reading (a read-only workspace may be meant: a
/// reviewer's).
fn denied_workspace(policy: &EffectivePolicy, workspace: &Path) -> Option<String> {
    let inside = workspace.join("file");
    let denied = [workspace, inside.as_path()].iter().any(|path| {
        policy.decide(path.as_os_str().as_encoded_bytes(), Op::Read).verdict == Verdict::Deny
    });
    denied.then(|| {
        format!(
            "the workspace {} is denied for read: the session cannot work in it",
            workspace.display()
        )
    })
}

/// Where a rule allows an op on its own directory and a floor decides that op there: the floor's
/// rule outranks it, so it has no effect there.
fn overridden(policy: &EffectivePolicy, rule: &Rule) -> Option<String> {
    let root = literal_root(&rule.glob)?;
    let ops: Vec<Op> = Op::ALL
        .into_iter()
        .filter(|op| rule.verdicts[op.index()] == Some(Verdict::Allow))
        .collect();
    let inside = format!("{root}/file");
    let (op, floor) = ops.into_iter().find_map(|op| {
        [root.as_str(), inside.as_str()].into_iter().find_map(|path| {
            let decision = policy.decide(path.as_bytes(), op);
            let floor = policy.rule(decision.rule?)?;
            let overrides = floor.layer > Layer::Policy && decision.verdict != Verdict::Allow;
            overrides.then_some((op, floor))
        })
    })?;
    Some(format!(
        "rule \"{}\" ({}) allows {} of {root}, but the {} \"{}\" decides it there ({}): the rule \
         has no effect there",
        rule.text,
        rule.source,
        op.name(),
        floor.tier,
        floor.text,
        floor.source
    ))
}

/// The longest directory of `glob` without a wildcard (`/a/b` of `/a/b/**`), or the glob itself
/// when it has none; None for `/`.
fn literal_root(glob: &str) -> Option<String> {
    let end = glob.find(['*', '?', '[', '{']).unwrap_or(glob.len());
    let literal = &glob[..end];
    let root = match end == glob.len() {
        true => literal,
        false => literal.rsplit_once('/').map_or("", |(dir, _)| dir),
    };
    (!root.is_empty() && root != "/").then(|| root.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::LoadOptions;

    fn policy(text: &str, user: &str) -> EffectivePolicy {
        let options = LoadOptions {
            policy_text: Some(text.into()),
            workspace: Some("/srv/ws".into()),
            user: Some(user.into()),
            ..LoadOptions::default()
        };
        EffectivePolicy::load(&options).unwrap()
    }

    fn warned(text: &str, user: &str) -> Vec<String> {
        warnings(&policy(text, user), Path::new("/srv/ws"))
    }

    #[test]
    fn a_glob_of_every_path_is_named() {
        let w = warned("[file_policy]\nwrite_paths = [\"**/\"]\n", "root");
        assert!(w.iter().any(|w| w.contains("\"**/\"") && w.contains("every path")), "{w:?}");
        let w = warned("[file_policy]\nwrite_paths = [\"<workspace>/**\"]\n", "root");
        assert!(!w.iter().any(|w| w.contains("every path")), "{w:?}");
    }

    #[test]
    fn one_glob_in_several_tiers_is_named() {
        let text = "[file_policy]\nread_paths = [\"/srv/data/**\"]\n\
                    write_paths = [\"/srv/data/**\"]\ndeny_paths = [\"/srv/data/**\"]\n";
        let w = warned(text, "root");
        assert!(w.iter().any(|w| w.contains("\"/srv/data/**\" is in")), "{w:?}");
        // Per-op lists name one glob once per op: that is how they are written.
        let text = "[file_policy.defaults]\nread = \"deny\"\nwrite = \"deny\"\n\
                    delete = \"deny\"\n[file_policy.read]\nsilent = [\"/srv/data/**\"]\n\
                    [file_policy.write]\nprompt = [\"/srv/data/**\"]\n";
        let w = warned(text, "root");
        assert!(!w.iter().any(|w| w.contains(" is in ")), "{w:?}");
    }

    #[test]
    fn a_denied_workspace_is_named() {
        let w = warned("[file_policy]\ndeny_paths = [\"/srv/**\"]\n", "root");
        assert!(w.iter().any(|w| w.contains("workspace /srv/ws is denied for")), "{w:?}");
        let w = warned("[file_policy]\nwrite_paths = [\"<workspace>/**\"]\n", "root");
        assert!(!w.iter().any(|w| w.contains("workspace")), "{w:?}");
    }

    #[test]
    fn a_rule_a_floor_overrides_is_named() {
        let w = warned("[file_policy]\nwrite_paths = [\"/etc/fp/**\"]\n", "root");
        assert!(w.iter().any(|w| w.contains("\"/etc/fp/**\"") && w.contains("no effect")), "{w:?}");
        let w = warned("[file_policy]\nwrite_paths = [\"/srv/data/**\"]\n", "root");
        assert!(!w.iter().any(|w| w.contains("no effect")), "{w:?}");
    }

    #[test]
    fn literal_roots() {
        assert_eq!(literal_root("/a/b/**").as_deref(), Some("/a/b"));
        assert_eq!(literal_root("/a/b/*.rs").as_deref(), Some("/a/b"));
        assert_eq!(literal_root("/a/b").as_deref(), Some("/a/b"));
        assert_eq!(literal_root("**/x"), None);
        assert_eq!(literal_root("/**"), None);
    }
}
