//! The announcement sockets: a [`Sender`] that puts one datagram on the
//! multicast group and to every unicast peer, a [`Receiver`] that hears
//! the group and, optionally, its own unicast port, and [`announce_loop`],
//! which announces every period (with jitter) and at once when told the
//! sender's state changed.
//!
//! Every socket is made with socket2 so the multicast options are explicit:
//! the outgoing interface and TTL from the config, loopback delivery on (so
//! services on one host hear each other), and `SO_REUSEADDR` on the group
//! port so several listeners on one host each get every announcement. A
//! unicast listener needs a port of its own: the kernel gives a unicast
//! datagram to one socket only.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proto::announce::{Announcement, MAX_DATAGRAM};
use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::{Rng, SeedableRng};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio::sync::Notify;

use crate::config::DiscoveryConfig;

/// Shortest gap between two announcements sent because of changes.
pub const MIN_CHANGE_GAP: Duration = Duration::from_millis(100);

/// Receive buffer asked for on listening sockets (bursts from thousands of
/// nodes arrive faster than one task may read them).
const RECV_BUFFER: usize = 4 << 20;

/// A socket that cannot be set up.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct NetError {
    /// What was being done.
    pub what: String,
    /// The system's error.
    #[source]
    pub source: io::Error,
}

fn ctx(what: impl Into<String>) -> impl FnOnce(io::Error) -> NetError {
    let what = what.into();
    move |source| NetError { what, source }
}

/// Puts announcements on the group and to the unicast peers.
#[derive(Debug)]
pub struct Sender {
    socket: UdpSocket,
    targets: Vec<SocketAddr>,
}

/// What one [`Sender::send`] did.
#[derive(Debug, Default)]
pub struct SendReport {
    /// Destinations the datagram went to.
    pub sent: usize,
    /// Destinations that refused it, and why.
    pub failed: Vec<(SocketAddr, io::Error)>,
}

impl Sender {
    /// A sender for `config` (call inside a tokio runtime).
    pub fn new(config: &DiscoveryConfig) -> Result<Sender, NetError> {
        let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))
            .map_err(ctx("cannot open a UDP socket for announcements"))?;
        let mut targets = Vec::with_capacity(config.unicast.len() + 1);
        if config.multicast {
            socket
                .set_multicast_if_v4(&config.interface)
                .map_err(ctx(format!(
                    "cannot send multicast on interface {}",
                    config.interface
                )))?;
            socket
                .set_multicast_ttl_v4(config.ttl)
                .map_err(ctx("cannot set the multicast TTL"))?;
            socket
                .set_multicast_loop_v4(true)
                .map_err(ctx("cannot enable multicast loopback"))?;
            targets.push(SocketAddr::V4(SocketAddrV4::new(config.group, config.port)));
        }
        targets.extend(config.unicast.iter().copied());
        let bind = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        socket
            .bind(&bind.into())
            .map_err(ctx("cannot bind the announcement socket"))?;
        socket
            .set_nonblocking(true)
            .map_err(ctx("cannot make the announcement socket non-blocking"))?;
        let socket = UdpSocket::from_std(socket.into())
            .map_err(ctx("cannot register the announcement socket"))?;
        Ok(Sender { socket, targets })
    }

    /// Where announcements go: the group (when multicast is on), then the
    /// unicast peers.
    pub fn targets(&self) -> &[SocketAddr] {
        &self.targets
    }

    /// Send one datagram to every destination.
    pub async fn send(&self, datagram: &[u8]) -> SendReport {
        let mut report = SendReport::default();
        for &target in &self.targets {
            match self.socket.send_to(datagram, target).await {
                Ok(_) => report.sent += 1,
                Err(e) => report.failed.push((target, e)),
            }
        }
        report
    }
}

/// Hears announcements on the group and, optionally, on a unicast port.
#[derive(Debug)]
pub struct Receiver {
    multicast: Option<UdpSocket>,
    unicast: Option<UdpSocket>,
}

/// One datagram heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heard {
    /// Its bytes (longer than [`MAX_DATAGRAM`] only when it was oversized:
    /// then it is cut at `MAX_DATAGRAM + 1`).
    pub bytes: Vec<u8>,
    /// Who sent it.
    pub from: SocketAddr,
}

