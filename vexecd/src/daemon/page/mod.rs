//! The live market page: vexecd serves it read-only at [`PATH`] on its metrics
//! address, next to `/metrics` (an [`exposition::Route`]). It shows the nodes the
//! table holds with price, what each charges now and whether it is contended, CPUs,
//! idle CPUs and load, and each node's price over the last hour as a small chart
//! (every chart on one scale) from the [`history`] the daemon samples once per
//! announcement period ([`sample`]). [`html`] writes the document, [`chart`] the
//! charts. It holds nothing a node's announcements do not already tell the whole
//! group, so whoever may scrape the metrics may read it; except the [`ledger`]
//! panel (each project's spend per hour, read from accountd), which is on only
//! where `[ledger]` is configured: a page for admins.

pub mod chart;
pub mod escape;
pub mod history;
pub mod html;
pub mod ledger;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use self::history::PriceHistory;
use self::html::{Page, Row};
use self::ledger::Ledger;
use super::stats::Shared;

/// Where the page is served.
pub const PATH: &str = "/market";
/// Most nodes listed on the page (by name); the rest are counted.
pub const MAX_LISTED: usize = 1000;

/// The page's state: the shared table, the price history, pages served.
#[derive(Debug)]
pub struct Market {
    shared: Arc<Shared>,
    history: Mutex<PriceHistory>,
    served: AtomicU64,
    selector: String,
    cluster: String,
    ledger: Option<Arc<Ledger>>,
}

impl Market {
    /// The page of `selector` in `cluster`, over `shared`.
    pub fn new(shared: Arc<Shared>, selector: &str, cluster: &str) -> Market {
        let cap = shared.read().config().max_entries;
        Market {
            shared,
            history: Mutex::new(PriceHistory::new(Instant::now(), cap)),
            served: AtomicU64::new(0),
            selector: selector.to_string(),
            cluster: cluster.to_string(),
            ledger: None,
        }
    }

    /// The page with the ledger panel showing what `ledger` holds.
    pub fn with_ledger(mut self, ledger: Arc<Ledger>) -> Market {
        self.ledger = Some(ledger);
        self
    }

    fn history(&self) -> std::sync::MutexGuard<'_, PriceHistory> {
        // A sample is one step; a poisoned lock leaves nothing half-done to trip on.
        self.history.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record every live node's price now.
    pub fn sample(&self, now: Instant) {
        let prices: Vec<(String, i64)> = {
            let t = self.shared.read();
            t.hot(now)
                .map(|(i, h)| (t.entry(i).announcement.name.clone(), h.price))
                .collect()
        };
        self.history()
            .sample(now, prices.iter().map(|(n, p)| (n.as_str(), *p)));
    }

    /// The page now.
    pub fn page(&self, now: Instant) -> Page {
        let mut rows: Vec<Row> = {
            let t = self.shared.read();
            t.hot(now)
                .filter_map(|(i, h)| {
                    let e = t.entry(i);
                    let s = e.status()?;
                    Some(Row {
                        name: e.announcement.name.clone(),
                        addr: e.announcement.addr.to_string(),
                        price: h.price,
                        charging: s.charging,
                        contended: s.contended,
                        cpus: h.cpus,
                        idle_milli: h.idle_milli,
                        load_milli: h.load_milli,
                        running_jobs: s.running_jobs,
                        runnable: s.runnable,
                        age: e.age(now),
                        points: Vec::new(),
                    })
                })
                .collect()
        };
        rows.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let more = rows.len().saturating_sub(MAX_LISTED);
        rows.truncate(MAX_LISTED);
        {
            let history = self.history();
            for r in &mut rows {
                r.points = history.of(&r.name, now);
            }
        }
        let stats = self.shared.stats(now);
        let unix_seconds = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Page {
            selector: self.selector.clone(),
            cluster: self.cluster.clone(),
            unix_seconds,
            served: self.served.fetch_add(1, Ordering::Relaxed) + 1,
            accepted: stats.accepted,
            dropped: stats.dropped().iter().map(|(_, n)| n).sum(),
            rows,
            more,
            ledger: self.ledger.as_ref().map(|l| l.shown()),
        }
    }

    /// The route that serves the page.
    pub fn route(self: &Arc<Market>) -> exposition::Route {
        let market = self.clone();
        exposition::Route {
            path: PATH,
            content_type: "text/html; charset=utf-8",
            render: Arc::new(move || html::render(&market.page(Instant::now()))),
        }
    }
}

/// Sample the prices every `period` until dropped.
pub async fn sample(market: Arc<Market>, period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        market.sample(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{NodeTable, TableConfig};
    use proto::announce::{Announcement, Kind, NodeStatus};

    fn node(name: &str, seq: u64, price: i64) -> Announcement {
        Announcement {
            cluster: proto::announce::DEFAULT_CLUSTER.into(),
            name: name.into(),
            addr: "127.0.0.1:7400".parse().unwrap(),
            incarnation: 1,
            seq,
            period_ms: 1000,
            kind: Kind::Node(NodeStatus {
                cpus: 2,
                price,
                charging: 0,
                contended: false,
                running_jobs: 1,
                runnable: 1,
                load_milli: 1000,
                idle_milli: 1000,
                free_mem_mib: 100,
            }),
            summary: None,
        }
    }

    #[test]
    fn the_page_lists_the_live_nodes_by_name_with_their_price_history() {
        let shared = Arc::new(Shared::new(NodeTable::new(TableConfig::default())));
        let market = Arc::new(Market::new(shared.clone(), "v1", "rexec"));
        let t0 = Instant::now();
        for (seq, price) in [(1, 0), (2, 5_000_000)] {
            let now = t0 + history::SPACING * seq as u32;
            for name in ["n2", "n1"] {
                shared
                    .write()
                    .ingest_announcement(node(name, seq, price), None, now)
                    .unwrap();
            }
            market.sample(now);
        }
        let page = market.page(t0 + history::SPACING * 2);
        let names: Vec<&str> = page.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["n1", "n2"]);
        assert_eq!(page.rows[0].price, 5_000_000);
        assert_eq!(
            page.rows[0].points,
            vec![(history::SPACING, 0), (Duration::ZERO, 5_000_000)]
        );
        assert_eq!(page.served, 1);
        assert_eq!(page.accepted, 4);
        assert_eq!(market.page(t0).served, 2);
    }
}
