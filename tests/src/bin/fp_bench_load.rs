//! The workloads and helpers of `cargo xtask bench kernel` (docs/performance.md):
//!
//! - `fp-bench-load open|stat FILE ITERATIONS RUNS`: times RUNS rounds of ITERATIONS open+close
//!   (or stat) of FILE and prints one line per round, `ns_per_op N`, so the caller takes the
//!   median. Every call goes through libc directly: the figure is the syscall plus the LSM hooks
//!   it reaches, not Rust's allocation of a CString.
//! - `fp-bench-load churn DIR ITERATIONS RUNS`: the same, for one create (open O_CREAT|O_WRONLY,
//!   close), rename and unlink of a file in DIR per operation.
//! - `fp-bench-load send SOCKET ITERATIONS RUNS`: the same, for one datagram sent on a socket
//!   connected to the datagram socket SOCKET (what syslog(3) does per message through
//!   `/dev/log`); `connect SOCKET ...`: one connect and close of a stream socket to SOCKET.
//! - `fp-bench-load serve SOCKET`: binds the stream socket SOCKET.stream and the datagram socket
//!   SOCKET.dgram, accepts and closes every connection and reads every datagram until killed
//!   (started outside the sessions: the helper whose socket a session's policy names).
//! - `fp-bench-load noop [CGROUP | --fmod-ret]`: attaches fp-ebpf's pass-through programs to
//!   exactly fp's hooks (`fp_agent::kernel::attach_noop`; with CGROUP, a cgroup v2 directory,
//!   those fp attaches per cgroup to that cgroup; with `--fmod-ret`, as fmod_ret programs on the
//!   kernel's `security_*` functions), prints `noop: attached N programs` and holds them until
//!   killed.
//! - `fp-bench-load landlock WORKSPACE [--] CMD ARGS...`: runs CMD under a Landlock ruleset of the
//!   shape of the benchmark's fp policy: read and execute everywhere, everything in WORKSPACE,
//!   and writing `/dev/null`.
//! - `fp-bench-load agent-start CLAUDE FP SOCKET ROUNDS`: Claude Code's time from its start to
//!   its first model request, alone and through the daemon at SOCKET under its profile
//!   (`FP run --profile claude-code`), ROUNDS rounds interleaved after an untimed run of each;
//!   prints `AGENT-BARE <round> <ns>` and `AGENT-DAEMON <round> <ns>`. It runs as the tests' agent
//!   user (the test VM only), with Claude Code from CLAUDE (its directory in the cache) installed
//!   as npm does, and a scripted model that answers at once.
//! - `fp-bench-load cpu-time [--] CMD ARGS...`: runs CMD and prints `cpu_ns N`, the CPU time
//!   (user + system) of it and the descendants it waited for: fp's programs run in their system
//!   calls, and unlike the wall clock it leaves out waits and other processes.
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context as _, bail};

#[derive(Clone, Copy)]
enum Workload {
    OpenClose,
    Stat,
    Churn,
    Send,
    Connect,
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fp-bench-load: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    match args.first().and_then(|a| a.to_str()) {
        Some("noop") => return noop(args.get(1)),
        Some("landlock") => return landlock(&args[1..]),
        Some("cpu-time") => return cpu_time(&args[1..]),
        Some("serve") => return serve(args.get(1)),
        Some("agent-start") => return agent_start(&args[1..]),
        _ => {}
    }
    let [workload, file, iterations, runs] = args.as_slice() else {
        bail!(
            "usage: fp-bench-load open|stat FILE ITERATIONS RUNS | churn DIR ITERATIONS RUNS | \
             send|connect SOCKET ITERATIONS RUNS"
        );
    };
    let workload = match workload.to_str() {
        Some("open") => Workload::OpenClose,
        Some("stat") => Workload::Stat,
        Some("churn") => Workload::Churn,
        Some("send") => Workload::Send,
        Some("connect") => Workload::Connect,
        _ => {
            bail!("workload must be `open`, `stat`, `churn`, `send` or `connect`, not {workload:?}")
        }
    };
    let file = CString::new(file.as_bytes()).context("FILE contains a NUL byte")?;
    let count = |s: &std::ffi::OsStr, what: &str| -> anyhow::Result<u64> {
        s.to_str()
            .and_then(|s| s.parse().ok())
            .filter(|&n: &u64| n > 0)
            .with_context(|| format!("{what} must be a positive integer, not {s:?}"))
    };
    let iterations = count(iterations, "ITERATIONS")?;
    let runs = count(runs, "RUNS")?;
    // An untimed round warms the dentry cache, the page tables and (under TCG) the translated code.
    one_round(workload, &file, iterations.min(20_000))?;
    for _ in 0..runs {
        let start = Instant::now();
        one_round(workload, &file, iterations)?;
        let ns = start.elapsed().as_nanos() / u128::from(iterations);
        println!("ns_per_op {ns}");
    }
    Ok(())
}

