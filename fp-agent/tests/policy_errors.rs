//! Every class of bad input gives one clear error with file:line:col and what was expected.
use fp_agent::policy::{EffectivePolicy, ErrorKind, LoadOptions, PolicyError};

fn load_with(policy: &str, config: Option<&str>, workspace: Option<&str>) -> PolicyError {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agent.toml");
    std::fs::write(&file, policy).unwrap();
    let config_file = config.map(|c| {
        let path = dir.path().join("config.toml");
        std::fs::write(&path, c).unwrap();
        path
    });
    let options = LoadOptions {
        policy_files: vec![file],
        config_file,
        workspace: workspace.map(Into::into),
        user: Some("root".into()),
        ..LoadOptions::default()
    };
    let e = EffectivePolicy::load(&options).expect_err("bad input must be rejected");
    // Paths differ per run; show the message relative to the temp dir.
    let shown = e.to_string().replace(&format!("{}/", dir.path().display()), "");
    eprintln!("{shown}");
    PolicyError { message: shown, ..e }
}

fn load(policy: &str) -> PolicyError {
    load_with(policy, None, Some("/tmp/ws"))
}

#[track_caller]
fn expect(e: &PolicyError, kind: ErrorKind, text: &[&str]) {
    assert_eq!(e.kind, kind, "{}", e.message);
    for t in text {
        assert!(e.message.contains(t), "{:?} not in:\n{}", t, e.message);
    }
}

#[test]
fn malformed_toml() {
    let e = load("[file_policy]\ndefault = \"deny\nx = 1\n");
    expect(&e, ErrorKind::Syntax, &["agent.toml:2:", "invalid TOML"]);
}

#[test]
fn unknown_key_did_you_mean() {
    let e = load("[file_policy]\ndefault = \"deny\"\ndeny_path = [\"/x\"]\n");
    expect(
        &e,
        ErrorKind::UnknownKey,
        &["agent.toml:3:1: error: unknown key `deny_path`", "did you mean `deny_paths`?"],
    );
    let e = load("[file_policy.read]\nsilnet = [\"/x\"]\n");
    expect(&e, ErrorKind::UnknownKey, &["agent.toml:2:1:", "did you mean `silent`?"]);
    let e = load("[file_polcy]\ndefault = \"deny\"\n");
    expect(&e, ErrorKind::UnknownKey, &["agent.toml:1:2:", "did you mean `file_policy`?"]);
}

#[test]
fn wrong_types() {
    let e = load("[file_policy]\ndeny_paths = \"/x\"\n");
    expect(
        &e,
        ErrorKind::WrongType,
        &["agent.toml:2:14:", "expected an array of glob strings for `deny_paths`, found string"],
    );
    let e = load("[file_policy]\ndeny_paths = [\"/x\", 3]\n");
    expect(
        &e,
        ErrorKind::WrongType,
        &["agent.toml:2:21:", "expected a glob string in `deny_paths`, found integer"],
    );
    let e = load("[file_policy]\ndefault = 3\n");
    expect(
        &e,
        ErrorKind::WrongType,
        &["agent.toml:2:11:", "expected \"deny\" | \"prompt\" | \"read\" | \"write\""],
    );
}

#[test]
fn bad_value_did_you_mean() {
    let e = load("[file_policy]\ndefault = \"writ\"\n");
    expect(
        &e,
        ErrorKind::BadValue,
        &["agent.toml:2:11:", "invalid value \"writ\"", "did you mean \"write\"?"],
    );
    let e = load("[file_policy.defaults]\nread = \"allow\"\n");
    expect(
        &e,
        ErrorKind::BadValue,
        &["agent.toml:2:8:", "expected \"silent\" | \"prompt\" | \"deny\""],
    );
}

