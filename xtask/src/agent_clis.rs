//! The agent CLIs the kernel tests run under their profiles (tests/kernel/agents.rs), pinned and
//! installed from the npm registry into a cache beside the test kernels (`target/fp-vm/agents`):
//! setup installs what is missing, later runs use the cache and need no network.
use crate::{
    cmd, paths,
    step::{Report, apt_get_update, require_root},
};
use anyhow::{Context as _, Result};
use std::{path::PathBuf, process::Command};

/// One pinned CLI: its directory in the cache is `<name>-<version>`, an npm prefix.
struct AgentCli {
    name: &'static str,
    package: &'static str,
    version: &'static str,
}

const AGENT_CLIS: &[AgentCli] = &[
    AgentCli { name: "claude-code", package: "@anthropic-ai/claude-code", version: "2.1.332" },
    AgentCli { name: "codex", package: "@openai/codex", version: "0.171.0" },
    AgentCli { name: "gemini-cli", package: "@google/gemini-cli", version: "0.61.0" },
];

/// The file that says an install completed (an interrupted one is redone).
const STAMP: &str = "installed";

pub fn ensure_all(report: Report) -> Result<()> {
    npm(report)?;
    for cli in AGENT_CLIS {
        ensure(cli, report)?;
    }
    Ok(())
}

/// Claude Code's directory in the cache, installed first if missing (the bench's agent CLI).
pub fn claude_code(report: Report) -> Result<PathBuf> {
    npm(report)?;
    let cli = AGENT_CLIS.iter().find(|c| c.name == "claude-code").context("no claude-code pin")?;
    ensure(cli, report)?;
    dir(cli)
}

fn dir(cli: &AgentCli) -> Result<PathBuf> {
    Ok(paths::vm_dir()?.join("agents").join(format!("{}-{}", cli.name, cli.version)))
}

fn ensure(cli: &AgentCli, report: Report) -> Result<()> {
    let dir = dir(cli)?;
    let what = format!("{}@{} for the agent tests", cli.package, cli.version);
    if dir.join(STAMP).is_file() {
        report.ok(&format!("{what} in {}", dir.display()));
        return Ok(());
    }
    println!("setup: installing {what} from the npm registry into {}", dir.display());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Its install script puts the native binary for this platform in place.
    cmd::run(
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--foreground-scripts", "--prefix"])
            .arg(&dir)
            .arg(format!("{}@{}", cli.package, cli.version)),
    )?;
    std::fs::write(dir.join(STAMP), format!("{}@{}\n", cli.package, cli.version))?;
    Ok(())
}

/// npm, from Debian unless one is on PATH already (Node.js from another source brings its own).
fn npm(report: Report) -> Result<()> {
    if cmd::try_output(Command::new("npm").arg("--version")).is_ok_and(|o| o.status.success()) {
        report.ok("npm on PATH");
        return Ok(());
    }
    require_root("install npm")?;
    println!("setup: installing Node.js and npm (the agent CLIs' installer)");
    apt_get_update()?;
    cmd::run(
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends", "nodejs", "npm"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}
