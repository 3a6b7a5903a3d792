//! The daemon's shared state and counters: the node table behind a lock
//! (the receiver writes, requests read), the count of selects served, the
//! [`SelectorStats`] a `Stats` request answers, and the periodic one-line
//! summary in the log.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use proto::select::SelectorStats;

use super::recorder::Recorder;
use crate::table::{Counters, NodeTable};

/// Shortest gap between two summary lines.
pub const SUMMARY_INTERVAL: Duration = Duration::from_secs(60);

/// What the prover ([`super::prove`]) did since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProofCounts {
    /// Moves proven and applied.
    pub proven: u64,
    /// Moves whose handshake failed.
    pub refuted: u64,
    /// Claims skipped: refuted recently, rate-limited, already being proven, or no room.
    pub skipped: u64,
}

/// What the receiver and the server share.
#[derive(Debug)]
pub struct Shared {
    table: RwLock<NodeTable>,
    selects: AtomicU64,
    proofs: Mutex<ProofCounts>,
    recorder: Recorder,
}

impl Shared {
    /// Wrap a table.
    pub fn new(table: NodeTable) -> Shared {
        Shared {
            table: RwLock::new(table),
            selects: AtomicU64::new(0),
            proofs: Mutex::new(ProofCounts::default()),
            recorder: Recorder::default(),
        }
    }

    /// The table for reading. A panic while holding the lock cannot leave
    /// the table half-updated in a way readers would trip on (each ingest
    /// is one step), so a poisoned lock is used as it is.
    pub fn read(&self) -> RwLockReadGuard<'_, NodeTable> {
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The table for writing.
    pub fn write(&self) -> RwLockWriteGuard<'_, NodeTable> {
        self.table.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Count one select answered with nodes.
    pub fn served_select(&self) {
        self.selects.fetch_add(1, Ordering::Relaxed);
    }

    /// What requests record for the metrics.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// Record what the prover has done (see [`super::prove`]).
    pub fn set_proofs(&self, counts: ProofCounts) {
        *self.proofs.lock().unwrap_or_else(|e| e.into_inner()) = counts;
    }

    /// What the prover has done.
    pub fn proofs(&self) -> ProofCounts {
        *self.proofs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The counters now.
    pub fn stats(&self, now: Instant) -> SelectorStats {
        let (c, nodes, services) = {
            let t = self.read();
            let services = t.selectors(now).count() + t.account_services(now).count();
            (t.counters(), t.nodes(now).count(), services)
        };
        stats_of(c, nodes, services, self.selects.load(Ordering::Relaxed))
    }
}

fn stats_of(c: Counters, nodes: usize, services: usize, selects: u64) -> SelectorStats {
    SelectorStats {
        nodes: nodes as u64,
        services: services as u64,
        selects,
        ..c.stats
    }
}

/// The summary line's text.
pub fn summary_line(s: &SelectorStats, p: ProofCounts) -> String {
    let dropped: Vec<String> = s
        .dropped()
        .iter()
        .map(|(reason, n)| format!("{} {n}", reason.replace('_', " ")))
        .collect();
    format!(
        "{} nodes, {} services known; datagrams accepted {}, dropped: {}; forgotten {}; selects {}; node moves proven {}, refuted {}, not probed {}",
        s.nodes,
        s.services,
        s.accepted,
        dropped.join(", "),
        s.forgotten,
        s.selects,
        p.proven,
        p.refuted,
        p.skipped
    )
}

/// Log a one-line summary at most once per `interval`, only when something
/// changed since the last one. Runs until dropped.
pub async fn log_summaries(shared: std::sync::Arc<Shared>, interval: Duration) {
    let mut last = (SelectorStats::default(), ProofCounts::default());
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let now = (shared.stats(Instant::now()), shared.proofs());
        if now != last {
            tracing::info!("{}", summary_line(&now.0, now.1));
            last = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_names_every_count() {
        let s = SelectorStats {
            accepted: 9,
            malformed: 1,
            oversized: 2,
            foreign_cluster: 3,
            stale: 4,
            table_full: 5,
            forgotten: 6,
            nodes: 7,
            services: 8,
            selects: 10,
        };
        let p = ProofCounts {
            proven: 11,
            refuted: 12,
            skipped: 13,
        };
        assert_eq!(
            summary_line(&s, p),
            "7 nodes, 8 services known; datagrams accepted 9, dropped: malformed 1, oversized 2, \
             foreign cluster 3, stale 4, table full 5; forgotten 6; selects 10; node moves \
             proven 11, refuted 12, not probed 13"
        );
    }
}
