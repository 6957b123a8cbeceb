//! Agents as they run: their tools under the shipped profiles, as a dedicated agent user
//! (docs/policy.md, "Profiles").
use fp_tests::{AgentUser, TempTree, exclusive, fp};

/// The `coding-agent` profile alone is a usable policy: git (`git init` copies its sample
/// hooks), `bash -l`, python, node, npm and cargo work in the workspace, and the agent's secrets,
/// the workspace's git hooks and the rest of the home stay out of reach (issue 53 item 2).
#[test]
fn the_coding_agent_profile_lets_the_tools_work_and_keeps_secrets_out() {
    let _g = exclusive();
    let mut agent = AgentUser::new();
    // Its Rust toolchain, installed in its home.
    agent.install("/root/.rustup".as_ref(), ".rustup");
    agent.install("/root/.cargo/bin".as_ref(), ".cargo/bin");
    agent.file(".profile", ". \"$HOME/.bashrc\"\n");
    agent.file(".bashrc", "export FROM_BASHRC=yes\n");
    agent.file(".ssh/id_ed25519", "private key\n");
    agent.file(".cargo/credentials.toml", "[registry]\ntoken = \"secret\"\n");
    agent.file("notes.txt", "the agent's other files\n");
    let t = TempTree::new("agents");
    let ws = t.join("ws");
    std::fs::create_dir(&ws).unwrap();
    agent.own(&ws);
    // Each tool in its own `set -e` subshell, reporting NAME=ok only if every step worked.
    let works = r#"
(set -e; cd "$WS"; git init -q; ls .git/hooks | grep -q '\.sample$'
 git config user.email agent@example.com; git config user.name agent
 echo hello > a.txt; git add a.txt; git commit -qm init; git log --oneline | grep -q init) && echo "git=ok"
bash -lc 'echo "bash-l=$FROM_BASHRC"'
(set -e; cd "$WS"; python3 -c 'import json, tempfile; tempfile.mkstemp(); print("python=" + json.dumps("ok"))')
(set -e; cd "$WS"; node -e 'require("fs").writeFileSync("n.txt", "ok"); console.log("node=" + require("fs").readFileSync("n.txt"))')
(set -e; cd "$WS"; mkdir -p dep app; cd dep; npm init -y >/dev/null; cd ../app; npm init -y >/dev/null
 npm install --offline --no-audit --no-fund ../dep >/dev/null; npm pkg set scripts.test='node -e 0'; npm test --silent) && echo "npm=ok"
(set -e; cd "$WS"; cargo new -q --vcs none tiny; cd tiny; cargo build -q --offline; ./target/debug/tiny) && echo "cargo=ok"
"#;
    let fails = r#"
cat "$HOME/.ssh/id_ed25519" >/dev/null 2>&1 || echo "ssh=denied"
cat "$HOME/.cargo/credentials.toml" >/dev/null 2>&1 || echo "cargo-token=denied"
cat "$HOME/notes.txt" >/dev/null 2>&1 || echo "home=denied"
echo x >> "$HOME/.bashrc" 2>/dev/null || echo "bashrc=denied"
echo x > "$WS/.git/hooks/pre-commit" 2>/dev/null || echo "hook=denied"
mv "$WS/.git/hooks/pre-commit.sample" "$WS/.git/hooks/pre-commit" 2>/dev/null || echo "hook-rename=denied"
"#;
    let out = fp()
        .args(["run", "--profile", "coding-agent", "--workspace"])
        .arg(&ws)
        .args(["--user", AgentUser::NAME, "--", "sh", "-c", &format!("{works}{fails}")])
        .env("WS", &ws)
        .env("PATH", format!("{}/.cargo/bin:/usr/local/bin:/usr/bin:/bin", agent.home.display()))
        .env_remove("RUSTUP_HOME")
        .env_remove("CARGO_HOME")
        .env_remove("TMPDIR")
        .output()
        .unwrap();
    let (got, err) = fp_tests::assert_reported(
        &out,
        &[
            "git=ok",
            "bash-l=yes",
            "python=\"ok\"",
            "node=ok",
            "npm=ok",
            "Hello, world!",
            "cargo=ok",
            "ssh=denied",
            "cargo-token=denied",
            "home=denied",
            "bashrc=denied",
            "hook=denied",
            "hook-rename=denied",
        ],
    );
    assert!(out.status.success(), "{got}\n{err}");
    // The tools were refused nothing else: every denial is one of the attempts above.
    let attempts = ["/.ssh/", "/credentials.toml ", "/notes.txt ", "/.bashrc ", "/pre-commit "];
    let others: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("fp: denied") && !attempts.iter().any(|a| l.contains(a)))
        .collect();
    assert!(others.is_empty(), "denied besides the attempts:\n{}", others.join("\n"));
}
