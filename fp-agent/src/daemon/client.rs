//! A blocking client of the control socket, for the CLI (`fp sessions`, `fp status`, `fp run`).
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use super::api::{self, ApiError, Event, Message, Reply, Request};

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
    pub fn connect(socket: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(socket).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                ClientError::NoDaemon { socket: socket.to_path_buf(), source }
            }
            _ => ClientError::Io(std::io::Error::new(
                source.kind(),
                format!("connecting to {}: {source}", socket.display()),
            )),
        })?;
        Ok(Client { reader: BufReader::new(stream.try_clone()?), writer: stream })
    }

    /// Bounds how long a call waits on the daemon (a timeout is [`ClientError::Io`]).
    pub fn set_timeout(&mut self, timeout: Option<std::time::Duration>) -> std::io::Result<()> {
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
    pub fn subscribe(mut self) -> Result<Events, ClientError> {
        match self.call(&Request::Subscribe)? {
            Reply::Subscribed => Ok(Events { client: self }),
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(reply: &Reply) -> ClientError {
    ClientError::Protocol(serde_json::to_string(reply).unwrap_or_default())
}

pub struct Events {
    client: Client,
}

impl Iterator for Events {
    type Item = Result<Event, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.client.read_reply().transpose()? {
            Ok(Reply::Event { event }) => Some(Ok(event)),
            Ok(Reply::Error { error }) => Some(Err(ClientError::Refused(error))),
            Ok(other) => Some(Err(unexpected(&other))),
            Err(e) => Some(Err(e)),
        }
    }
}
