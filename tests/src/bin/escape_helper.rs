//! Opens a file by routes the shell cannot take, for the escape suite (tests/escape):
//!
//! ```text
//! fp-escape-helper openat2 DIR PATH beneath|in-root   openat2(2) relative to DIR with RESOLVE_*
//! fp-escape-helper uring DIR PATH inline|async        io_uring IORING_OP_OPENAT (async: io-wq worker)
//! fp-escape-helper fd-open N PATH                     openat(2) relative to inherited fd N
//! fp-escape-helper opath-reopen PATH                  open O_PATH, then reopen /proc/self/fd/N
//! fp-escape-helper open-tree DIR PATH                 open_tree(2) clone of DIR, openat PATH in it
//! fp-escape-helper uring-rename FROM TO               io_uring IORING_OP_RENAMEAT
//! fp-escape-helper uring-link FROM TO                 io_uring IORING_OP_LINKAT
//! ```
//!
//! Prints `opened` and exits 0 on success, else prints the error (EACCES reads "Permission
//! denied") and exits 1.
use std::{
    ffi::CString,
    io,
    os::fd::{AsRawFd as _, OwnedFd, RawFd},
    process::ExitCode,
};

use anyhow::{Context as _, bail};
use io_uring::{IoUring, opcode, squeue, types};

/// `struct open_how` of openat2(2).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_BENEATH: u64 = 0x08;
const RESOLVE_IN_ROOT: u64 = 0x10;

fn open_dir(dir: &str) -> anyhow::Result<OwnedFd> {
    nix::fcntl::open(
        dir,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )
    .with_context(|| format!("opening {dir}"))
}

fn openat2(dir: RawFd, path: &CString, resolve: u64) -> io::Result<RawFd> {
    let how = OpenHow { flags: libc::O_RDONLY as u64, mode: 0, resolve };
    // SAFETY: valid pointers for the duration of the call; the size matches the struct.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            path.as_ptr(),
            &how as *const OpenHow,
            size_of::<OpenHow>(),
        )
    };
    if fd < 0 { Err(io::Error::last_os_error()) } else { Ok(fd as RawFd) }
}

fn uring_openat(dir: RawFd, path: &CString, worker: bool) -> io::Result<RawFd> {
    let mut ring = IoUring::new(4)?;
    let flags = if worker { squeue::Flags::ASYNC } else { squeue::Flags::empty() };
    let sqe = opcode::OpenAt::new(types::Fd(dir), path.as_ptr())
        .flags(libc::O_RDONLY)
        .build()
        .flags(flags)
        .user_data(1);
    // SAFETY: `path` outlives the submission, which completes before this function returns.
    unsafe { ring.submission().push(&sqe) }.map_err(io::Error::other)?;
    ring.submit_and_wait(1)?;
    let res = ring.completion().next().ok_or_else(|| io::Error::other("no completion"))?.result();
    if res < 0 { Err(io::Error::from_raw_os_error(-res)) } else { Ok(res) }
}

/// Submits one io_uring operation and waits for its result.
fn uring_one(sqe: squeue::Entry) -> io::Result<RawFd> {
    let mut ring = IoUring::new(4)?;
    // SAFETY: the caller's pointers outlive the submission, which completes before this returns.
    unsafe { ring.submission().push(&sqe.user_data(1)) }.map_err(io::Error::other)?;
    ring.submit_and_wait(1)?;
    let res = ring.completion().next().ok_or_else(|| io::Error::other("no completion"))?.result();
    if res < 0 { Err(io::Error::from_raw_os_error(-res)) } else { Ok(res) }
}

/// The value named `mode` in `choices`.
fn pick<T: Copy>(mode: &str, choices: &[(&str, T)]) -> anyhow::Result<T> {
    choices
        .iter()
        .find(|(name, _)| *name == mode)
        .map(|(_, v)| *v)
        .ok_or_else(|| anyhow::anyhow!("unknown mode {mode}"))
}

fn run(args: &[String]) -> anyhow::Result<io::Result<RawFd>> {
    let arg = |i: usize| args.get(i).map(String::as_str);
    let cstr = |s: &str| CString::new(s).context("NUL in path");
    Ok(match (arg(1), arg(2), arg(3), arg(4)) {
        (Some("openat2"), Some(dir), Some(path), Some(mode)) => {
            let resolve =
                pick(mode, &[("beneath", RESOLVE_BENEATH), ("in-root", RESOLVE_IN_ROOT)])?;
            openat2(open_dir(dir)?.as_raw_fd(), &cstr(path)?, resolve)
        }
        (Some("uring"), Some(dir), Some(path), Some(mode)) => {
            let worker = pick(mode, &[("inline", false), ("async", true)])?;
            uring_openat(open_dir(dir)?.as_raw_fd(), &cstr(path)?, worker)
        }
        (Some("fd-open"), Some(fd), Some(path), None) => {
            let fd: RawFd = fd.parse().context("fd number")?;
            // SAFETY: openat with a caller-provided dirfd and a valid C string.
            let r = unsafe { libc::openat(fd, cstr(path)?.as_ptr(), libc::O_RDONLY) };
            if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
        }
        (Some("opath-reopen"), Some(path), None, None) => {
            let fd =
                nix::fcntl::open(path, nix::fcntl::OFlag::O_PATH, nix::sys::stat::Mode::empty())
                    .with_context(|| format!("O_PATH open of {path}"))?;
            let proc = cstr(&format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
            // SAFETY: open with a valid C string.
            let r = unsafe { libc::open(proc.as_ptr(), libc::O_RDONLY) };
            if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
        }
        (Some("open-tree"), Some(dir), Some(path), None) => {
            const OPEN_TREE_CLONE: libc::c_uint = 1;
            // SAFETY: open_tree with a valid C string; the result is checked.
            let tree = unsafe {
                libc::syscall(
                    libc::SYS_open_tree,
                    libc::AT_FDCWD,
                    cstr(dir)?.as_ptr(),
                    OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
                )
            };
            if tree < 0 {
                return Ok(Err(io::Error::last_os_error()));
            }
            // SAFETY: openat relative to the detached tree's fd, with a valid C string.
            let r = unsafe { libc::openat(tree as RawFd, cstr(path)?.as_ptr(), libc::O_RDONLY) };
            if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
        }
        (Some(op @ ("uring-rename" | "uring-link")), Some(from), Some(to), None) => {
            let (from, to) = (cstr(from)?, cstr(to)?);
            let cwd = types::Fd(libc::AT_FDCWD);
            let sqe = match op {
                "uring-rename" => {
                    opcode::RenameAt::new(cwd, from.as_ptr(), cwd, to.as_ptr()).build()
                }
                _ => opcode::LinkAt::new(cwd, from.as_ptr(), cwd, to.as_ptr()).build(),
            };
            uring_one(sqe)
        }
        _ => bail!("usage: see the module documentation of tests/src/bin/escape_helper.rs"),
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    match run(&args) {
        Ok(Ok(_)) => {
            println!("opened");
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            println!("{e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("fp-escape-helper: {e:#}");
            ExitCode::from(2)
        }
    }
}
