//! The session boundary for unix sockets: a session process connects to, or sends to, a unix
//! socket served from outside its session only when its policy names that socket
//! (docs/threat-model.md, "The session boundary"). A helper outside the session that listens on a
//! socket (the user's systemd manager, dockerd, ssh-agent, a tmux server, D-Bus, an X server)
//! runs work or lends credentials past every rule; the session's own sockets (a server and its
//! clients both inside) are never asked about. Who serves a socket is the cgroup its server made
//! it in (`sock.sk_cgrp_data`, set at `socket()` by the creating task), which no name, symlink
//! or mount changes.
use aya_ebpf::{helpers::generated::bpf_probe_read_kernel, macros::map, maps::HashMap};
use core::ffi::c_void;
use fp_common::{
    kernel::{
        Hook, KernelOp, Reason, SESSION_AUDIT_ONLY, UNIX_KEY_NAME, UNIX_NAME_MAX, UnixPeerKey,
    },
    policy::{NO_RULE, TableVerdict},
};

use crate::{
    cgroups::cgroup_in_session,
    kernel::{
        EACCES, OFF_PATH_DENTRY, OFF_PID_NUMBERS, OFF_SOCK_CGROUP_DATA_CGROUP,
        OFF_SOCK_SK_CGRP_DATA, OFF_SOCK_SK_PEER_PID, OFF_UNIX_ADDRESS_LEN, OFF_UNIX_ADDRESS_NAME,
        OFF_UNIX_SOCK_ADDR, OFF_UNIX_SOCK_PATH, OFF_UNIX_SOCK_PEER, OFF_UPID_NR, dentry_identity,
        off, read,
    },
    outcome::Outcome,
    report::{Report, Socket, Target, report_socket},
    session::{Session, unreadable},
};

/// The sockets served from outside that each session's policy names (`sockets`), written by
/// userspace when the session starts and removed when it ends.
#[map]
pub(crate) static UNIX_PEERS: HashMap<UnixPeerKey, u8> = HashMap::with_max_entries(4096, 0);

/// `sizeof(sa_family_t)`: `sun_path` follows it in `struct sockaddr_un`.
const SUN_PATH: usize = 2;

/// The address `other` was bound to, as the server gave it: where its `sun_path` lies and how
/// many bytes it has (a path, or an abstract name starting with NUL); (0, 0) for an unbound
/// socket (a `socketpair` end).
#[inline(always)]
fn address(other: u64) -> Result<(u64, usize), ()> {
    let addr: u64 = read(other, off(&OFF_UNIX_SOCK_ADDR))?;
    if addr == 0 {
        return Ok((0, 0));
    }
    let len = read::<i32>(addr, off(&OFF_UNIX_ADDRESS_LEN))? as usize;
    let len = core::cmp::min(len.saturating_sub(SUN_PATH), UNIX_NAME_MAX);
    Ok((addr + (off(&OFF_UNIX_ADDRESS_NAME) + SUN_PATH) as u64, len))
}

/// The socket `other` (bound to `len` bytes of `sun_path` at `name`) as a session's policy names
/// it: by the identity of its file when it was bound to a path (whatever name led there), by its
/// name when abstract; neither for an unbound one, which no policy names.
#[inline(always)]
fn peer_key(session: u64, other: u64, name: u64, len: usize) -> Result<UnixPeerKey, ()> {
    let mut key = UnixPeerKey::new(session);
    let dentry: u64 = read(other, off(&OFF_UNIX_SOCK_PATH) + off(&OFF_PATH_DENTRY))?;
    if dentry != 0 {
        (key.ino, key.dev) = dentry_identity(dentry)?;
    } else if len > 1 {
        // An abstract name, after its leading NUL.
        key.len = core::cmp::min(len - 1, UNIX_NAME_MAX - 1) as u32;
        // Read back and masked: 6.1's verifier loses the bound of a length LLVM reloads from
        // the stack, and LLVM drops a mask it can prove redundant.
        // SAFETY: a read of the key just written.
        let size = unsafe { core::ptr::read_volatile(&key.len) } & (UNIX_KEY_NAME as u32 - 1);
        // SAFETY: at most the key's buffer; the helper checks the source.
        let to = key.name.as_mut_ptr() as *mut c_void;
        if unsafe { bpf_probe_read_kernel(to, size, (name + 1) as *const c_void) } != 0 {
            return Err(());
        }
    }
    Ok(key)
}

/// The cgroup the server of `other` made it in (its id), and whether that lies in the
/// session's subtree.
#[inline(always)]
fn server_cgroup(other: u64, session: u64) -> Result<(u64, bool), ()> {
    let cgroup: u64 = read(other, off(&OFF_SOCK_SK_CGRP_DATA) + off(&OFF_SOCK_CGROUP_DATA_CGROUP))?;
    cgroup_in_session(cgroup, session)
}

/// The tgid that called `listen()` on `other` (0 for a datagram socket: none did), for the
/// event.
#[inline(always)]
fn listener(other: u64) -> u64 {
    match read::<u64>(other, off(&OFF_SOCK_SK_PEER_PID)) {
        Ok(pid) if pid != 0 => {
            read::<i32>(pid, off(&OFF_PID_NUMBERS) + off(&OFF_UPID_NR)).unwrap_or(0) as u64
        }
        _ => 0,
    }
}

/// [`refuse_outside_server`] for a datagram from `sk` to `other`, but that a socket connected to
/// `other` sends to it without asking again: its connect was decided (by this hook too), as
/// Landlock's scopes decide, so a log line through a connected `/dev/log` costs one read.
#[inline(always)]
pub(crate) fn refuse_outside_receiver(session: &Session, sk: u64, other: u64) -> i32 {
    if read::<u64>(sk, off(&OFF_UNIX_SOCK_PEER)) == Ok(other) {
        return 0;
    }
    refuse_outside_server(session, Hook::UnixMaySend, other)
}

/// Refuses a connection or a datagram to `other` (a `struct sock *`) when its server is outside
/// the session and the session's policy does not name the socket; a socket that cannot be read
/// is refused (fail closed).
#[inline(always)]
pub(crate) fn refuse_outside_server(session: &Session, hook: Hook, other: u64) -> i32 {
    let Ok((cgroup, inside)) = server_cgroup(other, session.id) else {
        return unreadable(session);
    };
    if inside {
        return 0;
    }
    let Ok((name, len)) = address(other) else {
        return unreadable(session);
    };
    let Ok(key) = peer_key(session.id, other, name, len) else {
        return unreadable(session);
    };
    // SAFETY: only tested for presence.
    if key.names_a_socket() && unsafe { UNIX_PEERS.get(&key) }.is_some() {
        return 0;
    }
    let outcome =
        Outcome { verdict: TableVerdict::Deny, reason: Reason::Boundary, rule_id: NO_RULE };
    let enforced = session.info.flags & SESSION_AUDIT_ONLY == 0;
    let what = Report::new(hook, KernelOp::Write, enforced);
    let server = Target { cgroup, tgid: listener(other) };
    let socket = Socket { server, ino: key.ino, dev: key.dev, address: name, len: len as u32 };
    report_socket(session, &outcome, &what, &socket);
    if enforced { -EACCES } else { 0 }
}
