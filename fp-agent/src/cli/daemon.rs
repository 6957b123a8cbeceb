//! `fp daemon`: the host agent (docs/operations.md).
//!
//! Exit codes: 0 stopped cleanly (SIGTERM/SIGINT), 78 bad config (systemd does not restart it),
//! 125 any other failure (another daemon runs, the socket cannot be bound, the kernel refuses).
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;

use super::run::EXIT_FP_ERROR;
use crate::daemon::{self, Config, SessionHost};

/// EX_CONFIG (sysexits.h): packaging/fp.service lists it in RestartPreventExitStatus.
const EXIT_CONFIG: u8 = 78;

#[derive(clap::Args)]
pub struct Args {
    /// The config file (docs/configuration.md).
    #[arg(long, value_name = "FILE", default_value = daemon::config::DEFAULT_PATH)]
    config: PathBuf,
    /// Check the config file and exit.
    #[arg(long)]
    check: bool,
}

pub fn main(args: Args) -> ExitCode {
    let config = match Config::load(&args.config) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if args.check {
        println!("{}: ok", args.config.display());
        return ExitCode::SUCCESS;
    }
    match kernel_host(&config).and_then(|host| daemon::serve(&config, host)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fp daemon: error: {e:#}");
            ExitCode::from(EXIT_FP_ERROR)
        }
    }
}

/// The session host over the real kernel (pinned BPF objects, session cgroups, audit writer).
fn kernel_host(config: &Config) -> anyhow::Result<Arc<dyn SessionHost>> {
    if !nix::unistd::geteuid().is_root() {
        bail!("fp daemon needs root: it loads BPF LSM programs and creates cgroups");
    }
    Ok(daemon::host::KernelHost::start(config)?)
}