impl Receiver {
    /// Listen on the group (when `config.multicast`) and on `unicast`
    /// (when given; port 0 picks a free port, see [`Receiver::unicast_addr`]).
    pub fn bind(
        config: &DiscoveryConfig,
        unicast: Option<SocketAddr>,
    ) -> Result<Receiver, NetError> {
        let multicast = if config.multicast {
            Some(group_socket(config)?)
        } else {
            None
        };
        let unicast = match unicast {
            Some(addr) => Some(unicast_socket(addr)?),
            None => None,
        };
        if multicast.is_none() && unicast.is_none() {
            return Err(NetError {
                what: "nothing to listen on (multicast off and no unicast address)".into(),
                source: io::Error::from(io::ErrorKind::InvalidInput),
            });
        }
        Ok(Receiver { multicast, unicast })
    }

    /// The unicast address actually bound, when listening on one.
    pub fn unicast_addr(&self) -> Option<SocketAddr> {
        self.unicast.as_ref().and_then(|s| s.local_addr().ok())
    }

    /// The next datagram from either socket. Cancel-safe.
    pub async fn recv(&self) -> io::Result<Heard> {
        let (mut a, mut b) = ([0u8; MAX_DATAGRAM + 1], [0u8; MAX_DATAGRAM + 1]);
        let (bytes, n, from) = match (&self.multicast, &self.unicast) {
            (Some(m), Some(u)) => tokio::select! {
                r = m.recv_from(&mut a) => { let (n, f) = r?; (&a, n, f) }
                r = u.recv_from(&mut b) => { let (n, f) = r?; (&b, n, f) }
            },
            (Some(s), None) | (None, Some(s)) => {
                let (n, f) = s.recv_from(&mut a).await?;
                (&a, n, f)
            }
            (None, None) => std::future::pending().await,
        };
        Ok(Heard {
            bytes: bytes[..n].to_vec(),
            from,
        })
    }
}

fn group_socket(config: &DiscoveryConfig) -> Result<UdpSocket, NetError> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))
        .map_err(ctx("cannot open a UDP socket to hear announcements"))?;
    socket
        .set_reuse_address(true)
        .map_err(ctx("cannot share the announcement port"))?;
    // Best effort: a smaller buffer only means more drops under a burst.
    let _ = socket.set_recv_buffer_size(RECV_BUFFER);
    // Bound to the group address, the socket hears only the group's traffic.
    let bind = SocketAddr::V4(SocketAddrV4::new(config.group, config.port));
    socket
        .bind(&bind.into())
        .map_err(ctx(format!("cannot listen for announcements on {bind}")))?;
    socket
        .join_multicast_v4(&config.group, &config.interface)
        .map_err(ctx(format!(
            "cannot join multicast group {} on interface {}",
            config.group, config.interface
        )))?;
    socket
        .set_nonblocking(true)
        .map_err(ctx("cannot make the announcement socket non-blocking"))?;
    UdpSocket::from_std(socket.into()).map_err(ctx("cannot register the announcement socket"))
}

fn unicast_socket(addr: SocketAddr) -> Result<UdpSocket, NetError> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))
        .map_err(ctx("cannot open a UDP socket to hear announcements"))?;
    let _ = socket.set_recv_buffer_size(RECV_BUFFER);
    socket.bind(&addr.into()).map_err(ctx(format!(
        "cannot listen for unicast announcements on {addr}"
    )))?;
    socket
        .set_nonblocking(true)
        .map_err(ctx("cannot make the announcement socket non-blocking"))?;
    UdpSocket::from_std(socket.into()).map_err(ctx("cannot register the announcement socket"))
}

