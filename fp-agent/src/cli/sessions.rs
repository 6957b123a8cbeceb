//! `fp sessions`: list, end and reload the daemon's sessions.
//!
//! Exit codes: 0 ok, 1 the daemon said no, 3 no daemon running, 125 fp error.
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;

use crate::daemon::api::{PolicySource, Reload, SessionSummary};
use crate::daemon::{Client, ClientError};
use crate::exit;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    socket: Socket,
    /// Report as JSON.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(clap::Subcommand)]
enum Command {
    /// End a session: its processes are killed, its kernel entries and cgroup removed.
    End {
        /// The session's id, as `fp sessions` lists it.
        id: String,
    },
    /// Swap a session's policy atomically.
    Reload {
        /// The session's id, as `fp sessions` lists it.
        id: String,
        /// The new per-agent policy file.
        #[arg(long, value_name = "FILE")]
        policy: PathBuf,
        /// The operator config layered under it [default: the daemon's].
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// A shipped profile layered under the policy's rules (docs/policy.md, "Profiles").
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
    },
}

/// Where the daemon listens.
#[derive(clap::Args)]
pub struct Socket {
    /// The daemon's control socket.
    #[arg(long, global = true, value_name = "PATH", default_value = crate::config::DEFAULT_SOCKET)]
    socket: PathBuf,
}

impl Socket {
    /// Connects; every call is bounded ([`crate::daemon::client::CALL_TIMEOUT`]).
    pub fn connect(&self) -> Result<Client, ClientError> {
        Client::connect(&self.socket)
    }
}

/// Prints what a command produced, or its error, and returns the exit code.
pub fn report<T: Serialize>(
    result: Result<T, ClientError>,
    json: bool,
    text: impl FnOnce(&T) -> String,
) -> ExitCode {
    match result {
        Ok(value) if json => match serde_json::to_string_pretty(&value) {
            Ok(out) => {
                println!("{out}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("fp: error: {e}");
                ExitCode::from(exit::FP_ERROR)
            }
        },
        Ok(value) => {
            print!("{}", text(&value));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fp: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

pub fn main(args: Args) -> ExitCode {
    let json = args.json;
    let client = args.socket.connect();
    match args.command {
        None => report(client.and_then(|mut c| c.list()), json, |s| table(s)),
        Some(Command::End { id }) => {
            let ended = client.and_then(|mut c| c.end(&id)).map(|()| serde_json::json!({"id": id}));
            report(ended, json, |_| format!("session {id} ended\n"))
        }
        Some(Command::Reload { id, policy, config, profile }) => {
            let reloaded = reload_request(id, &policy, config.as_deref(), profile.as_deref())
                .and_then(|req| client.and_then(|mut c| c.reload(req)));
            report(reloaded, json, |r| {
                format!(
                    "session {}: policy {} -> {}\n",
                    r.id, r.previous_policy_hash, r.policy_hash
                )
            })
        }
    }
}

fn reload_request(
    id: String,
    policy: &Path,
    config: Option<&Path>,
    profile: Option<&str>,
) -> Result<Reload, ClientError> {
    Ok(Reload { id, source: PolicySource::for_caller(Some(policy), config, profile)? })
}

fn table(sessions: &[SessionSummary]) -> String {
    if sessions.is_empty() {
        return "no sessions\n".to_owned();
    }
    let header = ["ID", "AGENT", "MODE", "PIDS", "DENIALS", "BOUNDARY", "STARTED", "POLICY"]
        .map(String::from);
    let rows: Vec<[String; 8]> = sessions
        .iter()
        .map(|s| {
            [
                s.id.clone(),
                s.agent.clone(),
                s.mode.as_str().to_owned(),
                s.pids.to_string(),
                s.denials.to_string(),
                s.boundary.to_string(),
                s.started_at.clone(),
                s.policy_hash.chars().take(19).collect(),
            ]
        })
        .collect();
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> =
            row.iter().zip(widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::api::Mode;

    #[test]
    fn sessions_print_as_an_aligned_table() {
        assert_eq!(table(&[]), "no sessions\n");
        let session = SessionSummary {
            id: "s12".into(),
            agent: "claude".into(),
            cgroup_id: 9,
            pids: 3,
            mode: Mode::Audit,
            denials: 12,
            boundary: 2,
            dropped: 0,
            started_at: "2026-11-21T14:00:00Z".into(),
            policy_hash: "sha256:0123456789abcdef".into(),
        };
        assert_eq!(
            table(&[session]),
            "ID   AGENT   MODE   PIDS  DENIALS  BOUNDARY  STARTED               POLICY\n\
             s12  claude  audit  3     12       2         2026-11-21T14:00:00Z  sha256:0123456789ab\n"
        );
    }
}
