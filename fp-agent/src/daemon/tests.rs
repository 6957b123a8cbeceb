//! The server, protocol and client against a fake [`SessionHost`], on a socket in a temp dir.
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;

use super::api::{self, ApiError, ErrorCode, Event, Mode};
use super::{Client, ClientError, Peer, Server, SessionHost};
use crate::config::Config;

#[derive(Default)]
struct FakeHost {
    sessions: Mutex<Vec<api::SessionSummary>>,
    created: Mutex<Vec<api::CreateSession>>,
    /// (session, exit code) as `command_exited` noted them.
    exits: Mutex<Vec<(String, i32)>>,
    events: Option<broadcast::Sender<Event>>,
    shut_down: AtomicBool,
}

impl FakeHost {
    fn new() -> Arc<Self> {
        Arc::new(FakeHost { events: Some(broadcast::channel(16).0), ..FakeHost::default() })
    }

    fn publish(&self, event: Event) {
        let _ = self.events.as_ref().unwrap().send(event);
    }
}

impl SessionHost for FakeHost {
    fn create(
        &self,
        _peer: &Peer,
        req: api::CreateSession,
    ) -> Result<api::SessionCreated, ApiError> {
        let mut sessions = self.sessions.lock().unwrap();
        let summary = api::SessionSummary {
            id: format!("s{}", sessions.len() + 1),
            agent: req.agent.clone(),
            cgroup_id: 1000 + sessions.len() as u64,
            pids: 1,
            mode: req.mode.unwrap(),
            denials: 0,
            boundary: 0,
            dropped: 0,
            started_at: "2026-11-21T14:00:00Z".into(),
            policy_hash: "sha256:aa".into(),
        };
        sessions.push(summary.clone());
        self.created.lock().unwrap().push(req);
        self.publish(Event::SessionStarted { session: summary.clone() });
        Ok(api::SessionCreated {
            id: summary.id,
            cgroup_id: summary.cgroup_id,
            policy_hash: summary.policy_hash,
            unreadable_base: Default::default(),
        })
    }

    fn list(&self) -> Vec<api::SessionSummary> {
        self.sessions.lock().unwrap().clone()
    }

    fn end(&self, id: &str) -> Result<(), ApiError> {
        let mut sessions = self.sessions.lock().unwrap();
        let before = sessions.len();
        sessions.retain(|s| s.id != id);
        if sessions.len() == before {
            return Err(ApiError::new(ErrorCode::NotFound, format!("no session {id}")));
        }
        self.publish(Event::SessionEnded { id: id.into(), reason: "ended on request".into() });
        Ok(())
    }

    fn command_exited(&self, _peer: &Peer, id: &str, exit_code: i32) -> Result<(), ApiError> {
        if !self.sessions.lock().unwrap().iter().any(|s| s.id == id) {
            return Err(ApiError::new(ErrorCode::NotFound, format!("no session {id}")));
        }
        self.exits.lock().unwrap().push((id.into(), exit_code));
        Ok(())
    }

    fn reload(&self, req: api::Reload) -> Result<api::Reloaded, ApiError> {
        if req.source.policy_text.as_deref() == Some("bad") {
            return Err(ApiError::new(ErrorCode::InvalidPolicy, "inline:1:1: error: bad"));
        }
        Ok(api::Reloaded {
            id: req.id,
            previous_policy_hash: "sha256:aa".into(),
            policy_hash: "sha256:bb".into(),
        })
    }

    fn status(&self) -> api::HostStatus {
        api::HostStatus {
            bpf_lsm: true,
            backend: "bpf_lsm".into(),
            backend_why: "`bpf` is in the active LSM list".into(),
            attached_hooks: vec!["file_open".into()],
            maps: vec![api::MapUsage { name: "SESSIONS".into(), used: 1, capacity: 1024 }],
            sessions: self.sessions.lock().unwrap().len() as u32,
            counters: api::Counters { events: 7, losses: 0 },
            orphans: Vec::new(),
            audit: None,
        }
    }

    fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.as_ref().unwrap().subscribe()
    }

    fn shutdown(&self) {
        self.shut_down.store(true, Ordering::SeqCst);
    }
}

