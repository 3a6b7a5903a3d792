//! The selector's Prometheus metrics (`[metrics] listen`, served by
//! [`exposition::Endpoint`]): what the node table holds and has done, read at each
//! scrape from the shared state, and the selects served with their latency.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `rexec_selector_nodes` | gauge | |
//! | `rexec_selector_services` | gauge | |
//! | `rexec_selector_datagrams_accepted_total` | counter | |
//! | `rexec_selector_datagrams_dropped_total` | counter | `reason` |
//! | `rexec_selector_nodes_forgotten_total` | counter | |
//! | `rexec_selector_node_moves_total` | counter | `result` (`proven`, `refuted`, `not_probed`) |
//! | `rexec_selector_selects_total` | counter | `policy`, `result` (`ok`, `refused`) |
//! | `rexec_selector_select_seconds` | histogram | |

use std::sync::Arc;
use std::time::Instant;

use exposition::Registry;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::stats::Shared;
use crate::policy::PolicyName;

/// Selects by policy and result.
pub type Selects = Family<[(&'static str, &'static str); 2], Counter>;

/// The `policy` label of a select naming a policy this selector does not know.
pub const UNKNOWN_POLICY: &str = "unknown";

/// What the request path records.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Selects served, by policy and result.
    pub selects: Selects,
    /// How long answering a select took, seconds.
    pub select_seconds: Histogram,
}

impl Default for Recorder {
    fn default() -> Self {
        // Every policy by each result, and the refusals of a policy nobody knows, at
        // 0: a fresh selector shows them before its first select.
        let selects = Selects::default();
        let known = PolicyName::ALL.iter().flat_map(|p| {
            ["ok", "refused"].map(|result| [("policy", p.as_str()), ("result", result)])
        });
        let unknown = [("policy", UNKNOWN_POLICY), ("result", "refused")];
        exposition::at_zero(&selects, known.chain([unknown]));
        Recorder {
            selects,
            // 10 µs to about 0.3 s.
            select_seconds: Histogram::new(exponential_buckets(1e-5, 4.0, 8)),
        }
    }
}

impl Recorder {
    /// Record one select by `policy` that began at `started`.
    pub fn select(&self, policy: &'static str, ok: bool, started: Instant) {
        let result = if ok { "ok" } else { "refused" };
        self.selects
            .get_or_create(&[("policy", policy), ("result", result)])
            .inc();
        self.select_seconds.observe(started.elapsed().as_secs_f64());
    }
}

/// The table's state, read at each scrape.
#[derive(Debug)]
struct TableState(Arc<Shared>);

use exposition::{counter, gauge};

impl Collector for TableState {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.0.stats(Instant::now());
        let p = self.0.proofs();
        gauge(
            &mut encoder,
            "rexec_selector_nodes",
            "Live nodes in the table",
            s.nodes as i64,
        )?;
        gauge(
            &mut encoder,
            "rexec_selector_services",
            "Live selectors and account services in the table",
            s.services as i64,
        )?;
        counter(
            &mut encoder,
            "rexec_selector_datagrams_accepted",
            "Announcements accepted",
            s.accepted,
        )?;
        let dropped = [
            ("malformed", s.malformed),
            ("oversized", s.oversized),
            ("foreign_cluster", s.foreign_cluster),
            ("stale", s.stale),
            ("table_full", s.table_full),
            ("unproven", self.0.read().counters().unproven),
        ];
        let family = encoder.encode_descriptor(
            "rexec_selector_datagrams_dropped",
            "Datagrams dropped, by reason (unproven: a node's move held until proven)",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        let mut family = family;
        for (reason, n) in dropped {
            let labels = [("reason", reason)];
            ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
        }
        counter(
            &mut encoder,
            "rexec_selector_nodes_forgotten",
            "Senders forgotten after their window",
            s.forgotten,
        )?;
        let mut moves = encoder.encode_descriptor(
            "rexec_selector_node_moves",
            "Announced moves of live nodes, by what the proof found",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (result, n) in [
            ("proven", p.proven),
            ("refuted", p.refuted),
            ("not_probed", p.skipped),
        ] {
            ConstCounter::new(n).encode(moves.encode_family(&[("result", result)])?)?;
        }
        Ok(())
    }
}

/// The selector's registry over `shared` and `recorder`.
pub fn registry(shared: Arc<Shared>, recorder: &Recorder) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(TableState(shared)));
    r.register(
        "rexec_selector_selects",
        "Selects answered, by policy and result",
        recorder.selects.clone(),
    );
    r.register(
        "rexec_selector_select_seconds",
        "Time to answer a select",
        recorder.select_seconds.clone(),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_selector_shows_every_policy_and_result_at_zero() {
        let r = Recorder::default();
        let mut reg = Registry::default();
        reg.register("rexec_selector_selects", "s", r.selects.clone());
        let text = exposition::render(&reg);
        for policy in PolicyName::ALL {
            for result in ["ok", "refused"] {
                let want = format!(
                    "rexec_selector_selects_total{{policy=\"{policy}\",result=\"{result}\"}} 0\n"
                );
                assert!(text.contains(&want), "no {want:?} in\n{text}");
            }
        }
        let unknown = "rexec_selector_selects_total{policy=\"unknown\",result=\"refused\"} 0\n";
        assert!(text.contains(unknown), "{text}");
    }
}
