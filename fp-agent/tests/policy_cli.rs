//! `fp policy check|explain|compile`: output, JSON fields and exit codes (0 ok, 1 policy error,
//! 2 usage error).
use std::path::{Path, PathBuf};
use std::process::Command;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn fp(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fp")).args(args).output().unwrap();
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.code().unwrap_or(-1), text(out.stdout), text(out.stderr))
}

fn example(name: &str) -> String {
    examples().join(name).display().to_string()
}

#[test]
fn check_accepts_every_example() {
    let config = example("config.toml");
    let files = ["coding-agent.toml", "reviewer.toml", "secrets-prompt.toml", "network-homes.toml"];
    let paths: Vec<String> = files.iter().map(|f| example(f)).collect();
    let mut args = vec!["policy", "check", "--config", &config, "--workspace", "/tmp/ws"];
    args.extend(paths.iter().map(String::as_str));
    let (code, out, err) = fp(&args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches(": ok").count(), 4, "{out}");
    assert!(out.contains("safety floor ssh"), "floors are listed:\n{out}");
    assert!(
        out.contains("safety floor entry \"vcs-config\" lifted by"),
        "exceptions are reported:\n{out}"
    );
}

#[test]
fn check_json() {
    let (code, out, err) =
        fp(&["policy", "check", "--json", "--workspace", "/tmp/ws", &example("reviewer.toml")]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "v2");
    assert_eq!(v["defaults"]["write"], "deny");
    assert!(v["rules"].as_array().unwrap().len() > 50);
    assert_eq!(v["hash"].as_str().unwrap().len(), 64);
}

/// `fp policy explain --json` of the coding-agent example: one JSON object per path.
fn explain_coding_agent(op: &str, paths: &[&str]) -> Vec<serde_json::Value> {
    let policy = example("coding-agent.toml");
    let mut args = vec!["policy", "explain", "--policy", &policy, "--workspace", "/tmp/ws"];
    args.extend(["--op", op, "--json"]);
    args.extend(paths);
    let (code, out, err) = fp(&args);
    assert_eq!(code, 0, "{err}");
    out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn explain_json_fields() {
    let lines = explain_coding_agent("write", &["/tmp/ws/secrets/db.txt", "/tmp/ws/a/../.env"]);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["path"], "/tmp/ws/secrets/db.txt");
    assert_eq!(lines[0]["op"], "write");
    assert_eq!(lines[0]["verdict"], "prompt");
    assert_eq!(lines[0]["rule"], "<workspace>/secrets/**");
    let source = lines[0]["source"].as_str().unwrap();
    assert!(source.ends_with("coding-agent.toml:8:17"), "{source}");
    assert_eq!(lines[0]["kernel"], "exact");
    assert_eq!(lines[1]["path"], "/tmp/ws/.env");
    assert_eq!(lines[1]["verdict"], "deny");
    assert_eq!(lines[1]["tier"], "safety floor env-files");
}

#[test]
fn explain_default_has_no_rule() {
    let v = &explain_coding_agent("read", &["/opt/x"])[0];
    assert_eq!(v["verdict"], "deny");
    assert!(v["rule"].is_null() && v["source"].is_null());
    assert_eq!(v["tier"], "default");
}

#[test]
fn compile_json_dumps_tables() {
    let (code, out, err) = fp(&[
        "policy",
        "compile",
        "--policy",
        &example("coding-agent.toml"),
        "--workspace",
        "/tmp/ws",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let prefixes = v["tables"]["prefixes"].as_array().unwrap();
    assert!(prefixes.iter().any(|p| p["path"] == "/tmp/ws/" && p["match"] == "subtree"));
    let names = v["tables"]["names"].as_array().unwrap();
    assert!(names.iter().any(|n| n["kind"] == "suffix" && n["name"] == ".pem"));
}

#[test]
fn policy_error_exits_1_with_location() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[file_policy]\ndefault = \"deny\"\nwrite_path = [\"/x\"]\n").unwrap();
    let (code, _, err) = fp(&["policy", "check", "--workspace", "/tmp/ws", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("bad.toml:3:1: error: unknown key `write_path`"), "{err}");
    assert!(err.contains("did you mean `write_paths`?"), "{err}");
}

/// Every file is checked, past a bad one: each error where its report would be, exit 1.
#[test]
fn check_reports_every_file_past_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[file_policy]\ndefault = \"dney\"\n").unwrap();
    let (good, bad) = (example("reviewer.toml"), bad.display().to_string());
    let (code, out, err) = fp(&["policy", "check", "--workspace", "/tmp/ws", &bad, &good]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("bad.toml:2:11: error"), "{err}");
    assert!(out.contains("reviewer.toml: ok"), "the file after the bad one is checked:\n{out}");
    let (code, out, _) = fp(&["policy", "check", "--json", "--workspace", "/tmp/ws", &bad, &good]);
    assert_eq!(code, 1);
    let lines: Vec<serde_json::Value> =
        out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines[0]["error"].as_str().unwrap().contains("bad.toml:2:11"), "{out}");
    assert_eq!(lines[1]["schema"], "v2", "{out}");
}

