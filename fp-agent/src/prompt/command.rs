//! `approval_command`: a configured program that decides approvals. It gets the approval as JSON
//! on stdin; exit 0 approves, 1 denies, anything else (or running past its timeout) leaves the
//! approval to the other surfaces. On approval it may print `{"remember": "dir", "for": "10m"}`.
use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::approvals::{Approval, Approvals, Decider, Decision, Remember, Surface};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Longer than this and the command is killed and decides nothing.
    pub timeout: Duration,
}

/// What the command decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandVerdict {
    Approve {
        remember: Option<Remember>,
        duration: Option<Duration>,
    },
    Deny,
    /// Not decided by the command, and why.
    Undecided(String),
}

/// The optional stdout of an approving command.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveOutput {
    remember: Option<Remember>,
    #[serde(rename = "for")]
    duration: Option<String>,
}

impl ApprovalCommand {
    /// What the store calls with each new approval: the command, run for it.
    pub(crate) fn runner(self) -> super::approvals::Opened {
        Arc::new(move |approvals, approval| self.spawn(Arc::clone(approvals), approval))
    }

    /// Runs the command for `approval` on its own thread and applies what it decides.
    fn spawn(&self, approvals: Arc<Approvals>, approval: Approval) {
        let command = self.clone();
        let id = approval.id;
        let spawned = std::thread::Builder::new().name("fp-approval-cmd".into()).spawn(move || {
            let decider =
                Decider { uid: nix::unistd::geteuid().as_raw(), surface: Surface::Command };
            let (decision, remember, duration) = match command.run(&approval) {
                CommandVerdict::Approve { remember, duration } => {
                    (Decision::Approve, remember, duration)
                }
                CommandVerdict::Deny => (Decision::Deny, None, None),
                CommandVerdict::Undecided(why) => {
                    tracing::warn!(
                        approval = approval.id,
                        "approval_command decided nothing: {why}"
                    );
                    return;
                }
            };
            if let Err(e) = approvals.decide(approval.id, decision, remember, duration, decider) {
                tracing::info!(approval = approval.id, "approval_command was late: {e}");
            }
        });
        if let Err(e) = spawned {
            tracing::warn!(approval = id, "cannot start approval_command: {e}");
        }
    }

    /// Runs the command for `approval` and waits for its verdict (at most `timeout`).
    pub fn run(&self, approval: &Approval) -> CommandVerdict {
        let undecided = |why: String| CommandVerdict::Undecided(why);
        let input = match serde_json::to_vec(approval) {
            Ok(v) => v,
            Err(e) => return undecided(format!("cannot encode the approval: {e}")),
        };
        let mut child = match Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => return undecided(format!("cannot run {}: {e}", self.program.display())),
        };
        // A command that does not read its stdin gets EPIPE here; its exit status still counts.
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(&input);
        }
        let mut stdout = child.stdout.take();
        let reader = std::thread::spawn(move || {
            let mut out = Vec::new();
            if let Some(s) = stdout.as_mut() {
                let _ = s.take(64 * 1024).read_to_end(&mut out);
            }
            out
        });
        let deadline = Instant::now() + self.timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return undecided(format!("timed out after {:?}", self.timeout));
                }
                Err(e) => return undecided(format!("cannot wait for it: {e}")),
            }
        };
        let out = reader.join().unwrap_or_default();
        match status.code() {
            Some(0) => match parse_approve_output(&out) {
                Ok((remember, duration)) => CommandVerdict::Approve { remember, duration },
                Err(why) => undecided(why),
            },
            Some(1) => CommandVerdict::Deny,
            _ => undecided(format!("exited with {status}")),
        }
    }
}

fn parse_approve_output(out: &[u8]) -> Result<(Option<Remember>, Option<Duration>), String> {
    if out.iter().all(u8::is_ascii_whitespace) {
        return Ok((None, None));
    }
    let parsed: ApproveOutput = serde_json::from_slice(out).map_err(|e| {
        format!("approved, but its output is not {{\"remember\": ..., \"for\": ...}}: {e}")
    })?;
    let duration = parsed
        .duration
        .map(|d| parse_duration(&d))
        .transpose()
        .map_err(|e| format!("approved, but its \"for\" is invalid: {e}"))?;
    Ok((parsed.remember, duration))
}

/// `10m`, `1h 30m`, `90s`: a grant's lifetime.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if d.is_zero() => Err(format!("\"{text}\" is zero: give a positive duration")),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("\"{text}\": {e} (expected e.g. 30s, 10m, 2h)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approve_output_and_durations() {
        assert_eq!(parse_approve_output(b"\n"), Ok((None, None)));
        assert_eq!(
            parse_approve_output(br#"{"remember": "dir", "for": "10m"}"#),
            Ok((Some(Remember::Dir), Some(Duration::from_secs(600))))
        );
        assert!(parse_approve_output(br#"{"remember": "forever"}"#).is_err());
        assert!(parse_approve_output(br#"{"for": "soon"}"#).is_err());
        assert!(parse_duration("0s").is_err());
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
    }
}
