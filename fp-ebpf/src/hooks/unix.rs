//! Hooks on unix sockets (crate::unix): the session boundary for sockets served from outside.
use aya_ebpf::{macros::lsm, programs::LsmContext};
use fp_common::kernel::Hook;

use super::in_session;
use crate::{
    kernel::{OFF_SOCKET_SK, off, read},
    session::unreadable,
    unix::{refuse_outside_receiver, refuse_outside_server},
};

/// connect(2) of a stream or seqpacket socket to a listening one, by path or abstract name.
#[lsm(hook = "unix_stream_connect")]
pub fn fp_unix_stream_connect(ctx: LsmContext) -> i32 {
    // unix_stream_connect(struct sock *sock, struct sock *other, struct sock *newsk, int ret)
    in_session(ctx.arg(3), |session| {
        refuse_outside_server(session, Hook::UnixStreamConnect, ctx.arg(1))
    })
}

/// connect(2) of a datagram socket, and every datagram sent (sendto, sendmsg, a connected
/// socket's send).
#[lsm(hook = "unix_may_send")]
pub fn fp_unix_may_send(ctx: LsmContext) -> i32 {
    // unix_may_send(struct socket *sock, struct socket *other, int ret)
    in_session(ctx.arg(2), |session| {
        let sk = read::<u64>(ctx.arg(0), off(&OFF_SOCKET_SK));
        let other = read::<u64>(ctx.arg(1), off(&OFF_SOCKET_SK));
        let (Ok(sk), Ok(other)) = (sk, other) else {
            return unreadable(session);
        };
        refuse_outside_receiver(session, sk, other)
    })
}
