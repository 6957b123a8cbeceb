//! The `fp` command line. Each subcommand lives in its own file next to this one.
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod approvals;
mod audit;
mod daemon;
mod explain_op;
mod kernel;
mod policy;
mod progress;
mod run;
mod session_report;
mod sessions;
mod status;

#[derive(Parser)]
#[command(name = "fp", version, about = "Per-agent file policies enforced in the kernel")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a command in a confined session.
    Run(run::Args),
    /// Check, explain and compile policies.
    #[command(subcommand)]
    Policy(policy::Command),
    /// What the running kernel offers fp (BPF LSM probe, BTF offsets).
    #[command(subcommand)]
    Kernel(kernel::Command),
    /// Keys, verification, replay and tailing of the audit log.
    #[command(subcommand)]
    Audit(audit::Command),
    /// The host agent: serves the control socket (docs/operations.md).
    Daemon(daemon::Args),
    /// List, end and reload the daemon's sessions.
    Sessions(sessions::Args),
    /// The daemon's health, kernel support, hooks, map usage and counters.
    Status(status::Args),
    /// Pending approvals of the prompt tier (`--watch` follows them).
    Approvals(approvals::ListArgs),
    /// Approve a pending approval; `--remember` keeps allowing what it covers.
    Approve(approvals::ApproveArgs),
    /// Deny a pending approval.
    Deny(approvals::DenyArgs),
}

pub fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal: the daemon's stderr is a log file or the journal.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    // A report its reader cuts short (`fp policy check | head`) ends quietly, as other tools'
    // do, rather than panicking on the closed pipe. Commands that talk to the daemon or host a
    // session keep SIGPIPE ignored: a peer that went away is an error they report.
    if matches!(cli.command, Command::Policy(_) | Command::Audit(_) | Command::Kernel(_)) {
        // SAFETY: restores the default disposition, at start, before any thread exists.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    match cli.command {
        Command::Run(args) => run::main(args),
        Command::Policy(cmd) => policy::main(cmd),
        Command::Audit(cmd) => audit::main(cmd),
        Command::Kernel(cmd) => kernel::main(cmd),
        Command::Daemon(args) => daemon::main(args),
        Command::Sessions(args) => sessions::main(args),
        Command::Status(args) => status::main(args),
        Command::Approvals(args) => approvals::list(args),
        Command::Approve(args) => approvals::approve(args),
        Command::Deny(args) => approvals::deny(args),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    /// clap's own consistency checks (unique names and groups, ...) over every subcommand: they
    /// otherwise fire only when that subcommand runs.
    #[test]
    fn the_command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
