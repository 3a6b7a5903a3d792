//! TCP liveness options of a long-lived connection: keepalive probes while it is
//! idle and `TCP_USER_TIMEOUT`, so a peer machine that dies (or vanishes from the
//! network) while a job is stopped, or while the other side waits on it, is noticed
//! within a bound instead of the kernel's retransmission limit (about 15 minutes) or
//! never. Both sides of the node protocol set them: the client ([`crate::node`]) and
//! rexecd.

use std::io;
use std::os::fd::AsFd;
use std::time::Duration;

use socket2::{SockRef, TcpKeepalive};

/// Sets keepalive (first probe after `interval` of idleness, then every `interval`,
/// as many probes as fit in `user_timeout`) and `TCP_USER_TIMEOUT` = `user_timeout` (data
/// unacknowledged, or a receive window held shut, that long aborts the connection).
pub fn set_liveness(
    socket: &impl AsFd,
    interval: Duration,
    user_timeout: Duration,
) -> io::Result<()> {
    let sock = SockRef::from(socket);
    let step = interval.max(Duration::from_secs(1));
    let probes = (user_timeout.as_secs() / step.as_secs()).clamp(1, 127) as u32;
    let keepalive = TcpKeepalive::new()
        .with_time(step)
        .with_interval(step)
        .with_retries(probes);
    sock.set_tcp_keepalive(&keepalive)?;
    sock.set_tcp_user_timeout(Some(user_timeout))
}
