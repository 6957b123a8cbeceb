//! `fp audit`: keys, verification, replay and tailing of the audit log (docs/audit.md).
use std::collections::BTreeMap;
use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;

use crate::audit::checkpoint::{self, VerifierKey};
use crate::audit::replay::{self, Filter, Reevaluate};
use crate::audit::verify::{self, Report, VerifyOptions};
use crate::audit::{Body, Record, Verdict, segments, tail};
use crate::exit;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Make an Ed25519 checkpoint key pair: PREFIX.key (0600) and PREFIX.pub.
    Keygen {
        /// Path prefix of the two key files.
        prefix: PathBuf,
        /// Key name (signed-note key name; no '+' or spaces).
        #[arg(long, default_value = "fp-audit")]
        name: String,
        /// Replace existing key files.
        #[arg(long)]
        force: bool,
        #[arg(long)]
        json: bool,
    },
    /// Check the chain, signatures and checkpoints of a log and locate the first problem.
    /// Exit: 0 intact, 1 tamper evidence, 2 cannot verify, 3 intact with warnings.
    Verify {
        /// Active segment (its rotated segments are included) or segment files.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        trust: Trust,
        #[arg(long)]
        json: bool,
    },
    /// Verify, then show what sessions did; `--policy` re-decides every recorded decision.
    Replay(Box<ReplayArgs>),
    /// Print the last records of a log; `-f` follows it across rotations.
    Tail {
        /// The log's active segment, e.g. /var/log/fp/audit.log.
        path: PathBuf,
        /// Keep printing records as they are written.
        #[arg(short = 'f', long)]
        follow: bool,
        /// How many existing records to show first.
        #[arg(short = 'n', long, default_value_t = 10)]
        lines: usize,
        /// Print the raw records (JSON Lines).
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Args)]
pub struct Trust {
    /// Verifier key (PREFIX.pub from `fp audit keygen`).
    #[arg(long)]
    pubkey: Option<PathBuf>,
    /// A checkpoint note kept outside the log (the checkpoint sink file).
    #[arg(long)]
    trusted_checkpoint: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct ReplayArgs {
    /// The log's active segment (its rotated segments are included), or segment files.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    #[command(flatten)]
    trust: Trust,
    /// Only the records of this session (its name, as `fp sessions` lists it).
    #[arg(long)]
    session: Option<String>,
    /// Only the records of this agent.
    #[arg(long)]
    agent: Option<String>,
    /// RFC 3339 time.
    #[arg(long)]
    since: Option<String>,
    /// RFC 3339 time.
    #[arg(long)]
    until: Option<String>,
    /// Glob over the recorded path.
    #[arg(long)]
    path: Option<String>,
    /// allow, deny, prompt-approved, prompt-denied or prompt-timed-out.
    #[arg(long, value_parser = parse_verdict)]
    decision: Option<Verdict>,
    /// Re-evaluate every decision under this policy and report the differences.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// With --policy: the config, workspace and user the policy is compiled for.
    #[command(flatten)]
    compiled_for: super::policy::Session,
    /// How many differences to show with --policy.
    #[arg(long, default_value_t = 20)]
    examples: usize,
    /// Replay even if verification finds tampering.
    #[arg(long)]
    force: bool,
    #[arg(long, conflicts_with = "ocsf")]
    json: bool,
    /// OCSF File System Activity (class 1001) events, one per line.
    #[arg(long)]
    ocsf: bool,
}

fn parse_verdict(text: &str) -> Result<Verdict, String> {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).map_err(|_| {
        "expected allow, deny, prompt-approved, prompt-denied or prompt-timed-out".to_owned()
    })
}

pub fn main(cmd: Command) -> ExitCode {
    let json = match &cmd {
        Command::Keygen { json, .. }
        | Command::Verify { json, .. }
        | Command::Tail { json, .. } => *json,
        Command::Replay(args) => args.json || args.ocsf,
    };
    let result = match cmd {
        Command::Keygen { prefix, name, force, json } => keygen(&prefix, &name, force, json),
        Command::Verify { paths, trust, json } => verify_command(&paths, &trust, json),
        Command::Replay(args) => replay_command(&args),
        Command::Tail { path, follow, lines, json } => tail_command(&path, follow, lines, json),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        // The reader went away (e.g. `| head`): nothing left to report to.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            if json {
                println!("{}", serde_json::json!({ "error": format!("{e:#}") }));
            } else {
                eprintln!("fp audit: {e:#}");
            }
            ExitCode::from(exit::CANNOT_VERIFY)
        }
    }
}

