//! `fp policy`.
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {}

pub fn main(cmd: Command) -> ExitCode {
    match cmd {}
}
