//! `fp approvals`, `fp approve ID`, `fp deny ID`: the prompt tier's pending approvals, through
//! the daemon's control socket (docs/prompt.md). Exit: 0 done, 1 refused (unknown id, already
//! decided, not allowed), 3 no daemon, 125 fp error.
use std::io::Write as _;
use std::process::ExitCode;

use serde_json::json;

use crate::daemon::ClientError;
use crate::daemon::api::{DecideApproval, ErrorCode, Reply};
use crate::prompt::{
    Approval, ApprovalEvent, ApprovalId, Decision, PromptOutcome, Remember, Surface, parse_duration,
};

use crate::exit::FP_ERROR;

/// Where the daemon is, and whether to report JSON.
#[derive(clap::Args)]
pub struct Connection {
    #[command(flatten)]
    socket: super::sessions::Socket,
    /// Report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct ListArgs {
    /// Keep running and print approvals as they open and get decided.
    #[arg(long)]
    watch: bool,
    #[command(flatten)]
    socket: Connection,
}

#[derive(clap::Args)]
pub struct ApproveArgs {
    /// The approval's id, as `fp approvals` lists it.
    id: ApprovalId,
    /// Also allow later prompts of the session: all of them, the path's directory (and below),
    /// or the path.
    #[arg(long, value_enum)]
    remember: Option<Remember>,
    /// How long the remembered grant lasts (30s, 10m, 2h) [default: until the session ends].
    #[arg(long = "for", value_name = "DURATION", requires = "remember", value_parser = parse_duration)]
    duration: Option<std::time::Duration>,
    #[command(flatten)]
    socket: Connection,
}

#[derive(clap::Args)]
pub struct DenyArgs {
    /// The approval's id, as `fp approvals` lists it.
    id: ApprovalId,
    #[command(flatten)]
    socket: Connection,
}

/// Prints why a command failed. The daemon refusing the request itself is a refusal (1); the
/// daemon failing (`unavailable`, `internal`, ...) is fp's error.
fn exit(result: Result<(), ClientError>) -> ExitCode {
    let e = match result {
        Ok(()) => return ExitCode::SUCCESS,
        Err(e) => e,
    };
    let code = match &e {
        ClientError::Refused(error) => {
            eprintln!("fp: {}", error.message);
            let refused = [
                ErrorCode::NotFound,
                ErrorCode::AlreadyDecided,
                ErrorCode::PermissionDenied,
                ErrorCode::BadRequest,
            ];
            if refused.contains(&error.code) { e.exit_code() } else { FP_ERROR }
        }
        ClientError::NoDaemon { socket, source } => {
            eprintln!("fp: no daemon: {}: {source}", socket.display());
            e.exit_code()
        }
        _ => {
            eprintln!("fp: {e}");
            e.exit_code()
        }
    };
    ExitCode::from(code)
}

pub fn list(args: ListArgs) -> ExitCode {
    exit(list_approvals(&args))
}

pub fn approve(args: ApproveArgs) -> ExitCode {
    let decide = DecideApproval {
        id: args.id,
        decision: Decision::Approve,
        remember: args.remember,
        duration: args.duration.map(|d| humantime::format_duration(d).to_string()),
        surface: Some(Surface::Cli),
    };
    exit(decide_approval(decide, &args.socket))
}

pub fn deny(args: DenyArgs) -> ExitCode {
    let decide = DecideApproval {
        id: args.id,
        decision: Decision::Deny,
        remember: None,
        duration: None,
        surface: Some(Surface::Cli),
    };
    exit(decide_approval(decide, &args.socket))
}

fn list_approvals(args: &ListArgs) -> Result<(), ClientError> {
    let socket = &args.socket;
    // Subscribed before listing: an approval opened in between is streamed, not lost.
    let watch = match args.watch {
        true => Some(socket.socket.connect()?.watch_approvals()?),
        false => None,
    };
    let approvals = socket.socket.connect()?.list_approvals()?;
    if socket.json && !args.watch {
        println!("{}", serde_json::to_string_pretty(&approvals).map_err(encoding)?);
    } else if socket.json {
        for approval in approvals {
            println!("{}", json!({"kind": "pending", "approval": approval}));
        }
    } else if approvals.is_empty() && !args.watch {
        println!("no pending approvals");
    } else {
        for approval in &approvals {
            println!("{}", describe_approval(approval));
        }
    }
    for reply in watch.into_iter().flatten() {
        match reply? {
            Reply::ApprovalEvent { event } if socket.json => {
                println!("{}", serde_json::to_string(&event).map_err(encoding)?);
            }
            Reply::ApprovalEvent { event: ApprovalEvent::Opened { approval } } => {
                println!("{}", describe_approval(&approval));
            }
            Reply::ApprovalEvent { event: ApprovalEvent::Decided { outcome } } => {
                println!("{}", describe_outcome(&outcome));
            }
            Reply::Missed { count } => {
                eprintln!("fp: missed {count} approval events (see the audit log)");
            }
            other => return Err(ClientError::Protocol(format!("{other:?}"))),
        }
        let _ = std::io::stdout().flush();
    }
    match args.watch {
        true => Err(ClientError::Protocol("the daemon closed the connection".into())),
        false => Ok(()),
    }
}

fn decide_approval(decide: DecideApproval, socket: &Connection) -> Result<(), ClientError> {
    let outcome = socket.socket.connect()?.decide_approval(decide)?;
    if socket.json {
        println!("{}", serde_json::to_string_pretty(&outcome).map_err(encoding)?);
    } else {
        println!("{}", describe_outcome(&outcome));
    }
    Ok(())
}

fn encoding(e: serde_json::Error) -> ClientError {
    ClientError::Io(e.into())
}

fn describe_approval(approval: &Approval) -> String {
    let a = &approval.open;
    let rule = a.rule.as_deref().unwrap_or("default");
    format!(
        "#{} {} {} ({} pid {} {}): {} — rule {rule}, {} open(s), waiting {}s",
        approval.id,
        crate::prompt::serde_plain(&a.access),
        a.path,
        a.agent,
        a.pid,
        a.comm,
        a.session,
        approval.opens,
        approval.age_ms / 1000
    )
}

fn describe_outcome(o: &PromptOutcome) -> String {
    let id = o.approval.map_or("-".to_string(), |id| format!("#{id}"));
    let by = o.decided_by.map_or(String::new(), |d| {
        format!(" by uid {} via {}", d.uid, crate::prompt::serde_plain(&d.surface))
    });
    let grant = o.grant.as_ref().map_or(String::new(), |g| {
        let until = g.expires_at.as_deref().unwrap_or("the session ends");
        format!("; remembered {} {} until {until}", crate::prompt::serde_plain(&g.scope), g.path)
    });
    format!(
        "{id} {}{by}: {} {} ({} open(s), {} ms){grant}",
        crate::prompt::serde_plain(&o.outcome),
        crate::prompt::serde_plain(&o.open.access),
        o.open.path,
        o.opens,
        o.latency_us / 1000
    )
}