fn one_round(workload: Workload, file: &CString, iterations: u64) -> anyhow::Result<()> {
    let socket = std::path::Path::new(std::ffi::OsStr::from_bytes(file.as_bytes()));
    let sender = match workload {
        Workload::Send => {
            let sender = std::os::unix::net::UnixDatagram::unbound().context("socket")?;
            sender.connect(socket.with_extension("dgram")).context("connect")?;
            Some(sender)
        }
        _ => None,
    };
    let in_dir = |name: &str| {
        let mut path = file.as_bytes().to_vec();
        path.extend_from_slice(name.as_bytes());
        CString::new(path).expect("no NUL in a CString's bytes or the name")
    };
    let (created, renamed) = (in_dir("/churn-a"), in_dir("/churn-b"));
    let check = |result: libc::c_int, what: &str| -> anyhow::Result<libc::c_int> {
        if result < 0 {
            return Err(std::io::Error::last_os_error()).context(what.to_owned());
        }
        Ok(result)
    };
    for _ in 0..iterations {
        match workload {
            Workload::OpenClose => {
                let flags = libc::O_RDONLY | libc::O_CLOEXEC;
                // SAFETY: `file` is a valid NUL-terminated string; the fd is closed at once.
                let fd = check(unsafe { libc::open(file.as_ptr(), flags) }, "open")?;
                // SAFETY: `fd` was just opened by us and is not used again.
                unsafe { libc::close(fd) };
            }
            Workload::Stat => {
                let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
                // SAFETY: `file` is NUL-terminated and `st` is a writable `struct stat`.
                check(unsafe { libc::stat(file.as_ptr(), st.as_mut_ptr()) }, "stat")?;
            }
            Workload::Churn => {
                let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC;
                // SAFETY: the paths are valid NUL-terminated strings; the fd is closed at once.
                let fd = check(unsafe { libc::open(created.as_ptr(), flags, 0o644) }, "create")?;
                // SAFETY: `fd` was just opened by us and is not used again.
                unsafe { libc::close(fd) };
                // SAFETY: both paths are valid NUL-terminated strings.
                check(unsafe { libc::rename(created.as_ptr(), renamed.as_ptr()) }, "rename")?;
                // SAFETY: as above.
                check(unsafe { libc::unlink(renamed.as_ptr()) }, "unlink")?;
            }
            Workload::Send => {
                if let Some(sender) = &sender {
                    sender.send(b"<14>bench: a log line").context("send")?;
                }
            }
            Workload::Connect => {
                std::os::unix::net::UnixStream::connect(socket.with_extension("stream"))
                    .context("connect")?;
            }
        }
    }
    Ok(())
}

