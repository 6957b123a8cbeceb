//! `fp run`.
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn main(_args: Args) -> ExitCode {
    ExitCode::FAILURE
}
