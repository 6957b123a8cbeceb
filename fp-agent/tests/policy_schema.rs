//! Schema, evaluator and layering behaviour (the seed's test plan items, each a named test), the
//! floors, the runtime base and the v2 specificity examples of docs/policy.md.
use std::path::{Path, PathBuf};

use fp_agent::policy::{
    EffectivePolicy, ErrorKind, FileKind, KernelDisposition, Layer, LoadOptions, Op, PolicyFields,
    Verdict, layer, parse_str,
};

const WS: &str = "/tmp/fp-test-ws";

fn fields(text: &str, kind: FileKind) -> PolicyFields {
    parse_str(Path::new("test.toml"), text, kind).unwrap()
}

fn options() -> LoadOptions {
    LoadOptions { workspace: Some(WS.into()), user: Some("root".into()), ..LoadOptions::default() }
}

fn policy(text: &str) -> EffectivePolicy {
    EffectivePolicy::from_fields(&fields(text, FileKind::Policy), &options()).unwrap()
}

fn layered(global: &str, overlay: &str) -> EffectivePolicy {
    let f = layer(&fields(global, FileKind::Config), &fields(overlay, FileKind::Policy))
        .unwrap()
        .unwrap();
    EffectivePolicy::from_fields(&f, &options()).unwrap()
}

fn verdict(p: &EffectivePolicy, path: &str, op: Op) -> Verdict {
    p.decide(path.as_bytes(), op).verdict
}

fn rule_text(p: &EffectivePolicy, path: &str, op: Op) -> Option<String> {
    p.decide(path.as_bytes(), op).rule.and_then(|r| p.rule(r)).map(|r| r.text.clone())
}

const V1: &str = r#"
[file_policy]
default = "deny"
deny_paths = ["<workspace>/private/**"]
prompt_paths = ["<workspace>/secrets/**"]
read_paths = ["<workspace>/docs/**", "/opt/data/**"]
write_paths = ["<workspace>/**"]
"#;

#[test]
fn v1_per_tier_verdicts() {
    let p = policy(V1);
    assert_eq!(verdict(&p, "/tmp/fp-test-ws/private/x", Op::Read), Verdict::Deny);
    assert_eq!(verdict(&p, "/tmp/fp-test-ws/secrets/x", Op::Read), Verdict::Prompt);
    assert_eq!(verdict(&p, "/tmp/fp-test-ws/secrets/x", Op::Write), Verdict::Prompt);
    assert_eq!(verdict(&p, "/opt/data/x", Op::Read), Verdict::Allow);
    assert_eq!(verdict(&p, "/opt/data/x", Op::Write), Verdict::Deny);
    assert_eq!(verdict(&p, "/tmp/fp-test-ws/src/a.rs", Op::Write), Verdict::Allow);
    assert_eq!(verdict(&p, "/tmp/fp-test-ws/src/a.rs", Op::Delete), Verdict::Allow);
    assert_eq!(verdict(&p, "/opt/other", Op::Read), Verdict::Deny);
}

#[test]
fn deny_precedence_over_every_tier() {
    let p = policy(
        r#"[file_policy]
default = "write"
deny_paths = ["/data/**"]
prompt_paths = ["/data/**"]
read_paths = ["/data/**"]
write_paths = ["/data/x/**"]"#,
    );
    for op in Op::ALL {
        assert_eq!(verdict(&p, "/data/x/y", op), Verdict::Deny, "{op:?}");
    }
    assert_eq!(rule_text(&p, "/data/x/y", Op::Read).as_deref(), Some("/data/**"));
}

#[test]
fn read_paths_inside_workspace_blocks_writes() {
    let p = policy(V1);
    assert_eq!(verdict(&p, "/tmp/fp-test-ws/docs/guide.md", Op::Read), Verdict::Allow);
    assert_eq!(verdict(&p, "/tmp/fp-test-ws/docs/guide.md", Op::Write), Verdict::Deny);
    assert_eq!(verdict(&p, "/tmp/fp-test-ws/docs/guide.md", Op::Delete), Verdict::Deny);
    assert_eq!(
        rule_text(&p, "/tmp/fp-test-ws/docs/guide.md", Op::Write).as_deref(),
        Some("<workspace>/docs/**")
    );
}

