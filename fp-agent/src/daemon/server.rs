//! The control socket server: one task per connection, so a slow or stalled client only ever
//! holds up itself.
use std::future::Future;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, BufReader,
};
use tokio::net::UnixStream;
use tokio::sync::broadcast::{self, error::RecvError};

use super::SessionHost;
use super::api::{self, ApiError, ErrorCode, Event, Message, Reply, Request};
use crate::config::{Config, Sessions};
use crate::prompt::{ApprovalEvent, Approvals, Decider, PromptOutcome, Surface, parse_duration};
use crate::session::Cgroup2;

/// Open connections beyond this are refused, so that clients can never take the file
/// descriptors the daemon needs for sessions and the audit log.
pub const MAX_CONNECTIONS: usize = 512;

/// The connecting process, as the kernel reports it (SO_PEERCRED) when it connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

pub struct Server {
    listener: std::os::unix::net::UnixListener,
    shared: Arc<Shared>,
}

struct Shared {
    host: Arc<dyn SessionHost>,
    access: Access,
    sessions: Sessions,
    /// The daemon's config file: the default config layer of session policies.
    config_file: Option<PathBuf>,
    started: Instant,
}

/// Who may use the socket: root or members of `group`, never a process inside a session.
struct Access {
    group: Option<u32>,
    /// The sessions' cgroup parent, as `/proc/<pid>/cgroup` names cgroups.
    sessions_cgroup: PathBuf,
}

impl Server {
    /// Binds the socket (replacing a stale one: the caller holds the instance lock), readable and
    /// writable by root and the socket group only.
    pub fn bind(config: &Config, host: Arc<dyn SessionHost>) -> anyhow::Result<Server> {
        let hierarchy = Cgroup2::find()?;
        let parent = config.sessions_parent(&hierarchy);
        let inside = parent.strip_prefix(&hierarchy.mount).with_context(|| {
            format!(
                "cgroup_parent {} is not inside the cgroup2 hierarchy at {}",
                parent.display(),
                hierarchy.mount.display()
            )
        })?;
        let access = Access {
            group: config.socket_group.as_ref().map(|g| g.gid),
            sessions_cgroup: hierarchy.root.join(inside),
        };
        match std::fs::remove_file(&config.socket) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", config.socket.display()));
            }
            _ => {}
        }
        let listener = std::os::unix::net::UnixListener::bind(&config.socket)
            .with_context(|| format!("listening on {}", config.socket.display()))?;
        listener.set_nonblocking(true)?;
        std::fs::set_permissions(&config.socket, std::fs::Permissions::from_mode(0o660))?;
        if let Some(group) = &config.socket_group {
            let gid = Some(nix::unistd::Gid::from_raw(group.gid));
            nix::unistd::chown(&config.socket, None, gid).with_context(|| {
                format!("giving {} to group {}", config.socket.display(), group.name)
            })?;
        }
        let shared = Shared {
            host,
            access,
            sessions: config.sessions.clone(),
            config_file: config.file.clone(),
            started: Instant::now(),
        };
        Ok(Server { listener, shared: Arc::new(shared) })
    }

    /// Serves connections until `stop` completes; open connections are then dropped.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        let listener = match tokio::net::UnixListener::from_std(self.listener) {
            Ok(listener) => listener,
            Err(e) => {
                tracing::error!("cannot serve the socket: {e}");
                return;
            }
        };
        let mut connections = tokio::task::JoinSet::new();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) if connections.len() >= MAX_CONNECTIONS => {
                        let (read, write) = stream.into_split();
                        let error = ApiError::new(
                            ErrorCode::Unavailable,
                            format!("the daemon serves at most {MAX_CONNECTIONS} connections at once"),
                        );
                        connections.spawn(refuse(read, write, error));
                    }
                    Ok((stream, _)) => {
                        connections.spawn(serve_connection(self.shared.clone(), stream));
                    }
                    // EMFILE and the like: keep serving the connections we have.
                    Err(e) => {
                        tracing::warn!("accept: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
    }
}

