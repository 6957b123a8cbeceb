//! The prompt tier end to end: a session's open of a prompt-tier file waits in the kernel until
//! `fp approve` / `fp deny`, and a broker killed mid-prompt gives no data away.
use std::{
    path::{Path, PathBuf},
    process::Child,
    time::{Duration, Instant},
};

use fp_tests::{TempTree, exclusive, fp, start_daemon, stdout, wait_for_socket};

/// `cat` of `file` in a session of the daemon at `socket` under `policy`.
fn cat_in_session(socket: &Path, policy: &Path, ws: &Path, file: &Path) -> Child {
    fp_tests::run_with_daemon(socket, policy, ws, &format!("cat {}; echo rc=$?", file.display()))
}

/// The first pending approval, once there is one.
fn first_approval(socket: &Path) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(first) = approvals(socket).as_array().and_then(|a| a.first()) {
            return first.clone();
        }
        assert!(Instant::now() < deadline, "no approval appeared");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The id of the one pending approval, once it is there.
fn pending_approval(socket: &Path) -> u64 {
    first_approval(socket)["id"].as_u64().unwrap()
}

/// Waits (at most a minute) for `file` to exist, while no approval is pending.
fn wait_without_approval(socket: &Path, file: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !file.exists() {
        let pending = approvals(socket);
        assert!(
            pending.as_array().is_none_or(Vec::is_empty),
            "waiting for {}: asked again: {pending}",
            file.display()
        );
        assert!(Instant::now() < deadline, "{} never appeared", file.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A daemon (approvals time out after `timeout_secs`) in a fresh tree, and a policy prompting
/// for `<workspace>/secret/**`, which holds `secret`.
struct PromptDaemon {
    t: TempTree,
    daemon: fp_tests::Daemon,
    config: PathBuf,
    socket: PathBuf,
    policy: PathBuf,
    ws: PathBuf,
    secret: PathBuf,
}

impl PromptDaemon {
    fn start(name: &str, timeout_secs: u64) -> Self {
        let t = TempTree::new(name);
        let secret = t.file("ws/secret/f", "the secret\n");
        let config =
            fp_tests::daemon_config(&t, &format!("[approval]\ntimeout_secs = {timeout_secs}\n"));
        let socket = t.join("fp.sock");
        let policy = t.file(
            "policy.toml",
            "[file_policy]\ndefault = \"write\"\nprompt_paths = [\"<workspace>/secret/**\"]\n",
        );
        let mut daemon = start_daemon(&config);
        wait_for_socket(&socket, &mut daemon);
        let ws = t.join("ws");
        PromptDaemon { t, daemon, config, socket, policy, ws, secret }
    }
}

/// Stops the daemon with SIGTERM, checks it stopped cleanly and left nothing behind, and returns
/// its audit log (in `t`'s `log/`).
fn stop_daemon(daemon: fp_tests::Daemon, t: &TempTree) -> String {
    fp_tests::stop_daemon(daemon);
    std::fs::read_to_string(t.join("log/audit.log")).unwrap()
}

fn decide(socket: &Path, verb: &str, id: u64) {
    decide_with(socket, &[verb, &id.to_string()]);
}

fn decide_with(socket: &Path, args: &[&str]) {
    let out = fp().args(args).arg("--socket").arg(socket).output().unwrap();
    assert!(out.status.success(), "fp {args:?}: {}", fp_tests::stderr(&out));
}

#[test]
fn prompt_tier_opens_wait_for_a_decision_and_fail_closed_when_the_broker_dies() {
    let _g = exclusive();
    let PromptDaemon { t, mut daemon, config, socket, policy, ws, secret } =
        PromptDaemon::start("prompt", 120);

    // Approved: the held read gets the data. `fp run` said what waited and how to answer it.
    let reader = cat_in_session(&socket, &policy, &ws, &secret);
    let id = pending_approval(&socket);
    decide(&socket, "approve", id);
    let done = reader.wait_with_output().unwrap();
    let out = stdout(&done);
    assert!(out.contains("the secret") && out.contains("rc=0"), "{out}");
    let waiting = format!("waits to read {}", secret.display());
    let answer = format!("`fp approve {id}` allows it");
    let err = fp_tests::stderr(&done);
    assert!(err.contains(&waiting) && err.contains(&answer), "{err}");

    // Denied: the open fails.
    let reader = cat_in_session(&socket, &policy, &ws, &secret);
    decide(&socket, "deny", pending_approval(&socket));
    let out = stdout(&reader.wait_with_output().unwrap());
    assert!(!out.contains("the secret") && out.contains("rc=1"), "{out}");

    // The broker dies while the open waits: fanotify lets the open through, the kernel refuses
    // the read of a file whose open was never answered.
    let reader = cat_in_session(&socket, &policy, &ws, &secret);
    pending_approval(&socket);
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    let done = reader.wait_with_output().unwrap();
    let out = stdout(&done);
    assert!(!out.contains("the secret"), "data leaked after the broker died: {out}");
    assert!(out.contains("rc=1"), "{out}{}", fp_tests::stderr(&done));

    // A new daemon takes the session over, records the open its predecessor never answered, and
    // stops cleanly.
    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);
    let log = stop_daemon(daemon, &t);
    assert!(log.contains("prompt-approved") || log.contains("prompt_approved"), "{log}");
    assert!(log.contains("\"kind\":\"session-adopt\""), "{log}");
    assert!(log.contains("the prompt broker died before answering"), "{log}");
}

/// Waits (at most two minutes) until a session has made `file`: it runs.
fn session_started(file: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !file.exists() {
        assert!(Instant::now() < deadline, "the session never started");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The pending approvals listed from outside every session.
fn approvals(socket: &Path) -> serde_json::Value {
    let out = fp().args(["approvals", "--json", "--socket"]).arg(socket).output().unwrap();
    serde_json::from_str(&stdout(&out)).unwrap_or_default()
}

#[test]
fn session_processes_cannot_approve_execs_wait_outsiders_pass_and_nobody_means_denied() {
    let _g = exclusive();
    // Long enough for two `fp` commands in a session under TCG on a loaded host.
    let timeout = 30;
    let PromptDaemon { t, daemon, socket, policy, ws, secret, .. } =
        PromptDaemon::start("prompt-more", timeout);
    let tool = t.join("ws/secret/tool");
    std::fs::copy("/bin/echo", &tool).unwrap();

    // A session process that will try to list and decide the approval: started first (a session
    // start is slow under TCG), it waits until `go` names the approval.
    let fp_bin = fp_tests::fp_bin();
    let go = t.join("go");
    let inside = fp_tests::run_with_daemon(
        &socket,
        &policy,
        &ws,
        &format!(
            "while [ ! -s {go} ]; do sleep 0.1; done; id=$(cat {go}); \
             {fp_bin} approvals --socket {s}; echo list=$?; {fp_bin} approve $id --socket {s}; echo approve=$?",
            go = go.display(),
            s = socket.display()
        ),
    );

    // An exec of a prompt-tier binary waits for its approval, as an exec.
    let exec = fp_tests::run_with_daemon(
        &socket,
        &policy,
        &ws,
        &format!("{} approved-exec 2>&1; echo rc=$?", tool.display()),
    );
    let id = pending_approval(&socket);
    let listed = approvals(&socket);
    assert_eq!(listed[0]["access"], "exec", "{listed}");

    // While it waits: a process outside every session reads the same files at once.
    let started = Instant::now();
    let outside =
        fp_tests::run_outside(&format!("cat {}; {} outside", secret.display(), tool.display()));
    assert!(stdout(&outside).contains("the secret") && stdout(&outside).contains("outside"));
    // Held, it would wait until the approval is decided below or times out (30 s); a loaded
    // host may take seconds for the reads themselves.
    assert!(started.elapsed() < Duration::from_secs(timeout - 10), "an outsider was held");

    // A session process may neither list nor decide approvals; the approval stays pending.
    std::fs::write(&go, id.to_string()).unwrap();
    let inside = inside.wait_with_output().unwrap();
    let said = stdout(&inside);
    assert!(
        said.contains("list=1") && said.contains("approve=1"),
        "{said}{}",
        fp_tests::stderr(&inside)
    );
    assert_eq!(approvals(&socket)[0]["id"], id, "the refused approval must stay pending");
    decide(&socket, "approve", id);
    let out = stdout(&exec.wait_with_output().unwrap());
    let log = || std::fs::read_to_string(t.join("log/audit.log")).unwrap_or_default();
    assert!(out.contains("approved-exec") && out.contains("rc=0"), "{out}\n{}", log());

    // Nobody decides: the open is refused when the approval times out.
    // Timed from before the reader starts: its approval (and its timeout) can only start later,
    // however late a loaded host lets the test see it.
    let waited = Instant::now();
    let reader = cat_in_session(&socket, &policy, &ws, &secret);
    pending_approval(&socket);
    let done = reader.wait_with_output().unwrap();
    let (out, err) = (stdout(&done), fp_tests::stderr(&done));
    assert!(!out.contains("the secret") && out.contains("rc=1"), "{out}");
    // fanotify's refusal is EPERM (docs/prompt.md).
    assert!(err.contains("Operation not permitted"), "{err}");
    assert!(waited.elapsed() >= Duration::from_secs(timeout), "denied before the timeout");

    let log = stop_daemon(daemon, &t);
    assert!(log.contains("prompt-timed-out"), "{log}");
}

/// `fp run` without a daemon, in a session of its own (no controlling terminal), with `config`.
fn run_embedded(
    config: Option<&Path>,
    policy: &Path,
    ws: &Path,
    script: &str,
) -> std::process::Output {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = fp();
    cmd.args(["run", "--embedded", "--policy"]).arg(policy).arg("--workspace").arg(ws);
    if let Some(config) = config {
        cmd.arg("--config").arg(config);
    }
    cmd.args(["--user", "root", "--", "sh", "-c", script]);
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| nix::unistd::setsid().map(drop).map_err(std::io::Error::from));
    }
    let out = cmd.output().unwrap();
    fp_tests::assert_nothing_left_behind();
    out
}

#[test]
fn fp_run_without_a_daemon_asks_its_approval_command() {
    let _g = exclusive();
    let t = TempTree::new("prompt-embedded");
    let secret = t.file("ws/secret/f", "the secret\n");
    let ws = t.join("ws");
    // A prompt rule on the root filesystem too (9p in the VM): its filesystem is marked as well.
    let root_file = Path::new("/usr/lib/os-release");
    let policy = t.file(
        "policy.toml",
        &format!(
            "[file_policy]\ndefault = \"write\"\nprompt_paths = [\"<workspace>/secret/**\", \"{}\"]\n",
            root_file.display()
        ),
    );
    let script = format!(
        "t0=$(date +%s); cat {}; echo rc=$?; cat {} >/dev/null; echo root=$?; \
         echo took=$(($(date +%s) - t0))",
        secret.display(),
        root_file.display()
    );
    let config = |exit: u8| {
        t.file(
            &format!("approve-{exit}.toml"),
            &format!("[approval]\ntimeout_secs = 120\ncommand = [\"/bin/sh\", \"-c\", \"cat >/dev/null; exit {exit}\"]\n"),
        )
    };

    let approved = run_embedded(Some(&config(0)), &policy, &ws, &script);
    let (out, err) = (stdout(&approved), fp_tests::stderr(&approved));
    assert!(
        out.contains("the secret") && out.contains("rc=0") && out.contains("root=0"),
        "{out}{err}"
    );
    assert!(err.contains("approved read") && err.contains("via command"), "{err}");

    let denied = run_embedded(Some(&config(1)), &policy, &ws, &script);
    let (out, err) = (stdout(&denied), fp_tests::stderr(&denied));
    assert!(
        !out.contains("the secret") && out.contains("rc=1") && out.contains("root=1"),
        "{out}{err}"
    );
    assert!(err.contains("denied read"), "{err}");

    // No approval_command and no terminal: denied at once, saying how to configure one.
    let nobody = run_embedded(None, &policy, &ws, &script);
    let (out, err) = (stdout(&nobody), fp_tests::stderr(&nobody));
    assert!(!out.contains("the secret") && out.contains("rc=1"), "{out}{err}");
    assert!(err.contains("no approval_command") && err.contains("[approval]"), "{err}");
    let took: u64 = out.split("took=").nth(1).and_then(|t| t.trim().parse().ok()).unwrap();
    assert!(took < 30, "waited for the 60 s timeout: {out}{err}");
}

#[test]
fn fp_run_without_a_daemon_asks_on_its_terminal() {
    use std::io::{BufRead as _, Write as _};
    let _g = exclusive();
    let t = TempTree::new("prompt-tty");
    let secret = t.file("ws/secret/f", "the secret\n");
    let policy = t.file(
        "policy.toml",
        "[file_policy]\ndefault = \"write\"\nprompt_paths = [\"<workspace>/secret/**\"]\n",
    );
    let fp_run = format!(
        "{} run --embedded --policy {} --workspace {} --user root -- sh -c 'cat {}; echo rc=$?'",
        fp_tests::fp_bin(),
        policy.display(),
        t.join("ws").display(),
        secret.display()
    );
    // script(1) runs fp with a pseudo-terminal as its controlling terminal, relaying our pipes.
    let mut run = std::process::Command::new("script")
        .args(["-qfec", &fp_run, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut terminal = std::io::BufReader::new(run.stdout.take().unwrap());
    let mut seen = Vec::new();
    // The question ends without a newline: read up to its last byte.
    while !String::from_utf8_lossy(&seen).contains("Allow? [y/N]") {
        let mut chunk = Vec::new();
        let n = terminal.read_until(b']', &mut chunk).unwrap();
        assert!(n > 0, "fp never asked: {}", String::from_utf8_lossy(&seen));
        seen.extend(chunk);
    }
    let question = String::from_utf8_lossy(&seen).into_owned();
    assert!(question.contains("wants to read") && question.contains("secret/f"), "{question}");
    run.stdin.take().unwrap().write_all(b"y\n").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut terminal, &mut rest).unwrap();
    assert!(run.wait().unwrap().success(), "{question}{rest}");
    assert!(rest.contains("the secret") && rest.contains("rc=0"), "{question}{rest}");
    assert!(rest.contains("via terminal"), "{rest}");
    fp_tests::assert_nothing_left_behind();
}

#[test]
fn a_remembered_dir_grant_lets_later_opens_through_until_it_expires_also_without_a_broker() {
    let _g = exclusive();
    let PromptDaemon { t, mut daemon, config, socket, policy, ws, .. } =
        PromptDaemon::start("grants", 120);
    for name in ["a", "b", "c", "d", "e", "f"] {
        t.file(&format!("ws/secret/{name}"), &format!("secret {name}\n"));
    }
    // One session: each step waits for the test's marker file, and leaves one when done.
    let (w, m) = (ws.display(), t.join("").display().to_string());
    let step = |file: &str, done: &str| {
        format!("cat {w}/secret/{file}; echo rc_{file}=$?; touch {m}{done}; ")
    };
    let wait = |marker: &str| format!("while [ ! -e {m}{marker} ]; do sleep 0.1; done; ");
    let script = [
        step("a", "a_done"),
        step("b", "b_done"),
        wait("go_c"),
        step("c", "c_done"),
        step("d", "d_done"),
        wait("go_e"),
        step("e", "e_done"),
        wait("go_f"),
        step("f", "f_done"),
    ]
    .concat();
    let session = fp_tests::run_with_daemon(&socket, &policy, &ws, &script);

    // Grants long enough that a guest three times slower than a quiet one still reads b and e
    // before they expire (issue 16 item 7).
    // Approved with a 15 s directory grant: b, in the same directory, is not asked for.
    let approval = first_approval(&socket);
    assert!(approval["path"].as_str().unwrap().ends_with("secret/a"), "{approval}");
    let id = approval["id"].as_u64().unwrap().to_string();
    decide_with(&socket, &["approve", &id, "--remember", "dir", "--for", "15s"]);
    let approved = Instant::now();
    wait_without_approval(&socket, &t.join("b_done"));

    // Expired: c is asked for again (and denied).
    std::thread::sleep(Duration::from_secs(16).saturating_sub(approved.elapsed()));
    std::fs::write(t.join("go_c"), "").unwrap();
    let approval = first_approval(&socket);
    assert!(approval["path"].as_str().unwrap().ends_with("secret/c"), "{approval}");
    decide(&socket, "deny", approval["id"].as_u64().unwrap());

    // d: approved with a 30 s grant, then the broker dies. With no broker the kernel denies
    // prompts, so e gets through on the kernel's copy of the grant alone, until it expires.
    let approval = first_approval(&socket);
    assert!(approval["path"].as_str().unwrap().ends_with("secret/d"), "{approval}");
    let id = approval["id"].as_u64().unwrap().to_string();
    decide_with(&socket, &["approve", &id, "--remember", "dir", "--for", "30s"]);
    let approved = Instant::now();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    // The heartbeat goes stale after 2 s.
    std::thread::sleep(Duration::from_secs(3));
    assert!(approved.elapsed() < Duration::from_secs(25), "too slow to test before expiry");
    std::fs::write(t.join("go_e"), "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !t.join("e_done").exists() {
        assert!(Instant::now() < deadline, "e was never read");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(31).saturating_sub(approved.elapsed()));
    std::fs::write(t.join("go_f"), "").unwrap();
    let done = session.wait_with_output().unwrap();
    let out = stdout(&done);
    for (file, read) in
        [("a", true), ("b", true), ("c", false), ("d", true), ("e", true), ("f", false)]
    {
        let rc = if read { 0 } else { 1 };
        assert!(
            out.contains(&format!("rc_{file}={rc}")),
            "{file}: {out}{}",
            fp_tests::stderr(&done)
        );
        assert_eq!(out.contains(&format!("secret {file}")), read, "{file}: {out}");
    }

    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);
    let log = stop_daemon(daemon, &t);
    assert!(log.contains("granted"), "no granted open in the audit log: {log}");
}

/// The broker marks the mounts of a session's own mount namespace, not whole filesystems: with a
/// prompt session live, a process outside every session never waits for the broker, even one
/// that cannot answer (stopped). A session process that reaches a prompt-tier file through the
/// host's mounts (an outsider's `/proc/<pid>/root`), where no event is raised, gets no data: the
/// kernel half fails closed.
#[test]
fn outsiders_never_wait_for_the_broker_and_unmarked_mounts_fail_closed() {
    use nix::{sys::signal, unistd::Pid};
    let _g = exclusive();
    let PromptDaemon { t, daemon, socket, policy, ws, secret, .. } =
        PromptDaemon::start("prompt-outsiders", 120);
    let (started, stop) = (ws.join("started"), t.join("stop"));
    let session = fp_tests::run_with_daemon(
        &socket,
        &policy,
        &ws,
        &format!(
            "touch {}; while [ ! -e {} ]; do sleep 0.1; done; \
             cat /proc/{}/root{}; echo rc=$?",
            started.display(),
            stop.display(),
            std::process::id(),
            secret.display()
        ),
    );
    session_started(&started);

    // The daemon (its broker) stopped: an outsider creates, writes and reads new files in the
    // session's workspace and its prompt scope, and reads the prompt-tier file. With filesystem
    // marks each of these opens would wait for the broker until `timeout` killed it.
    let daemon_pid = Pid::from_raw(daemon.id() as i32);
    signal::kill(daemon_pid, signal::SIGSTOP).unwrap();
    let outside = fp_tests::run_outside(&format!(
        "timeout 100 sh -c 'echo made > {ws}/outside && cat {ws}/outside && \
         echo made > {ws}/secret/outside && cat {ws}/secret/outside {secret}'; echo rc=$?",
        ws = ws.display(),
        secret = secret.display()
    ));
    signal::kill(daemon_pid, signal::SIGCONT).unwrap();
    let said = stdout(&outside);
    assert!(said.contains("made\nmade\nthe secret\nrc=0"), "an outsider waited: {said}");

    // The session opens the prompt-tier file through the test's own root (the host's mounts).
    std::fs::write(&stop, "").unwrap();
    let done = session.wait_with_output().unwrap();
    let out = stdout(&done);
    assert!(!out.contains("the secret"), "read through an unmarked mount: {out}");
    assert!(out.contains("rc=1"), "{out}{}", fp_tests::stderr(&done));
    assert!(approvals(&socket).as_array().is_none_or(Vec::is_empty), "asked for an unmarked open");
    stop_daemon(daemon, &t);
}

/// A filesystem mounted on the host below a prompt scope after the session started propagates
/// into the session's mount namespace, and the broker marks it as it appears: its prompt-tier
/// files are asked for like the others, rather than failing closed until a reload.
#[test]
fn a_filesystem_mounted_below_a_prompt_scope_mid_session_is_marked_as_it_appears() {
    let _g = exclusive();
    let PromptDaemon { t, daemon, socket, policy, ws, .. } =
        PromptDaemon::start("prompt-mounted", 120);
    // The prompt scope as a shared mount: mounts below it reach the session's namespace.
    let (scope, go) = (ws.join("secret"), t.join("go"));
    std::fs::create_dir(scope.join("late")).unwrap();
    let shared = fp_tests::run_outside(&format!(
        "mount --bind {s} {s} && mount --make-shared {s}",
        s = scope.display()
    ));
    assert!(shared.status.success(), "{}", fp_tests::stderr(&shared));
    let late = scope.join("late/f");
    // Until the broker has marked the new mount an open there fails closed: tried again.
    let session = fp_tests::run_with_daemon(
        &socket,
        &policy,
        &ws,
        &format!(
            "touch {ws}/started; while [ ! -e {go} ]; do sleep 0.1; done; \
             for i in $(seq 100); do cat {late} 2>/dev/null && break; sleep 0.2; done; echo rc=$?",
            ws = ws.display(),
            go = go.display(),
            late = late.display()
        ),
    );
    session_started(&ws.join("started"));
    let mounted = fp_tests::run_outside(&format!(
        "mount -t tmpfs late {} && echo late > {}",
        scope.join("late").display(),
        late.display()
    ));
    assert!(mounted.status.success(), "{}", fp_tests::stderr(&mounted));
    std::fs::write(&go, "").unwrap();
    let approval = first_approval(&socket);
    assert_eq!(approval["path"], late.display().to_string(), "{approval}");
    decide(&socket, "approve", approval["id"].as_u64().unwrap());
    let done = session.wait_with_output().unwrap();
    let out = stdout(&done);
    fp_tests::run_outside(&format!("umount -R {}", scope.display()));
    assert!(out.contains("late\nrc=0"), "{out}{}", fp_tests::stderr(&done));
    stop_daemon(daemon, &t);
}

/// In a session's own mount namespace each existing prompt scope is a mount of its own, and only
/// it is marked: the session's opens elsewhere (a build in its workspace) never wait for the
/// broker, even a stopped one, while its prompt-tier opens are still held for a decision.
#[test]
fn a_sessions_opens_outside_its_prompt_scopes_never_wait_for_the_broker() {
    use nix::{sys::signal, unistd::Pid};
    let _g = exclusive();
    let PromptDaemon { t, daemon, socket, policy, ws, secret, .. } =
        PromptDaemon::start("prompt-inside", 120);
    let (started, go, built, asked) =
        (ws.join("started"), t.join("go"), ws.join("built"), t.join("asked"));
    // After the build, the prompt-tier read: denied in the kernel while the broker's heartbeat
    // is stale (just after it was stopped), so tried again until it is held.
    let session = fp_tests::run_with_daemon(
        &socket,
        &policy,
        &ws,
        &format!(
            "grep -q ' {scope} ' /proc/self/mountinfo && echo scope-mounted; touch {started}; \
             while [ ! -e {go} ]; do sleep 0.1; done; \
             mkdir {ws}/obj && echo made > {ws}/obj/new.o && cat {ws}/obj/new.o > {ws}/obj/copy \
             && mv {ws}/obj/copy {built}; \
             while [ ! -e {asked} ]; do sleep 0.1; done; \
             for i in $(seq 100); do cat {secret} 2>/dev/null && break; sleep 0.2; done; echo rc=$?",
            scope = ws.join("secret").display(),
            ws = ws.display(),
            started = started.display(),
            go = go.display(),
            built = built.display(),
            asked = asked.display(),
            secret = secret.display(),
        ),
    );
    session_started(&started);
    let daemon_pid = Pid::from_raw(daemon.id() as i32);
    signal::kill(daemon_pid, signal::SIGSTOP).unwrap();
    std::fs::write(&go, "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !built.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    signal::kill(daemon_pid, signal::SIGCONT).unwrap();
    assert!(built.exists(), "the session's build waited for the stopped broker");
    std::fs::write(&asked, "").unwrap();
    decide(&socket, "approve", pending_approval(&socket));
    let done = session.wait_with_output().unwrap();
    let out = stdout(&done);
    assert!(out.contains("scope-mounted"), "{out}");
    assert_eq!(std::fs::read_to_string(&built).unwrap(), "made\n");
    assert!(out.contains("the secret\nrc=0"), "{out}{}", fp_tests::stderr(&done));
    stop_daemon(daemon, &t);
}

/// A user who is not root owns the session's mount namespace through a user namespace of their
/// own: the broker marks that namespace's mounts, never whole filesystems. An outsider writes and
/// reads in the prompt scope while the broker is stopped, and the session's prompt-tier read is
/// held for a decision as for root's; the command keeps its user and its exit status.
#[test]
fn an_unprivileged_clients_session_gets_a_mount_namespace_of_its_own() {
    use nix::{sys::signal, unistd::Pid};
    let _g = exclusive();
    let t = TempTree::new("prompt-nonroot");
    let secret = t.file("ws/secret/f", "the secret\n");
    let config = fp_tests::daemon_config_for_nobody(&t, "[approval]\ntimeout_secs = 120\n");
    let (socket, ws, go) = (t.join("fp.sock"), t.join("ws"), t.join("go"));
    let policy = t.file(
        "policy.toml",
        "[file_policy]\ndefault = \"write\"\nprompt_paths = [\"<workspace>/secret/**\"]\n",
    );
    let mut daemon = start_daemon(&config);
    wait_for_socket(&socket, &mut daemon);
    let script = format!(
        "echo mnt=$(readlink /proc/self/ns/mnt); while [ ! -e {go} ]; do sleep 0.1; done; \
         for i in $(seq 100); do cat {secret} 2>/dev/null && break; sleep 0.2; done; \
         echo rc=$?; exit 7",
        go = go.display(),
        secret = secret.display()
    );
    let session = fp_tests::fp_run_as_nobody(&socket, &policy, &ws, &script)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !daemon_sessions(&socket).contains("\"pids\"") {
        assert!(Instant::now() < deadline, "the session never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    let daemon_pid = Pid::from_raw(daemon.id() as i32);
    signal::kill(daemon_pid, signal::SIGSTOP).unwrap();
    let outside = fp_tests::run_outside(&format!(
        "timeout 100 sh -c 'echo made > {ws}/secret/outside && cat {ws}/secret/outside {secret}'; \
         echo rc=$?",
        ws = ws.display(),
        secret = secret.display()
    ));
    signal::kill(daemon_pid, signal::SIGCONT).unwrap();
    let said = stdout(&outside);
    assert!(said.contains("made\nthe secret\nrc=0"), "an outsider waited: {said}");

    std::fs::write(&go, "").unwrap();
    decide(&socket, "approve", pending_approval(&socket));
    let done = session.wait_with_output().unwrap();
    let out = stdout(&done);
    assert_eq!(
        done.status.code(),
        Some(7),
        "the command's status: {out}{}",
        fp_tests::stderr(&done)
    );
    let host_ns = std::fs::read_link("/proc/self/ns/mnt").unwrap();
    assert!(
        out.contains("mnt=mnt:[") && !out.contains(&format!("mnt={}", host_ns.display())),
        "{out}"
    );
    assert!(out.contains("the secret\nrc=0"), "{out}{}", fp_tests::stderr(&done));
    let log = stop_daemon(daemon, &t);
    assert!(log.contains("\"uid\":65534"), "{log}");
}

/// `fp sessions --json` of the daemon at `socket`.
fn daemon_sessions(socket: &Path) -> String {
    let out = fp().args(["sessions", "--json", "--socket"]).arg(socket).output().unwrap();
    stdout(&out)
}
