//! `fp run [--policy FILE | --deny PATH...] [...] -- CMD ARGS`: runs CMD in a new session: a cgroup
//! whose every process has its file operations (open, create, delete, rename, link, truncate,
//! attribute changes, exec) decided in the kernel by the compiled policy. Without a daemon the
//! agent is embedded in this command for the lifetime of CMD.
use std::{
    ffi::{CString, OsString},
    os::{fd::AsRawFd as _, unix::process::CommandExt as _},
    path::{Path, PathBuf},
    process::ExitCode,
    sync::atomic::{AtomicI32, Ordering},
};

use anyhow::{Context as _, bail};
use nix::unistd::{Gid, Uid, User};

use crate::{
    agent::{self, Agent},
    audit,
    daemon::{Client, ClientError, api},
    exit, kernel,
    owner::Owner,
    policy::{EffectivePolicy, LoadOptions},
    prompt,
    session::{self, Mode},
};

#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("rules").required(true).multiple(true).args(["deny", "policy", "config"]))]
pub struct Args {
    /// Deny every operation on PATH and everything below it, allow the rest (repeatable).
    #[arg(long = "deny", value_name = "PATH", conflicts_with_all = ["policy", "config"])]
    deny: Vec<PathBuf>,
    /// The agent's policy file (repeatable: later files are layered over earlier ones).
    #[arg(long, value_name = "FILE")]
    policy: Vec<PathBuf>,
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

/// Who the command runs as.
struct RunAs {
    user: User,
    groups: Vec<Gid>,
}

impl RunAs {
    /// `--user`, else the user behind sudo, else root (said on stderr: never silently).
    fn resolve(name: Option<&str>) -> anyhow::Result<Self> {
        let user = match name {
            Some(name) => {
                User::from_name(name)?.with_context(|| format!("no user named {name}"))?
            }
            None if !nix::unistd::geteuid().is_root() => {
                let uid = nix::unistd::getuid();
                User::from_uid(uid)?.with_context(|| format!("no passwd entry for uid {uid}"))?
            }
            None => match std::env::var("SUDO_UID").ok().and_then(|u| u.parse().ok()) {
                Some(uid) => User::from_uid(Uid::from_raw(uid))?
                    .with_context(|| format!("no user with uid {uid} (SUDO_UID)"))?,
                None => {
                    eprintln!(
                        "fp: note: the command runs as root (pass --user to run it as another user)"
                    );
                    User::from_uid(Uid::from_raw(0))?.context("no passwd entry for root")?
                }
            },
        };
        let name = CString::new(user.name.as_bytes())?;
        let groups = nix::unistd::getgrouplist(&name, user.gid)
            .with_context(|| format!("groups of {}", user.name))?;
        Ok(Self { user, groups })
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
    note_floors_over_base(&policy, &run_as);
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
    kernel::probe(&hierarchy.mount)?;
    // Unmounted when this returns if it mounted it (and nothing else is pinned there by then).
    let _bpffs = kernel::Bpffs::mount()?;
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
    let source = api::PolicySource::for_caller(policy, args.config.as_deref())?;
    let workspace = workspace(args)?;
    // The daemon compiles the session's policy; the same files compiled here tell what the
    // floors remove for this user (silently skipped if they do not load here).
    if let Ok(policy) = load_policy(args, run_as) {
        note_floors_over_base(&policy, run_as);
    }
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
        options.workspace = Some(workspace(args)?);
        EffectivePolicy::load(&options)
    } else {
        let deny = args.deny.iter().map(|p| resolve_deny(p)).collect::<anyhow::Result<Vec<_>>>()?;
        EffectivePolicy::from_deny_paths(&deny, &options)
    };
    // A policy error names its own severity ("error: ..." or "file:line:col: error: ...").
    policy.map_err(|e| anyhow::anyhow!("{}", e.to_string().trim_start_matches("error: ")))
}

/// The runtime base's entries in the user's home (`~/.gitconfig`, ...) that a safety floor
/// makes unreadable for this session, e.g. every one of them when `~` is `/root` (floor
/// `root-home`): (the entries as written, the floors that remove them). Empty when none is.
pub fn base_entries_under_floors(policy: &EffectivePolicy) -> (Vec<String>, Vec<String>) {
    use crate::policy::{Layer, Op, Verdict};
    let (mut entries, mut floors) = (Vec::new(), Vec::new());
    for rule in policy.rules() {
        if rule.layer != Layer::RuntimeBase
            || !rule.text.starts_with('~')
            || rule.verdicts[Op::Read.index()] != Some(Verdict::Allow)
        {
            continue;
        }
        // A path the entry allows: itself, or one below it for `dir/**`.
        let (shown, path) = match rule.glob.strip_suffix("/**") {
            Some(dir) => (rule.text.trim_end_matches("/**"), format!("{dir}/config")),
            None => (rule.text.as_str(), rule.glob.clone()),
        };
        let decision = policy.decide(path.as_bytes(), Op::Read);
        let Some(decider) = decision.rule.and_then(|r| policy.rule(r)) else { continue };
        if decision.verdict == Verdict::Deny && decider.layer > Layer::Policy {
            if !entries.iter().any(|e| e == shown) {
                entries.push(shown.to_owned());
            }
            if !floors.contains(&decider.tier) {
                floors.push(decider.tier.clone());
            }
        }
    }
    (entries, floors)
}

/// Says, before the command starts, which runtime base entries the floors remove for this user:
/// running as root, `~/.gitconfig` is under `/root`, which no session may read, so e.g. git
/// fails to read its configuration (docs/policy.md).
fn note_floors_over_base(policy: &EffectivePolicy, run_as: &RunAs) {
    let (entries, floors) = base_entries_under_floors(policy);
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

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_signal(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Runs the command as `run_as`, with only stdio (and `keep_fds`) inherited, after `place` has
/// put it into its session: the child reports its pid and waits before exec until `place`
/// returns, so not one instruction of the command runs outside the session. Forwards fp's
/// termination signals to it while it runs. Returns fp's exit status: the command's, 128 +
/// signal, or 127 when it could not be started. The command starts in `cwd` ([`start_dir`]),
/// else in fp's own working directory (if it still has one).
fn run_placed(
    command: &[OsString],
    run_as: &RunAs,
    keep_fds: &[i32],
    cwd: Option<PathBuf>,
    place: impl FnOnce(i32) -> anyhow::Result<()>,
) -> anyhow::Result<u8> {
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..]);
    let user = &run_as.user;
    if !user.uid.is_root() || nix::unistd::getuid() != user.uid {
        cmd.env("HOME", &user.dir).env("USER", &user.name).env("LOGNAME", &user.name);
    }
    for &fd in keep_fds {
        // SAFETY: F_GETFD only reads the fd's flags.
        if fd < 3 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            bail!("--keep-fd {fd}: not an open file descriptor above stderr");
        }
    }
    let keep_fds = keep_fds.to_vec();
    let (uid, gid) = (user.uid.as_raw(), user.gid.as_raw());
    // Only root changes identity; anyone else runs the command as themselves.
    let switch = nix::unistd::geteuid().is_root();
    if !switch && nix::unistd::geteuid() != user.uid {
        bail!("only root can run a command as another user ({})", user.name);
    }
    let groups: Vec<libc::gid_t> = run_as.groups.iter().map(|g| g.as_raw()).collect();
    // Unprivileged, the command runs with this process's own ids: those are what it may map.
    let own_mounts =
        UserNamespace::mapping(nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw())?;
    let cwd = cwd.or_else(|| std::env::current_dir().ok()).and_then(|dir| {
        std::ffi::CString::new(std::os::unix::ffi::OsStringExt::into_vec(dir.into_os_string())).ok()
    });
    let (pid_read, pid_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let (release_read, release_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let (pid_w, release_r, release_w) =
        (pid_write.as_raw_fd(), release_read.as_raw_fd(), release_write.as_raw_fd());
    // SAFETY: the closure only makes async-signal-safe system calls on values prepared before fork.
    unsafe {
        cmd.pre_exec(move || {
            // A mount namespace of its own, a slave of the host's (mounts and unmounts there
            // still reach it): the prompt broker marks its mounts, so that opens outside every
            // session never wait for the broker. A caller who is not root owns it through a user
            // namespace that maps only themselves (`own_mounts`). Where neither is allowed the
            // session shares the host's, and the broker marks whole filesystems.
            let own = libc::unshare(libc::CLONE_NEWNS) == 0 || (!switch && own_mounts.enter()?);
            if own
                && libc::mount(
                    c"none".as_ptr(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_SLAVE,
                    std::ptr::null(),
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            let pid = libc::getpid().to_ne_bytes();
            if libc::write(pid_w, pid.as_ptr().cast(), pid.len()) != pid.len() as isize {
                return Err(std::io::Error::last_os_error());
            }
            // Held until placed; EOF means fp gave up (so this copy of the write end must go).
            libc::close(release_w);
            let mut go = 0u8;
            if libc::read(release_r, (&raw mut go).cast(), 1) != 1 {
                return Err(std::io::Error::other("fp did not place the command in its session"));
            }
            // A cgroup namespace rooted at the session's cgroup, where it now is: with the
            // hierarchy mounted `nsdelegate`, the kernel keeps every move of the session's
            // processes between cgroups inside it, and fp lets them make cgroups of their own
            // there (docs/threat-model.md, "Sub-cgroups"). Without one, cgroupfs stays
            // read-only to the session.
            let _ = libc::unshare(libc::CLONE_NEWCGROUP);
            // Its working directory by name, entered now: a prompt scope above it may have
            // become a mount of its own while it waited (docs/prompt.md, Marks).
            if let Some(cwd) = &cwd
                && libc::chdir(cwd.as_ptr()) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // Only stdio (and --keep-fd) cross into the session: every other fd closes at exec.
            const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
            if libc::syscall(libc::SYS_close_range, 3, libc::c_uint::MAX, CLOSE_RANGE_CLOEXEC) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            for &fd in &keep_fds {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if switch
                && (libc::setgroups(groups.len(), groups.as_ptr()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // spawn() returns only once the child has exec'd, so it runs on its own thread while this one
    // places the child.
    // The thread keeps the child's ends open until spawn() returns: a child that fails before
    // reporting its pid then shows as EOF here.
    let spawner = std::thread::spawn(move || {
        let spawned = cmd.spawn();
        drop((pid_write, release_read));
        spawned
    });
    let mut pid = [0u8; 4];
    let reported = nix::unistd::read(&pid_read, &mut pid);
    let placed = match reported {
        Ok(4) => place(i32::from_ne_bytes(pid)),
        _ => Err(anyhow::anyhow!("the command did not start")),
    };
    if placed.is_ok() {
        nix::unistd::write(&release_write, b"g")?;
    }
    drop(release_write);
    let spawned = spawner.join().expect("the spawner thread panicked");
    placed?;
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            eprintln!("fp: cannot run {}: {e}", command[0].to_string_lossy());
            return Ok(exit::CANNOT_START);
        }
    };
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: installs a handler that only calls kill(2).
        unsafe { libc::signal(sig, forward_signal as *const () as libc::sighandler_t) };
    }
    let status = child.wait().context("waiting for the command");
    CHILD.store(0, Ordering::Relaxed);
    let status = status?;
    Ok(match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => exit::SIGNALED + sig as u8,
        _ => exit::FP_ERROR,
    })
}

/// A user namespace mapping only the caller's own uid and gid to themselves, for a caller who is
/// not root to own the session's mount namespace: files keep their owners and the caller their
/// groups, and the command, not uid 0 inside, runs without capabilities. (Inside, other users'
/// files show as nobody's, and setuid and file capabilities do not apply: docs/prompt.md.)
struct UserNamespace {
    uid_map: CString,
    gid_map: CString,
}

impl UserNamespace {
    fn mapping(uid: libc::uid_t, gid: libc::gid_t) -> anyhow::Result<Self> {
        Ok(Self {
            uid_map: CString::new(format!("{uid} {uid} 1"))?,
            gid_map: CString::new(format!("{gid} {gid} 1"))?,
        })
    }

    /// Enters a new user namespace and a mount namespace it owns: `Ok(false)` when the host
    /// does not allow it (unprivileged user namespaces disabled), an error if entered but not
    /// mapped (the command must not run unmapped). Called between fork and exec: system calls
    /// only.
    unsafe fn enter(&self) -> std::io::Result<bool> {
        // SAFETY: async-signal-safe system calls on buffers prepared before fork.
        unsafe {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                return Ok(false);
            }
            // gid_map may be written only once setgroups(2) is refused in the namespace.
            for (file, text) in [
                (c"/proc/self/setgroups", c"deny"),
                (c"/proc/self/uid_map", self.uid_map.as_c_str()),
                (c"/proc/self/gid_map", self.gid_map.as_c_str()),
            ] {
                let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                let len = text.to_bytes().len();
                let written = fd >= 0 && libc::write(fd, text.as_ptr().cast(), len) == len as isize;
                let error = std::io::Error::last_os_error();
                if fd >= 0 {
                    libc::close(fd);
                }
                if !written {
                    return Err(error);
                }
            }
            Ok(true)
        }
    }
}

/// Moves `pid` into the session cgroup `cgroup`.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn deny_policy(user: &str) -> EffectivePolicy {
        let options = LoadOptions { user: Some(user.into()), ..LoadOptions::default() };
        EffectivePolicy::from_deny_paths(&[PathBuf::from("/srv/secrets")], &options).unwrap()
    }

    /// Running as root, `~` is `/root`, which the `root-home` floor makes unreadable: the base's
    /// git configuration goes with it, and `fp run` says so.
    #[test]
    fn the_root_home_floor_removes_the_base_entries_in_roots_home() {
        let (entries, floors) = base_entries_under_floors(&deny_policy("root"));
        assert_eq!(entries, ["~/.gitconfig", "~/.config/git"]);
        assert_eq!(floors, ["safety floor root-home"]);
    }

    #[test]
    fn a_home_outside_the_floors_keeps_the_base() {
        let (entries, floors) = base_entries_under_floors(&deny_policy("nobody"));
        assert!(entries.is_empty() && floors.is_empty(), "{entries:?} {floors:?}");
    }
}
