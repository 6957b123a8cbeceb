//! The watch on what the fmod_ret backend needs of the running kernel, which anyone outside a
//! session may change while the agent runs: `kernel.ftrace_enabled` (at 0 the kernel runs none of
//! fp's programs, though they stay attached) and the preemption mode (switchable through
//! debugfs: where tasks are preempted inside programs, the kernel skips some runs of them,
//! `kernel::preemption`). The agent checked both as it started (`kernel::probe`); this reads
//! them every second while the agent runs and says each change loudly: an error on stderr and an
//! `enforcement` record in the audit log. New sessions are refused meanwhile
//! ([`Manager::create`]).
use std::{sync::atomic::Ordering, time::Duration};

use super::Manager;
use crate::{audit, kernel};

/// How often the watch reads the settings.
const EVERY: Duration = Duration::from_secs(1);

/// Why fp's fmod_ret programs do not enforce now, if they do not.
pub(super) fn fmod_ret_refusal() -> Option<Refusal> {
    match kernel::ftrace_enabled() {
        Some(false) => Some(Refusal::FtraceOff),
        _ => kernel::preemption().refusal().map(Refusal::Preemption),
    }
}

impl Manager {
    /// Starts the watch where the programs enforce through fmod_ret; it ends with the agent.
    pub(super) fn spawn_fmod_ret_watch(&self) {
        if self.backend() != Some(kernel::Backend::FModRet) {
            return;
        }
        let (this, stop) = (self.this.clone(), self.stop.clone());
        std::thread::spawn(move || {
            let mut refused = None;
            while !stop.load(Ordering::Acquire) {
                std::thread::sleep(EVERY);
                let now = fmod_ret_refusal();
                if now == refused {
                    continue;
                }
                let was = std::mem::replace(&mut refused, now.clone());
                match this.upgrade() {
                    Some(manager) => manager.enforcement_changed(was, now),
                    None => break,
                }
            }
        });
    }

    fn enforcement_changed(&self, was: Option<Refusal>, now: Option<Refusal>) {
        let (state, reason) = match (&now, was) {
            (None, Some(Refusal::FtraceOff)) => {
                ("on", "kernel.ftrace_enabled is 1 again: fp's programs run".to_owned())
            }
            (None, _) => ("on", "the kernel no longer preempts tasks inside fp's programs".into()),
            (Some(Refusal::FtraceOff), _) => (
                "off",
                "kernel.ftrace_enabled was set to 0: the kernel runs none of fp's fmod_ret \
                 programs, no session is confined, and new sessions are refused until it is 1"
                    .into(),
            ),
            (Some(Refusal::Preemption(why)), _) => (
                "off",
                format!("{why}; sessions are not reliably confined, and new sessions are refused"),
            ),
        };
        match now {
            None => tracing::warn!("{reason}"),
            Some(_) => tracing::error!("ENFORCEMENT OFF: {reason}"),
        }
        self.record(audit::Event::Enforcement(audit::Enforcement {
            backend: kernel::Backend::FModRet.name().to_owned(),
            state: state.to_owned(),
            reason,
        }));
    }
}

/// Why fp's fmod_ret programs do not enforce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    FtraceOff,
    /// The preemption mode's refusal ([`kernel::PreemptionFact::refusal`]).
    Preemption(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::FtraceOff => f.write_str(kernel::FTRACE_DISABLED),
            Refusal::Preemption(why) => f.write_str(why),
        }
    }
}