#[test]
fn usage_error_exits_2() {
    let (code, _, _) = fp(&["policy", "explain", "--policy", "x.toml", "/a"]);
    assert_eq!(code, 2, "missing --op");
    let (code, _, _) = fp(&["policy", "explain", "--policy", "x.toml", "--op", "exec", "/a"]);
    assert_eq!(code, 2, "bad --op");
}

/// `explain --op rename|exchange|link SRC DST`: the REFER rule's answer with its errno.
#[test]
fn explain_moves() {
    let dir = std::env::temp_dir().join(format!("fp-explain-moves-{}", std::process::id()));
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join("private/sub")).unwrap();
    std::fs::write(ws.join("c.secret"), "x").unwrap();
    let policy = dir.join("p.toml");
    std::fs::write(
        &policy,
        "[file_policy.defaults]\nread = \"deny\"\nwrite = \"deny\"\ndelete = \"deny\"\n\
         [file_policy.read]\nsilent = [\"<workspace>/**\"]\n\
         deny = [\"<workspace>/**/*.secret\", \"<workspace>/private/**\"]\n\
         [file_policy.write]\nsilent = [\"<workspace>/**\"]\n\
         [file_policy.delete]\nsilent = [\"<workspace>/**\"]\n",
    )
    .unwrap();
    let (p, w) = (policy.display().to_string(), ws.display().to_string());
    let at = |rel: &str| ws.join(rel).display().to_string();
    let explain = |op: &str, src: &str, dst: &str| {
        let args = ["policy", "explain", "--json", "--policy", &p, "--workspace", &w, "--op", op];
        let (code, out, err) = fp(&[&args[..], &[&at(src), &at(dst)]].concat());
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let refused = explain("rename", "c.secret", "c.txt");
    assert_eq!(
        (refused["verdict"].as_str(), refused["errno"].as_str()),
        (Some("deny"), Some("EXDEV"))
    );
    assert_eq!(refused["source_verdicts"]["read"], "deny");
    let same = explain("rename", "c.secret", "d.secret");
    assert_eq!(same["verdict"], "allow", "{same}");
    assert_eq!(explain("link", "c.secret", "l.txt")["errno"], "EXDEV");
    let out_of_tree = explain("rename", "private/sub", "sub");
    assert_eq!(
        (out_of_tree["errno"].as_str(), out_of_tree["directory"].as_bool()),
        (Some("EXDEV"), Some(true))
    );
    let (code, _, err) =
        fp(&["policy", "explain", "--policy", &p, "--op", "rename", &at("c.secret")]);
    assert_eq!(code, 2, "one path is a usage error: {err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Without `--workspace`, explain (like check, run and replay) takes the current directory.
#[test]
fn explain_defaults_the_workspace_to_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fp"))
        .args(["policy", "explain", "--policy", &example("coding-agent.toml")])
        .args(["--op", "write", "src/main.rs"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("write allow") && text.contains("<workspace>/**"), "{text}");
}

/// A write the policy allows to a file with several links is refused in a session's first
/// seconds, while its read-only trees (the example's `~/.rustup/**`) are listed for hardlinks:
/// explain says so.
#[test]
fn explain_names_the_wait_of_files_with_several_links() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("one"), "1").unwrap();
    std::fs::write(dir.path().join("a"), "a").unwrap();
    std::fs::hard_link(dir.path().join("a"), dir.path().join("b")).unwrap();
    let (policy, w) = (example("coding-agent.toml"), dir.path().display().to_string());
    let (a, one) = (format!("{w}/a"), format!("{w}/one"));
    let args = ["policy", "explain", "--policy", &policy, "--workspace", &w, "--op", "write"];
    let (code, out, err) = fp(&[&args[..], &[&a, &one]].concat());
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("it has 2 links").count(), 1, "{out}");
    let (_, out, _) = fp(&[&args[..], &["--json", &a, &one]].concat());
    let lines: Vec<serde_json::Value> =
        out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["refused_while_listing_hardlinks"]["links"], 2, "{out}");
    assert!(lines[1].get("refused_while_listing_hardlinks").is_none(), "{out}");
}

