//! `cargo xtask`: everything a developer or CI runs besides plain cargo.
use clap::Parser;

#[derive(Parser)]
enum Task {}

fn main() -> anyhow::Result<()> {
    match Task::parse() {}
}
