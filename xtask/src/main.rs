//! `cargo xtask`: everything a developer or CI runs besides plain cargo.
mod agent_clis;
mod bench;
mod cmd;
mod demo;
mod kernels;
mod paths;
mod setup;
mod step;
mod test_kernel;
mod vm;

use clap::Parser;
use std::process::ExitCode;

#[derive(Parser)]
#[command(about = "fp developer tasks: toolchain setup, kernel test VM, tests")]
enum Task {
    /// Install everything the build and the test VM need (idempotent; a second run does nothing).
    Setup,
    /// Run a command as root inside a VM booting a pinned Debian kernel.
    Vm(vm::VmArgs),
    /// Build the privileged tests on the host and run them in the VM, one kernel after another.
    TestKernel(test_kernel::TestKernelArgs),
    /// Run every test: unit tests of the default members, then the kernel tests on all kernels.
    Test,
    /// Boot the VM and show a session being denied next to the same commands outside it.
    Demo(demo::DemoArgs),
    /// Benchmarks: what fp's kernel programs cost (docs/performance.md).
    #[command(subcommand)]
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let result = match Task::parse() {
        Task::Setup => setup::run(step::Report::Everything).map(|()| ExitCode::SUCCESS),
        Task::Vm(args) => vm::main(args),
        Task::TestKernel(args) => test_kernel::main(args),
        Task::Test => test_kernel::test_all(),
        Task::Demo(args) => demo::main(args),
        Task::Bench(args) => bench::main(args),
    };
    result.unwrap_or_else(|e| {
        eprintln!("xtask: error: {e:#}");
        ExitCode::FAILURE
    })
}
