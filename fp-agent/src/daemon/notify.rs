//! systemd's notify protocol (sd_notify(3)): one datagram per state change to `$NOTIFY_SOCKET`.
//! Without that variable (not started by systemd with Type=notify) every call does nothing.
use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

pub fn ready() {
    send("READY=1");
}

pub fn stopping() {
    send("STOPPING=1");
}

pub fn watchdog() {
    send("WATCHDOG=1");
}

/// How often to ping the watchdog: half the interval systemd set (`WatchdogSec=`), if any.
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    // WATCHDOG_PID, when set, names the process systemd expects the pings from.
    if let Some(pid) = std::env::var("WATCHDOG_PID").ok().and_then(|p| p.parse::<u32>().ok())
        && pid != std::process::id()
    {
        return None;
    }
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}

fn send(state: &str) {
    if let Some(path) = std::env::var_os("NOTIFY_SOCKET") {
        send_to(&path, state);
    }
}

fn send_to(path: &std::ffi::OsStr, state: &str) {
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path);
    // "@name" is a socket in the abstract namespace.
    let address = match bytes.strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name),
        None => SocketAddr::from_pathname(path),
    };
    let sent = address
        .and_then(|address| UnixDatagram::unbound()?.send_to_addr(state.as_bytes(), &address));
    if let Err(e) = sent {
        tracing::warn!("cannot notify systemd ({state}): {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_reach_the_notify_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        for state in ["READY=1", "WATCHDOG=1", "STOPPING=1"] {
            send_to(path.as_os_str(), state);
        }
        let mut buf = [0u8; 64];
        let states: Vec<String> = (0..3)
            .map(|_| {
                let n = listener.recv(&mut buf).unwrap();
                String::from_utf8_lossy(&buf[..n]).into_owned()
            })
            .collect();
        assert_eq!(states, ["READY=1", "WATCHDOG=1", "STOPPING=1"]);
    }

    #[test]
    fn abstract_notify_sockets_are_reached() {
        let name = format!("fp-notify-test-{}", std::process::id());
        let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&address).unwrap();
        send_to(std::ffi::OsStr::new(&format!("@{name}")), "READY=1");
        let mut buf = [0u8; 16];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
    }
}
