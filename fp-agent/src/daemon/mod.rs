//! `fp daemon`: the host agent's control socket. The server authenticates peers, parses the
//! versioned JSON-lines protocol ([`api`], docs/api.md) and dispatches to a [`SessionHost`], which
//! owns the kernel side (BPF objects, session cgroups, the audit writer).
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use crate::config::Config;

pub mod api;
pub mod client;
pub mod kernel_host;
mod lock;
mod notify;
pub mod server;
#[cfg(test)]
mod tests;

pub use client::{Client, ClientError};
pub use lock::InstanceLock;
pub use server::{Peer, Server};

/// What the server dispatches to. Methods may block (they run on tokio's blocking pool); errors
/// are replied to the client as they are, so their `code` and message are what it sees.
pub trait SessionHost: Send + Sync + 'static {
    /// Creates a session and moves `req.pid` into its cgroup before returning. The server has
    /// checked that `req.pid` is a child of `peer.pid`, that a non-root peer asks only for its
    /// own uid, and has filled in the defaults of `[sessions]` (mode, full_audit, policy, config).
    fn create(
        &self,
        peer: &Peer,
        req: api::CreateSession,
    ) -> Result<api::SessionCreated, api::ApiError>;
    fn list(&self) -> Vec<api::SessionSummary>;
    /// Ends a session: kills its processes, removes its kernel entries and cgroup.
    fn end(&self, id: &str) -> Result<(), api::ApiError>;
    /// Notes the exit code of a session's command for its `session-end` record; only the peer
    /// that created the session may.
    fn command_exited(&self, peer: &Peer, id: &str, exit_code: i32) -> Result<(), api::ApiError>;
    /// Swaps a session's policy atomically (the config default is filled in as for `create`).
    fn reload(&self, req: api::Reload) -> Result<api::Reloaded, api::ApiError>;
    fn status(&self) -> api::HostStatus;
    /// Decision and session events for subscribers. A subscriber that falls behind is told how
    /// many it missed; it never slows the host or other subscribers.
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<api::Event>;
    /// The prompt tier's pending approvals, when the host runs a broker (docs/prompt.md): the
    /// server routes `list_approvals`, `decide_approval` and `watch_approvals` there.
    fn approvals(&self) -> Option<Arc<crate::prompt::Approvals>> {
        None
    }
    /// Called once when the daemon stops (SIGTERM/SIGINT): ends the sessions, detaches the
    /// programs, flushes and checkpoints the audit log.
    fn shutdown(&self);
}

/// Runs the daemon: takes the single-instance locks — the pin directory's (host-wide), then the
/// socket's — before anything else, then starts the host with `start` (which opens the audit log
/// and takes over the sessions pinned there) and serves it until SIGTERM or SIGINT.
pub fn run(
    config: &Config,
    start: impl FnOnce(&Config) -> anyhow::Result<Arc<dyn SessionHost>>,
) -> anyhow::Result<()> {
    let _pins = InstanceLock::acquire_dir(&config.pin_dir)?;
    let socket_dir = config.socket.parent().context("the socket path has no directory")?;
    std::fs::create_dir_all(socket_dir)
        .with_context(|| format!("creating {}", socket_dir.display()))?;
    let _socket = InstanceLock::acquire(&config.lock_path())?;
    let host = start(config)?;
    serve(config, host)
}

/// Serves `host` until SIGTERM or SIGINT: listens on the socket, tells systemd it is ready and
/// pings its watchdog, then shuts the host down. The caller holds the locks ([`run`]).
pub fn serve(config: &Config, host: Arc<dyn SessionHost>) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let served = runtime.block_on(async {
        // Handlers before the socket exists: a SIGTERM as soon as clients can see the daemon
        // must stop it cleanly.
        let stop = stop_signal().context("installing the SIGTERM/SIGINT handlers")?;
        let server = Server::bind(config, host.clone())?;
        // One line when clients can use it (the journal's, under systemd).
        eprintln!(
            "fp: daemon ready (pid {}): listening on {}",
            std::process::id(),
            config.socket.display()
        );
        notify::ready();
        let watchdog = notify::watchdog_interval().map(|every| tokio::spawn(ping(every)));
        server.run(stop).await;
        notify::stopping();
        if let Some(watchdog) = watchdog {
            watchdog.abort();
        }
        anyhow::Ok(())
    });
    host.shutdown();
    let _ = std::fs::remove_file(&config.socket);
    served
}

async fn ping(every: Duration) {
    let mut ticks = tokio::time::interval(every);
    loop {
        ticks.tick().await;
        notify::watchdog();
    }
}

/// Resolves at the first SIGTERM or SIGINT; the handlers are installed when this is called.
fn stop_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = int.recv() => tracing::info!("SIGINT: shutting down"),
        }
    })
}
