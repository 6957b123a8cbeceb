//! `fp status`: the daemon's health, kernel support, attached hooks, map usage and counters.
//!
//! Exit codes: 0 ok, 1 the daemon said no, 3 no daemon running, 125 fp error.
use std::fmt::Write as _;
use std::process::ExitCode;

use super::sessions::{Socket, report};
use crate::daemon::api::Status;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    socket: Socket,
    /// Report as JSON.
    #[arg(long)]
    json: bool,
}

pub fn main(args: Args) -> ExitCode {
    let status = args.socket.connect().and_then(|mut c| c.status());
    report(status, args.json, text)
}

fn text(status: &Status) -> String {
    let (daemon, host) = (&status.daemon, &status.host);
    let mut out = String::new();
    let up = daemon.uptime_secs;
    let uptime = format!("{}h {:02}m {:02}s", up / 3600, up / 60 % 60, up % 60);
    let _ = writeln!(
        out,
        "daemon    pid {}, fp {} (protocol v{}), up {uptime}",
        daemon.pid, daemon.version, daemon.protocol
    );
    let lsm = if host.bpf_lsm { "BPF LSM active" } else { "BPF LSM not active" };
    let _ = writeln!(out, "kernel    {}, {lsm}", daemon.kernel_release);
    // An older daemon does not say.
    if !host.backend.is_empty() {
        let _ = writeln!(out, "backend   {} ({})", host.backend, host.backend_why);
    }
    let hooks = if host.attached_hooks.is_empty() {
        "none".to_owned()
    } else {
        host.attached_hooks.join(", ")
    };
    let _ = writeln!(out, "hooks     {hooks}");
    let _ = writeln!(out, "sessions  {}", host.sessions);
    for orphan in &host.orphans {
        let why = match &orphan.reason {
            None => format!("{} process(es)", orphan.pids),
            Some(why) => why.clone(),
        };
        let _ = writeln!(
            out,
            "orphan    {} (its fp run, pid {}, was killed): {why}, still confined",
            orphan.session, orphan.pid
        );
    }
    for map in &host.maps {
        let percent = (map.used * 100).checked_div(map.capacity).unwrap_or(0);
        let _ =
            writeln!(out, "map       {:<20} {}/{} ({percent}%)", map.name, map.used, map.capacity);
    }
    if let Some(audit) = &host.audit {
        let _ = writeln!(out, "{}", audit_line(audit));
    }
    let counters = &host.counters;
    let _ = writeln!(out, "events    {} read, {} lost", counters.events, counters.losses);
    out
}

/// The audit log's line: its health, and the free space on its filesystem.
fn audit_line(audit: &crate::daemon::api::AuditStatus) -> String {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let free = audit.free_bytes.map_or(String::new(), |b| format!(", {:.1} MiB free", mib(b)));
    let state = match audit.health.as_str() {
        "ok" if audit.low_space => {
            format!("ok, LOW SPACE: under space_left ({:.1} MiB)", mib(audit.space_left))
        }
        "ok" => "ok".to_owned(),
        "no-space" => "NO SPACE: records queued in memory, new sessions refused".to_owned(),
        "read-only" => {
            "READ-ONLY FILESYSTEM: records queued in memory, new sessions refused".to_owned()
        }
        other => format!("{}: the writer stopped, new sessions refused", other.to_uppercase()),
    };
    let state = match (audit.health.as_str(), audit.on_full) {
        ("ok", _) | (_, crate::audit::OnFull::Refuse) => state,
        (_, crate::audit::OnFull::Freeze) => format!("{state}, sessions frozen"),
    };
    format!("audit     {}: {state}{free}", audit.log.display())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::OrphanOutcome;
    use crate::daemon::api::{AuditStatus, Counters, DaemonInfo, HostStatus, MapUsage, Orphan};

    #[test]
    fn status_prints_one_fact_per_line() {
        let status = Status {
            daemon: DaemonInfo {
                pid: 321,
                version: "0.1.0".into(),
                protocol: 1,
                uptime_secs: 3725,
                kernel_release: "6.12.0".into(),
            },
            host: HostStatus {
                bpf_lsm: false,
                backend: "fmod_ret".into(),
                backend_why: "`bpf` is not in the active LSM list (capability,yama)".into(),
                attached_hooks: vec![],
                maps: vec![MapUsage { name: "SESSIONS".into(), used: 3, capacity: 1024 }],
                sessions: 3,
                counters: Counters { events: 10, losses: 1 },
                orphans: vec![Orphan {
                    session: "run-812-4711".into(),
                    pid: 812,
                    cgroup: Some(9),
                    pids: 2,
                    outcome: OrphanOutcome::Kept,
                    reason: None,
                }],
                audit: Some(AuditStatus {
                    log: "/var/log/fp/audit.log".into(),
                    health: "no-space".into(),
                    free_bytes: Some(0),
                    space_left: 5 << 20,
                    low_space: true,
                    on_full: crate::audit::OnFull::Refuse,
                }),
            },
        };
        assert_eq!(
            text(&status),
            "daemon    pid 321, fp 0.1.0 (protocol v1), up 1h 02m 05s\n\
             kernel    6.12.0, BPF LSM not active\n\
             backend   fmod_ret (`bpf` is not in the active LSM list (capability,yama))\n\
             hooks     none\n\
             sessions  3\n\
             orphan    run-812-4711 (its fp run, pid 812, was killed): 2 process(es), still confined\n\
             map       SESSIONS             3/1024 (0%)\n\
             audit     /var/log/fp/audit.log: NO SPACE: records queued in memory, new sessions \
             refused, 0.0 MiB free\n\
             events    10 read, 1 lost\n"
        );
    }

    /// Under `space_left`, a log that is still written says so.
    #[test]
    fn low_space_is_said() {
        let audit = AuditStatus {
            log: "/var/log/fp/audit.log".into(),
            health: "ok".into(),
            free_bytes: Some(3 << 20),
            space_left: 5 << 20,
            low_space: true,
            on_full: crate::audit::OnFull::Freeze,
        };
        let line = audit_line(&audit);
        assert_eq!(
            line,
            "audit     /var/log/fp/audit.log: ok, LOW SPACE: under space_left (5.0 MiB), 3.0 MiB free"
        );
        // With on_full = "freeze", a full disk says the sessions wait.
        let full = AuditStatus { health: "no-space".into(), free_bytes: Some(0), ..audit };
        assert_eq!(
            audit_line(&full),
            "audit     /var/log/fp/audit.log: NO SPACE: records queued in memory, new sessions \
             refused, sessions frozen, 0.0 MiB free"
        );
    }
}
