//! `fp run [--policy FILE | --deny PATH...] [...] -- CMD ARGS`: runs CMD in a new session: a cgroup
//! whose every process has its file operations (open, create, delete, rename, link, truncate,
//! attribute changes, exec) decided in the kernel by the compiled policy. Without a daemon the
//! agent is embedded in this command for the lifetime of CMD.
use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::{Context as _, bail};

use crate::{
    agent::{self, Agent},
    audit,
    daemon::{Client, ClientError, api},
    exit, kernel,
    launch::{RunAs, run_placed},
    owner::Owner,
    policy::{EffectivePolicy, LoadOptions, UnreadableBase},
    prompt,
    session::{self, Mode},
};

#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("rules").required(true).multiple(true).args(["deny", "policy", "config", "profile"]))]
pub struct Args {
    /// Deny every operation on PATH and everything below it, allow the rest (repeatable).
    #[arg(long = "deny", value_name = "PATH", conflicts_with_all = ["policy", "config", "profile"])]
    deny: Vec<PathBuf>,
    /// The agent's policy file (repeatable: later files are layered over earlier ones).
    #[arg(long, value_name = "FILE")]
    policy: Vec<PathBuf>,
    /// A shipped profile for the agent CLI, layered under the policy's rules: claude-code,
    /// codex, gemini-cli or coding-agent; alone, it is the whole policy under default deny
    /// (docs/policy.md, "Profiles").
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// The operator's config.toml (its [file_policy] is the global layer).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// What <workspace> expands to, and where the command starts; an existing directory
    /// [default: the current directory].
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Run the command as USER (and expand ~ to their home) [default: the user behind sudo, or
    /// the caller].
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// The agent's name in records.
    #[arg(long, value_name = "NAME", default_value = "fp-run")]
    agent: String,
    /// enforce: deny what the policy denies; audit: decide and record everything, deny nothing.
    #[arg(long, value_enum, default_value = "enforce")]
    mode: Mode,
    /// Also record allowed writes, deletes and execs, not only denials.
    #[arg(long)]
    full_audit: bool,
    /// Record the session and every decision in the hash-chained, signed audit log FILE
    /// (docs/audit-format.md) instead of printing denials to stderr.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Private key signing the audit log's checkpoints (`fp audit keygen`). Without it a new key
    /// is made for a new log and its public half written to FILE.pub.
    #[arg(long, value_name = "KEY", requires = "audit_log")]
    audit_key: Option<PathBuf>,
    /// Let file descriptor FD cross into the session too (repeatable); by default only stdin,
    /// stdout and stderr do. A file opened before the session stays usable through its fd,
    /// though every operation the kernel checks on it (truncate, reopen, ...) is still decided.
    #[arg(long = "keep-fd", value_name = "FD")]
    keep_fds: Vec<i32>,
    /// The daemon's control socket: when a daemon answers there, it hosts the session (and
    /// records it in its audit log); otherwise fp runs an embedded agent for the command's
    /// lifetime. `--deny`, `--audit-log` and `--cgroup-parent` always use the embedded agent.
    #[arg(long, value_name = "PATH", default_value = crate::config::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Never ask a daemon: run the embedded agent.
    #[arg(long)]
    embedded: bool,
    /// cgroup v2 directory under which the session cgroup is created [default: <cgroup2 mount>/fp].
    #[arg(long, value_name = "DIR")]
    cgroup_parent: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

pub fn main(args: Args) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fp: error: {e:#}");
            ExitCode::from(exit::FP_ERROR)
        }
    }
}

