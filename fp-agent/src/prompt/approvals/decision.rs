//! Who decides and how: approve or deny, what an approval remembers, and the surface it came
//! from.
use fp_common::kernel::GrantScope;
use serde::{Deserialize, Serialize};

/// What `--remember` keeps after an approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Remember {
    /// Every prompt of the session.
    Session,
    /// Every path in the approved path's directory and below it.
    Dir,
    /// The approved path only.
    Path,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approve,
    Deny,
}

impl From<Remember> for GrantScope {
    fn from(remember: Remember) -> Self {
        match remember {
            Remember::Session => GrantScope::Session,
            Remember::Dir => GrantScope::Dir,
            Remember::Path => GrantScope::Path,
        }
    }
}

/// Where a decision came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Surface {
    /// `fp approve` / `fp deny`.
    Cli,
    /// Another client of the control socket (an agent runtime's approval surfacer).
    Socket,
    /// The configured `approval_command`.
    Command,
    /// The controlling terminal of `fp run`'s embedded agent.
    Terminal,
}

/// Who decided: the peer's uid and the surface it used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decider {
    pub uid: u32,
    pub surface: Surface,
}
