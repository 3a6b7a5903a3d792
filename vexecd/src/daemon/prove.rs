//! Proving a node's move before the table believes it.
//!
//! Anyone who can send to the discovery group can announce any node's name. When an
//! announcement would move a live node to another address or incarnation, the table
//! holds it ([`crate::table::NodeTable::take_unproven`]) and the node stays listed
//! where it was. The prover then connects to the announced address and completes a
//! mutual-TLS handshake; only a server holding the cluster CA's certificate for that
//! node name passes, and only then does the move reach the table
//! ([`crate::table::NodeTable::ingest_proven`]). A forger's address fails the
//! handshake (or does not answer) and is not probed again for [`REFUTED_FOR`].
//!
//! Probes are bounded: one at a time per node name, at most [`MAX_IN_FLIGHT`] at
//! once, and a token bucket per source address ([`SOURCE_BURST`] at once,
//! [`SOURCE_RATE`] a second after that), so a flood of forged moves costs the
//! selector a few handshakes a second, never one per datagram.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use certs::Role;
use proto::announce::Announcement;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_rustls::TlsConnector;

use super::stats::{ProofCounts, Shared};

/// Longest wait for a probe's TCP connection and handshake.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// A move that failed its proof is not probed again for this long.
pub const REFUTED_FOR: Duration = Duration::from_secs(10);
/// Most probes running at once.
pub const MAX_IN_FLIGHT: usize = 16;
/// Probes one source address may cause at once.
pub const SOURCE_BURST: f64 = 4.0;
/// Probes one source address may cause per second after its burst.
pub const SOURCE_RATE: f64 = 2.0;
/// Claims waiting for the prover; more are dropped (the node announces again).
pub const QUEUE: usize = 256;
/// Most refuted moves and sources remembered; older ones are forgotten first.
const MAX_REMEMBERED: usize = 4096;
/// At most one warning about refuted moves per this interval.
const WARN_INTERVAL: Duration = Duration::from_secs(60);

/// A held announcement and the address its datagram came from.
pub type Claim = (Announcement, Option<IpAddr>);

/// What identifies one claimed move: the node and the address claimed (whatever the
/// incarnation, so a forger cannot buy a fresh probe by counting incarnations up).
type MoveKey = (String, SocketAddr);

/// A token bucket per source address.
#[derive(Debug, Default)]
struct Buckets(HashMap<Option<IpAddr>, (f64, Instant)>);