/// Serves SOCKET.stream (accepting and closing every connection) and SOCKET.dgram (reading
/// every datagram) until killed; prints `serve: ready` once both are bound.
fn serve(socket: Option<&std::ffi::OsString>) -> anyhow::Result<()> {
    use std::os::unix::net::{UnixDatagram, UnixListener};
    let Some(socket) = socket.map(std::path::Path::new) else {
        bail!("usage: fp-bench-load serve SOCKET");
    };
    let (stream, dgram) = (socket.with_extension("stream"), socket.with_extension("dgram"));
    let _ = (std::fs::remove_file(&stream), std::fs::remove_file(&dgram));
    let listener = UnixListener::bind(&stream).with_context(|| format!("binding {stream:?}"))?;
    let receiver = UnixDatagram::bind(&dgram).with_context(|| format!("binding {dgram:?}"))?;
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while receiver.recv(&mut buf).is_ok() {}
    });
    println!("serve: ready");
    for connection in listener.incoming() {
        drop(connection);
    }
    Ok(())
}

/// Runs the command and prints the CPU time it and its waited-for descendants took.
fn cpu_time(args: &[std::ffi::OsString]) -> anyhow::Result<()> {
    let Some((program, rest)) = without_dashes(args).split_first() else {
        bail!("usage: fp-bench-load cpu-time [--] CMD ARGS...");
    };
    // The kernel keeps utime + stime equal to the tasks' precise run time (to the microsecond in
    // a timeval): the children's total before and after the one child is theirs.
    let children = || -> anyhow::Result<u128> {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
        // SAFETY: `usage` is a writable `struct rusage`.
        if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error()).context("getrusage");
        }
        // SAFETY: getrusage succeeded, so it filled `usage`.
        let usage = unsafe { usage.assume_init() };
        let us = |t: libc::timeval| t.tv_sec as u128 * 1_000_000 + t.tv_usec as u128;
        Ok((us(usage.ru_utime) + us(usage.ru_stime)) * 1_000)
    };
    let before = children()?;
    let status = std::process::Command::new(program)
        .args(rest)
        .status()
        .with_context(|| format!("running {program:?}"))?;
    if !status.success() {
        bail!("{program:?} failed: {status}");
    }
    println!("cpu_ns {}", children()? - before);
    Ok(())
}

/// A command's arguments without a leading `--`.
fn without_dashes(command: &[std::ffi::OsString]) -> &[std::ffi::OsString] {
    match command.split_first() {
        Some((dashes, rest)) if dashes == "--" => rest,
        _ => command,
    }
}

/// Holds the pass-through programs attached (the per-cgroup ones to `cgroup`, if given) until
/// the process is killed.
fn noop(arg: Option<&std::ffi::OsString>) -> anyhow::Result<()> {
    use fp_agent::kernel::NoopEntry;
    use std::os::fd::AsFd as _;
    let cgroup = match arg.filter(|a| *a != "--fmod-ret") {
        Some(path) => Some(
            std::fs::File::open(path).with_context(|| format!("opening the cgroup {path:?}"))?,
        ),
        None => None,
    };
    let entry = match (&cgroup, arg) {
        (Some(dir), _) => NoopEntry::LsmCgroup(dir.as_fd()),
        (None, Some(_)) => NoopEntry::FModRet,
        (None, None) => NoopEntry::Lsm,
    };
    let (_object, links) = fp_agent::kernel::attach_noop(entry, None)?;
    println!("noop: attached {} programs", links.len());
    loop {
        std::thread::park();
    }
}