#[test]
fn v1_defaults() {
    for (default, expect) in [
        ("deny", [Verdict::Deny, Verdict::Deny, Verdict::Deny]),
        ("prompt", [Verdict::Prompt, Verdict::Prompt, Verdict::Prompt]),
        ("read", [Verdict::Allow, Verdict::Deny, Verdict::Deny]),
        ("write", [Verdict::Allow, Verdict::Allow, Verdict::Allow]),
    ] {
        let p = policy(&format!("[file_policy]\ndefault = \"{default}\""));
        assert_eq!(p.defaults(), expect, "{default}");
        for op in Op::ALL {
            assert_eq!(verdict(&p, "/opt/unmatched", op), expect[op.index()]);
            assert_eq!(p.decide(b"/opt/unmatched", op).rule, None);
        }
    }
}

#[test]
fn v1_most_specific_glob_wins_within_a_tier() {
    let p = policy(
        r#"[file_policy]
deny_paths = ["/srv/**", "/srv/app/**", "/srv/app/config.toml"]"#,
    );
    assert_eq!(
        rule_text(&p, "/srv/app/config.toml", Op::Read).as_deref(),
        Some("/srv/app/config.toml")
    );
    assert_eq!(rule_text(&p, "/srv/app/x", Op::Read).as_deref(), Some("/srv/app/**"));
    assert_eq!(rule_text(&p, "/srv/x", Op::Read).as_deref(), Some("/srv/**"));
}

const V2: &str = r#"
[file_policy.defaults]
read = "prompt"
write = "deny"
delete = "deny"

[file_policy.read]
silent = ["/home/u/Repos/**"]
deny = ["/home/u/Repos/private/**"]

[file_policy.write]
silent = ["/home/u/Repos/openfang/**"]
prompt = ["/home/u/Repos/**"]

[file_policy.delete]
prompt = ["/home/u/Repos/openfang/**"]
"#;

#[test]
fn v2_per_op_rules() {
    let p = policy(V2);
    assert_eq!(verdict(&p, "/home/u/Repos/a/b", Op::Read), Verdict::Allow);
    assert_eq!(verdict(&p, "/home/u/Repos/private/b", Op::Read), Verdict::Deny);
    assert_eq!(verdict(&p, "/home/u/Repos/openfang/x", Op::Write), Verdict::Allow);
    assert_eq!(verdict(&p, "/home/u/Repos/other/x", Op::Write), Verdict::Prompt);
    assert_eq!(verdict(&p, "/home/u/Repos/openfang/x", Op::Delete), Verdict::Prompt);
    assert_eq!(verdict(&p, "/home/u/Repos/other/x", Op::Delete), Verdict::Deny);
    assert_eq!(verdict(&p, "/opt/x", Op::Read), Verdict::Prompt);
}

/// The worked examples of "most specific" in docs/policy.md.
#[test]
fn v2_most_specific_glob_wins_strictest_on_tie() {
    let p = policy(
        r#"[file_policy.defaults]
read = "deny"
[file_policy.read]
silent = ["/w/**", "/w/*.log", "/w/a/**", "/w/a/b"]
prompt = ["**/notes", "/w/a/**"]
deny = ["**/*.log", "/w/c/**/x"]"#,
    );
    // Exact path (class 3) beats everything.
    assert_eq!(verdict(&p, "/w/a/b", Op::Read), Verdict::Allow);
    // Same glob in two tiers: strictest wins.
    assert_eq!(verdict(&p, "/w/a/c", Op::Read), Verdict::Prompt);
    // Literal final component (class 2) beats a subtree (class 0), however long its prefix.
    assert_eq!(verdict(&p, "/w/a/notes", Op::Read), Verdict::Prompt);
    // Partly wildcard final component (class 1) beats a subtree.
    assert_eq!(verdict(&p, "/w/a/x.log", Op::Read), Verdict::Deny);
    // Within class 1, more literal bytes win: "/w/*.log" (7) beats "**/*.log" (5).
    assert_eq!(verdict(&p, "/w/y.log", Op::Read), Verdict::Allow);
    // A literal final component below a wildcard (class 2) beats the subtree /w/**.
    assert_eq!(verdict(&p, "/w/c/d/x", Op::Read), Verdict::Deny);
    // Longer literal prefix wins among subtrees.
    assert_eq!(verdict(&p, "/w/z", Op::Read), Verdict::Allow);
}