impl Buckets {
    fn take(&mut self, source: Option<IpAddr>, now: Instant) -> bool {
        if self.0.len() >= MAX_REMEMBERED && !self.0.contains_key(&source) {
            // Full buckets are the ones worth forgetting.
            self.0.retain(|_, (tokens, at)| {
                *tokens + now.duration_since(*at).as_secs_f64() * SOURCE_RATE < SOURCE_BURST
            });
        }
        let (tokens, at) = self.0.entry(source).or_insert((SOURCE_BURST, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * SOURCE_RATE).min(SOURCE_BURST);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The prover's bookkeeping: which moves are being proven or were refuted.
#[derive(Debug, Default)]
struct Book {
    in_flight: HashSet<String>,
    refuted: HashMap<MoveKey, Instant>,
    buckets: Buckets,
    counts: ProofCounts,
}

impl Book {
    /// Whether to probe `claim` now; marks its node in flight when so.
    fn admit(&mut self, (a, source): &Claim, now: Instant) -> bool {
        let key = (a.name.clone(), a.addr);
        if self.refuted.get(&key).is_some_and(|until| *until > now)
            || self.in_flight.contains(&a.name)
            || self.in_flight.len() >= MAX_IN_FLIGHT
            || !self.buckets.take(*source, now)
        {
            self.counts.skipped += 1;
            return false;
        }
        self.in_flight.insert(a.name.clone());
        true
    }

    fn refute(&mut self, a: &Announcement, now: Instant) {
        if self.refuted.len() >= MAX_REMEMBERED {
            self.refuted.retain(|_, until| *until > now);
        }
        if self.refuted.len() < MAX_REMEMBERED {
            self.refuted
                .insert((a.name.clone(), a.addr), now + REFUTED_FOR);
        }
        self.counts.refuted += 1;
    }
}

/// The sending side: hands the table's held moves to the prover.
#[derive(Debug, Clone)]
pub struct Claims(mpsc::Sender<Claim>);

impl Claims {
    /// Offer what the table holds; a full queue drops the rest (the nodes announce
    /// again within their period).
    pub fn offer(&self, shared: &Shared) {
        for claim in shared.write().take_unproven() {
            if self.0.try_send(claim).is_err() {
                break;
            }
        }
    }
}

/// A prover's channel: [`Claims`] for the receiver, the other end for [`run`].
pub fn channel() -> (Claims, mpsc::Receiver<Claim>) {
    let (tx, rx) = mpsc::channel(QUEUE);
    (Claims(tx), rx)
}

/// Prove claims until the channel closes, applying each proven move to the table.
pub async fn run(shared: Arc<Shared>, connector: TlsConnector, mut claims: mpsc::Receiver<Claim>) {
    let mut book = Book::default();
    let mut probes: JoinSet<(Claim, Result<(), String>)> = JoinSet::new();
    let mut last_warning: Option<Instant> = None;
    loop {
        tokio::select! {
            claim = claims.recv() => {
                let Some(claim) = claim else { break };
                if !book.admit(&claim, Instant::now()) {
                    continue;
                }
                let connector = connector.clone();
                probes.spawn(async move {
                    let (a, _) = &claim;
                    let outcome = clients::dial::dial(
                        &a.addr.to_string(),
                        &connector,
                        Role::Node,
                        &a.name,
                        PROBE_TIMEOUT,
                    )
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string());
                    (claim, outcome)
                });
            }
            Some(done) = probes.join_next() => {
                let Ok(((a, source), outcome)) = done else { continue };
                book.in_flight.remove(&a.name);
                let now = Instant::now();
                match outcome {
                    Ok(()) => {
                        book.counts.proven += 1;
                        let (name, addr, incarnation) = (a.name.clone(), a.addr, a.incarnation);
                        if shared.write().ingest_proven(a, source, now).is_ok() {
                            tracing::info!(
                                "node {name} is now at {addr} (incarnation {incarnation}): proven by its certificate"
                            );
                        }
                    }
                    Err(e) => {
                        book.refute(&a, now);
                        if last_warning.is_none_or(|t| now.duration_since(t) >= WARN_INTERVAL) {
                            tracing::warn!(
                                "an announcement moves node {} to {} but that address did not prove it ({e}); the node stays where it was ({} moves refuted so far)",
                                a.name, a.addr, book.counts.refuted
                            );
                            last_warning = Some(now);
                        }
                    }
                }
                shared.set_proofs(book.counts);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::announce::{Kind, NodeStatus};

    fn claim(name: &str, port: u16, source: [u8; 4]) -> Claim {
        let a = Announcement {
            cluster: "c".into(),
            name: name.into(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            incarnation: 1,
            seq: 1,
            period_ms: 1000,
            kind: Kind::Node(NodeStatus {
                cpus: 1,
                price: 0,
                charging: 0,
                contended: false,
                running_jobs: 0,
                runnable: 0,
                load_milli: 0,
                idle_milli: 0,
                free_mem_mib: 0,
            }),
            summary: None,
        };
        (a, Some(IpAddr::from(source)))
    }

    #[test]
    fn one_probe_per_node_at_a_time_and_a_refuted_move_waits() {
        let (mut book, t0) = (Book::default(), Instant::now());
        assert!(book.admit(&claim("n1", 9, [10, 0, 0, 1]), t0));
        assert!(
            !book.admit(&claim("n1", 10, [10, 0, 0, 2]), t0),
            "n1 in flight"
        );
        book.in_flight.remove("n1");
        book.refute(&claim("n1", 9, [10, 0, 0, 1]).0, t0);
        assert!(!book.admit(&claim("n1", 9, [10, 0, 0, 3]), t0 + REFUTED_FOR / 2));
        // Another address of the same node is a new claim.
        assert!(book.admit(&claim("n1", 10, [10, 0, 0, 3]), t0 + REFUTED_FOR / 2));
        book.in_flight.remove("n1");
        assert!(book.admit(&claim("n1", 9, [10, 0, 0, 4]), t0 + REFUTED_FOR * 2));
        assert_eq!(
            book.counts,
            ProofCounts {
                proven: 0,
                refuted: 1,
                skipped: 2
            }
        );
    }

    #[test]
    fn a_source_gets_its_burst_then_its_rate() {
        let (mut b, t0) = (Buckets::default(), Instant::now());
        let src = Some(IpAddr::from([10, 0, 0, 9]));
        let burst = (0..100).filter(|_| b.take(src, t0)).count();
        assert_eq!(burst, SOURCE_BURST as usize);
        // Ten seconds later: the burst again, not ten seconds' worth of tokens.
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(
            (0..100).filter(|_| b.take(src, t1)).count(),
            SOURCE_BURST as usize
        );
        // Half a second at the rate gives one more.
        let t2 = t1 + Duration::from_millis(500);
        assert_eq!((0..100).filter(|_| b.take(src, t2)).count(), 1);
        // Another source is not affected.
        assert!(b.take(Some(IpAddr::from([10, 0, 0, 10])), t2));
    }

    #[test]
    fn no_more_than_max_in_flight() {
        let (mut book, t0) = (Book::default(), Instant::now());
        let admitted = (0..100u8)
            .filter(|i| book.admit(&claim(&format!("n{i}"), 9, [10, 1, 0, *i]), t0))
            .count();
        assert_eq!(admitted, MAX_IN_FLIGHT);
    }
}
