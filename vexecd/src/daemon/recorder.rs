//! What the request path records for the selector's metrics: the selects
//! served, by policy and result, and how long each took. The shared state
//! ([`super::stats`]) holds one; [`super::metrics`] registers it for scraping.

use std::time::Instant;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

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

#[cfg(test)]
mod tests {
    use exposition::Registry;

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