#[test]
fn glob_matching_rules() {
    let p = policy(
        r#"[file_policy]
default = "write"
deny_paths = ["/g/*/one", "/g/**/deep", "**/.cache/**", "/g/Case", "/g/q?", "/g/{x,y}z"]"#,
    );
    let deny = |path: &str| verdict(&p, path, Op::Write) == Verdict::Deny;
    assert!(deny("/g/a/one"));
    assert!(!deny("/g/a/b/one"), "* never crosses /");
    assert!(deny("/g/deep") && deny("/g/a/b/c/deep"), "** spans zero or more components");
    assert!(deny("/h/.cache/x") && !deny("/h/.cache"), "dir/** is strictly below dir");
    assert!(deny("/g/Case") && !deny("/g/case"), "case-sensitive");
    assert!(deny("/g/qa") && !deny("/g/q"));
    assert!(deny("/g/xz") && deny("/g/yz") && !deny("/g/zz"));
}

#[test]
fn workspace_and_home_expansion() {
    let p = policy(
        r#"[file_policy]
write_paths = ["<workspace>/src/**", "~/notes/**", "<workspace>", "//tmp//./x/"]"#,
    );
    let globs: Vec<&str> =
        p.rules().iter().filter(|r| r.layer == Layer::Policy).map(|r| r.glob.as_str()).collect();
    assert_eq!(globs, ["/tmp/fp-test-ws/src/**", "/root/notes/**", "/tmp/fp-test-ws", "/tmp/x"]);
}

#[test]
fn expansion_escapes_glob_characters() {
    let o = LoadOptions { workspace: Some("/tmp/w[1]*".into()), ..options() };
    let f = fields("[file_policy]\nwrite_paths = [\"<workspace>/**\"]", FileKind::Policy);
    let p = EffectivePolicy::from_fields(&f, &o).unwrap();
    assert_eq!(verdict(&p, "/tmp/w[1]*/a", Op::Write), Verdict::Allow);
    assert_eq!(verdict(&p, "/tmp/w1x/a", Op::Write), Verdict::Deny);
}

const GLOBAL: &str = r#"
[file_policy]
default = "read"
deny_paths = ["/srv/**"]
write_paths = ["/tmp/**"]
"#;

#[test]
fn global_applies() {
    // No overlay fields at all: the global policy is the session's.
    let p = layered(GLOBAL, "");
    assert_eq!(verdict(&p, "/srv/x", Op::Read), Verdict::Deny);
    assert_eq!(verdict(&p, "/tmp/x", Op::Write), Verdict::Allow);
    assert_eq!(verdict(&p, "/opt/x", Op::Read), Verdict::Allow);
}

#[test]
fn overlay_replaces_per_field() {
    let p = layered(
        GLOBAL,
        "[file_policy]\ndefault = \"deny\"\nwrite_paths = [\"/var/tmp/**\"]\ndeny_paths = []",
    );
    // default replaced
    assert_eq!(verdict(&p, "/opt/x", Op::Read), Verdict::Deny);
    // write_paths replaced
    assert_eq!(verdict(&p, "/var/tmp/x", Op::Write), Verdict::Allow);
    assert_eq!(verdict(&p, "/tmp/x", Op::Write), Verdict::Deny);
    // deny_paths empty: inherited
    assert_eq!(verdict(&p, "/srv/x", Op::Read), Verdict::Deny);
}

#[test]
fn overlay_replaces_per_field_v2() {
    let global =
        "[file_policy.defaults]\nread = \"silent\"\n[file_policy.read]\ndeny = [\"/a/**\"]";
    let p = layered(global, "[file_policy.defaults]\nwrite = \"prompt\"");
    assert_eq!(verdict(&p, "/opt/x", Op::Read), Verdict::Allow);
    assert_eq!(verdict(&p, "/opt/x", Op::Write), Verdict::Prompt);
    assert_eq!(verdict(&p, "/a/x", Op::Read), Verdict::Deny);
}

/// "Both default" (neither layer sets a policy field) is None: fp has no policy to run a
/// session with and refuses (fail closed) instead of running unconfined.
#[test]
fn both_default_returns_none() {
    let g = fields("[other]\nx = 1", FileKind::Config);
    let o = fields("", FileKind::Policy);
    assert_eq!(layer(&g, &o).unwrap(), None);
    let base_only = fields("[file_policy]\nbase = \"none\"", FileKind::Policy);
    assert_eq!(layer(&g, &base_only).unwrap(), None);
    let e = EffectivePolicy::from_fields(&base_only, &options()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NoPolicy);
}

