//! `fp-bench-load open|stat FILE ITERATIONS RUNS`: the workload of `cargo xtask bench kernel`.
//! Times RUNS rounds of ITERATIONS open+close (or stat) of FILE and prints one line per round,
//! `ns_per_op N`, so the caller takes the median. Every call goes through libc directly: the
//! figure is the syscall plus the LSM hooks it reaches, not Rust's allocation of a CString.
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context as _, bail};

#[derive(Clone, Copy)]
enum Workload {
    OpenClose,
    Stat,
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fp-bench-load: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let [workload, file, iterations, runs] = args.as_slice() else {
        bail!("usage: fp-bench-load open|stat FILE ITERATIONS RUNS");
    };
    let workload = match workload.to_str() {
        Some("open") => Workload::OpenClose,
        Some("stat") => Workload::Stat,
        _ => bail!("workload must be `open` or `stat`, not {workload:?}"),
    };
    let file = CString::new(file.as_bytes()).context("FILE contains a NUL byte")?;
    let count = |s: &std::ffi::OsStr, what: &str| -> anyhow::Result<u64> {
        s.to_str()
            .and_then(|s| s.parse().ok())
            .filter(|&n: &u64| n > 0)
            .with_context(|| format!("{what} must be a positive integer, not {s:?}"))
    };
    let iterations = count(iterations, "ITERATIONS")?;
    let runs = count(runs, "RUNS")?;
    // An untimed round warms the dentry cache, the page tables and (under TCG) the translated code.
    one_round(workload, &file, iterations.min(20_000))?;
    for _ in 0..runs {
        let start = Instant::now();
        one_round(workload, &file, iterations)?;
        let ns = start.elapsed().as_nanos() / u128::from(iterations);
        println!("ns_per_op {ns}");
    }
    Ok(())
}

fn one_round(workload: Workload, file: &CString, iterations: u64) -> anyhow::Result<()> {
    for _ in 0..iterations {
        match workload {
            Workload::OpenClose => {
                // SAFETY: `file` is a valid NUL-terminated string; the fd is closed at once.
                let fd = unsafe { libc::open(file.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
                if fd < 0 {
                    return Err(std::io::Error::last_os_error()).context("open");
                }
                // SAFETY: `fd` was just opened by us and is not used again.
                unsafe { libc::close(fd) };
            }
            Workload::Stat => {
                let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
                // SAFETY: `file` is NUL-terminated and `st` is a writable `struct stat`.
                if unsafe { libc::stat(file.as_ptr(), st.as_mut_ptr()) } != 0 {
                    return Err(std::io::Error::last_os_error()).context("stat");
                }
            }
        }
    }
    Ok(())
}
