//! `fp daemon`: the host agent (docs/operations.md).
//!
//! Exit codes: 0 stopped cleanly (SIGTERM/SIGINT), 78 bad config (systemd does not restart it),
//! 125 any other failure (another daemon runs, the socket cannot be bound, the kernel refuses).
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;

use crate::config::Config;
use crate::daemon::{self, SessionHost};
use crate::{exit, kernel};

#[derive(clap::Args)]
pub struct Args {
    /// The config file (docs/configuration.md).
    #[arg(long, value_name = "FILE", default_value = crate::config::DEFAULT_PATH)]
    config: PathBuf,
    /// Check the config file and exit.
    #[arg(long)]
    check: bool,
}

pub fn main(args: Args) -> ExitCode {
    let loaded = Config::load(&args.config)
        .and_then(|config| crate::config::check_file_policy(&args.config).map(|()| config));
    let config = match loaded {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(exit::BAD_CONFIG);
        }
    };
    if args.check {
        println!("{}: ok", args.config.display());
        return ExitCode::SUCCESS;
    }
    match run_kernel_daemon(&config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fp daemon: error: {e:#}");
            ExitCode::from(exit::FP_ERROR)
        }
    }
}

/// The daemon over the real kernel (pinned BPF objects, session cgroups, audit writer). Nothing
/// on the host changes before BPF LSM is known to work here and the locks are held: a second
/// daemon, or one on a kernel without BPF LSM, is refused without touching the live one's pins,
/// sessions or log.
fn run_kernel_daemon(config: &Config) -> anyhow::Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("fp daemon needs root: it loads BPF LSM programs and creates cgroups");
    }
    let _bpffs = kernel::ready(&crate::session::Cgroup2::find()?.mount)?;
    daemon::run(config, |config| {
        let host: Arc<dyn SessionHost> = daemon::kernel_host::KernelHost::start(config)?;
        Ok(host)
    })
}