#[test]
fn missing_workspace() {
    let f = fields("[file_policy]\nwrite_paths = [\"<workspace>/**\"]", FileKind::Policy);
    let e = EffectivePolicy::from_fields(&f, &LoadOptions { workspace: None, ..options() })
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::MissingWorkspace);
    assert!(e.to_string().starts_with("test.toml:2:16: error:"), "{e}");
    let e =
        EffectivePolicy::from_fields(&f, &LoadOptions { workspace: Some("".into()), ..options() })
            .unwrap_err();
    assert_eq!(e.kind, ErrorKind::MissingWorkspace);
    assert!(e.to_string().contains("empty workspace"), "{e}");
}

#[test]
fn safety_floor_cannot_be_loosened_by_a_policy() {
    let p = policy(
        r#"[file_policy]
default = "write"
write_paths = ["/**", "**/.ssh/**", "<workspace>/.env"]"#,
    );
    for path in [
        "/home/u/.ssh/id_ed25519",
        "/tmp/fp-test-ws/.env",
        "/a/b/server.pem",
        "/etc/shadow",
        "/root/x",
    ] {
        for op in Op::ALL {
            assert_eq!(verdict(&p, path, op), Verdict::Deny, "{path} {op:?}");
        }
    }
    // Read-only entries: reads are up to the policy, changes are denied.
    assert_eq!(verdict(&p, "/home/u/.bashrc", Op::Read), Verdict::Allow);
    assert_eq!(verdict(&p, "/home/u/.bashrc", Op::Write), Verdict::Deny);
    assert_eq!(verdict(&p, "/etc/hosts", Op::Delete), Verdict::Deny);
}

#[test]
fn operator_can_lift_a_named_floor_entry() {
    let p = layered(
        "[file_policy]\nfloor_exceptions = [\"env-files\"]",
        "[file_policy]\ndefault = \"write\"",
    );
    assert_eq!(verdict(&p, "/tmp/fp-test-ws/.env", Op::Read), Verdict::Allow);
    assert_eq!(p.floor_exceptions().len(), 1);
    assert_eq!(verdict(&p, "/tmp/fp-test-ws/x.pem", Op::Read), Verdict::Deny);
}

#[test]
fn self_protection_and_secrets() {
    let o = LoadOptions {
        protected_paths: vec![PathBuf::from("/srv/audit.log")],
        secret_paths: vec!["/srv/k".into()],
        ..options()
    };
    let f = fields("[file_policy]\ndefault = \"write\"", FileKind::Policy);
    let p = EffectivePolicy::from_fields(&f, &o).unwrap();
    for path in [
        "/etc/fp/config.toml",
        "/var/log/fp/audit",
        "/sys/fs/bpf/fp/x",
        "/sys/fs/cgroup/fp/cgroup.procs",
        "/run/fp",
        "/srv/audit.log",
    ] {
        assert_eq!(verdict(&p, path, Op::Write), Verdict::Deny, "{path}");
        assert_eq!(verdict(&p, path, Op::Read), Verdict::Allow, "{path}");
    }
    assert_eq!(verdict(&p, "/etc/fp/keys/audit.key", Op::Read), Verdict::Deny);
    assert_eq!(verdict(&p, "/srv/k", Op::Read), Verdict::Deny);
}

#[test]
fn runtime_base_lets_programs_start_under_default_deny() {
    let p = policy("[file_policy]\ndefault = \"deny\"\nwrite_paths = [\"<workspace>/**\"]");
    for path in [
        "/usr/bin/bash",
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/etc/ld.so.cache",
        "/etc/localtime",
        "/dev/urandom",
        "/dev/pts",
        "/etc/profile.d",
    ] {
        assert_eq!(verdict(&p, path, Op::Read), Verdict::Allow, "{path}");
        assert_eq!(verdict(&p, path, Op::Write), Verdict::Deny, "{path}");
    }
    assert_eq!(verdict(&p, "/dev/null", Op::Write), Verdict::Allow);
    assert_eq!(verdict(&p, "/dev/pts/3", Op::Write), Verdict::Allow);
    // A policy rule outranks the base.
    let p = policy("[file_policy]\ndeny_paths = [\"/usr/local/**\"]");
    assert_eq!(verdict(&p, "/usr/local/bin/x", Op::Read), Verdict::Deny);
    // base = "none" opts out.
    let p = policy("[file_policy]\nbase = \"none\"\ndefault = \"deny\"");
    assert_eq!(verdict(&p, "/usr/bin/bash", Op::Read), Verdict::Deny);
}

