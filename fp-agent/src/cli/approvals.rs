//! `fp approvals`, `fp approve ID`, `fp deny ID`: the prompt tier's pending approvals, through
//! the daemon's control socket (docs/prompt.md). Exit: 0 done, 1 refused (unknown id, already
//! decided, not allowed), 3 no daemon, 125 fp error.
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use serde_json::{Value, json};

use crate::prompt::api::{ApprovalReply, ApprovalRequest, DecideRequest};
use crate::prompt::{
    Approval, ApprovalEvent, ApprovalId, Decision, PromptOutcome, Remember, Surface, parse_duration,
};

use crate::config::DEFAULT_SOCKET;
/// The protocol version of the control socket.
const PROTOCOL: u32 = 1;

const EXIT_REFUSED: u8 = 1;
const EXIT_NO_DAEMON: u8 = 3;
const EXIT_FP_ERROR: u8 = 125;

#[derive(clap::Args)]
pub struct Socket {
    /// The daemon's control socket.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct ListArgs {
    /// Keep running and print approvals as they open and get decided.
    #[arg(long)]
    watch: bool,
    #[command(flatten)]
    socket: Socket,
}

#[derive(clap::Args)]
pub struct ApproveArgs {
    id: ApprovalId,
    /// Also allow later prompts of the session: all of them, the path's directory (and below),
    /// or the path.
    #[arg(long, value_enum)]
    remember: Option<Remember>,
    /// How long the remembered grant lasts (30s, 10m, 2h) [default: until the session ends].
    #[arg(long = "for", value_name = "DURATION", requires = "remember", value_parser = parse_duration)]
    duration: Option<std::time::Duration>,
    #[command(flatten)]
    socket: Socket,
}

#[derive(clap::Args)]
pub struct DenyArgs {
    id: ApprovalId,
    #[command(flatten)]
    socket: Socket,
}

/// Why a request did not succeed.
enum Failure {
    /// The daemon answered with an error (its code and message).
    Refused(String, String),
    NoDaemon(String),
    Fp(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Fp(e)
    }
}

fn exit(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Refused(code, message)) => {
            eprintln!("fp: {message}");
            // Errors about the request itself are refusals; the daemon failing is fp's error.
            let refused = ["not_found", "already_decided", "permission_denied", "bad_request"];
            ExitCode::from(if refused.contains(&code.as_str()) {
                EXIT_REFUSED
            } else {
                EXIT_FP_ERROR
            })
        }
        Err(Failure::NoDaemon(why)) => {
            eprintln!("fp: no daemon: {why}");
            ExitCode::from(EXIT_NO_DAEMON)
        }
        Err(Failure::Fp(e)) => {
            eprintln!("fp: {e:#}");
            ExitCode::from(EXIT_FP_ERROR)
        }
    }
}

pub fn list(args: ListArgs) -> ExitCode {
    exit(list_approvals(&args))
}

pub fn approve(args: ApproveArgs) -> ExitCode {
    let decide = DecideRequest {
        id: args.id,
        decision: Decision::Approve,
        remember: args.remember,
        duration: args.duration.map(|d| humantime::format_duration(d).to_string()),
        surface: Some(Surface::Cli),
    };
    exit(decide_approval(decide, &args.socket))
}

pub fn deny(args: DenyArgs) -> ExitCode {
    let decide = DecideRequest {
        id: args.id,
        decision: Decision::Deny,
        remember: None,
        duration: None,
        surface: Some(Surface::Cli),
    };
    exit(decide_approval(decide, &args.socket))
}

fn list_approvals(args: &ListArgs) -> Result<(), Failure> {
    let socket = &args.socket;
    // Subscribed before listing: an approval opened in between is streamed, not lost.
    let watch = if args.watch { Some(subscribe(&socket.socket)?) } else { None };
    let reply = request(&socket.socket, &ApprovalRequest::ListApprovals)?;
    let ApprovalReply::Approvals { approvals } = reply else {
        return Err(unexpected(&reply));
    };
    if socket.json && !args.watch {
        println!("{}", serde_json::to_string_pretty(&approvals).context("encoding")?);
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
    match watch {
        Some(lines) => stream(lines, socket.json),
        None => Ok(()),
    }
}

fn subscribe(socket: &Path) -> Result<Lines, Failure> {
    let mut lines = send(socket, &ApprovalRequest::WatchApprovals)?;
    match read_reply(&mut lines)? {
        ApprovalReply::Watching => Ok(lines),
        other => Err(unexpected(&other)),
    }
}

fn stream(mut lines: Lines, json: bool) -> Result<(), Failure> {
    loop {
        match read_reply(&mut lines)? {
            ApprovalReply::ApprovalEvent { event } if json => {
                println!("{}", serde_json::to_string(&event).context("encoding")?);
            }
            ApprovalReply::ApprovalEvent { event: ApprovalEvent::Opened { approval } } => {
                println!("{}", describe_approval(&approval));
            }
            ApprovalReply::ApprovalEvent { event: ApprovalEvent::Decided { outcome } } => {
                println!("{}", describe_outcome(&outcome));
            }
            ApprovalReply::Missed { count } => {
                eprintln!("fp: missed {count} approval events (see the audit log)");
            }
            other => return Err(unexpected(&other)),
        }
        let _ = std::io::stdout().flush();
    }
}

fn decide_approval(decide: DecideRequest, socket: &Socket) -> Result<(), Failure> {
    let reply = request(&socket.socket, &ApprovalRequest::DecideApproval(decide))?;
    let ApprovalReply::Decided { outcome } = reply else {
        return Err(unexpected(&reply));
    };
    if socket.json {
        println!("{}", serde_json::to_string_pretty(&outcome).context("encoding")?);
    } else {
        println!("{}", describe_outcome(&outcome));
    }
    Ok(())
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

fn unexpected(reply: &ApprovalReply) -> Failure {
    Failure::Fp(anyhow!("unexpected reply from the daemon: {reply:?}"))
}

/// One request, one reply.
fn request(socket: &Path, request: &ApprovalRequest) -> Result<ApprovalReply, Failure> {
    let mut lines = send(socket, request)?;
    read_reply(&mut lines)
}

type Lines = std::io::Lines<BufReader<UnixStream>>;

fn send(socket: &Path, request: &ApprovalRequest) -> Result<Lines, Failure> {
    let mut stream = UnixStream::connect(socket).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            Failure::NoDaemon(format!("{}: {e}", socket.display()))
        }
        _ => Failure::Fp(anyhow!("connecting to {}: {e}", socket.display())),
    })?;
    let mut line = serde_json::to_value(request).context("encoding the request")?;
    line["v"] = json!(PROTOCOL);
    let mut bytes = serde_json::to_vec(&line).context("encoding the request")?;
    bytes.push(b'\n');
    stream.write_all(&bytes).with_context(|| format!("writing to {}", socket.display()))?;
    Ok(BufReader::new(stream).lines())
}

fn read_reply(lines: &mut Lines) -> Result<ApprovalReply, Failure> {
    let line = lines
        .next()
        .ok_or_else(|| anyhow!("the daemon closed the connection"))?
        .context("reading the daemon's reply")?;
    let value: Value = serde_json::from_str(&line).context("the daemon's reply is not JSON")?;
    // Errors are matched on their code alone: the daemon's own codes are not all ours.
    if value["type"] == "error" {
        let code = value["error"]["code"].as_str().unwrap_or("").to_string();
        let message = value["error"]["message"].as_str().unwrap_or(&line).to_string();
        return Err(Failure::Refused(code, message));
    }
    Ok(serde_json::from_value(value).with_context(|| format!("unexpected reply: {line}"))?)
}