/// Restricts this process with Landlock (read and execute everywhere, every right in the
/// workspace, writing /dev/null) and execs the command. The rights are those of Landlock ABI 5,
/// or as many of them as the running kernel handles.
fn landlock(args: &[std::ffi::OsString]) -> anyhow::Result<()> {
    use landlock::{
        ABI, Access as _, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr as _,
        RulesetCreatedAttr as _, RulesetStatus,
    };
    let [workspace, command @ ..] = args else {
        bail!("usage: fp-bench-load landlock WORKSPACE [--] CMD ARGS...");
    };
    let Some((program, rest)) = without_dashes(command).split_first() else {
        bail!("usage: fp-bench-load landlock WORKSPACE [--] CMD ARGS...");
    };
    let abi = ABI::V5;
    let beneath = |path: &std::ffi::OsStr, access| -> anyhow::Result<_> {
        Ok(PathBeneath::new(
            PathFd::new(path).with_context(|| format!("opening {path:?}"))?,
            access,
        ))
    };
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))?
        .create()?
        .add_rule(beneath("/".as_ref(), AccessFs::from_read(abi))?)?
        .add_rule(beneath(workspace, AccessFs::from_all(abi))?)?
        .add_rule(beneath(
            "/dev/null".as_ref(),
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev,
        )?)?
        .restrict_self()
        .context("landlock_restrict_self")?;
    if status.ruleset == RulesetStatus::NotEnforced {
        bail!("Landlock is not available on this kernel");
    }
    let error = std::process::Command::new(program).args(rest).exec();
    Err(error).with_context(|| format!("exec {program:?}"))
}

fn agent_start(args: &[std::ffi::OsString]) -> anyhow::Result<()> {
    use fp_tests::{AgentUser, model::ScriptedModel};
    use std::process::{Command, Stdio};
    let [claude, fp, socket, rounds] = args else {
        bail!("usage: fp-bench-load agent-start CLAUDE FP SOCKET ROUNDS");
    };
    let rounds: u32 = rounds.to_str().and_then(|r| r.parse().ok()).context("ROUNDS")?;
    fp_tests::loopback_up();
    let mut agent = AgentUser::new();
    agent.install_claude_code(claude.as_ref());
    let ws = agent.home.join("app");
    std::fs::create_dir(&ws)?;
    agent.own(&ws);
    let model = ScriptedModel::anthropic(Vec::new());
    // Both as `fp run --user` starts the command: the user's ids, HOME, USER, LOGNAME, the
    // workspace as the current directory.
    let command = |confined: bool| {
        let mut cmd = match confined {
            true => {
                let mut run = Command::new(fp);
                run.args(["run", "--socket"]).arg(socket).args(["--profile", "claude-code"]);
                run.arg("--workspace").arg(&ws).args(["--user", AgentUser::NAME, "--"]);
                run
            }
            false => {
                let mut alone = Command::new("setpriv");
                alone.args(["--reuid=6000", "--regid=6000", "--clear-groups", "--"]);
                alone.env("HOME", &agent.home).current_dir(&ws);
                alone.env("USER", AgentUser::NAME).env("LOGNAME", AgentUser::NAME);
                alone
            }
        };
        cmd.args(["claude", "-p", "hello"])
            .env("PATH", format!("{}/.local/bin:/usr/bin:/bin", agent.home.display()))
            .env("ANTHROPIC_BASE_URL", &model.url)
            .env("ANTHROPIC_API_KEY", "sk-scripted")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    };
    // From the spawn to the model's next request; then the CLI must finish its turn and succeed.
    let first_request = |confined: bool| -> anyhow::Result<u128> {
        let before = model.seen();
        let start = Instant::now();
        let mut child = command(confined).spawn().context("starting claude")?;
        let ns = loop {
            if model.seen() > before {
                break start.elapsed().as_nanos();
            }
            if child.try_wait()?.is_some() || start.elapsed().as_secs() > 300 {
                let _ = child.kill();
                let out = child.wait_with_output()?;
                bail!("claude made no request: {}", String::from_utf8_lossy(&out.stderr));
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        };
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!("claude: {}: {}", out.status, String::from_utf8_lossy(&out.stderr));
        }
        Ok(ns)
    };
    first_request(false)?;
    first_request(true)?;
    for round in 1..=rounds {
        println!("AGENT-BARE {round} {}", first_request(false)?);
        println!("AGENT-DAEMON {round} {}", first_request(true)?);
    }
    Ok(())
}
