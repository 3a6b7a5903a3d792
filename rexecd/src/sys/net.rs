//! TCP liveness options of a long-lived client connection: keepalive probes while it
//! is idle and `TCP_USER_TIMEOUT`, so a client machine that dies (or vanishes from the
//! network) while its job is stopped, or while rexecd waits on it, is noticed within a
//! bound instead of the kernel's retransmission limit (about 15 minutes) or never.
//! The options are set by `clients::liveness`, which the node protocol's client uses too.

pub use clients::liveness::set_liveness;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use socket2::SockRef;

    use super::*;

    #[test]
    fn a_socket_gets_keepalive_and_the_user_timeout() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        set_liveness(&stream, Duration::from_secs(2), Duration::from_secs(90)).unwrap();
        let sock = SockRef::from(&stream);
        assert!(sock.keepalive().unwrap());
        assert_eq!(sock.tcp_keepalive_time().unwrap(), Duration::from_secs(2));
        assert_eq!(sock.tcp_keepalive_retries().unwrap(), 45);
        assert_eq!(
            sock.tcp_user_timeout().unwrap(),
            Some(Duration::from_secs(90))
        );
    }
}