fn run(args: Args) -> anyhow::Result<ExitCode> {
    // A mistyped --workspace is said first, before anything is loaded or asked for.
    start_dir(&args)?;
    let run_as = RunAs::resolve(args.user.as_deref())?;
    let embedded_only = args.embedded
        || !args.deny.is_empty()
        || args.audit_log.is_some()
        || args.cgroup_parent.is_some();
    if !embedded_only {
        match Client::connect(&args.socket) {
            Ok(client) => return run_with_daemon(client, &args, &run_as),
            Err(ClientError::NoDaemon { .. }) => {}
            Err(e) => bail!("the daemon at {}: {e}", args.socket.display()),
        }
    }
    if !nix::unistd::geteuid().is_root() {
        bail!(
            "no daemon answers at {}, and the embedded agent needs root: it loads BPF LSM \
             programs and creates cgroups",
            args.socket.display()
        );
    }
    // The kernel's BTF is read (three parses, ~1 s under TCG) while the policy compiles.
    kernel::prepare_in_background();
    let policy = load_policy(&args, &run_as)?;
    note_unreadable_base(&policy.unreadable_base(), &run_as);
    // The [approval] section of the operator's config: who decides prompt-tier opens.
    let approval = match &args.config {
        Some(path) => {
            crate::config::Config::load(path)
                .map_err(|e| anyhow::anyhow!("{}", e.to_string().trim_start_matches("error: ")))?
                .approval
        }
        None => crate::config::Approval::default(),
    };
    // Nothing on the host changes before BPF LSM is known to work here: no log file, no bpffs
    // mount, no cgroup. A kernel without it gets the probe's explanation (exit 125).
    let hierarchy = session::Cgroup2::find()?;
    let loading = super::progress::Slow::start("fp: loading fp's kernel programs for the session");
    let _bpffs = kernel::ready(&hierarchy.mount)?;
    let parent = args.cgroup_parent.clone().unwrap_or_else(|| hierarchy.mount.join("fp"));
    // Its pins, session and cgroup are named after this process (pid and start time), so that
    // the next agent tells whether it died (`session::orphans`).
    let name = Owner::current()?.name(session::orphans::RUN);
    let audit = match &args.audit_log {
        None => None,
        Some(path) => {
            let signer = match &args.audit_key {
                Some(key) => audit::checkpoint::SignerKey::load(key)?,
                None => ephemeral_signer(path)?,
            };
            Some(audit::WriterConfig::new(path.to_path_buf(), signer))
        }
    };
    let host = Agent::start(agent::Settings {
        cgroup2: hierarchy,
        parent,
        pin_dir: kernel::pin_root().join(&name),
        state: None,
        audit,
        observer: None,
        approval,
        surfaces: prompt::Surfaces::Embedded,
    })?;
    drop(loading);
    let ran = run_session(&host, &args, &run_as, &name, policy);
    // Already done unless the session failed to start; the audit log closes last.
    let stopped = host.shutdown("fp run exited");
    let (status, dropped) = ran?;
    stopped?;
    if dropped > 0 {
        eprintln!("fp: {dropped} decision events were lost (ring buffer full)");
    }
    Ok(ExitCode::from(status))
}

/// How long `fp run` waits for the daemon to create its session.
const CREATE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs the command in a session the daemon hosts; the daemon ends it when its last process
/// exits.
fn run_with_daemon(mut client: Client, args: &Args, run_as: &RunAs) -> anyhow::Result<ExitCode> {
    let [policy] = match args.policy.as_slice() {
        [] => [None],
        [one] => [Some(one.as_path())],
        _ => {
            bail!("a daemon session takes one --policy file (or pass --embedded to layer several)")
        }
    };
    let source =
        api::PolicySource::for_caller(policy, args.config.as_deref(), args.profile.as_deref())?;
    let workspace = workspace(args)?;
    let request = |pid| api::CreateSession {
        agent: args.agent.clone(),
        source: source.clone(),
        workspace: Some(workspace.clone()),
        uid: run_as.user.uid.as_raw(),
        mode: Some(args.mode),
        full_audit: Some(args.full_audit),
        pid,
        command: args.command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
    };
    // The session's refusals are printed here, as the embedded agent prints them.
    let reporter = super::session_report::Reporter::start(&args.socket);
    let mut session = None;
    let status = run_placed(&args.command, run_as, &args.keep_fds, start_dir(args)?, |pid| {
        // Compiling a large policy and listing the trees whose reads it withholds take a while
        // on a slow machine: longer than other calls may, and said on the terminal.
        client.set_timeout(Some(CREATE_TIMEOUT))?;
        let setting_up = super::progress::Slow::start("fp: the daemon is setting the session up");
        let created = client.create(request(pid)).map_err(anyhow::Error::new)?;
        drop(setting_up);
        // Said before the command starts, from the policy the daemon compiled.
        note_unreadable_base(&created.unreadable_base, run_as);
        client.set_timeout(Some(crate::daemon::client::CALL_TIMEOUT))?;
        if let Some(reporter) = &reporter {
            reporter.watch(&created.id);
        }
        session = Some(created.id);
        Ok(())
    })?;
    // For the session's end record: only this process could wait for the command.
    if let Some(id) = session
        && let Err(e) = client.command_exited(&id, i32::from(status))
    {
        tracing::warn!("telling the daemon the command's exit code: {e}");
    }
    if let Some(reporter) = reporter {
        reporter.finish();
    }
    Ok(ExitCode::from(status))
}

