//! The bounded audit trail of refused requests, and the cut-off of a peer that
//! keeps sending them. A refusal (a malformed frame, a request of an unknown
//! protocol version, an operation the caller's role may not do) is counted per
//! certificate identity in windows of [`RefusalPolicy::window`]:
//!
//! - the first [`RefusalPolicy::recorded`] refusals of a window are each a row
//!   of the ledger's `refusals` table, committed before the answer goes out (as
//!   every refusal was before);
//! - the rest are counted in memory and written as one summary row (with its
//!   `count`) when the window ends, or at shutdown;
//! - a peer refused more than [`RefusalPolicy::max_refused`] times in one window
//!   is cut off for one window: one row says so, its connections are closed at
//!   their next request, and new connections are closed after the handshake.
//!
//! So a peer costs the ledger at most `recorded + 2` rows per window however
//! much garbage it sends, and the writer thread (which debits share) does at
//! most `recorded` commits per window on its behalf.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use certs::PeerIdentity;
use proto::account::ErrorCode;
use tokio::time::Instant;

use crate::store::Refusal;

/// How refusals are recorded and when a peer is cut off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefusalPolicy {
    /// Refusals of one peer recorded one row each per window.
    pub recorded: u32,
    /// Refusals of one peer allowed per window; one more cuts it off.
    pub max_refused: u32,
    /// The counting window, and how long a cut-off lasts.
    pub window: Duration,
}

impl Default for RefusalPolicy {
    fn default() -> Self {
        RefusalPolicy {
            recorded: 16,
            max_refused: 64,
            window: Duration::from_secs(60),
        }
    }
}

/// What to do about one refusal.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Rows to commit before answering (this refusal, a cut-off notice, or the
    /// summary of a window that just ended).
    pub write: Vec<Refusal>,
    /// The peer is cut off: answer, then close the connection.
    pub cut_off: bool,
}

#[derive(Debug)]
struct Window {
    start: Instant,
    refused: u64,
    recorded: u32,
    /// Refusals counted but not written one by one.
    pending: u64,
    /// The last of them, for the summary.
    last: Option<Refusal>,
    cut_off_until: Option<Instant>,
}

impl Window {
    fn new(now: Instant) -> Window {
        Window {
            start: now,
            refused: 0,
            recorded: 0,
            pending: 0,
            last: None,
            cut_off_until: None,
        }
    }

    fn cut_off(&self, now: Instant) -> bool {
        self.cut_off_until.is_some_and(|t| now < t)
    }

    /// Over, with no cut-off still running.
    fn over(&self, now: Instant, length: Duration) -> bool {
        !self.cut_off(now) && now.duration_since(self.start) >= length
    }

    /// The summary row of what was counted and not written, if anything.
    fn summary(&mut self, peer: &PeerIdentity, length: Duration) -> Option<Refusal> {
        let last = self.last.take()?;
        let count = std::mem::take(&mut self.pending);
        Some(Refusal {
            message: format!(
                "{count} more refused requests from {peer} within {} s, not recorded one by one; the last: {}",
                length.as_secs(),
                last.message
            ),
            count,
            ..last
        })
    }
}

/// Per-peer refusal counts (one [`RefusalBook`] per server).
#[derive(Debug)]
pub struct RefusalBook {
    policy: RefusalPolicy,
    peers: Mutex<HashMap<PeerIdentity, Window>>,
}

impl RefusalBook {
    /// An empty book.
    pub fn new(policy: RefusalPolicy) -> RefusalBook {
        RefusalBook {
            policy,
            peers: Mutex::new(HashMap::new()),
        }
    }