async fn serve_connection(shared: Arc<Shared>, stream: UnixStream) {
    let peer = stream
        .peer_cred()
        .ok()
        .and_then(|c| Some(Peer { pid: c.pid()?, uid: c.uid(), gid: c.gid() }));
    let (read, mut write) = stream.into_split();
    let admitted = match peer {
        Some(peer) => shared.access.admit(&peer).map(|()| peer),
        None => Err(ApiError::new(ErrorCode::PermissionDenied, "cannot identify the peer process")),
    };
    let peer = match admitted {
        Ok(peer) => peer,
        Err(error) => {
            tracing::warn!("refused a connection: {}", error.message);
            return refuse(read, write, error).await;
        }
    };
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        match read_line(&mut reader, &mut line).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(error) => return refuse(reader, write, error).await,
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let reply = match api::parse_request(&line) {
            Ok(Request::Subscribe) => {
                let events = shared.host.subscribe();
                return stream_replies(Reply::Subscribed, events, event_reply, reader, write).await;
            }
            Ok(Request::WatchApprovals) => match shared.approvals() {
                Ok(approvals) => {
                    let events = approvals.subscribe();
                    return stream_replies(Reply::Watching, events, approval_reply, reader, write)
                        .await;
                }
                Err(error) => error.into(),
            },
            Ok(request) => shared.handle(peer, request).await,
            Err(error) => error.into(),
        };
        if write.write_all(&Message::line(reply)).await.is_err() {
            return;
        }
    }
}

/// Replies with `error` and closes the connection, first discarding for a moment what the client
/// still sends: closing with its request unread would fail the client's write before it could
/// read why it was refused.
async fn refuse(
    mut reader: impl AsyncRead + Unpin,
    mut write: impl AsyncWrite + Unpin,
    error: ApiError,
) {
    let _ = write.write_all(&Message::line(error.into())).await;
    let _ = write.shutdown().await;
    let mut scratch = [0u8; 4096];
    let drain = async { while matches!(reader.read(&mut scratch).await, Ok(n) if n > 0) {} };
    let _ = tokio::time::timeout(REFUSAL_LINGER, drain).await;
}

/// How long a refused connection is drained before it is closed.
const REFUSAL_LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads one line (without its newline) into `line`; `Ok(false)` at the end of the stream. A line
/// longer than [`api::MAX_REQUEST_BYTES`] is an error: the connection cannot be resynchronized.
async fn read_line(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
) -> Result<bool, ApiError> {
    line.clear();
    let cap = api::MAX_REQUEST_BYTES as u64 + 1;
    let read = reader.take(cap).read_until(b'\n', line).await;
    match read {
        Ok(0) | Err(_) => Ok(false),
        Ok(_) if line.last() == Some(&b'\n') => {
            line.pop();
            Ok(true)
        }
        Ok(_) if line.len() > api::MAX_REQUEST_BYTES => Err(ApiError::new(
            ErrorCode::LineTooLong,
            format!("a request line is at most {} bytes", api::MAX_REQUEST_BYTES),
        )),
        // The last line, without a newline.
        Ok(_) => Ok(true),
    }
}

/// Replies `first`, then forwards `events` as replies until the client goes away or `reply`
/// says the stream ended. Input after the request is read and ignored, so a closed connection
/// is noticed even when no events flow.
async fn stream_replies<T: Clone>(
    first: Reply,
    mut events: broadcast::Receiver<T>,
    reply: fn(Result<T, RecvError>) -> Option<Reply>,
    mut reader: impl AsyncRead + Unpin,
    mut write: impl AsyncWrite + Unpin,
) {
    if write.write_all(&Message::line(first)).await.is_err() {
        return;
    }
    let mut scratch = [0u8; 512];
    loop {
        let next = tokio::select! {
            received = events.recv() => match reply(received) {
                Some(next) => next,
                None => return,
            },
            read = reader.read(&mut scratch) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            },
        };
        if write.write_all(&Message::line(next)).await.is_err() {
            return;
        }
    }
}

/// One line of a `subscribe` stream; None when the host is gone.
fn event_reply(received: Result<Event, RecvError>) -> Option<Reply> {
    match received {
        Ok(event) => Some(Reply::Event { event }),
        Err(RecvError::Lagged(count)) => Some(Reply::Event { event: Event::Missed { count } }),
        Err(RecvError::Closed) => None,
    }
}

/// One line of a `watch_approvals` stream; None when the approval store is gone.
pub fn approval_reply(received: Result<ApprovalEvent, RecvError>) -> Option<Reply> {
    match received {
        Ok(event) => Some(Reply::ApprovalEvent { event }),
        Err(RecvError::Lagged(count)) => Some(Reply::Missed { count }),
        Err(RecvError::Closed) => None,
    }
}

