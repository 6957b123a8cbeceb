//! The workloads and helpers of `cargo xtask bench kernel` (docs/performance.md):
//!
//! - `fp-bench-load open|stat FILE ITERATIONS RUNS`: times RUNS rounds of ITERATIONS open+close
//!   (or stat) of FILE and prints one line per round, `ns_per_op N`, so the caller takes the
//!   median. Every call goes through libc directly: the figure is the syscall plus the LSM hooks
//!   it reaches, not Rust's allocation of a CString.
//! - `fp-bench-load noop`: attaches fp-ebpf's pass-through programs to exactly fp's hooks
//!   (`fp_agent::kernel::attach_noop`), prints `noop: attached N programs` and holds them until
//!   killed.
//! - `fp-bench-load landlock WORKSPACE [--] CMD ARGS...`: runs CMD under a Landlock ruleset of the
//!   shape of the benchmark's fp policy: read and execute everywhere, everything in WORKSPACE,
//!   and writing `/dev/null`.
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
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
    match args.first().and_then(|a| a.to_str()) {
        Some("noop") => return noop(),
        Some("landlock") => return landlock(&args[1..]),
        _ => {}
    }
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

/// Holds the pass-through programs attached until the process is killed.
fn noop() -> anyhow::Result<()> {
    let (_object, links) = fp_agent::kernel::attach_noop()?;
    println!("noop: attached {} programs", links.len());
    loop {
        std::thread::park();
    }
}

/// Landlock's ABI (include/uapi/linux/landlock.h): filesystem access rights.
mod landlock {
    pub const EXECUTE: u64 = 1 << 0;
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const READ_FILE: u64 = 1 << 2;
    pub const READ_DIR: u64 = 1 << 3;
    /// ABI 1 handles bits 0..=12; ABI 2 adds REFER (13), 3 TRUNCATE (14), 5 IOCTL_DEV (15).
    pub const TRUNCATE: u64 = 1 << 14;
    pub const IOCTL_DEV: u64 = 1 << 15;
    pub const CREATE_RULESET_VERSION: u32 = 1;
    pub const RULE_PATH_BENEATH: u32 = 1;

    #[repr(C)]
    pub struct RulesetAttr {
        pub handled_access_fs: u64,
    }

    #[repr(C, packed)]
    pub struct PathBeneathAttr {
        pub allowed_access: u64,
        pub parent_fd: i32,
    }

    /// Every filesystem right ABI `abi` knows.
    pub fn handled(abi: i64) -> u64 {
        let bits = match abi {
            1 => 13,
            2 => 14,
            3 | 4 => 15,
            _ => 16,
        };
        (1u64 << bits) - 1
    }
}

/// Restricts this process with Landlock (read and execute everywhere, every right in the
/// workspace, writing /dev/null) and execs the command.
fn landlock(args: &[std::ffi::OsString]) -> anyhow::Result<()> {
    let [workspace, command @ ..] = args else {
        bail!("usage: fp-bench-load landlock WORKSPACE [--] CMD ARGS...");
    };
    let command = match command.split_first() {
        Some((dashes, rest)) if dashes == "--" => rest,
        _ => command,
    };
    let Some((program, rest)) = command.split_first() else {
        bail!("usage: fp-bench-load landlock WORKSPACE [--] CMD ARGS...");
    };
    // SAFETY: a query of the ABI version: no pointer is passed.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<landlock::RulesetAttr>(),
            0usize,
            landlock::CREATE_RULESET_VERSION,
        )
    };
    if abi < 1 {
        return Err(std::io::Error::last_os_error()).context("Landlock is not available");
    }
    let handled = landlock::handled(abi);
    let attr = landlock::RulesetAttr { handled_access_fs: handled };
    // SAFETY: `attr` is a valid ruleset attribute of the size passed.
    let ruleset = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const landlock::RulesetAttr,
            std::mem::size_of::<landlock::RulesetAttr>(),
            0u32,
        )
    };
    if ruleset < 0 {
        return Err(std::io::Error::last_os_error()).context("landlock_create_ruleset");
    }
    let read = landlock::EXECUTE | landlock::READ_FILE | landlock::READ_DIR;
    let file_rights =
        (landlock::READ_FILE | landlock::WRITE_FILE | landlock::TRUNCATE | landlock::IOCTL_DEV)
            & handled;
    let rules: [(&std::ffi::OsStr, u64); 3] = [
        ("/".as_ref(), read),
        (workspace.as_os_str(), handled),
        ("/dev/null".as_ref(), file_rights),
    ];
    for (path, access) in rules {
        let dir = std::fs::File::open(path).with_context(|| format!("opening {path:?}"))?;
        let rule = landlock::PathBeneathAttr {
            allowed_access: access,
            parent_fd: std::os::fd::AsRawFd::as_raw_fd(&dir),
        };
        // SAFETY: `rule` is a valid path-beneath attribute; `ruleset` is our ruleset fd.
        let added = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset as i32,
                landlock::RULE_PATH_BENEATH,
                &rule as *const landlock::PathBeneathAttr,
                0u32,
            )
        };
        if added != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("landlock_add_rule {path:?}"));
        }
    }
    // SAFETY: plain prctl and syscall calls with integer arguments.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error()).context("PR_SET_NO_NEW_PRIVS");
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset as i32, 0u32) != 0 {
            return Err(std::io::Error::last_os_error()).context("landlock_restrict_self");
        }
        libc::close(ruleset as i32);
    }
    let error = std::process::Command::new(program).args(rest).exec();
    Err(error).with_context(|| format!("exec {program:?}"))
}
