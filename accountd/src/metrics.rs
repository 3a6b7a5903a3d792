//! accountd's Prometheus metrics (`[metrics] listen`, served by
//! [`exposition::Endpoint`]): what the server answered ([`ServerMeters`]) and what
//! the ledger's writer committed ([`StoreMeters`]).
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `rexec_accountd_requests_total` | counter | `op` (the operation's name), `result` (`ok`, `refused`) |
//! | `rexec_accountd_refusals_total` | counter | `code` (the refusal's error code) |
//! | `rexec_accountd_cut_offs_total` | counter | |
//! | `rexec_accountd_debits_applied_total` | counter | |
//! | `rexec_accountd_commit_batch_size` | histogram | |
//! | `rexec_accountd_commit_seconds` | histogram | |
//! | `rexec_accountd_balances_credits` | gauge | |
//!
//! Labels are bounded: operation names and error codes are the protocol's own
//! (an operation this accountd does not know is `Unknown`), never a user or node.
//! `refused` counts every request answered with an error (refused by role, or by
//! the ledger: unknown user, duplicate key, ...). A `Debits` frame counts once as `Debits`
//! (`ok` unless the frame itself was refused) and each debit in it once as a
//! `Debit`, with that debit's own result. The balances' sum is one gauge,
//! kept in micro-credits by the writer (read at most once a second, after a
//! commit's answers are sent, and within a second of the last write; see
//! `store::sums`) and shown in credits.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use proto::account::{AccountOp, ErrorCode};

type Requests = Family<[(&'static str, &'static str); 2], Counter>;
type Refusals = Family<[(&'static str, String); 1], Counter>;

/// What the connections count.
#[derive(Debug, Clone)]
pub struct ServerMeters {
    requests: Requests,
    refusals: Refusals,
    cut_offs: Counter,
}

impl Default for ServerMeters {
    /// Every operation this build knows, by each result, and every refusal code,
    /// each at 0: a fresh ledger shows them before the first request.
    fn default() -> Self {
        let meters = ServerMeters {
            requests: Requests::default(),
            refusals: Refusals::default(),
            cut_offs: Counter::default(),
        };
        let ops = AccountOp::KNOWN_NAMES
            .iter()
            .flat_map(|op| ["ok", "refused"].map(|result| [("op", *op), ("result", result)]));
        exposition::at_zero(&meters.requests, ops);
        let codes = ErrorCode::ALL
            .iter()
            .copied()
            .chain([ErrorCode::Unknown(0)]);
        let codes = codes.map(|c| [("code", code_label(c))]);
        exposition::at_zero(&meters.refusals, codes);
        meters
    }
}

/// The `code` label of a refusal: the code's name (`Unknown` for one this build
/// does not know, so at most one series per code a peer can send: bounded by what
/// the wire carries).
fn code_label(code: ErrorCode) -> String {
    match code {
        ErrorCode::Unknown(_) => "Unknown".to_string(),
        known => format!("{known:?}"),
    }
}

impl ServerMeters {
    /// A request for `op` was answered, `ok` or not.
    pub fn answered(&self, op: &'static str, ok: bool) {
        let result = if ok { "ok" } else { "refused" };
        self.requests
            .get_or_create(&[("op", op), ("result", result)])
            .inc();
    }

    /// A request was refused before it reached the ledger (role, version, malformed).
    pub fn refused(&self, code: ErrorCode) {
        self.refusals
            .get_or_create(&[("code", code_label(code))])
            .inc();
    }

    /// A peer was cut off after too many refusals.
    pub fn cut_off(&self) {
        self.cut_offs.inc();
    }
}

/// What the ledger's writer thread counts.
#[derive(Debug)]
pub struct StoreMeters {
    debits_applied: Counter,
    batch_size: Histogram,
    commit_seconds: Histogram,
    balances: AtomicI64,
}

impl Default for StoreMeters {
    fn default() -> Self {
        StoreMeters {
            debits_applied: Counter::default(),
            // 1 to 4096 writes.
            batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 13)),
            // 100 µs to about 1.6 s.
            commit_seconds: Histogram::new(exponential_buckets(1e-4, 2.0, 15)),
            balances: AtomicI64::new(0),
        }
    }
}

impl StoreMeters {
    /// A group commit of `size` writes, begun at `started`, applied `debits` new
    /// debits (duplicates not counted).
    pub fn committed(&self, size: usize, debits: u64, started: Instant) {
        self.commit_seconds.observe(started.elapsed().as_secs_f64());
        self.batch_size.observe(size as f64);
        self.debits_applied.inc_by(debits);
    }

    /// The sum of every balance is now `micros` micro-credits.
    pub fn set_balances(&self, micros: i64) {
        self.balances.store(micros, Ordering::Relaxed);
    }

    /// The sum of every balance last seen, micro-credits.
    pub fn balances(&self) -> i64 {
        self.balances.load(Ordering::Relaxed)
    }
}

/// The balances' sum, read at each scrape.
#[derive(Debug)]
struct Balances(Arc<StoreMeters>);

impl Collector for Balances {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Display only: the ledger keeps integer micro-credits.
        let credits = self.0.balances() as f64 / money::MICROS_PER_CREDIT as f64;
        let g = ConstGauge::new(credits);
        g.encode(encoder.encode_descriptor(
            "rexec_accountd_balances_credits",
            "Sum of every account's balance, credits",
            None,
            MetricType::Gauge,
        )?)
    }
}