/// Decides a pending approval for a peer of uid `uid` (`decide_approval`).
pub fn decide(
    approvals: &Approvals,
    request: api::DecideApproval,
    uid: u32,
) -> Result<PromptOutcome, ApiError> {
    let duration = request.duration.as_deref().map(parse_duration).transpose();
    let duration =
        duration.map_err(|e| ApiError::new(ErrorCode::BadRequest, format!("for: {e}")))?;
    let decider = Decider { uid, surface: request.surface.unwrap_or(Surface::Socket) };
    Ok(approvals.decide(request.id, request.decision, request.remember, duration, decider)?)
}

impl Shared {
    async fn handle(self: &Arc<Self>, peer: Peer, request: Request) -> Reply {
        let shared = self.clone();
        let work = tokio::task::spawn_blocking(move || shared.dispatch(peer, request));
        work.await.unwrap_or_else(|e| {
            ApiError::new(ErrorCode::Internal, format!("the request failed: {e}")).into()
        })
    }

    fn dispatch(&self, peer: Peer, request: Request) -> Reply {
        let host = &self.host;
        let reply = match request {
            Request::CreateSession(req) => self
                .prepare_create(&peer, req)
                .and_then(|req| host.create(&peer, req))
                .map(Reply::SessionCreated),
            Request::ListSessions => Ok(Reply::Sessions { sessions: host.list() }),
            Request::EndSession { id } => host.end(&id).map(|()| Reply::SessionEnded { id }),
            Request::CommandExited { id, exit_code } => {
                host.command_exited(&peer, &id, exit_code).map(|()| Reply::ExitNoted { id })
            }
            Request::ReloadSession(mut req) => check_source(&peer, &req.source).and_then(|()| {
                req.source.config = req.source.config.take().or_else(|| self.default_config());
                host.reload(req).map(Reply::Reloaded)
            }),
            Request::Status => {
                Ok(Reply::Status(api::Status { daemon: self.daemon_info(), host: host.status() }))
            }
            Request::ListApprovals => {
                self.approvals().map(|approvals| Reply::Approvals { approvals: approvals.list() })
            }
            Request::DecideApproval(req) => self
                .approvals()
                .and_then(|approvals| decide(&approvals, req, peer.uid))
                .map(|outcome| Reply::Decided { outcome }),
            // Handled by the connection, which turns into a stream.
            Request::Subscribe => Ok(Reply::Subscribed),
            Request::WatchApprovals => Ok(Reply::Watching),
        };
        reply.unwrap_or_else(Reply::from)
    }

    /// Checks a create request against its peer and fills in the `[sessions]` defaults.
    fn prepare_create(
        &self,
        peer: &Peer,
        mut req: api::CreateSession,
    ) -> Result<api::CreateSession, ApiError> {
        check_source(peer, &req.source)?;
        if peer.uid != 0 && req.uid != peer.uid {
            return Err(ApiError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "uid {} may create sessions only for itself, not uid {}",
                    peer.uid, req.uid
                ),
            ));
        }
        match parent_of(req.pid) {
            Some(parent) if parent == peer.pid => {}
            _ => {
                return Err(ApiError::new(
                    ErrorCode::PermissionDenied,
                    format!(
                        "pid {} is not a child of the connecting process {}",
                        req.pid, peer.pid
                    ),
                ));
            }
        }
        if req.source.policy.is_none() && req.source.policy_text.is_none() {
            req.source.policy = self.sessions.default_policy.clone();
        }
        req.source.config = req.source.config.take().or_else(|| self.default_config());
        if req.source == api::PolicySource::default() {
            return Err(ApiError::new(
                ErrorCode::BadRequest,
                "no policy: name one, or set [sessions] default_policy in the daemon's config",
            ));
        }
        req.mode = Some(req.mode.unwrap_or(self.sessions.default_mode));
        req.full_audit = Some(req.full_audit.unwrap_or(self.sessions.full_audit));
        Ok(req)
    }

    /// The prompt tier's approval store, when the host runs a broker (docs/prompt.md).
    fn approvals(&self) -> Result<Arc<Approvals>, ApiError> {
        self.host.approvals().ok_or_else(|| {
            ApiError::new(ErrorCode::Unavailable, "this daemon runs no prompt broker")
        })
    }

    fn default_config(&self) -> Option<PathBuf> {
        self.sessions.policy_config.clone().or_else(|| self.config_file.clone())
    }

    fn daemon_info(&self) -> api::DaemonInfo {
        api::DaemonInfo {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            protocol: api::VERSION,
            uptime_secs: self.started.elapsed().as_secs(),
            kernel_release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|r| r.trim().to_owned())
                .unwrap_or_default(),
        }
    }
}

