//! `fp approvals|approve|deny` against a stand-in daemon that routes the socket's approval
//! requests to a real approval store, as the daemon does: output, JSON and exit codes (0 ok,
//! 1 refused, 3 no daemon, 125 fp error).
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fp_agent::daemon::api::{self, Message, Reply, Request};
use fp_agent::daemon::server;
use fp_agent::prompt::{Access, Approvals, Open, OpenRequest, Remember};
use serde_json::Value;

fn fp(socket: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fp"))
        .args(args)
        .arg("--socket")
        .arg(socket)
        .output()
        .unwrap();
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.code().unwrap_or(-1), text(out.stdout), text(out.stderr))
}

/// Serves one request per connection from `approvals`, as the daemon's server answers them.
fn serve(approvals: Arc<Approvals>, dir: &Path) -> PathBuf {
    let socket = dir.join("control.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line).unwrap();
            let value: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(value["v"], 1);
            let request = api::parse_request(line.trim_end().as_bytes()).unwrap();
            let watch = (request == Request::WatchApprovals).then(|| approvals.subscribe());
            reply(
                &mut stream,
                match request {
                    Request::ListApprovals => Reply::Approvals { approvals: approvals.list() },
                    Request::DecideApproval(req) => server::decide(&approvals, req, 0)
                        .map_or_else(Reply::from, |outcome| Reply::Decided { outcome }),
                    Request::WatchApprovals => Reply::Watching,
                    other => panic!("not an approvals request: {other:?}"),
                },
            );
            if let Some(mut events) = watch {
                let approvals = Arc::clone(&approvals);
                std::thread::spawn(move || {
                    while let Some(line) = server::approval_reply(events.blocking_recv()) {
                        reply(&mut stream, line);
                    }
                    drop(approvals);
                });
            }
        }
    });
    socket
}

fn reply(stream: &mut std::os::unix::net::UnixStream, reply: Reply) {
    // A watcher that went away ends its stream.
    let _ = stream.write_all(&Message::line(reply));
}

#[test]
fn watch_streams_pending_opened_and_decided() {
    let dir = tempfile::tempdir().unwrap();
    let (approvals, _) = store_with_one_open();
    let socket = serve(Arc::clone(&approvals), dir.path());
    let mut watcher = Watcher(
        Command::new(env!("CARGO_BIN_EXE_fp"))
            .args(["approvals", "--watch", "--json", "--socket"])
            .arg(&socket)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(watcher.0.stdout.take().unwrap()).lines();
    let mut next = || -> Value { serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap() };
    let pending = next();
    assert_eq!(
        (pending["kind"].as_str(), pending["approval"]["id"].as_u64()),
        (Some("pending"), Some(1))
    );
    // The watch subscribed before listing: what opens now is streamed.
    let open = approvals.list()[0].open.clone();
    approvals.hold(OpenRequest::new(open, b"/ws/secrets/other".to_vec()), Box::new(|_| {}));
    let opened = next();
    assert_eq!(opened["kind"], "opened");
    assert_eq!(opened["approval"]["path"], "/ws/secrets/other");
    let decider = fp_agent::prompt::Decider { uid: 0, surface: fp_agent::prompt::Surface::Socket };
    approvals.decide(2, fp_agent::prompt::Decision::Deny, None, None, decider).unwrap();
    let decided = next();
    assert_eq!(
        (decided["kind"].as_str(), decided["outcome"]["outcome"].as_str()),
        (Some("decided"), Some("denied"))
    );
}

/// `fp approvals --watch` runs until killed: kill it however the test ends.
struct Watcher(std::process::Child);

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A store holding one open of `/ws/secrets/key`; the returned cell gets its answer.
fn store_with_one_open() -> (Arc<Approvals>, Arc<Mutex<Option<bool>>>) {
    let (approvals, _outcomes) = Approvals::new(Duration::from_secs(60), None, None);
    let answer = Arc::new(Mutex::new(None));
    let cell = Arc::clone(&answer);
    let open = Open {
        session: "s1".into(),
        agent: "coder".into(),
        pid: 42,
        comm: "cat".into(),
        access: Access::Read,
        path: String::new(),
        rule: Some("<workspace>/secrets/**".into()),
    };
    let request = OpenRequest::new(open, b"/ws/secrets/key".to_vec());
    approvals.hold(request, Box::new(move |allow| *cell.lock().unwrap() = Some(allow)));
    (approvals, answer)
}

#[test]
fn list_approve_and_already_decided() {
    let dir = tempfile::tempdir().unwrap();
    let (approvals, answer) = store_with_one_open();
    let socket = serve(Arc::clone(&approvals), dir.path());

    let (code, out, err) = fp(&socket, &["approvals"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("#1 read /ws/secrets/key (coder pid 42 cat)"), "{out}");
    let (code, out, _) = fp(&socket, &["approvals", "--json"]);
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed[0]["rule"], "<workspace>/secrets/**");

    let (code, out, err) = fp(&socket, &["approve", "1", "--remember", "dir", "--for", "10m"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("#1 approved by uid 0 via cli"), "{out}");
    assert!(out.contains("remembered dir /ws/secrets until"), "{out}");
    assert_eq!(*answer.lock().unwrap(), Some(true));
    let grants = approvals.grants();
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].scope, Remember::Dir);

    let (code, _, err) = fp(&socket, &["deny", "1"]);
    assert_eq!(code, 1);
    assert!(err.contains("already decided: approved by uid 0 via cli"), "{err}");
    let (code, _, err) = fp(&socket, &["deny", "7"]);
    assert_eq!(code, 1);
    assert!(err.contains("no pending approval 7"), "{err}");
}

#[test]
fn deny_json_and_no_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let (approvals, answer) = store_with_one_open();
    let socket = serve(approvals, dir.path());
    let (code, out, err) = fp(&socket, &["deny", "1", "--json"]);
    assert_eq!(code, 0, "{err}");
    let outcome: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(outcome["outcome"], "denied");
    assert_eq!(outcome["decided_by"]["surface"], "cli");
    assert_eq!(*answer.lock().unwrap(), Some(false));

    let (code, _, err) = fp(&dir.path().join("absent.sock"), &["approvals"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no daemon"), "{err}");
}

#[test]
fn a_daemon_error_is_an_fp_error() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line).unwrap();
        let error =
            r#"{"v":1,"type":"error","error":{"code":"unavailable","message":"shutting down"}}"#;
        writeln!(stream, "{error}").unwrap();
    });
    let (code, _, err) = fp(&socket, &["approvals"]);
    assert_eq!(code, 125, "{err}");
    assert!(err.contains("shutting down"), "{err}");
}