fn keygen(prefix: &Path, name: &str, force: bool, json: bool) -> anyhow::Result<u8> {
    let (private, public) = checkpoint::keygen(name, prefix, force)?;
    let key_id = VerifierKey::load(&public)?.key_id();
    if json {
        let out =
            serde_json::json!({ "private_key": private, "public_key": public, "key_id": key_id });
        println!("{out}");
    } else {
        println!("wrote {} (0600) and {}; key id {key_id}", private.display(), public.display());
    }
    Ok(exit::OK)
}

fn verify_options(trust: &Trust) -> anyhow::Result<VerifyOptions> {
    let key = trust.pubkey.as_deref().map(VerifierKey::load).transpose()?;
    let trusted_checkpoint = match &trust.trusted_checkpoint {
        Some(path) => Some(
            crate::input::read_text(path, crate::input::KEY_MAX)
                .with_context(|| format!("reading trusted checkpoint {}", path.display()))?,
        ),
        None => None,
    };
    Ok(VerifyOptions { key, trusted_checkpoint })
}

/// Verifies with a progress bar on a terminal.
fn run_verify(paths: &[PathBuf], trust: &Trust) -> anyhow::Result<(Vec<PathBuf>, Report)> {
    let segments = segments::expand(paths)?;
    let options = verify_options(trust)?;
    let bar = if std::io::stderr().is_terminal() {
        let total = segments.iter().filter_map(|p| p.metadata().ok()).map(|m| m.len()).sum();
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec}",
            )
            .expect("valid template"),
        );
        Some(bar)
    } else {
        None
    };
    let report = verify::verify(&segments, &options, &mut |bytes| {
        if let Some(bar) = &bar {
            bar.inc(bytes);
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok((segments, report))
}

fn print_report(report: &Report) {
    let verdict = match report.exit_code() {
        exit::INTACT => "intact".to_owned(),
        exit::TAMPER => "TAMPER EVIDENCE".to_owned(),
        exit::CANNOT_VERIFY => match &report.problem {
            Some(problem) => format!("CANNOT VERIFY: {}", problem.detail),
            None => "CANNOT VERIFY".to_owned(),
        },
        _ => "intact with warnings".to_owned(),
    };
    println!("{verdict}");
    println!(
        "segments: {}, records: {}, seq {} .. {}",
        report.segments.len(),
        report.records,
        report.first_seq.map_or("-".into(), |s| s.to_string()),
        report.last_seq.map_or("-".into(), |s| s.to_string()),
    );
    println!(
        "time: {} .. {}",
        report.first_time.as_deref().unwrap_or("-"),
        report.last_time.as_deref().unwrap_or("-")
    );
    println!(
        "log id: {}, key ids: {}",
        report.log_id.as_deref().unwrap_or("-"),
        report.key_ids.join(", ")
    );
    println!(
        "checkpoints: {} ({} signatures verified), unsealed tail: {} record(s)",
        report.checkpoints, report.checkpoints_verified, report.unsealed_tail
    );
    if let Some(p) = &report.problem {
        let class = serde_json::to_value(p.class).expect("serializable");
        println!(
            "problem: {} at {}:{} (byte offset {}, seq {}): {}",
            class.as_str().unwrap_or_default(),
            p.segment.display(),
            p.line,
            p.offset,
            p.seq,
            p.detail
        );
    }
    for warning in &report.warnings {
        println!("warning: {warning}");
    }
}

fn verify_command(paths: &[PathBuf], trust: &Trust, json: bool) -> anyhow::Result<u8> {
    let (_, report) = run_verify(paths, trust)?;
    if json {
        let mut out = serde_json::to_value(&report)?;
        out["exit_code"] = report.exit_code().into();
        println!("{out}");
    } else {
        print_report(&report);
    }
    Ok(report.exit_code())
}

/// The policy engine for `--policy`. Not connected in this build.
fn load_policy(
    path: &Path,
    session: &super::policy::Session,
) -> anyhow::Result<Box<dyn Reevaluate>> {
    let policy = super::policy::load_for_replay(path, session)
        .with_context(|| format!("--policy {}", path.display()))?;
    Ok(Box::new(policy))
}

fn replay_command(args: &ReplayArgs) -> anyhow::Result<u8> {
    let policy = args.policy.as_deref().map(|p| load_policy(p, &args.compiled_for)).transpose()?;
    let filter = Filter {
        session: args.session.clone(),
        agent: args.agent.clone(),
        since: args.since.as_deref().map(replay::normalize_time).transpose()?,
        until: args.until.as_deref().map(replay::normalize_time).transpose()?,
        path: match &args.path {
            Some(glob) => Some(
                globset::Glob::new(glob)
                    .with_context(|| format!("--path {glob:?}"))?
                    .compile_matcher(),
            ),
            None => None,
        },
        decision: args.decision,
    };
    let (segments, report) = run_verify(&args.paths, &args.trust)?;
    let failed = matches!(report.exit_code(), exit::TAMPER | exit::CANNOT_VERIFY);
    if failed {
        let problem = report.problem.as_ref().expect("a failed verification has a problem");
        let what = format!("{}:{}: {}", problem.segment.display(), problem.line, problem.detail);
        if !args.force {
            let refusal = format!(
                "refusing to replay: verification failed ({what}); pass --force to replay anyway"
            );
            if args.json {
                let doc = serde_json::json!({ "verification": report, "refused": refusal });
                println!("{doc}");
            }
            eprintln!("fp audit: {refusal}");
            // 1 for tamper evidence, 2 for a log the given key cannot verify.
            return Ok(report.exit_code());
        }
        eprintln!("fp audit: WARNING: replaying a log that failed verification ({what})");
    }
    let records = replay::read_records(&segments)?;
    let matching: Vec<&Record> = records.iter().filter(|r| filter.matches(r)).collect();
    if matching.is_empty() {
        // Said on stderr, so that stdout stays the (empty) listing scripts read.
        match records.len() {
            0 => eprintln!("fp audit: the log holds no records"),
            n => eprintln!("fp audit: none of the {n} records read matches the filter"),
        }
    }
    let decisions = || {
        matching.iter().filter_map(|r| match &r.body {
            Body::Decision(d) => Some((*r, d)),
            _ => None,
        })
    };
    let what_if = policy.as_deref().map(|p| replay::what_if(decisions(), p, args.examples));
    let mut out = std::io::stdout().lock();
    if args.ocsf {
        for (record, decision) in decisions() {
            writeln!(out, "{}", replay::to_ocsf(record, decision))?;
        }
    } else if args.json {
        let doc = serde_json::json!({
            "verification": report,
            "forced": failed,
            "records": matching,
            "what_if": what_if,
        });
        writeln!(out, "{doc}")?;
    } else {
        for record in &matching {
            writeln!(out, "{}", replay::describe(record))?;
        }
        write_session_summary(&mut out, &matching)?;
        if let Some(w) = &what_if {
            writeln!(
                out,
                "what if: {} decisions, {} unchanged, would now deny {}, allow {}, prompt {}",
                w.evaluated, w.unchanged, w.would_now_deny, w.would_now_allow, w.would_now_prompt
            )?;
            for d in &w.examples {
                writeln!(
                    out,
                    "  #{} {} {} {}: recorded {} ({}), now {:?} ({})",
                    d.seq,
                    d.session,
                    d.op.as_str(),
                    d.path.display(),
                    d.recorded.as_str(),
                    d.recorded_rule,
                    d.now.verdict,
                    d.now.rule
                )?;
            }
        }
    }
    Ok(exit::OK)
}

/// Per session: how many operations of each kind got each decision.
fn write_session_summary(
    out: &mut impl std::io::Write,
    records: &[&Record],
) -> std::io::Result<()> {
    let mut counts: BTreeMap<&str, BTreeMap<(&str, &str), u64>> = BTreeMap::new();
    for record in records {
        if let Body::Decision(d) = &record.body {
            *counts
                .entry(&d.session)
                .or_default()
                .entry((d.op.as_str(), d.decision.as_str()))
                .or_default() += 1;
        }
    }
    for (session, by_kind) in counts {
        let parts: Vec<String> =
            by_kind.iter().map(|((op, decision), n)| format!("{op} {decision}: {n}")).collect();
        writeln!(out, "session {session}: {}", parts.join(", "))?;
    }
    Ok(())
}

fn tail_command(path: &Path, follow: bool, lines: usize, json: bool) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    tail::tail(path, lines, follow, &mut |line| {
        let written = if json {
            out.write_all(line).and_then(|()| out.write_all(b"\n"))
        } else {
            match serde_json::from_slice::<Record>(line) {
                Ok(record) => writeln!(out, "{}", replay::describe(&record)),
                Err(e) => writeln!(out, "unreadable record: {e}"),
            }
        };
        written.and_then(|()| out.flush()).is_ok()
    })?;
    Ok(exit::OK)
}
