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
use prometheus_client::metrics::counter::ConstCounter;

use super::recorder::Recorder;
use super::stats::Shared;

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
        let unproven = ("unproven", self.0.read().counters().unproven);
        let dropped = s.dropped().into_iter().chain([unproven]);
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