/// accountd's registry over `server` and `store`.
pub fn registry(server: &ServerMeters, store: Arc<StoreMeters>) -> exposition::Registry {
    let mut r = exposition::Registry::default();
    r.register(
        "rexec_accountd_requests",
        "Requests answered, by operation and result",
        server.requests.clone(),
    );
    r.register(
        "rexec_accountd_refusals",
        "Requests refused before reaching the ledger (role, version, malformed), by code",
        server.refusals.clone(),
    );
    r.register(
        "rexec_accountd_cut_offs",
        "Peers cut off after too many refused requests",
        server.cut_offs.clone(),
    );
    r.register(
        "rexec_accountd_debits_applied",
        "Debits applied to the ledger (repeats of an applied debit not counted)",
        store.debits_applied.clone(),
    );
    r.register(
        "rexec_accountd_commit_batch_size",
        "Writes in one group commit",
        store.batch_size.clone(),
    );
    r.register(
        "rexec_accountd_commit_seconds",
        "Time to apply and commit one group commit",
        store.commit_seconds.clone(),
    );
    r.register_collector(Box::new(Balances(store)));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_names_ops_codes_and_the_balances_in_credits() {
        let server = ServerMeters::default();
        let store = Arc::new(StoreMeters::default());
        server.answered("Debit", true);
        server.answered("Debit", true);
        server.answered("Grant", false);
        server.refused(ErrorCode::Forbidden);
        server.refused(ErrorCode::Unknown(77));
        server.cut_off();
        store.committed(3, 2, Instant::now());
        store.set_balances(12_500_000);
        let text = exposition::render(&registry(&server, store));
        for want in [
            "rexec_accountd_requests_total{op=\"Debit\",result=\"ok\"} 2\n",
            "rexec_accountd_requests_total{op=\"Grant\",result=\"refused\"} 1\n",
            "rexec_accountd_refusals_total{code=\"Forbidden\"} 1\n",
            "rexec_accountd_refusals_total{code=\"Unknown\"} 1\n",
            "rexec_accountd_cut_offs_total 1\n",
            "rexec_accountd_debits_applied_total 2\n",
            "rexec_accountd_commit_batch_size_count 1\n",
            "rexec_accountd_commit_batch_size_sum 3.0\n",
            "rexec_accountd_commit_seconds_count 1\n",
            "rexec_accountd_balances_credits 12.5\n",
        ] {
            assert!(text.contains(want), "no {want:?} in\n{text}");
        }
    }

    #[test]
    fn a_fresh_ledger_shows_every_operation_and_refusal_code_at_zero() {
        let text = exposition::render(&registry(
            &ServerMeters::default(),
            Arc::new(StoreMeters::default()),
        ));
        for op in AccountOp::KNOWN_NAMES {
            for result in ["ok", "refused"] {
                let want =
                    format!("rexec_accountd_requests_total{{op=\"{op}\",result=\"{result}\"}} 0\n");
                assert!(text.contains(&want), "no {want:?} in\n{text}");
            }
        }
        for want in [
            "rexec_accountd_refusals_total{code=\"Forbidden\"} 0\n",
            "rexec_accountd_refusals_total{code=\"Unknown\"} 0\n",
            "rexec_accountd_cut_offs_total 0\n",
        ] {
            assert!(text.contains(want), "no {want:?} in\n{text}");
        }
    }
}