/// A policy source is well-formed, and only root names files for the daemon (root) to read: a
/// group member sends the text of its policy, so it cannot probe files through error messages.
fn check_source(peer: &Peer, source: &api::PolicySource) -> Result<(), ApiError> {
    source.validate()?;
    if peer.uid != 0 && (source.policy.is_some() || source.config.is_some()) {
        return Err(ApiError::new(
            ErrorCode::PermissionDenied,
            "only root may name policy or config files; send the policy as `policy_text`",
        ));
    }
    Ok(())
}

impl Access {
    fn admit(&self, peer: &Peer) -> Result<(), ApiError> {
        let allowed = peer.uid == 0
            || self
                .group
                .is_some_and(|group| peer.gid == group || groups_of(peer.pid).contains(&group));
        if !allowed {
            return Err(ApiError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "uid {} may not use the fp control socket (root or the socket group only)",
                    peer.uid
                ),
            ));
        }
        // Fail closed: a peer whose cgroup cannot be read is treated as inside a session.
        match cgroup_of(peer.pid) {
            Some(cgroup) if !cgroup.starts_with(&self.sessions_cgroup) => Ok(()),
            _ => Err(ApiError::new(
                ErrorCode::PermissionDenied,
                "processes inside fp sessions may not use the fp control socket",
            )),
        }
    }
}

/// The cgroup v2 path of a process (the `0::` line of /proc/<pid>/cgroup).
fn cgroup_of(pid: i32) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines().find_map(|l| l.strip_prefix("0::")).map(|p| Path::new(p.trim_end()).to_path_buf())
}

/// The supplementary groups of a process (the `Groups:` line of /proc/<pid>/status).
fn groups_of(pid: i32) -> Vec<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let groups = text.lines().find_map(|l| l.strip_prefix("Groups:")).unwrap_or("");
    groups.split_whitespace().filter_map(|g| g.parse().ok()).collect()
}

/// The parent pid of a process (/proc/<pid>/stat, after the parenthesized command name).
fn parent_of(pid: i32) -> Option<i32> {
    if pid <= 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after_name) = stat.rsplit_once(')')?;
    after_name.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_process_facts_from_proc() {
        let me = std::process::id() as i32;
        assert_eq!(parent_of(me), Some(std::os::unix::process::parent_id() as i32));
        assert_eq!(parent_of(0), None);
        assert_eq!(parent_of(-5), None);
        assert!(cgroup_of(me).is_some_and(|c| c.is_absolute()));
        assert!(cgroup_of(i32::MAX).is_none());
        assert!(groups_of(i32::MAX).is_empty());
    }

    #[test]
    fn peers_inside_the_sessions_parent_are_refused() {
        let me = std::process::id() as i32;
        let mine = cgroup_of(me).unwrap();
        let peer = Peer { pid: me, uid: 0, gid: 0 };
        let access = |sessions_cgroup: &Path| Access {
            group: None,
            sessions_cgroup: sessions_cgroup.into(),
        };
        assert!(access(Path::new("/fp-sessions-elsewhere")).admit(&peer).is_ok());
        let e = access(&mine).admit(&peer).unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionDenied);
        let stranger = Peer { pid: me, uid: 4242, gid: 4242 };
        let e = access(Path::new("/fp-sessions-elsewhere")).admit(&stranger).unwrap_err();
        assert!(e.message.starts_with("uid 4242 may not"), "{e}");
        let member = Access { group: Some(4242), sessions_cgroup: "/fp-sessions-elsewhere".into() };
        assert!(member.admit(&stranger).is_ok());
    }

    #[test]
    fn only_root_names_files_for_the_daemon_to_read() {
        let member = Peer { pid: 1, uid: 1000, gid: 1000 };
        let file = api::PolicySource { policy: Some("/etc/shadow".into()), ..Default::default() };
        assert_eq!(check_source(&member, &file).unwrap_err().code, ErrorCode::PermissionDenied);
        assert!(check_source(&Peer { uid: 0, ..member }, &file).is_ok());
        let text =
            api::PolicySource { policy_text: Some("[file_policy]\n".into()), ..Default::default() };
        assert!(check_source(&member, &text).is_ok());
    }
}