/// The session's policy, with fp's own files (the audit log and its key) protected from it.
fn load_policy(args: &Args, run_as: &RunAs) -> anyhow::Result<EffectivePolicy> {
    let mut options =
        LoadOptions { user: Some(run_as.user.name.clone()), ..LoadOptions::default() };
    if let Some(log) = &args.audit_log {
        let log = std::path::absolute(log)?;
        options.protected_paths.push(PathBuf::from(format!("{}.pub", log.display())));
        options.protected_paths.push(log);
    }
    if let Some(key) = &args.audit_key {
        options.secret_paths.push(std::path::absolute(key)?);
    }
    let policy = if args.deny.is_empty() {
        options.policy_files = args.policy.clone();
        options.config_file = args.config.clone();
        options.profile = args.profile.clone();
        options.workspace = Some(workspace(args)?);
        EffectivePolicy::load(&options)
    } else {
        let deny = args.deny.iter().map(|p| resolve_deny(p)).collect::<anyhow::Result<Vec<_>>>()?;
        EffectivePolicy::from_deny_paths(&deny, &options)
    };
    // A policy error names its own severity ("error: ..." or "file:line:col: error: ...").
    policy.map_err(|e| anyhow::anyhow!("{}", e.to_string().trim_start_matches("error: ")))
}

/// Says, before the command starts, which runtime base entries the floors remove for this user:
/// running as root, `~/.gitconfig` is under `/root`, which no session may read, so e.g. git
/// fails to read its configuration (docs/policy.md).
fn note_unreadable_base(unreadable: &UnreadableBase, run_as: &RunAs) {
    let UnreadableBase { entries, floors } = unreadable;
    if entries.is_empty() {
        return;
    }
    let verb = if entries.len() == 1 { "is" } else { "are" };
    eprintln!(
        "fp: note: running as {} (home {}): {} {verb} unreadable ({}); set HOME to another \
         directory for the command or use --user",
        run_as.user.name,
        run_as.user.dir.display(),
        entries.join(", "),
        floors.join(", ")
    );
}

/// What `<workspace>` expands to: `--workspace`, which must be a directory (a typo would give
/// rules that match nothing), else the current directory.
fn workspace(args: &Args) -> anyhow::Result<PathBuf> {
    let Some(ws) = &args.workspace else {
        return std::env::current_dir().context("the current directory");
    };
    match std::fs::metadata(ws) {
        Ok(md) if md.is_dir() => Ok(std::path::absolute(ws)?),
        Ok(_) => bail!("--workspace {}: not a directory", ws.display()),
        Err(e) => bail!("--workspace {}: {e}", ws.display()),
    }
}

/// Where the command starts: in `--workspace`, when given (None: where fp runs).
fn start_dir(args: &Args) -> anyhow::Result<Option<PathBuf>> {
    args.workspace.as_ref().map(|_| workspace(args)).transpose()
}

/// A `--deny` path as the kernel will see it: symlinks resolved when it exists (the inode table
/// also covers the target by identity).
fn resolve_deny(p: &Path) -> anyhow::Result<PathBuf> {
    let abs = std::path::absolute(p).with_context(|| format!("resolving {}", p.display()))?;
    Ok(std::fs::canonicalize(&abs).unwrap_or(abs))
}

/// Creates the session (with the prompt broker if its policy needs one), runs the command in it
/// and ends it: (fp's exit status, events lost).
fn run_session(
    host: &Agent,
    args: &Args,
    run_as: &RunAs,
    name: &str,
    policy: EffectivePolicy,
) -> anyhow::Result<(u8, u64)> {
    let spec = session::SessionSpec {
        name: name.to_owned(),
        agent: args.agent.clone(),
        policy,
        mode: args.mode,
        full_audit: args.full_audit,
        uid: run_as.user.uid.as_raw(),
        workspace: args.workspace.clone(),
        pid: std::process::id(),
        command: args.command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
    };
    // Created once the command's process exists (in its own mount namespace, which the prompt
    // broker marks) and before it runs the command.
    let mut created = None;
    let status = run_placed(&args.command, run_as, &args.keep_fds, start_dir(args)?, |pid| {
        created = Some(host.create(spec, pid)?.2);
        Ok(())
    });
    // Pending approvals are denied before the session's processes are killed.
    host.stop_prompts();
    let Some(id) = created else {
        return Err(status.err().unwrap_or_else(|| anyhow::anyhow!("no session was created")));
    };
    let reason = if status.is_ok() { "command exited" } else { "fp failed" };
    let ended = host.end(id, status.as_ref().ok().map(|s| i32::from(*s)), reason);
    let status = status?;
    Ok((status, ended?.dropped))
}

/// A new key for a new log, its public half written next to the log; an existing log needs the
/// key that signed it.
fn ephemeral_signer(log: &Path) -> anyhow::Result<audit::checkpoint::SignerKey> {
    if log.exists() {
        bail!("{} exists: pass --audit-key with the key that signs it", log.display());
    }
    let signer = audit::checkpoint::SignerKey::generate("fp-run")?;
    let public = PathBuf::from(format!("{}.pub", log.display()));
    audit::checkpoint::write_atomic(
        &public,
        format!("{}\n", signer.verifier().encode()).as_bytes(),
        0o644,
    )?;
    eprintln!(
        "fp: audit log {} is signed with a new key; its public key is {}",
        log.display(),
        public.display()
    );
    Ok(signer)
}