#[test]
fn invalid_glob() {
    let e = load("[file_policy]\ndeny_paths = [\"/a/[z-a]\"]\n");
    expect(&e, ErrorKind::InvalidGlob, &["agent.toml:2:15:", "invalid glob \"/a/[z-a]\""]);
    let e = load("[file_policy]\ndeny_paths = [\"/a/b**\"]\n");
    expect(
        &e,
        ErrorKind::InvalidGlob,
        &["agent.toml:2:15:", "`**` must be a whole path component"],
    );
}

#[test]
fn relative_paths() {
    let e = load("[file_policy]\nwrite_paths = [\"/ok/**\", \"src/**\"]\n");
    expect(
        &e,
        ErrorKind::RelativePath,
        &[
            "agent.toml:2:26:",
            "relative rule path \"src/**\"",
            "start with /, ~/, <workspace>/ or **/",
        ],
    );
    let e = load("[file_policy]\nwrite_paths = [\"*.txt\"]\n");
    expect(&e, ErrorKind::RelativePath, &["agent.toml:2:16:"]);
    let e = load("[file_policy]\nwrite_paths = [\"~bob/x\"]\n");
    expect(&e, ErrorKind::BadValue, &["agent.toml:2:16:", "~user is not supported"]);
}

#[test]
fn dot_dot_in_rules() {
    let e = load("[file_policy]\nread_paths = [\"<workspace>/../etc/**\"]\n");
    expect(&e, ErrorKind::DotDot, &["agent.toml:2:15:", "`..`"]);
}

#[test]
fn mixed_schemas() {
    let e = load("[file_policy]\ndefault = \"deny\"\n[file_policy.read]\nsilent = [\"/x\"]\n");
    expect(
        &e,
        ErrorKind::MixedSchemas,
        &[
            "agent.toml:3:14:",
            "`read` is a schema v2 key but this file already uses schema v1",
            "v1 keys are default, deny_paths",
        ],
    );
}

#[test]
fn mixed_schemas_across_layers() {
    let e = load_with(
        "[file_policy.defaults]\nread = \"deny\"\n",
        Some("[file_policy]\ndefault = \"deny\"\n"),
        None,
    );
    expect(&e, ErrorKind::MixedSchemas, &["agent.toml:1:14:", "config.toml:2:1", "same schema"]);
}

#[test]
fn missing_workspace_for_a_workspace_rule() {
    let e = load_with("[file_policy]\nwrite_paths = [\"<workspace>/**\"]\n", None, None);
    expect(&e, ErrorKind::MissingWorkspace, &["agent.toml:2:16:", "no workspace", "--workspace"]);
    let e = load_with("[file_policy]\ndefault = \"deny\"\n", None, Some("relative/ws"));
    expect(&e, ErrorKind::MissingWorkspace, &["not absolute"]);
}

#[test]
fn floor_exceptions_only_in_the_operator_config() {
    let e = load("[file_policy]\nfloor_exceptions = [\"ssh\"]\n");
    expect(&e, ErrorKind::UnknownKey, &["agent.toml:2:1:", "only in the operator's config"]);
    let e = load_with(
        "[file_policy]\ndefault = \"deny\"\n",
        Some("[file_policy]\nfloor_exceptions = [\"sshh\"]\n"),
        None,
    );
    expect(
        &e,
        ErrorKind::BadValue,
        &["config.toml:2:21:", "unknown safety-floor entry \"sshh\"", "ssh, aws"],
    );
}

#[test]
fn policy_file_holds_only_file_policy() {
    let e = load("[file_policy]\ndefault = \"deny\"\n[audit]\nx = 1\n");
    expect(
        &e,
        ErrorKind::UnknownKey,
        &["agent.toml:3:2:", "(a policy file holds only [file_policy])"],
    );
}

#[test]
fn no_policy_at_all() {
    let e = load("");
    expect(&e, ErrorKind::NoPolicy, &["no [file_policy] rules"]);
}

