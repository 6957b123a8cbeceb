//! The blocking client of the control socket, for every CLI command that talks to the daemon
//! (`fp sessions`, `fp status`, `fp run`, `fp approvals`, `fp approve`, `fp deny`). A call waits
//! at most [`CALL_TIMEOUT`] for the daemon; a stream (`subscribe`, `watch_approvals`) waits for
//! as long as it runs.
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::api::{self, ApiError, Event, Message, Reply, Request};
use crate::prompt::{Approval, PromptOutcome};

/// How long a call waits on the daemon: a hung daemon must not hang the CLI.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

#[derive(Debug)]
pub enum ClientError {
    /// Nothing listens on the socket (absent, or refused: no daemon is running).
    NoDaemon {
        socket: PathBuf,
        source: std::io::Error,
    },
    /// The daemon answered with an error.
    Refused(ApiError),
    Io(std::io::Error),
    /// The daemon's reply is not what the protocol says (another version, a bug).
    Protocol(String),
}

impl ClientError {
    /// The CLI's exit status: 1 the daemon said no, 3 no daemon, 125 anything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            ClientError::Refused(_) => crate::exit::REFUSED,
            ClientError::NoDaemon { .. } => crate::exit::NO_DAEMON,
            ClientError::Io(_) | ClientError::Protocol(_) => crate::exit::FP_ERROR,
        }
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::NoDaemon { socket, source } => {
                write!(f, "no fp daemon is running on {} ({source})", socket.display())
            }
            ClientError::Refused(e) => write!(f, "the daemon refused: {e}"),
            ClientError::Io(e) => write!(f, "talking to the daemon: {e}"),
            ClientError::Protocol(what) => write!(f, "unexpected reply from the daemon: {what}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(e)
    }
}

