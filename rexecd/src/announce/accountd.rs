//! Finding accountd from its announcements: when `[market]` names no accountd
//! and discovery is on, rexecd hears the cluster's announcements and keeps the
//! address of the newest `Account` announcement of its cluster that carries the
//! expected name (`accountd_name`) in a [`LearntAddress`], which the debit client
//! and the balance checks read at each connection. The TLS handshake still checks
//! accountd's certificate names `accountd_name`, so a forged announcement can
//! delay charges, never divert them.

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

/// The newest matching announcement seen, and whether `a` replaces it.
#[derive(Debug, Default)]
pub struct Newest(Option<Announcement>);

impl Newest {
    /// Takes `a` if it is an `Account` announcement of the wanted cluster and name,
    /// newer than the one kept (a larger incarnation wins: a restarted accountd,
    /// perhaps at a new address); returns the address to use when it changed.
    pub fn offer(&mut self, wanted: &Wanted, a: Announcement) -> Option<std::net::SocketAddr> {
        if a.cluster != wanted.cluster || a.kind != Kind::Account || a.name != wanted.name {
            return None;
        }
        if let Some(kept) = &self.0
            && !a.supersedes(kept)
        {
            return None;
        }
        let changed = self.0.as_ref().is_none_or(|k| k.addr != a.addr);
        let addr = a.addr;
        self.0 = Some(a);
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
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
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
        if let Some(addr) = newest.offer(&wanted, a)
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

    #[test]
    fn newest_matching_announcement_wins() {
        let w = Wanted {
            cluster: "c".into(),
            name: "accountd".into(),
        };
        let mut n = Newest::default();
        let a1 = "10.0.0.9:7071".parse().unwrap();
        assert_eq!(
            n.offer(&w, account("accountd", "10.0.0.9:7071", 5, 0)),
            Some(a1)
        );
        // Same address again: nothing to change.
        assert_eq!(
            n.offer(&w, account("accountd", "10.0.0.9:7071", 5, 1)),
            None
        );
        // Stale (older incarnation), another name, another cluster, another kind.
        assert_eq!(n.offer(&w, account("accountd", "10.0.0.8:1", 4, 9)), None);
        assert_eq!(n.offer(&w, account("evil", "10.0.0.8:1", 9, 0)), None);
        let mut other = account("accountd", "10.0.0.8:1", 9, 0);
        other.cluster = "d".into();
        assert_eq!(n.offer(&w, other), None);
        let mut selector = account("accountd", "10.0.0.8:1", 9, 0);
        selector.kind = Kind::Selector;
        assert_eq!(n.offer(&w, selector), None);
        // A restart elsewhere.
        let a2 = "10.0.0.10:7071".parse().unwrap();
        assert_eq!(
            n.offer(&w, account("accountd", "10.0.0.10:7071", 6, 0)),
            Some(a2)
        );
    }
}