#[test]
fn missing_file() {
    let options = LoadOptions {
        policy_files: vec!["/nonexistent/agent.toml".into()],
        ..LoadOptions::default()
    };
    let e = EffectivePolicy::load(&options).unwrap_err();
    expect(&e, ErrorKind::Io, &["cannot read /nonexistent/agent.toml"]);
}

#[test]
fn unknown_user() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.toml");
    std::fs::write(&file, "[file_policy]\ndefault = \"deny\"\n").unwrap();
    let options = LoadOptions {
        policy_files: vec![file],
        user: Some("no-such-user-fp".into()),
        ..LoadOptions::default()
    };
    let e = EffectivePolicy::load(&options).unwrap_err();
    expect(&e, ErrorKind::UnknownUser, &["no-such-user-fp"]);
}

/// Every input is bounded before it is worked on: a file that never ends (`/dev/zero`) after
/// 4 MiB, a file of more list entries than a session may have rules before any glob is built,
/// bytes that are not text at their position.
#[test]
fn unbounded_and_binary_inputs() {
    let options = LoadOptions {
        policy_files: vec!["/dev/zero".into()],
        user: Some("root".into()),
        ..LoadOptions::default()
    };
    let started = std::time::Instant::now();
    let e = EffectivePolicy::load(&options).unwrap_err();
    expect(&e, ErrorKind::Io, &["cannot read /dev/zero: larger than the limit of 4194304 bytes"]);
    let rules: String = (0..40_000).map(|i| format!("\"/x/{i}/*\",")).collect();
    let e = load(&format!("[file_policy]\ndefault = \"deny\"\ndeny_paths = [{rules}]\n"));
    expect(&e, ErrorKind::Limit, &["agent.toml:3:14:", "more than 32768 entries", "`deny_paths`"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", started.elapsed());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agent.toml");
    std::fs::write(&file, b"[file_policy]\ndefault = \"deny\"\nx = \"\xff\"\n").unwrap();
    let options = LoadOptions { policy_files: vec![file], ..options };
    let e = EffectivePolicy::load(&options).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Syntax);
    let shown = e.to_string();
    assert!(shown.contains("agent.toml:3:6: error: the file is not UTF-8 text"), "{shown}");
}

/// A rule the kernel's tables cannot decide exactly is refused where it was written, with a
/// decidable form that matches more, or the forms the kernel decides (issue 53 item 1).
#[test]
fn rules_the_kernel_cannot_decide_exactly() {
    let e = load("[file_policy]\ndefault = \"write\"\ndeny_paths = [\"/opt/*/cache/**\"]\n");
    expect(
        &e,
        ErrorKind::Undecidable,
        &[
            "agent.toml:3:15: error: rule \"/opt/*/cache/**\" is not decided exactly by the kernel",
            "refuse every create, rename and delete",
            "help: write \"/opt/**/cache/**\" instead (it matches more paths)",
        ],
    );
    let e = load("[file_policy]\ndefault = \"deny\"\nwrite_paths = [\"/tmp/claude-*/x*y\"]\n");
    expect(&e, ErrorKind::Undecidable, &["agent.toml:3:", "write \"/tmp/**\" instead"]);
    let e = load("[file_policy]\ndefault = \"write\"\nprompt_paths = [\"**/x*y\"]\n");
    expect(&e, ErrorKind::Undecidable, &["name the paths instead", "`dir/name*`"]);
    // What users write for a CLI's config files and temp files is decided.
    let ok = "[file_policy]\ndefault = \"deny\"\n\
              write_paths = [\"~/.claude.json.*\", \"/tmp/claude-*\", \"<workspace>/**/*.lock\",\n\
                             \"/tmp/claude-*/**\", \"~/.cache/*-tmp/**\", \"**/node-*/**\"]\n";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agent.toml");
    std::fs::write(&file, ok).unwrap();
    let options = LoadOptions {
        policy_files: vec![file],
        workspace: Some("/tmp/ws".into()),
        user: Some("root".into()),
        ..LoadOptions::default()
    };
    EffectivePolicy::load(&options).unwrap();
}
