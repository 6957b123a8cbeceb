//! What `fp run` prints of a session a daemon hosts: each decision the daemon records for it, in
//! the line the embedded agent prints, and each of its opens that waits for an approval with how
//! to answer it. The events are subscribed to before the session is asked for and the approvals
//! before its command starts, so nothing of it passes unseen.
use std::{
    io::Write as _,
    path::{Path, PathBuf},
    sync::mpsc::{self, Receiver, Sender},
    thread,
    time::Duration,
};

use crate::{
    audit,
    daemon::{
        Client, api,
        client::{Events, Stream},
    },
    prompt::{Approval, ApprovalEvent},
    session,
};

/// How long `fp run` waits, once its command exited, for the daemon to end the session: the
/// decisions of its last moments are printed by then.
const LAST_LINES: Duration = Duration::from_secs(3);

/// The threads that print one session's decisions and waiting opens.
pub struct Reporter {
    socket: PathBuf,
    /// The session's id, to the thread that prints its decisions.
    id: Sender<String>,
    /// Says that the daemon ended the session.
    ended: Receiver<()>,
}

impl Reporter {
    /// Subscribes to the daemon's events on `socket`; None when the daemon refuses them (the
    /// session then runs without its lines: they are in the audit log anyway).
    pub fn start(socket: &Path) -> Option<Reporter> {
        let events = Client::connect(socket).and_then(Client::subscribe).ok()?;
        let (ended_tx, ended) = mpsc::channel();
        let (id_tx, id) = mpsc::channel();
        thread::spawn(move || print_decisions(events, id, ended_tx));
        Some(Reporter { socket: socket.to_owned(), id: id_tx, ended })
    }

    /// Prints what concerns the session `id` from now on. Call it before the session's command
    /// starts: the approvals are watched from here on (the daemon starts its prompt broker with
    /// the first session that needs one, so there are none to watch before; a daemon without
    /// one refuses the watch, and then nothing waits).
    pub fn watch(&self, id: &str) {
        let _ = self.id.send(id.to_owned());
        if let Ok(approvals) = Client::connect(&self.socket).and_then(Client::watch_approvals) {
            let id = id.to_owned();
            thread::spawn(move || print_waiting(approvals, &id));
        }
    }

    /// Waits (bounded) for the daemon to end the session, so that its last lines are printed.
    pub fn finish(self) {
        let _ = self.ended.recv_timeout(LAST_LINES);
    }
}

/// Prints the session's decisions until the daemon ends it, then says so on `ended`.
fn print_decisions(events: Events, id: Receiver<String>, ended: Sender<()>) {
    let Ok(id) = id.recv() else { return };
    for event in events {
        match event {
            Ok(api::Event::Decision { record }) => {
                let Ok(decision) = serde_json::from_value::<audit::FileDecision>(record) else {
                    continue;
                };
                if decision.session == id {
                    print(&session::event::record_line(&decision));
                }
            }
            Ok(api::Event::Missed { count }) => {
                print(&format!("fp: missed {count} events of the daemon (see the audit log)\n"));
            }
            Ok(api::Event::SessionEnded { id: ended_id, .. }) if ended_id == id => break,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let _ = ended.send(());
}

/// Prints each of the session's opens that starts to wait for an approval.
fn print_waiting(approvals: Stream<api::Reply>, id: &str) {
    for reply in approvals {
        match reply {
            Ok(api::Reply::ApprovalEvent { event: ApprovalEvent::Opened { approval } })
                if approval.open.session == id =>
            {
                print(&waiting_line(&approval));
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
}

/// `fp: cat (pid 812) waits to read /srv/secrets/k (rule "/srv/secrets/**"): ...`.
fn waiting_line(approval: &Approval) -> String {
    let open = &approval.open;
    let rule = open.rule.as_deref().map(|r| format!(" (rule \"{r}\")")).unwrap_or_default();
    format!(
        "fp: {} (pid {}) waits to {} {}{rule}: `fp approve {id}` allows it, `fp deny {id}` \
         refuses it\n",
        open.comm,
        open.pid,
        crate::prompt::serde_plain(&open.access),
        open.path,
        id = approval.id,
    )
}

/// One write(2) per line, so that it does not interleave with the command's own stderr.
fn print(line: &str) {
    let _ = std::io::stderr().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::{Access, Open};

    #[test]
    fn a_waiting_open_says_how_to_answer_it() {
        let approval = Approval {
            id: 7,
            open: Open {
                session: "s1".into(),
                agent: "claude".into(),
                pid: 812,
                comm: "cat".into(),
                access: Access::Read,
                path: "/srv/secrets/k".into(),
                rule: Some("/srv/secrets/**".into()),
            },
            opened_at: String::new(),
            age_ms: 0,
            opens: 1,
        };
        assert_eq!(
            waiting_line(&approval),
            "fp: cat (pid 812) waits to read /srv/secrets/k (rule \"/srv/secrets/**\"): \
             `fp approve 7` allows it, `fp deny 7` refuses it\n"
        );
    }
}