impl Client {
    /// Connects; calls time out after [`CALL_TIMEOUT`] (see [`Client::set_timeout`]).
    pub fn connect(socket: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(socket).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                ClientError::NoDaemon { socket: socket.to_path_buf(), source }
            }
            // The socket's mode, or fp's kernel programs for a session process: the daemon is
            // served from outside every session (docs/threat-model.md, "The session boundary").
            std::io::ErrorKind::PermissionDenied => ClientError::Refused(ApiError::new(
                api::ErrorCode::PermissionDenied,
                format!(
                    "connecting to {}: {source}: processes inside fp sessions, and users other \
                     than root and the socket's group, may not use the fp control socket",
                    socket.display()
                ),
            )),
            _ => ClientError::Io(std::io::Error::new(
                source.kind(),
                format!("connecting to {}: {source}", socket.display()),
            )),
        })?;
        let mut client = Client { reader: BufReader::new(stream.try_clone()?), writer: stream };
        client.set_timeout(Some(CALL_TIMEOUT))?;
        Ok(client)
    }

    /// Bounds how long a call waits on the daemon (a timeout is [`ClientError::Io`]).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) -> std::io::Result<()> {
        self.writer.set_read_timeout(timeout)?;
        self.writer.set_write_timeout(timeout)
    }

    /// Sends one request and reads its reply; an error reply is [`ClientError::Refused`].
    pub fn call(&mut self, request: &Request) -> Result<Reply, ClientError> {
        // A daemon that refuses the connection replies and closes, maybe before the request is
        // written: its reply says why, better than the failed write.
        let written = self.writer.write_all(&api::request_line(request));
        let reply = self.read_reply();
        if let (Err(e), Err(_) | Ok(None)) = (&written, &reply) {
            return Err(ClientError::Io(std::io::Error::new(e.kind(), e.to_string())));
        }
        match reply? {
            Some(Reply::Error { error }) => Err(ClientError::Refused(error)),
            Some(reply) => Ok(reply),
            None => Err(ClientError::Protocol("the daemon closed the connection".into())),
        }
    }

    /// The next reply, or `None` when the daemon closed the connection.
    fn read_reply(&mut self) -> Result<Option<Reply>, ClientError> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let message: Message = serde_json::from_str(&line)
            .map_err(|e| ClientError::Protocol(format!("{e}: {}", line.trim_end())))?;
        if message.v != api::VERSION {
            return Err(ClientError::Protocol(format!(
                "protocol version {} (this fp speaks {})",
                message.v,
                api::VERSION
            )));
        }
        Ok(Some(message.reply))
    }

    pub fn create(&mut self, req: api::CreateSession) -> Result<api::SessionCreated, ClientError> {
        match self.call(&Request::CreateSession(req))? {
            Reply::SessionCreated(created) => Ok(created),
            other => Err(unexpected(&other)),
        }
    }

    pub fn list(&mut self) -> Result<Vec<api::SessionSummary>, ClientError> {
        match self.call(&Request::ListSessions)? {
            Reply::Sessions { sessions } => Ok(sessions),
            other => Err(unexpected(&other)),
        }
    }

    pub fn end(&mut self, id: &str) -> Result<(), ClientError> {
        match self.call(&Request::EndSession { id: id.to_owned() })? {
            Reply::SessionEnded { .. } => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// Tells the daemon the exit code of session `id`'s command (see [`Request::CommandExited`]).
    pub fn command_exited(&mut self, id: &str, exit_code: i32) -> Result<(), ClientError> {
        match self.call(&Request::CommandExited { id: id.to_owned(), exit_code })? {
            Reply::ExitNoted { .. } => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    pub fn reload(&mut self, req: api::Reload) -> Result<api::Reloaded, ClientError> {
        match self.call(&Request::ReloadSession(req))? {
            Reply::Reloaded(reloaded) => Ok(reloaded),
            other => Err(unexpected(&other)),
        }
    }

    pub fn status(&mut self) -> Result<api::Status, ClientError> {
        match self.call(&Request::Status)? {
            Reply::Status(status) => Ok(status),
            other => Err(unexpected(&other)),
        }
    }

    /// Turns the connection into a stream of events, ending when the daemon closes it.
    pub fn subscribe(self) -> Result<Events, ClientError> {
        self.stream(Request::Subscribe, Reply::Subscribed, |reply| match reply {
            Reply::Event { event } => Ok(event),
            other => Err(unexpected(&other)),
        })
    }

    /// The prompt tier's pending approvals.
    pub fn list_approvals(&mut self) -> Result<Vec<Approval>, ClientError> {
        match self.call(&Request::ListApprovals)? {
            Reply::Approvals { approvals } => Ok(approvals),
            other => Err(unexpected(&other)),
        }
    }

    pub fn decide_approval(
        &mut self,
        req: api::DecideApproval,
    ) -> Result<PromptOutcome, ClientError> {
        match self.call(&Request::DecideApproval(req))? {
            Reply::Decided { outcome } => Ok(outcome),
            other => Err(unexpected(&other)),
        }
    }

    /// Turns the connection into a stream of approval events: each a [`Reply::ApprovalEvent`]
    /// or a [`Reply::Missed`], ending when the daemon closes it.
    pub fn watch_approvals(self) -> Result<Stream<Reply>, ClientError> {
        self.stream(Request::WatchApprovals, Reply::Watching, |reply| match reply {
            Reply::ApprovalEvent { .. } | Reply::Missed { .. } => Ok(reply),
            other => Err(unexpected(&other)),
        })
    }

    /// Sends a request that turns the connection into a stream once the daemon replies `first`;
    /// the stream waits for its items without a timeout.
    fn stream<T>(
        mut self,
        request: Request,
        first: Reply,
        item: fn(Reply) -> Result<T, ClientError>,
    ) -> Result<Stream<T>, ClientError> {
        match self.call(&request)? {
            reply if reply == first => {
                self.set_timeout(None)?;
                Ok(Stream { client: self, item })
            }
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(reply: &Reply) -> ClientError {
    ClientError::Protocol(serde_json::to_string(reply).unwrap_or_default())
}

/// The items of a stream ([`Client::subscribe`], [`Client::watch_approvals`]), until the daemon
/// closes the connection.
pub struct Stream<T> {
    client: Client,
    /// The item a reply is, or the error that it is not one.
    item: fn(Reply) -> Result<T, ClientError>,
}

pub type Events = Stream<Event>;

impl<T> Iterator for Stream<T> {
    type Item = Result<T, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.client.read_reply().transpose()? {
            Ok(Reply::Error { error }) => Some(Err(ClientError::Refused(error))),
            Ok(reply) => Some((self.item)(reply)),
            Err(e) => Some(Err(e)),
        }
    }
}