    fn peers(&self) -> std::sync::MutexGuard<'_, HashMap<PeerIdentity, Window>> {
        self.peers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a refusal of `peer` and decides what to write and whether to cut it off.
    pub fn refused(
        &self,
        peer: &PeerIdentity,
        op: &str,
        code: ErrorCode,
        message: &str,
        now: Instant,
    ) -> Decision {
        let policy = self.policy;
        let mut peers = self.peers();
        let w = peers
            .entry(peer.clone())
            .or_insert_with(|| Window::new(now));
        let mut decision = Decision::default();
        if w.over(now, policy.window) {
            decision.write.extend(w.summary(peer, policy.window));
            *w = Window::new(now);
        }
        let row = Refusal {
            role: peer.role.to_string(),
            name: peer.name.clone(),
            op: op.to_string(),
            code,
            message: message.to_string(),
            count: 1,
        };
        let was_cut_off = w.cut_off(now);
        w.refused += 1;
        if !was_cut_off && w.refused > u64::from(policy.max_refused) {
            w.cut_off_until = Some(now + policy.window);
            decision.write.push(Refusal {
                op: "cut-off".to_string(),
                code: ErrorCode::Unavailable,
                message: format!(
                    "{peer} cut off for {} s: more than {} refused requests within {} s",
                    policy.window.as_secs(),
                    policy.max_refused,
                    policy.window.as_secs()
                ),
                ..row.clone()
            });
        }
        if w.recorded < policy.recorded && !was_cut_off {
            w.recorded += 1;
            decision.write.push(row);
        } else {
            w.pending += 1;
            w.last = Some(row);
        }
        decision.cut_off = w.cut_off(now);
        decision
    }

    /// When `peer` is cut off now, until when.
    pub fn cut_off_until(&self, peer: &PeerIdentity, now: Instant) -> Option<Instant> {
        let peers = self.peers();
        let w = peers.get(peer)?;
        w.cut_off(now).then_some(w.cut_off_until).flatten()
    }

    /// Ends the windows that are over: returns their summary rows and forgets
    /// peers with nothing left to count. Called periodically.
    pub fn tick(&self, now: Instant) -> Vec<Refusal> {
        let length = self.policy.window;
        let mut out = Vec::new();
        self.peers().retain(|peer, w| {
            if !w.over(now, length) {
                return true;
            }
            out.extend(w.summary(peer, length));
            false
        });
        out
    }

    /// Every summary still pending (at shutdown).
    pub fn drain(&self) -> Vec<Refusal> {
        let length = self.policy.window;
        self.peers()
            .drain()
            .filter_map(|(peer, mut w)| w.summary(&peer, length))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use certs::Role;

    fn book(recorded: u32, max_refused: u32) -> RefusalBook {
        RefusalBook::new(RefusalPolicy {
            recorded,
            max_refused,
            window: Duration::from_secs(10),
        })
    }

    #[test]
    fn a_flood_costs_a_bounded_number_of_rows_per_window() {
        let b = book(3, 1_000_000);
        let peer = PeerIdentity::new(Role::User, "mallory").unwrap();
        let t0 = Instant::now();
        let mut rows = Vec::new();
        for _ in 0..10_000 {
            let d = b.refused(&peer, "decode", ErrorCode::Malformed, "garbage", t0);
            assert!(!d.cut_off);
            rows.extend(d.write);
        }
        assert_eq!(rows.len(), 3);
        assert!(b.tick(t0 + Duration::from_secs(9)).is_empty());
        let summary = b.tick(t0 + Duration::from_secs(10));
        assert_eq!(summary.len(), 1);
        assert_eq!(summary[0].count, 9_997);
        assert!(
            summary[0]
                .message
                .contains("9997 more refused requests from user mallory")
        );
        assert!(b.drain().is_empty(), "the peer was forgotten");
    }

    #[test]
    fn a_peer_over_the_limit_is_cut_off_for_one_window_then_counted_afresh() {
        let b = book(2, 5);
        let peer = PeerIdentity::new(Role::Node, "n9").unwrap();
        let other = PeerIdentity::new(Role::Node, "n1").unwrap();
        let t0 = Instant::now();
        let mut rows = 0;
        for i in 1..=5 {
            let d = b.refused(&peer, "decode", ErrorCode::Malformed, "x", t0);
            assert!(!d.cut_off, "refusal {i}");
            rows += d.write.len();
        }
        let d = b.refused(&peer, "decode", ErrorCode::Malformed, "x", t0);
        assert!(d.cut_off);
        assert_eq!(d.write.len(), 1);
        assert_eq!(d.write[0].op, "cut-off");
        assert_eq!(rows, 2);
        assert!(b.cut_off_until(&peer, t0).is_some());
        assert!(b.cut_off_until(&other, t0).is_none());
        let later = t0 + Duration::from_secs(10);
        assert!(b.cut_off_until(&peer, later).is_none());
        let summary = b.tick(later);
        assert_eq!(summary.len(), 1);
        assert_eq!(summary[0].count, 4);
        let d = b.refused(&peer, "decode", ErrorCode::Malformed, "x", later);
        assert!(!d.cut_off);
        assert_eq!(d.write.len(), 1);
    }
}
