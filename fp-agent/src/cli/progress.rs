//! A line on the terminal for a step that may take long (loading fp's programs takes seconds on
//! a slow machine): shown only once the step has taken a second, and only on a terminal.
use std::{
    io::IsTerminal as _,
    sync::mpsc::{self, RecvTimeoutError, Sender},
    time::Duration,
};

/// How long a step runs before its line is shown.
const SHOWN_AFTER: Duration = Duration::from_secs(1);

/// A step under way; dropping it ends it.
pub struct Slow {
    _done: Option<Sender<()>>,
}

impl Slow {
    /// Prints `what` on stderr if the step is still under way after a second.
    pub fn start(what: &'static str) -> Slow {
        if !std::io::stderr().is_terminal() {
            return Slow { _done: None };
        }
        let (done, ended) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if ended.recv_timeout(SHOWN_AFTER) == Err(RecvTimeoutError::Timeout) {
                eprintln!("{what}");
            }
        });
        Slow { _done: Some(done) }
    }
}