#[test]
fn kernel_decides_common_shapes_exactly() {
    let p = policy(V1);
    for path in [
        "/tmp/fp-test-ws/src/a.rs",
        "/usr/bin/bash",
        "/home/u/.ssh/config",
        "/a/b.pem",
        "/x/.env.local",
    ] {
        for op in Op::ALL {
            assert_eq!(p.decide(path.as_bytes(), op).kernel, KernelDisposition::Exact, "{path}");
        }
    }
    let p = policy("[file_policy]\ndeny_paths = [\"/opt/*/cache/**\"]");
    assert_eq!(p.decide(b"/opt/a/cache/x", Op::Read).kernel, KernelDisposition::Defer);
    assert_eq!(p.decide(b"/opt/a/other/x", Op::Read).kernel, KernelDisposition::Exact);
}

#[test]
fn from_deny_paths_denies_paths_and_their_trees() {
    let p = EffectivePolicy::from_deny_paths(&[PathBuf::from("/srv/data")], &options()).unwrap();
    assert_eq!(verdict(&p, "/srv/data", Op::Read), Verdict::Deny);
    assert_eq!(verdict(&p, "/srv/data/x", Op::Write), Verdict::Deny);
    assert_eq!(verdict(&p, "/srv/database", Op::Write), Verdict::Allow);
}

#[test]
fn hash_is_stable_and_tracks_the_policy() {
    assert_eq!(policy(V1).hash(), policy(V1).hash());
    assert_ne!(policy(V1).hash(), policy(&V1.replace("private", "privat")).hash());
}

#[test]
fn examples_are_accepted() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let config = dir.join("config.toml");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") || path == config {
            continue;
        }
        let o = LoadOptions {
            policy_files: vec![path.clone()],
            config_file: Some(config.clone()),
            ..options()
        };
        EffectivePolicy::load(&o).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        count += 1;
    }
    assert!(count >= 4);
}

/// The seed's implementation let write_paths beat read_paths on an overlap
/// (`write_beats_read_on_overlap`); fp follows the issue's stated order, Deny > Prompt > Read >
/// Write, so the same overlap is read-only (which is what makes
/// `read_paths_inside_workspace_blocks_writes` hold).
#[test]
fn read_beats_write_on_overlap() {
    let p = policy("[file_policy]\nread_paths = [\"/d/**\"]\nwrite_paths = [\"/d/**\"]");
    assert_eq!(verdict(&p, "/d/x", Op::Read), Verdict::Allow);
    assert_eq!(verdict(&p, "/d/x", Op::Write), Verdict::Deny);
}

#[test]
fn layered_over_can_downgrade_default() {
    let p = layered("[file_policy]\ndefault = \"prompt\"", "[file_policy]\ndefault = \"deny\"");
    assert_eq!(verdict(&p, "/opt/x", Op::Read), Verdict::Deny);
    let p = layered("[file_policy]\ndefault = \"write\"", "[file_policy]\ndefault = \"read\"");
    assert_eq!(verdict(&p, "/opt/x", Op::Write), Verdict::Deny);
}

/// A restarted daemon rebuilds a session's policy from what it saved: same hash, same tables,
/// same decisions; a saved policy whose rules are out of order is refused.
#[test]
fn saved_policy_round_trips() {
    let p = layered(&format!("{V1}floor_exceptions = [\"shell-rc\"]\n"), "");
    let json = serde_json::to_string(&p.saved()).unwrap();
    let back = EffectivePolicy::from_saved(serde_json::from_str(&json).unwrap()).unwrap();
    assert_eq!(back.hash(), p.hash());
    let tables = |p: &EffectivePolicy| {
        let t = p.tables();
        let mut names: Vec<String> = t.names().map(|n| format!("{n:?}")).collect();
        names.sort();
        format!(
            "{:?} {:?} {names:?} {:?}",
            t.header(),
            t.prefixes().collect::<Vec<_>>(),
            t.scopes()
        )
    };
    assert!(tables(&back) == tables(&p), "the rebuilt tables differ");
    assert_eq!(back.floor_exceptions(), p.floor_exceptions());
    for path in ["/tmp/fp-test-ws/secrets/k", "/tmp/fp-test-ws/docs/a", "/etc/passwd", "/x"] {
        for op in Op::ALL {
            assert_eq!(back.decide(path.as_bytes(), op), p.decide(path.as_bytes(), op), "{path}");
        }
    }
    let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
    value["rules"].as_array_mut().unwrap().swap(0, 1);
    assert!(EffectivePolicy::from_saved(serde_json::from_value(value).unwrap()).is_err());
}
