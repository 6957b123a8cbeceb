//! Hooks on unix sockets (crate::unix): the session boundary for sockets served from outside.
use fp_common::kernel::Hook;

use crate::{
    kernel::{OFF_SOCKET_SK, off, read},
    session::unreadable,
    unix::{refuse_outside_receiver, refuse_outside_server},
};

hook! {
    /// connect(2) of a stream or seqpacket socket to a listening one, by path or abstract name.
    lsm("unix_stream_connect", ret = 3) fp_unix_stream_connect;
    fmod_ret("security_unix_stream_connect") fp_fmod_ret_unix_stream_connect;
    // unix_stream_connect(struct sock *sock, struct sock *other, struct sock *newsk, int ret)
    |session, ctx| refuse_outside_server(session, Hook::UnixStreamConnect, ctx.arg(1))
}

hook! {
    /// connect(2) of a datagram socket, and every datagram sent (sendto, sendmsg, a connected
    /// socket's send).
    lsm("unix_may_send", ret = 2) fp_unix_may_send;
    fmod_ret("security_unix_may_send") fp_fmod_ret_unix_may_send;
    // unix_may_send(struct socket *sock, struct socket *other, int ret)
    |session, ctx| {
        let sk = read::<u64>(ctx.arg(0), off(&OFF_SOCKET_SK));
        let other = read::<u64>(ctx.arg(1), off(&OFF_SOCKET_SK));
        let (Ok(sk), Ok(other)) = (sk, other) else {
            return unreadable(session);
        };
        refuse_outside_receiver(session, sk, other)
    }
}