/// Listen on `config`'s group for announcements of its cluster that `want`
/// accepts: at most `limit`, and only `grace` more once the first is heard
/// (to collect the others announcing about then). Returns them in the order
/// heard, the newest of each sender (by [`Announcement::supersedes`]);
/// empty when none was heard in time. How a client finds the services
/// nobody configured for it.
pub async fn hear(
    config: &DiscoveryConfig,
    limit: Duration,
    grace: Duration,
    want: impl Fn(&Announcement) -> bool,
) -> Result<Vec<Announcement>, NetError> {
    let receiver = Receiver::bind(config, None)?;
    let deadline = tokio::time::Instant::now() + limit;
    let mut until = deadline;
    let mut heard: Vec<Announcement> = Vec::new();
    while let Ok(got) = tokio::time::timeout_at(until, receiver.recv()).await {
        let Ok(datagram) = got else { continue };
        let Ok(a) = Announcement::decode(&datagram.bytes) else {
            continue;
        };
        if a.cluster != config.cluster || !want(&a) {
            continue;
        }
        if heard.is_empty() {
            until = deadline.min(tokio::time::Instant::now() + grace);
        }
        match heard
            .iter_mut()
            .find(|h| h.name == a.name && h.kind == a.kind && h.addr == a.addr)
        {
            Some(h) if a.supersedes(h) => *h = a,
            Some(_) => {}
            None => heard.push(a),
        }
    }
    Ok(heard)
}

/// This start's incarnation: the wall clock in Unix microseconds (larger at
/// every restart, unless the clock went back).
pub fn incarnation() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_micros() as u64)
        .max(1)
}

/// Announce until the task is dropped: every `period` (between 90% and 110%
/// of it, so senders started together drift apart) and soon after `changed`
/// is notified (at most once per [`MIN_CHANGE_GAP`]). `make` gives the
/// announcement to send; the loop fills in incarnation, sequence number and
/// period. Failures are logged (once per destination until it works again)
/// and never end the loop.
pub async fn announce_loop<F>(sender: Sender, period: Duration, changed: Arc<Notify>, mut make: F)
where
    F: FnMut() -> Announcement,
{
    let incarnation = incarnation();
    let mut jitter = Jitter::from_os().unwrap_or_else(|e| {
        tracing::warn!("no randomness from the operating system ({e}): announcement jitter follows the start time");
        Jitter::seeded(incarnation)
    });
    let period_ms = period.as_millis().clamp(1, u32::MAX as u128) as u32;
    let mut failing: Vec<SocketAddr> = Vec::new();
    for seq in 0u64.. {
        let mut a = make();
        a.incarnation = incarnation;
        a.seq = seq;
        a.period_ms = period_ms;
        match a.encode() {
            Ok(datagram) => {
                let report = sender.send(&datagram).await;
                for (to, e) in &report.failed {
                    if !failing.contains(to) {
                        tracing::warn!("cannot announce to {to}: {e}");
                        failing.push(*to);
                    }
                }
                failing.retain(|to| report.failed.iter().any(|(f, _)| f == to));
            }
            Err(e) => tracing::error!("cannot encode this service's announcement: {e}"),
        }
        let sent_at = Instant::now();
        let wait = jitter.around(period);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = changed.notified() => {
                tokio::time::sleep_until((sent_at + MIN_CHANGE_GAP).into()).await;
            }
        }
    }
}

/// The period's jitter: `rand_xoshiro`'s SplitMix64, seeded from the operating
/// system so that senders started together drift apart (not for secrets).
struct Jitter(SplitMix64);

impl Jitter {
    fn from_os() -> Result<Jitter, getrandom::Error> {
        Ok(Jitter::seeded(getrandom::u64()?))
    }

    fn seeded(seed: u64) -> Jitter {
        Jitter(SplitMix64::seed_from_u64(seed))
    }

    fn around(&mut self, period: Duration) -> Duration {
        // 900..=1100 thousandths of the period.
        let milli = 900 + self.0.next_u64() % 201;
        period * milli as u32 / 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_ten_percent() {
        let mut j = Jitter::seeded(12345);
        let p = Duration::from_secs(2);
        let waits: Vec<_> = (0..1000).map(|_| j.around(p)).collect();
        assert!(waits.iter().all(|w| *w >= p * 9 / 10 && *w <= p * 11 / 10));
        let min = waits.iter().min().unwrap();
        let max = waits.iter().max().unwrap();
        assert!(*max - *min > Duration::from_millis(300), "{min:?}..{max:?}");
    }

    #[test]
    fn senders_started_together_draw_different_jitter() {
        let p = Duration::from_secs(2);
        let draw = |mut j: Jitter| (0..8).map(|_| j.around(p)).collect::<Vec<_>>();
        assert_ne!(
            draw(Jitter::from_os().unwrap()),
            draw(Jitter::from_os().unwrap())
        );
    }
}