/// A server on its own runtime thread, stopped on drop.
struct TestDaemon {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    host: Arc<FakeHost>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestDaemon {
    fn start() -> Self {
        Self::start_with(|_| {})
    }

    fn start_with(configure: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config {
            socket: dir.path().join("fp.sock"),
            file: Some("/etc/fp/config.toml".into()),
            ..Config::default()
        };
        config.sessions.default_mode = Mode::Audit;
        configure(&mut config);
        let host = FakeHost::new();
        let server = Server::bind(&config, host.clone()).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(server.run(async {
                let _ = stopped.await;
            }));
        });
        TestDaemon {
            socket: config.socket,
            _dir: dir,
            host,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn client(&self) -> Client {
        let mut client = Client::connect(&self.socket).unwrap();
        client.set_timeout(Some(Duration::from_secs(10))).unwrap();
        client
    }

    /// A raw connection, to send what the client never would.
    fn raw(&self) -> (UnixStream, BufReader<UnixStream>) {
        let stream = UnixStream::connect(&self.socket).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        (stream, reader)
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        let _ = self.thread.take().unwrap().join();
    }
}

fn reply_of(reader: &mut BufReader<UnixStream>) -> serde_json::Value {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

/// Each line of `cases` gets an error reply with its code.
fn error_replies(
    stream: &mut UnixStream,
    reader: &mut BufReader<UnixStream>,
    cases: &[(&str, &str)],
) {
    for &(line, code) in cases {
        stream.write_all(line.as_bytes()).unwrap();
        let reply = reply_of(reader);
        assert_eq!((reply["v"].as_u64(), reply["type"].as_str()), (Some(1), Some("error")));
        assert_eq!(reply["error"]["code"], code, "{line}");
    }
}

fn refused(result: Result<impl std::fmt::Debug, ClientError>) -> ApiError {
    match result {
        Err(ClientError::Refused(e)) => e,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A child process, killed and reaped on drop.
struct Child(std::process::Child);

impl Child {
    fn spawn() -> Self {
        Child(std::process::Command::new("sleep").arg("30").spawn().unwrap())
    }

    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn create_request(pid: i32) -> api::CreateSession {
    api::CreateSession {
        agent: "claude".into(),
        source: api::PolicySource {
            policy: Some("/etc/fp/claude.toml".into()),
            ..Default::default()
        },
        workspace: Some("/home/alice/project".into()),
        uid: 1000,
        mode: None,
        full_audit: None,
        pid,
        command: vec!["bash".into(), "-l".into()],
    }
}

#[test]
fn sessions_round_trip() {
    let daemon = TestDaemon::start();
    let mut client = daemon.client();
    let child = Child::spawn();
    let created = client.create(create_request(child.pid())).unwrap();
    assert_eq!(created.id, "s1");

    // The server filled in the [sessions] defaults and the daemon's config file as config layer.
    let seen = daemon.host.created.lock().unwrap()[0].clone();
    assert_eq!(seen.mode, Some(Mode::Audit));
    assert_eq!(seen.full_audit, Some(false));
    assert_eq!(seen.command, ["bash", "-l"], "the session's argv reaches the host");
    assert_eq!(seen.source.config.as_deref(), Some(Path::new("/etc/fp/config.toml")));

    let sessions = client.list().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!((sessions[0].agent.as_str(), sessions[0].mode), ("claude", Mode::Audit));

    let reload = api::Reload {
        id: "s1".into(),
        source: api::PolicySource { policy: Some("/etc/fp/v2.toml".into()), ..Default::default() },
    };
    let reloaded = client.reload(reload).unwrap();
    assert_eq!(
        (reloaded.previous_policy_hash.as_str(), reloaded.policy_hash.as_str()),
        ("sha256:aa", "sha256:bb")
    );
    let bad = api::Reload {
        id: "s1".into(),
        source: api::PolicySource { policy_text: Some("bad".into()), ..Default::default() },
    };
    assert_eq!(refused(client.reload(bad)).code, ErrorCode::InvalidPolicy);

    let status = client.status().unwrap();
    assert_eq!(status.daemon.pid, std::process::id());
    assert_eq!(status.daemon.protocol, api::VERSION);
    assert_eq!((status.host.sessions, status.host.counters.events), (1, 7));

    client.command_exited("s1", 3).unwrap();
    assert_eq!(*daemon.host.exits.lock().unwrap(), [("s1".to_owned(), 3)]);
    client.end("s1").unwrap();
    assert_eq!(refused(client.end("s1")).code, ErrorCode::NotFound);
    assert_eq!(refused(client.command_exited("s1", 0)).code, ErrorCode::NotFound);
    assert!(client.list().unwrap().is_empty());
}

#[test]
fn create_checks_the_pid_and_the_policy() {
    let daemon = TestDaemon::start();
    let mut client = daemon.client();
    // pid 1 is nobody's child here: pulling it into a session is refused.
    let e = refused(client.create(create_request(1)));
    assert_eq!(e.code, ErrorCode::PermissionDenied);
    assert!(e.message.contains("not a child"), "{e}");
    let e = refused(client.create(create_request(i32::MAX)));
    assert_eq!(e.code, ErrorCode::PermissionDenied);

    let child = Child::spawn();
    let mut both = create_request(child.pid());
    both.source.policy_text = Some("[file_policy]\n".into());
    assert_eq!(refused(client.create(both)).code, ErrorCode::BadRequest);
    assert!(daemon.host.created.lock().unwrap().is_empty());
}

#[test]
fn a_session_without_any_policy_is_refused() {
    let daemon = TestDaemon::start_with(|c| c.file = None);
    let mut client = daemon.client();
    let child = Child::spawn();
    let mut none = create_request(child.pid());
    none.source = api::PolicySource::default();
    let e = refused(client.create(none));
    assert!(e.message.contains("default_policy"), "{e}");
}

#[test]
fn subscribers_receive_events_and_learn_what_they_missed() {
    let daemon = TestDaemon::start();
    let mut events = daemon.client().subscribe().unwrap();
    let child = Child::spawn();
    daemon.client().create(create_request(child.pid())).unwrap();
    let Some(Ok(Event::SessionStarted { session })) = events.next() else { panic!() };
    assert_eq!(session.id, "s1");

    // More events than the channel holds, large enough to fill the socket while this subscriber
    // does not read: whatever it does not receive, it is told it missed.
    let record = serde_json::json!({"padding": "x".repeat(64 << 10)});
    for _ in 0..100 {
        daemon.host.publish(Event::Decision { record: record.clone() });
    }
    let (mut received, mut missed) = (0, 0);
    while received + missed < 100 {
        match events.next() {
            Some(Ok(Event::Decision { record: r })) if r == record => received += 1,
            Some(Ok(Event::Missed { count })) => missed += count,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(received + missed, 100);
    assert!(missed > 0, "100 events of 64 KiB do not fit 16 slots and a socket buffer");
}

#[test]
fn bad_lines_get_error_replies_and_the_connection_goes_on() {
    let daemon = TestDaemon::start();
    let (mut stream, mut reader) = daemon.raw();
    let cases = [
        ("{not json\n", "invalid_json"),
        ("{\"v\":2,\"op\":\"status\"}\n", "unsupported_version"),
        ("{\"op\":\"status\"}\n", "unsupported_version"),
        ("{\"v\":1,\"op\":\"reboot\"}\n", "bad_request"),
        ("\u{1}\u{2}\u{ff}\n", "invalid_json"),
    ];
    error_replies(&mut stream, &mut reader, &cases);
    stream.write_all(b"\n{\"v\":1,\"op\":\"list_sessions\"}\n").unwrap();
    assert_eq!(reply_of(&mut reader)["type"], "sessions");
}

/// Approval requests are parsed like the others: another version is `unsupported_version`, and
/// a daemon without a prompt broker answers `unavailable`; the connection goes on.
#[test]
fn approval_requests_share_the_protocol() {
    let daemon = TestDaemon::start();
    let (mut stream, mut reader) = daemon.raw();
    let cases = [
        ("{\"v\":2,\"op\":\"list_approvals\"}\n", "unsupported_version"),
        ("{\"op\":\"watch_approvals\"}\n", "unsupported_version"),
        (
            "{\"v\":7,\"op\":\"decide_approval\",\"id\":1,\"decision\":\"deny\"}\n",
            "unsupported_version",
        ),
        ("{\"v\":1,\"op\":\"decide_approval\",\"id\":1}\n", "bad_request"),
        ("{\"v\":1,\"op\":\"list_approvals\"}\n", "unavailable"),
        ("{\"v\":1,\"op\":\"watch_approvals\"}\n", "unavailable"),
    ];
    error_replies(&mut stream, &mut reader, &cases);
    assert_eq!(refused(daemon.client().list_approvals()).code, ErrorCode::Unavailable);
}

/// A call gives up on a daemon that never answers; a stream, once started, waits.
#[test]
fn calls_time_out_and_streams_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("slow.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let server = std::thread::spawn(move || {
        // The first connection is never answered; the second starts a watch, then waits.
        let (silent, _) = listener.accept().unwrap();
        let (mut watch, _) = listener.accept().unwrap();
        let mut line = String::new();
        BufReader::new(&watch).read_line(&mut line).unwrap();
        watch.write_all(b"{\"v\":1,\"type\":\"watching\"}\n").unwrap();
        std::thread::sleep(Duration::from_millis(600));
        watch.write_all(b"{\"v\":1,\"type\":\"missed\",\"count\":2}\n").unwrap();
        drop(silent);
    });
    let mut client = Client::connect(&socket).unwrap();
    client.set_timeout(Some(Duration::from_millis(200))).unwrap();
    let e = client.list_approvals().unwrap_err();
    assert!(matches!(&e, ClientError::Io(_)), "{e}");
    assert_eq!(e.exit_code(), 125);
    let mut client = Client::connect(&socket).unwrap();
    client.set_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut watch = client.watch_approvals().unwrap();
    assert_eq!(watch.next().unwrap().unwrap(), api::Reply::Missed { count: 2 });
    server.join().unwrap();
}

#[test]
fn an_oversized_line_is_refused_and_closes_only_its_connection() {
    let daemon = TestDaemon::start();
    let (mut stream, mut reader) = daemon.raw();
    let huge = vec![b'x'; api::MAX_REQUEST_BYTES + 10];
    let writer = std::thread::spawn(move || {
        stream.write_all(&huge).unwrap();
        stream
    });
    assert_eq!(reply_of(&mut reader)["error"]["code"], "line_too_long");
    // The daemon drained the rest of the line: the whole write went through.
    let stream = writer.join().unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    assert_eq!(reader.read_to_end(&mut rest).unwrap(), 0, "the connection is closed");
    assert!(daemon.client().list().unwrap().is_empty());
}

#[test]
fn stalled_clients_do_not_stall_others() {
    let daemon = TestDaemon::start();
    // Half a request, never finished.
    let (mut half, _half_reader) = daemon.raw();
    half.write_all(b"{\"v\":1,\"op\":").unwrap();
    // A subscriber that never reads, while events flood its socket buffer.
    let (mut deaf, _deaf_reader) = daemon.raw();
    deaf.write_all(b"{\"v\":1,\"op\":\"subscribe\"}\n").unwrap();
    // A subscriber that reads.
    let mut listening = daemon.client().subscribe().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let record = serde_json::json!({"padding": "x".repeat(4096)});
    for _ in 0..2000 {
        daemon.host.publish(Event::Decision { record: record.clone() });
    }
    let started = std::time::Instant::now();
    assert!(daemon.client().status().unwrap().host.bpf_lsm);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(listening.next().unwrap().is_ok());
}

#[test]
fn connections_beyond_the_limit_are_refused_until_one_closes() {
    let daemon = TestDaemon::start();
    let mut open: Vec<_> = (0..super::server::MAX_CONNECTIONS).map(|_| daemon.raw()).collect();
    // The server has accepted them all once each has been answered.
    for (stream, reader) in &mut open {
        stream.write_all(b"{\"v\":1,\"op\":\"list_sessions\"}\n").unwrap();
        assert_eq!(reply_of(reader)["type"], "sessions");
    }
    let e = refused(daemon.client().list());
    assert_eq!(e.code, ErrorCode::Unavailable);
    drop(open.pop());
    // The refused connection lingers up to REFUSAL_LINGER; retry until a slot is free.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match daemon.client().list() {
            Ok(sessions) => break assert!(sessions.is_empty()),
            Err(e) if std::time::Instant::now() < deadline => {
                assert!(
                    matches!(&e, ClientError::Refused(a) if a.code == ErrorCode::Unavailable),
                    "{e}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn shutdown_reaches_the_host_and_no_daemon_is_exit_3() {
    let daemon = TestDaemon::start();
    let host = daemon.host.clone();
    let socket = daemon.socket.clone();
    drop(daemon);
    let e = Client::connect(&socket).err().unwrap();
    assert_eq!(e.exit_code(), 3, "{e}");
    // serve() calls shutdown after run(); run() alone leaves the host running.
    assert!(!host.shut_down.load(Ordering::SeqCst));
}

/// Forks a child that runs `setup`, then asks for the status; its exit status says what it got:
/// 0 refused with permission_denied, 1 another reply (or none), 2 no connection, 3 setup failed.
fn status_from_child(socket: &Path, setup: impl FnOnce() -> bool) -> i32 {
    let request = api::request_line(&api::Request::Status);
    // Safety: the child only makes system calls on memory prepared before the fork, then exits.
    match unsafe { nix::unistd::fork() }.unwrap() {
        nix::unistd::ForkResult::Child => {
            let code = if !setup() {
                3
            } else {
                match UnixStream::connect(socket) {
                    Err(_) => 2,
                    Ok(mut stream) => {
                        let mut reply = [0u8; 4096];
                        // The daemon reads the request even when it refuses the peer.
                        let n = stream.write_all(&request).and_then(|()| stream.read(&mut reply));
                        let reply = &reply[..n.unwrap_or(0)];
                        let needle = b"\"code\":\"permission_denied\"";
                        i32::from(!reply.windows(needle.len()).any(|w| w == needle))
                    }
                }
            };
            unsafe { libc::_exit(code) }
        }
        nix::unistd::ForkResult::Parent { child } => {
            match nix::sys::wait::waitpid(child, None).unwrap() {
                nix::sys::wait::WaitStatus::Exited(_, code) => code,
                other => panic!("{other:?}"),
            }
        }
    }
}

fn is_root() -> bool {
    let root = nix::unistd::geteuid().is_root();
    if !root {
        eprintln!("skipped: needs root");
    }
    root
}

#[test]
fn peers_that_are_neither_root_nor_in_the_group_are_refused() {
    if !is_root() {
        return;
    }
    let daemon = TestDaemon::start();
    // Let anyone reach the socket, so that the daemon's own check is what refuses.
    use std::os::unix::fs::PermissionsExt as _;
    let open = std::fs::Permissions::from_mode(0o755);
    std::fs::set_permissions(daemon.socket.parent().unwrap(), open).unwrap();
    std::fs::set_permissions(&daemon.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let nobody = nix::unistd::Uid::from_raw(65534);
    let nogroup = nix::unistd::Gid::from_raw(65534);
    let as_nobody = || {
        nix::unistd::setgroups(&[]).is_ok()
            && nix::unistd::setgid(nogroup).is_ok()
            && nix::unistd::setuid(nobody).is_ok()
    };
    assert_eq!(status_from_child(&daemon.socket, as_nobody), 0);
    // Root itself is served.
    assert_eq!(status_from_child(&daemon.socket, || true), 1);
}

#[test]
fn peers_inside_the_sessions_cgroup_are_refused() {
    if !is_root() {
        return;
    }
    let hierarchy = crate::session::Cgroup2::find().unwrap();
    let cgroups =
        TempCgroup::create(&hierarchy.mount.join(format!("fp-daemon-test-{}", std::process::id())));
    let parent = cgroups.0.clone();
    let daemon = TestDaemon::start_with(|c| c.cgroup_parent = Some(parent));
    let procs = cgroups.0.join("s1/cgroup.procs").into_os_string().into_encoded_bytes();
    let procs = std::ffi::CString::new(procs).unwrap();
    let join_session = || {
        // Safety: a plain open/write/close on a path prepared before the fork.
        unsafe {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
            let joined = fd >= 0 && libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
            libc::close(fd);
            joined
        }
    };
    assert_eq!(status_from_child(&daemon.socket, join_session), 0);
    assert_eq!(status_from_child(&daemon.socket, || true), 1);
}

/// A sessions parent `<dir>` with one session `<dir>/s1`, removed on drop (even on failure).
struct TempCgroup(PathBuf);

impl TempCgroup {
    fn create(dir: &Path) -> Self {
        std::fs::create_dir_all(dir.join("s1")).unwrap();
        TempCgroup(dir.to_path_buf())
    }
}

impl Drop for TempCgroup {
    fn drop(&mut self) {
        // rmdir is EBUSY until the exited child is released.
        for dir in [self.0.join("s1"), self.0.clone()] {
            for _ in 0..500 {
                if std::fs::remove_dir(&dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

#[test]
fn a_second_daemon_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        socket: dir.path().join("fp.sock"),
        pin_dir: dir.path().join("bpf/fp"),
        ..Config::default()
    };
    let _first = super::InstanceLock::acquire(&config.lock_path()).unwrap();
    let e = super::run(&config, |_| panic!("the host must not start")).unwrap_err().to_string();
    assert!(e.starts_with("another fp daemon is running"), "{e}");
    assert!(!config.socket.exists(), "the running daemon's socket is left alone");
}

/// The pins are host-wide: a daemon with the same pin directory is refused before it starts its
/// host (which would open its audit log and take the live daemon's sessions over), on the same
/// socket and on another.
#[test]
fn a_second_daemon_on_the_same_pins_refuses_before_starting_its_host() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        socket: dir.path().join("a/fp.sock"),
        pin_dir: dir.path().join("bpf/fp"),
        ..Config::default()
    };
    let _first = super::InstanceLock::acquire_dir(&config.pin_dir).unwrap();
    let other = Config { socket: dir.path().join("b/fp.sock"), ..config.clone() };
    let pid = std::process::id();
    for config in [&config, &other] {
        let e = super::run(config, |_| panic!("the host must not start")).unwrap_err();
        let e = e.to_string();
        let expected = format!(
            "another fp daemon is running (pid {pid}, holding {}",
            dir.path().join("bpf/fp").display()
        );
        assert!(e.starts_with(&expected), "{e}");
        assert!(!config.lock_path().exists(), "refused before it touched its socket's directory");
    }
}

/// `serve` in a child process, as systemd runs it: READY=1 once the socket answers, watchdog
/// pings, and SIGTERM stops it cleanly (STOPPING=1, the host shut down, the socket removed). The
/// child is this test binary running [`serve_as_a_child`], not a fork: tokio's signal pipe is
/// process-global, and a forked child would share this process's.
#[test]
fn serve_notifies_systemd_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let notify_path = dir.path().join("notify");
    let notifications = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notifications.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let socket = dir.path().join("fp.sock");
    // Killed on drop, should an assertion fail while it runs.
    let mut child = Child(
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "daemon::tests::serve_as_a_child", "--test-threads=1"])
            .env(SERVE_SOCKET, &socket)
            .env("NOTIFY_SOCKET", &notify_path)
            .env("WATCHDOG_USEC", "100000")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let next = || {
        let mut buf = [0u8; 64];
        let n = notifications.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    assert_eq!(next(), "READY=1");
    let status = Client::connect(&socket).unwrap().status().unwrap();
    assert_eq!(status.daemon.pid, child.0.id());
    assert_eq!(next(), "WATCHDOG=1");
    let pid = nix::unistd::Pid::from_raw(child.pid());
    nix::sys::signal::kill(pid, nix::sys::signal::SIGTERM).unwrap();
    let stopping = (0..100).map(|_| next()).find(|state| state != "WATCHDOG=1");
    assert_eq!(stopping.as_deref(), Some("STOPPING=1"));
    assert!(child.0.wait().unwrap().success(), "serve returned an error or skipped shutdown");
    assert!(!socket.exists());
}

const SERVE_SOCKET: &str = "FP_TEST_SERVE_SOCKET";

#[test]
#[ignore = "the child half of serve_notifies_systemd_and_stops_cleanly_on_sigterm"]
fn serve_as_a_child() {
    let socket = std::env::var_os(SERVE_SOCKET).expect("run by its parent test");
    let socket = PathBuf::from(socket);
    let pin_dir = socket.with_file_name("pins");
    let config = Config { socket, pin_dir, ..Config::default() };
    let host = FakeHost::new();
    let started = host.clone();
    super::run(&config, move |_| Ok(started as Arc<dyn SessionHost>)).unwrap();
    assert!(host.shut_down.load(Ordering::SeqCst));
}
