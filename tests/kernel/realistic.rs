//! Real programs under a realistic policy: default deny, the workspace writable, the runtime base
//! and the safety floor. The policy is usable (git, python3, cargo, make and shell pipelines work)
//! and still safe (secrets, writes outside the workspace and deletes of protected files fail).
use fp_tests::{TempTree, exclusive, fp};

/// The agent's policy: schema v1, as an operator would write it for a coding agent.
const POLICY: &str = r#"[file_policy]
default = "deny"
write_paths = ["<workspace>/**"]
read_paths = ["<workspace>/protected/**", "~/.cargo/**", "~/.rustup/**"]
"#;

/// The operator's config: the toolchain lives in root's home here, so that floor entry is lifted
/// (the ssh, key-file and other floor entries stay).
const CONFIG: &str = r#"[file_policy]
floor_exceptions = ["root-home"]
"#;

#[test]
fn real_programs_work_and_secrets_stay_out_of_reach() {
    let _g = exclusive();
    let t = TempTree::new("realistic");
    let ws = t.join("ws");
    t.file("ws/protected/keep.txt", "keep\n");
    t.file("ws/.ssh/id_ed25519", "private key\n");
    t.file("ws/tmp/.keep", "");
    let policy = t.file("policy.toml", POLICY);
    let config = t.file("config.toml", CONFIG);
    let outside = t.join("outside.txt");
    // Each program in its own `set -e` subshell, reporting NAME=ok only if every step worked.
    let works = r#"
(set -e; cd "$WS"; git init -q repo; cd repo
 git config user.email agent@example.com; git config user.name agent
 echo hello > a.txt; git add a.txt; git commit -qm init; git status --short) && echo "git=ok"
(set -e; cd "$WS"; python3 -c 'import json, subprocess, tempfile, pathlib; print("python=" + json.dumps("ok"))')
(set -e; cd "$WS"; printf 'all:\n\techo made > made.txt\n' > Makefile; make -s; grep -q made made.txt) && echo "make=ok"
(set -e; [ "$(printf 'b\na\nb\n' | sort | uniq | wc -l)" = 2 ]) && echo "pipeline=ok"
(set -e; cd "$WS"; cargo new -q --vcs none tiny; cd tiny; cargo build -q --offline; ./target/debug/tiny) && echo "cargo=ok"
"#;
    let fails = r#"
cat "$WS/.ssh/id_ed25519" >/dev/null 2>&1 || echo "ssh=denied"
echo x > "$OUTSIDE" 2>/dev/null || echo "outside=denied"
rm -f "$WS/protected/keep.txt" 2>/dev/null || echo "delete=denied"
cat "$WS/protected/keep.txt" >/dev/null && echo "protected-read=ok"
"#;
    let out = fp()
        .args(["run", "--policy"])
        .arg(&policy)
        .arg("--config")
        .arg(&config)
        .arg("--workspace")
        .arg(&ws)
        .args(["--user", "root", "--"])
        .args(["sh", "-c", &format!("{works}{fails}")])
        .env("WS", &ws)
        .env("OUTSIDE", &outside)
        .env("TMPDIR", ws.join("tmp"))
        .env("CARGO_HOME", ws.join("cargo-home"))
        .env("RUSTUP_HOME", "/root/.rustup")
        .env("PATH", "/root/.cargo/bin:/usr/local/bin:/usr/bin:/bin")
        .output()
        .unwrap();
    let (got, err) = fp_tests::assert_reported(
        &out,
        &[
            "git=ok",
            "python=\"ok\"",
            "make=ok",
            "pipeline=ok",
            "Hello, world!",
            "cargo=ok",
            "ssh=denied",
            "outside=denied",
            "delete=denied",
            "protected-read=ok",
        ],
    );
    assert!(out.status.success(), "{got}\n{err}");
    assert!(!outside.exists(), "nothing was written outside the workspace");
    assert_eq!(std::fs::read_to_string(t.join("ws/protected/keep.txt")).unwrap(), "keep\n");
    // Every denial is reported with its rule; print them so a too-strict default shows up.
    eprintln!(
        "denials reported:\n{}",
        err.lines().filter(|l| l.starts_with("fp: denied")).collect::<Vec<_>>().join("\n")
    );
}
