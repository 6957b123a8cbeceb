//! Agents as they run: their tools under the shipped profiles, as a dedicated agent user
//! (docs/policy.md, "Profiles").
use fp_tests::model::{ScriptedModel, ToolCall, ToolResult};
use fp_tests::{AgentUser, TempTree, exclusive, fp};
use serde_json::json;

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

/// An agent CLI as the scenario below drives it: how it is started and the names of its tools.
struct Cli {
    profile: &'static str,
    /// The command line, run with the agent's `~/.local/bin` first on PATH.
    command: &'static [&'static str],
    /// The environment pointing it at the scripted model's URL (`{url}`, there and in `command`),
    /// with a fake key.
    env: &'static [(&'static str, &'static str)],
    /// Its tool calls: run a shell command; write a file; read one; replace text in one.
    shell: fn(String) -> ToolCall,
    write: fn(&str, &str) -> ToolCall,
    read: fn(&str) -> ToolCall,
    edit: fn(&str, &str, &str) -> ToolCall,
    /// The process (or thread) names fp reports for refusals of its read and write tools; None
    /// where the CLI refuses paths outside its workspace itself, so that fp never sees them.
    reader: Option<&'static str>,
    writer: Option<&'static str>,
}

/// An agent CLI, installed in the agent user's home by `install` (given the workspace), runs under its profile alone
/// as that user, driven by a scripted model: its shell and file tools work in the workspace (git
/// init and commit, a Python test, a write and an edit), its state persists (`state`, in the
/// home), and its attempts at the agent's secrets through its shell, its own read tool and a
/// subprocess, at the environment of the agent user's process outside the session and at the
/// workspace's hooks are refused, reported and never reach the model (issue 53 item 3).
fn cli_works_under_its_profile_and_keeps_secrets_out(
    cli: &Cli,
    model: fn(Vec<ToolCall>) -> ScriptedModel,
    install: impl FnOnce(&mut AgentUser, &std::path::Path),
    state: &[&str],
) {
    let _g = exclusive();
    fp_tests::loopback_up();
    let mut agent = AgentUser::new();
    let key = agent.file(".ssh/id_ed25519", "PRIVATE-KEY-MATERIAL\n");
    agent.file(".aws/credentials", "aws_secret_access_key = AWS-SECRET-MATERIAL\n");
    let t = TempTree::new(cli.profile);
    let ws = t.join("ws");
    std::fs::create_dir(&ws).unwrap();
    agent.own(&ws);
    install(&mut agent, &ws);
    // A process of the same user outside the session, with a secret in its environment.
    let mut outsider = std::process::Command::new("setpriv")
        .args(["--reuid=6000", "--regid=6000", "--clear-groups", "--"])
        .args(["env", "TOKEN=ENV-SECRET-MATERIAL", "sleep", "900"])
        .spawn()
        .unwrap();
    let (w, k) = (ws.display().to_string(), key.display().to_string());
    let notes = format!("{w}/notes.md");
    let model = model(vec![
        (cli.shell)(format!(
            "cd {w} && git init -q && printf 'def add(a, b):\\n    return a + b\\n' > calc.py && \
             printf 'from calc import add\\nassert add(2, 3) == 5\\nprint(\"TESTS-PASSED\")\\n' > test_calc.py && \
             python3 test_calc.py && git add . && \
             git -c user.email=agent@example.com -c user.name=agent commit -qm init && echo COMMITTED"
        )),
        (cli.write)(&notes, "first\n"),
        (cli.read)(&notes),
        (cli.edit)(&notes, "first", "edited"),
        (cli.read)(&k),
        (cli.shell)("cat ~/.ssh/id_ed25519 ~/.aws/credentials".to_owned()),
        (cli.shell)(format!("python3 -c 'print(open(\"{k}\").read())'")),
        (cli.shell)(format!("head -c 64 /proc/{}/environ", outsider.id())),
        (cli.write)(&format!("{w}/.git/hooks/pre-commit"), "#!/bin/sh\n"),
    ]);
    let mut run = fp();
    run.args(["run", "--profile", cli.profile, "--workspace"])
        .arg(&ws)
        .args(["--user", AgentUser::NAME, "--", "timeout", "600"])
        .args(cli.command.iter().map(|a| a.replace("{url}", &model.url)))
        .env("PATH", format!("{}/.local/bin:/usr/local/bin:/usr/bin:/bin", agent.home.display()));
    for (name, value) in cli.env {
        run.env(name, value.replace("{url}", &model.url));
    }
    let out = run.output().unwrap();
    let _ = outsider.kill();
    let _ = outsider.wait();
    fp_tests::assert_nothing_left_behind();
    let (got, err) = (fp_tests::stdout(&out), fp_tests::stderr(&out));
    let results = model.tool_results();
    let shown: Vec<String> =
        results.iter().enumerate().map(|(i, r)| format!("#{i} {:?}", r)).collect();
    let context = format!("stdout:\n{got}\nstderr:\n{err}\ntool results:\n{}", shown.join("\n"));
    assert!(out.status.success(), "{context}");
    assert_eq!(results.len(), 9, "every tool call came back: {context}");
    assert!(got.contains("done"), "{context}");
    // The workspace: git, a test, a write and an edit.
    assert!(results[0].text.contains("TESTS-PASSED"), "{context}");
    assert!(results[0].text.contains("COMMITTED"), "{context}");
    assert_eq!(std::fs::read_to_string(ws.join("notes.md")).unwrap(), "edited\n", "{context}");
    // Its state persists.
    for file in state {
        assert!(agent.home.join(file).exists(), "~/{file}: {context}");
    }
    // The secrets: refused through each route, and never sent to the model.
    // A refusal, as the tool reports it: an error, or the failing command's output.
    let refused = |r: &ToolResult| {
        let said = ["EACCES", "Permission denied", "PermissionError", "Failed to write"];
        r.is_error || said.iter().any(|s| r.text.contains(s))
    };
    for i in [4, 5, 6, 7, 8] {
        assert!(refused(&results[i]), "#{i}: {context}");
    }
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    let sent = model.requests().iter().map(|r| r.to_string()).collect::<String>();
    for secret in ["PRIVATE-KEY-MATERIAL", "AWS-SECRET-MATERIAL", "ENV-SECRET-MATERIAL"] {
        assert!(!sent.contains(secret), "{secret} reached the model");
    }
    // And reported, each refusal by the process that tried.
    let by = |name: Option<&str>| name.map(|n| format!("by {n}"));
    let refusals = [
        ("id_ed25519", by(cli.reader)),
        ("id_ed25519", by(Some("cat"))),
        ("credentials", by(Some("cat"))),
        ("id_ed25519", by(Some("python3"))),
        ("environ", by(Some("head"))),
        ("pre-commit", by(cli.writer)),
    ];
    for (what, by) in refusals.iter().filter_map(|(what, by)| Some((what, by.as_deref()?))) {
        let reported = |l: &&str| l.starts_with("fp: denied") && l.contains(what) && l.contains(by);
        assert!(err.lines().any(|l| reported(&l)), "no denial of {what} {by}: {context}");
    }
    eprintln!("{context}");
}

