//! The session boundary for terminals: no session process types into a terminal or drives a
//! console, root included (docs/threat-model.md, "The session boundary"). `TIOCSTI` queues input
//! on a terminal the session may share with the user's shell, which runs it after the session
//! ends (CVE-2017-5226, which bubblewrap's `--new-session` answers); `TIOCLINUX` pastes a
//! console's selection as input (CVE-2023-28100). Refused on any file, before the driver: the
//! kernel's own checks let root (CAP_SYS_ADMIN) through both.
use fp_common::kernel::{Hook, KernelOp, Reason};

use crate::{protect::refuse_without_path, session::Session};

/// `TIOCSTI`: fake input, one byte per call.
pub(crate) const TIOCSTI: u32 = 0x5412;
/// `TIOCLINUX`: the virtual console's subcommands, selection paste among them.
pub(crate) const TIOCLINUX: u32 = 0x541C;

/// Refuses `TIOCSTI` and `TIOCLINUX` (the event's inode field names the command); every other
/// ioctl is the driver's and the kernel's to decide: job control (`TIOCSPGRP`), `TIOCSCTTY`,
/// window sizes and termios keep working. `cmd` is the ioctl's full 32-bit command: no high bit
/// hides it (seccomp's CVE-2019-10063).
#[inline(always)]
pub(crate) fn refuse_terminal_input(session: &Session, hook: Hook, cmd: u32) -> i32 {
    if cmd != TIOCSTI && cmd != TIOCLINUX {
        return 0;
    }
    refuse_without_path(session, hook, KernelOp::Write, Reason::Boundary, (cmd as u64, 0))
}
