//! The watch on `kernel.ftrace_enabled`, on the fmod_ret backend: while it is 0 the kernel runs
//! none of fp's programs (they stay attached), and anyone outside a session may write it. The
//! agent checked it was 1 as it started (`kernel::probe`); this reads it every second while the
//! agent runs and says each change loudly: an error on stderr and an `enforcement` record in the
//! audit log. New sessions are refused while it is 0 ([`Manager::create`]).
use std::{sync::atomic::Ordering, time::Duration};

use super::Manager;
use crate::{audit, kernel};

/// How often the watch reads the setting.
const EVERY: Duration = Duration::from_secs(1);

impl Manager {
    /// Starts the watch where the programs enforce through fmod_ret; it ends with the agent.
    pub(super) fn spawn_ftrace_watch(&self) {
        if self.backend() != Some(kernel::Backend::FModRet) {
            return;
        }
        let (this, stop) = (self.this.clone(), self.stop.clone());
        std::thread::spawn(move || {
            let mut enabled = true;
            while !stop.load(Ordering::Acquire) {
                std::thread::sleep(EVERY);
                let now = kernel::ftrace_enabled() != Some(false);
                if now == enabled {
                    continue;
                }
                enabled = now;
                match this.upgrade() {
                    Some(manager) => manager.ftrace_changed(enabled),
                    None => break,
                }
            }
        });
    }

    fn ftrace_changed(&self, enabled: bool) {
        let (state, reason) = match enabled {
            true => ("on", "kernel.ftrace_enabled is 1 again: fp's programs run"),
            false => (
                "off",
                "kernel.ftrace_enabled was set to 0: the kernel runs none of fp's fmod_ret \
                 programs, no session is confined, and new sessions are refused until it is 1",
            ),
        };
        match enabled {
            true => tracing::warn!("{reason}"),
            false => tracing::error!("ENFORCEMENT OFF: {reason}"),
        }
        self.record(audit::Event::Enforcement(audit::Enforcement {
            backend: kernel::Backend::FModRet.name().to_owned(),
            state: state.to_owned(),
            reason: reason.to_owned(),
        }));
    }
}