/// The globs users write for a CLI's atomic config writes and per-user temp files (`dir/name.*`,
/// `dir/*.lock`, `dir/prefix*`) are decided in the kernel: check does not warn, explain says
/// `exact`, and a `*` never reaches below the directory (issue 53 item 1).
#[test]
fn dotfile_globs_are_decided_in_the_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("p.toml");
    std::fs::write(
        &policy,
        "[file_policy]\ndefault = \"deny\"\nwrite_paths = [\"/h/.claude.json.*\", \"/h/*.lock\", \"/tmp/claude-*\"]\n",
    )
    .unwrap();
    let p = policy.display().to_string();
    let (code, out, err) = fp(&["policy", "check", "--workspace", "/tmp/ws", &p]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("not fully decided"), "{out}");
    let paths = ["/h/.claude.json.tmp.1", "/h/x.lock", "/tmp/claude-0", "/h/d/.claude.json.1"];
    let args = ["policy", "explain", "--policy", &p, "--workspace", "/tmp/ws", "--op", "write"];
    let (code, out, err) = fp(&[&args[..], &["--json"], &paths[..]].concat());
    assert_eq!(code, 0, "{err}");
    let lines: Vec<serde_json::Value> =
        out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let verdicts: Vec<String> =
        lines.iter().map(|l| format!("{} {}", l["verdict"], l["kernel"])).collect();
    let allow = r#""allow" "exact""#;
    assert_eq!(verdicts, [allow, allow, allow, r#""deny" "exact""#], "{out}");
}

/// What `fp policy explain --json` says of writing each path, layered as `args` say: the
/// verdict and the deciding rule's layer (`default`: no rule).
fn write_verdicts(args: &[&str], paths: &[&str]) -> Vec<(String, String)> {
    let explain = ["policy", "explain", "--workspace", "/w", "--user", "nobody", "--op", "write"];
    let (code, out, err) = fp(&[&explain[..], args, &["--json"], paths].concat());
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| {
            let layer = v["layer"].as_str().unwrap_or("default");
            (v["verdict"].as_str().unwrap().into(), layer.into())
        })
        .collect()
}

/// A profile is layered under the policy: the policy's rules decide where they match, the
/// profile where they do not, the default elsewhere; alone, it is the policy under default deny.
/// `check` shows the merged result (issue 53 item 2).
#[test]
fn profiles_layer_under_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("p.toml");
    std::fs::write(
        &policy,
        "[file_policy]\ndefault = \"deny\"\ndeny_paths = [\"~/.claude/projects/**\"]\n",
    )
    .unwrap();
    let p = policy.display().to_string();
    // nobody's home is /nonexistent.
    let paths = [
        "/nonexistent/.claude/projects/x.jsonl",
        "/nonexistent/.claude/todos/t.json",
        "/nonexistent/.claude.json.tmp.7.1",
        "/nonexistent/.claude/settings.json",
        "/w/.git/hooks/pre-commit.sample",
        "/w/.git/hooks/pre-commit",
        "/w/src/main.rs",
        "/etc/motd",
    ];
    let layered = write_verdicts(&["--policy", &p, "--profile", "claude-code"], &paths);
    let expected = [
        ("deny", "policy"),
        ("allow", "profile"),
        ("allow", "profile"),
        ("deny", "profile"),
        ("allow", "profile"),
        ("deny", "profile"),
        ("allow", "profile"),
        ("deny", "default"),
    ];
    let expected: Vec<(String, String)> =
        expected.iter().map(|(v, t)| (v.to_string(), t.to_string())).collect();
    assert_eq!(layered, expected);
    // The profile alone: the same but for the policy's one rule.
    let alone = write_verdicts(&["--profile", "claude-code"], &paths);
    assert_eq!(alone[0], ("allow".into(), "profile".into()));
    assert_eq!(alone[1..], expected[1..]);
    // Without the profile the policy's default decides.
    assert_eq!(
        write_verdicts(&["--policy", &p], &paths[1..2]),
        [("deny".into(), "default".into())]
    );
    let (code, out, err) = fp(&["policy", "check", "--profile", "codex", "--workspace", "/w"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("profile codex: ok"), "{out}");
    assert!(out.contains("<profile codex>:"), "the profile's rules are listed:\n{out}");
    let (code, _, err) = fp(&["policy", "check", "--profile", "claude", "--workspace", "/w"]);
    assert_eq!(code, 1);
    assert!(err.contains("the profiles are claude-code, codex, coding-agent, gemini-cli"), "{err}");
}
