//! The session boundary for the signals a file sends: a file whose owner a session process set
//! (`F_SETOWN`, `F_SETOWN_EX`, `FIOSETOWN`, `SIOCSPGRP`) signals (SIGIO, SIGURG, or the
//! `F_SETSIG` signal, SIGKILL included) only processes of that session. The kernel sends the
//! signal from whatever task does the I/O (an outsider writing to the session's pipe, a softirq
//! receiving a packet), so the setter's session is remembered per file when the owner is set
//! (`file_set_fowner`, which cannot refuse) and each delivery decided against it
//! (`file_send_sigiotask`, once per target task).
use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap},
};
use core::intrinsics::{AtomicOrdering, atomic_xadd};
use fp_common::kernel::Hook;

use crate::{
    boundary::refuse_outsider,
    kernel::{EACCES, OFF_FILE_F_OWNER, OFF_FOWN_STRUCT_FILE, off, read},
    session::{current_session, session},
};

/// The session whose process set each file's owner, by the file's address. An entry lasts until
/// an outsider sets the file's owner or the daemon removes the session's entries at its end: a
/// freed file's stale entry is overwritten when the owner of a file at that address is set,
/// which the kernel does before any signal of it.
#[map]
pub(crate) static FOWNERS: HashMap<u64, u64> = HashMap::with_max_entries(16384, 0);

/// How many owners session processes set that [`FOWNERS`] had no room for. While it is not 0,
/// a file `FOWNERS` does not name signals no process (fail closed: the setter is unknown); the
/// daemon clears both maps when no session is left.
#[map]
pub(crate) static FOWNERS_LOST: Array<u64> = Array::with_max_entries(1, 0);

/// A file's owner is being set by the current task: remembers its session, or forgets the file
/// when the task is in none.
#[inline(always)]
pub(crate) fn remember_owner(file: u64) {
    match current_session() {
        Some(session) => {
            if FOWNERS.insert(&file, &session.id, 0).is_err()
                && let Some(lost) = FOWNERS_LOST.get_ptr_mut(0)
            {
                // SAFETY: `lost` points into a map value that lives as long as the program runs.
                unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(lost, 1) };
            }
        }
        None => {
            let _ = FOWNERS.remove(&file);
        }
    }
}

/// The file of a `struct fown_struct *`: the owner points back at it where the kernel allocates
/// it apart (6.12), and lies inside it at `file.f_owner` elsewhere (6.1).
#[inline(always)]
fn owner_file(fown: u64) -> Result<u64, ()> {
    match off(&OFF_FOWN_STRUCT_FILE) {
        0 => Ok(fown - off(&OFF_FILE_F_OWNER) as u64),
        at => read(fown, at - 1),
    }
}

/// Decides the signal of the file owned by `fown` to `task`: refused when a session process set
/// the owner and `task` is outside that session; when the setter is unknown because
/// [`FOWNERS`] was full, refused to every task.
#[inline(always)]
pub(crate) fn decide_signal(task: u64, fown: u64) -> i32 {
    let setter = owner_file(fown).ok().and_then(|file| {
        // SAFETY: a copy out of the map value.
        unsafe { FOWNERS.get(&file) }.copied()
    });
    match setter {
        // A session that has ended confines nothing any more.
        Some(id) => session(id).map_or(0, |s| refuse_outsider(&s, Hook::FileSendSigiotask, task)),
        None => {
            let lost = FOWNERS_LOST.get(0).copied().unwrap_or(1);
            if lost == 0 { 0 } else { -EACCES }
        }
    }
}
