//! Finding accountd from its announcements: when `[market]` names no accountd
//! and discovery is on, rexecd hears the cluster's announcements and keeps the
//! address of the newest `Account` announcement of its cluster that carries the
//! expected name (`accountd_name`) in a [`LearntAddress`], which the debit client
//! and the balance checks read at each connection. Several accountd on one
//! PostgreSQL announce the same name: the node keeps the newest while it is heard,
//! and moves to another that is still announcing once the kept one has been silent
//! for [`SILENT_PERIODS`] of its periods. The TLS handshake still checks
//! accountd's certificate names `accountd_name`, so a forged announcement can
//! delay charges, never divert them.

use std::time::{Duration, Instant};

use clients::account::LearntAddress;
use discovery::net::Receiver;
use proto::announce::{Announcement, Kind};

/// What the listener accepts.
#[derive(Debug, Clone)]
pub struct Wanted {
    /// The cluster.
    pub cluster: String,
    /// The name accountd's certificate must carry.
    pub name: String,
}

/// Periods of silence after which the kept accountd counts as gone, and any other
/// accountd of the wanted name that is announcing is taken in its place (the same
/// window a selector forgets a node after).
pub const SILENT_PERIODS: u32 = 3;

/// The newest matching announcement seen, when it was heard, and whether `a`
/// replaces it.
#[derive(Debug, Default)]
pub struct Newest(Option<(Announcement, Instant)>);

impl Newest {
    /// Takes `a`, heard at `now`, if it is an `Account` announcement of the wanted
    /// cluster and name, and either newer than the one kept (a larger incarnation
    /// wins: a restarted accountd, perhaps at a new address) or the kept one has been
    /// silent for [`SILENT_PERIODS`] of its periods (it died: another instance on the
    /// same database takes over); returns the address to use when it changed.
    pub fn offer(
        &mut self,
        wanted: &Wanted,
        a: Announcement,
        now: Instant,
    ) -> Option<std::net::SocketAddr> {
        if a.cluster != wanted.cluster || a.kind != Kind::Account || a.name != wanted.name {
            return None;
        }
        if let Some((kept, heard)) = &self.0
            && !a.supersedes(kept)
        {
            let period = Duration::from_millis(u64::from(kept.period_ms.max(1)));
            let silent = now.saturating_duration_since(*heard) > period * SILENT_PERIODS;
            // The kept instance's own older datagram, or another while it is heard.
            if a.addr == kept.addr || !silent {
                return None;
            }
        }
        let changed = self.0.as_ref().is_none_or(|(k, _)| k.addr != a.addr);
        let addr = a.addr;
        self.0 = Some((a, now));
        changed.then_some(addr)
    }
}

/// Listens until the task is dropped, updating `learnt`.
pub async fn listen(receiver: Receiver, wanted: Wanted, learnt: LearntAddress) {
    let mut newest = Newest::default();
    loop {
        let heard = match receiver.recv().await {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(error = %e, "cannot receive announcements; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let a = match Announcement::decode(&heard.bytes) {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(from = %heard.from, error = %e, "ignored a datagram");
                continue;
            }
        };
        if let Some(addr) = newest.offer(&wanted, a, Instant::now())
            && learnt.set(Some(addr.to_string()))
        {
            tracing::info!(%addr, name = %wanted.name, "accountd found from its announcements");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(name: &str, addr: &str, incarnation: u64, seq: u64) -> Announcement {
        Announcement {
            cluster: "c".into(),
            name: name.into(),
            addr: addr.parse().unwrap(),
            incarnation,
            seq,
            period_ms: 1000,
            kind: Kind::Account,
            summary: None,
        }
    }

    fn wanted() -> Wanted {
        Wanted {
            cluster: "c".into(),
            name: "accountd".into(),
        }
    }

    #[test]
    fn newest_matching_announcement_wins() {
        let w = wanted();
        let now = Instant::now();
        let mut n = Newest::default();
        let mut offer = |a| n.offer(&w, a, now);
        let a1 = "10.0.0.9:7071".parse().unwrap();
        assert_eq!(offer(account("accountd", "10.0.0.9:7071", 5, 0)), Some(a1));
        // Same address again: nothing to change.
        assert_eq!(offer(account("accountd", "10.0.0.9:7071", 5, 1)), None);
        // Stale (older incarnation), another name, another cluster, another kind.
        assert_eq!(offer(account("accountd", "10.0.0.8:1", 4, 9)), None);
        assert_eq!(offer(account("evil", "10.0.0.8:1", 9, 0)), None);
        let mut other = account("accountd", "10.0.0.8:1", 9, 0);
        other.cluster = "d".into();
        assert_eq!(offer(other), None);
        let mut selector = account("accountd", "10.0.0.8:1", 9, 0);
        selector.kind = Kind::Selector;
        assert_eq!(offer(selector), None);
        // A restart elsewhere.
        let a2 = "10.0.0.10:7071".parse().unwrap();
        assert_eq!(offer(account("accountd", "10.0.0.10:7071", 6, 0)), Some(a2));
    }

    #[test]
    fn a_silent_instance_gives_way_to_another_still_announcing() {
        // Two accountd on one database: b started last, so b is kept while heard.
        let w = wanted();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let (a, b) = ("10.0.0.9:7071", "10.0.0.10:7071");
        let mut n = Newest::default();
        assert!(n.offer(&w, account("accountd", a, 5, 0), at(0)).is_some());
        assert!(n.offer(&w, account("accountd", b, 6, 0), at(10)).is_some());
        // a keeps announcing; b is heard within its period of 1 s: b stays.
        for k in 1..=3 {
            assert_eq!(
                n.offer(&w, account("accountd", a, 5, k), at(k * 1000)),
                None
            );
            assert_eq!(
                n.offer(&w, account("accountd", b, 6, k), at(k * 1000 + 10)),
                None
            );
        }
        // b is killed after 3010 ms. Within three periods of silence, a is not taken.
        assert_eq!(n.offer(&w, account("accountd", a, 5, 4), at(5000)), None);
        assert_eq!(n.offer(&w, account("accountd", a, 5, 5), at(6000)), None);
        // Past them, a is.
        assert_eq!(
            n.offer(&w, account("accountd", a, 5, 6), at(7000)),
            Some(a.parse().unwrap())
        );
        // b restarts (a larger incarnation): back to b at once.
        assert_eq!(
            n.offer(&w, account("accountd", b, 7, 0), at(7500)),
            Some(b.parse().unwrap())
        );
        // An older datagram of the kept instance changes nothing, however late.
        assert_eq!(n.offer(&w, account("accountd", b, 6, 9), at(60_000)), None);
    }
}