/// The pinned version of the cached CLI `dir` (its `installed` stamp: `package@version`).
fn version_of(dir: &std::path::Path) -> String {
    let stamp = std::fs::read_to_string(dir.join("installed")).unwrap();
    stamp.trim().rsplit('@').next().unwrap().to_owned()
}

/// Claude Code, installed as its vendor's installer does (`~/.local/bin/claude` ->
/// `~/.local/share/claude/versions/<version>`).
#[test]
fn claude_code_works_under_its_profile_and_keeps_secrets_out() {
    let cli = Cli {
        profile: "claude-code",
        command: &["claude", "-p", "build the calculator", "--dangerously-skip-permissions"],
        env: &[
            ("ANTHROPIC_BASE_URL", "{url}"),
            ("ANTHROPIC_API_KEY", "sk-scripted"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
        ],
        shell: |command| ToolCall { name: "Bash", input: json!({ "command": command }) },
        write: |path, content| ToolCall {
            name: "Write",
            input: json!({"file_path": path, "content": content}),
        },
        read: |path| ToolCall { name: "Read", input: json!({ "file_path": path }) },
        edit: |path, old, new| ToolCall {
            name: "Edit",
            input: json!({"file_path": path, "old_string": old, "new_string": new}),
        },
        // Its file tools run on its runtime's worker threads.
        reader: Some("Bun Pool"),
        writer: Some("Bun Pool"),
    };
    let install = |agent: &mut AgentUser, _: &std::path::Path| {
        let cached = fp_tests::agent_cli("claude-code");
        let binary = cached.join("node_modules/@anthropic-ai/claude-code/bin/claude.exe");
        let installed = format!(".local/share/claude/versions/{}", version_of(&cached));
        agent.install(&binary, &installed);
        agent.symlink(".local/bin/claude", &agent.home.join(&installed));
    };
    let state = [".claude/projects", ".claude.json"];
    cli_works_under_its_profile_and_keeps_secrets_out(
        &cli,
        ScriptedModel::anthropic,
        install,
        &state,
    );
}

/// Gemini CLI, installed by npm under the agent's own prefix (`npm install -g --prefix
/// ~/.local`), its settings choosing the API key and trusting the workspace written beforehand
/// (the profile keeps them read-only).
#[test]
fn gemini_cli_works_under_its_profile_and_keeps_secrets_out() {
    let cli = Cli {
        profile: "gemini-cli",
        command: &["gemini", "-p", "build the calculator", "--yolo"],
        env: &[("GOOGLE_GEMINI_BASE_URL", "{url}"), ("GEMINI_API_KEY", "scripted")],
        shell: |command| ToolCall {
            name: "run_shell_command",
            input: json!({ "command": command }),
        },
        write: |path, content| ToolCall {
            name: "write_file",
            input: json!({"file_path": path, "content": content}),
        },
        read: |path| ToolCall { name: "read_file", input: json!({ "file_path": path }) },
        edit: |path, old, new| ToolCall {
            name: "replace",
            input: json!({"file_path": path, "old_string": old, "new_string": new,
                          "instruction": "replace the text"}),
        },
        // Its file tools refuse paths outside the workspace, and `.git`, themselves.
        reader: None,
        writer: None,
    };
    let install = |agent: &mut AgentUser, ws: &std::path::Path| {
        let cached = fp_tests::agent_cli("gemini-cli");
        agent.install(&cached.join("node_modules"), ".local/lib/node_modules");
        let script = "../lib/node_modules/@google/gemini-cli/bundle/gemini.js";
        agent.symlink(".local/bin/gemini", script.as_ref());
        let settings = r#"{"security": {"auth": {"selectedType": "gemini-api-key"}}}"#;
        agent.file(".gemini/settings.json", settings);
        let trusted = json!({ ws.display().to_string(): "TRUST_FOLDER" });
        agent.file(".gemini/trustedFolders.json", &trusted.to_string());
    };
    let state = [".gemini/projects.json", ".gemini/tmp"];
    cli_works_under_its_profile_and_keeps_secrets_out(&cli, ScriptedModel::gemini, install, &state);
}

/// The Codex CLI, installed by npm under the agent's own prefix, pointed at the scripted model
/// as a model provider of its own. Its one tool is a shell; it edits files with `apply_patch`,
/// which it runs itself.
#[test]
fn codex_works_under_its_profile_and_keeps_secrets_out() {
    fn exec(cmd: String) -> ToolCall {
        ToolCall { name: "exec_command", input: json!({ "cmd": cmd }) }
    }
    let cli = Cli {
        profile: "codex",
        command: &[
            "codex",
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-m",
            "gpt-5",
            "-c",
            "model_provider=\"scripted\"",
            "-c",
            "model_providers.scripted={name=\"scripted\", base_url=\"{url}/v1\", \
             env_key=\"OPENAI_API_KEY\", wire_api=\"responses\"}",
            "build the calculator",
        ],
        env: &[("OPENAI_API_KEY", "sk-scripted")],
        shell: exec,
        write: |path, content| {
            let lines: String = content.lines().map(|l| format!("+{l}\n")).collect();
            let patch = format!("*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch");
            exec(format!("apply_patch <<'EOF'\n{patch}\nEOF"))
        },
        read: |path| exec(format!("cat {path}")),
        edit: |path, old, new| {
            let hunk = format!("@@\n-{old}\n+{new}\n");
            let patch = format!("*** Begin Patch\n*** Update File: {path}\n{hunk}*** End Patch");
            exec(format!("apply_patch <<'EOF'\n{patch}\nEOF"))
        },
        // It applies patches on its runtime's worker threads.
        reader: Some("cat"),
        writer: Some("tokio-rt-worker"),
    };
    let install = |agent: &mut AgentUser, _: &std::path::Path| {
        let cached = fp_tests::agent_cli("codex");
        agent.install(&cached.join("node_modules"), ".local/lib/node_modules");
        agent
            .symlink(".local/bin/codex", "../lib/node_modules/@openai/codex/bin/codex.js".as_ref());
    };
    let state = [".codex/sessions", ".codex/installation_id"];
    cli_works_under_its_profile_and_keeps_secrets_out(
        &cli,
        ScriptedModel::responses,
        install,
        &state,
    );
}

/// Claude Code installed by npm under the agent's own prefix (`npm install -g --prefix ~/.local`,
/// npm's advice for a global install without root) starts under its profile (issue 53 item 2:
/// both install layouts).
#[test]
fn claude_code_starts_from_an_npm_install() {
    let _g = exclusive();
    let mut agent = AgentUser::new();
    agent.install_claude_code(&fp_tests::agent_cli("claude-code"));
    let t = TempTree::new("claude-npm");
    let out = fp()
        .args(["run", "--profile", "claude-code", "--workspace"])
        .arg(&t.0)
        .args(["--user", AgentUser::NAME, "--", "timeout", "300", "claude", "--version"])
        .env("PATH", format!("{}/.local/bin:/usr/bin:/bin", agent.home.display()))
        .output()
        .unwrap();
    let (got, err) = fp_tests::assert_reported(&out, &["(Claude Code)"]);
    assert!(out.status.success(), "{got}\n{err}");
}
