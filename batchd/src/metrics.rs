//! The batch queue's Prometheus metrics (`[metrics] listen`, served by
//! [`exposition::Endpoint`]): the queue's jobs by state and what they have cost,
//! read from the live queue at each scrape, and the submissions and decisions
//! counted as they happen.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `rexec_batch_jobs` | gauge | `state` (`queued`, `held`, `running`, `suspended`, `finished`, `cancelled`, `failed`) |
//! | `rexec_batch_processors` | gauge | |
//! | `rexec_batch_starts_total` | counter | |
//! | `rexec_batch_charged_credits_total` | counter | |
//! | `rexec_batch_submissions_total` | counter | `result` (`ok`, `refused`) |
//! | `rexec_batch_decisions_total` | counter | |
//! | `rexec_batch_decision_seconds` | histogram | |
//! | `rexec_batch_utility_achieved_credits` | gauge | |
//! | `rexec_batch_utility_max_credits` | gauge | |
//!
//! The utility gauges are the batch papers' aggregate utility over every ended job
//! the store holds ([`Utility`]): a gauge, since a utility may be negative.
//!
//! Starts and charges are summed over every job the store holds (the queue keeps
//! ended jobs too), so they count since the store was created, not since the
//! daemon started; nothing is labelled by job or user.

use std::sync::Arc;
use std::time::Instant;

use exposition::{Registry, counter, gauge};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use proto::batch::JobState;

use crate::Shared;

/// Submissions by result.
pub type Submissions = Family<[(&'static str, &'static str); 1], Counter>;

/// What the request path and the decision loop record.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Submissions, by result.
    pub submissions: Submissions,
    /// Decisions taken (a policy run over a non-empty queue).
    pub decisions: Counter,
    /// How long a decision took (snapshot, policy, starts), seconds.
    pub decision_seconds: Histogram,
}

impl Default for Recorder {
    fn default() -> Self {
        // Both results at 0, so a fresh queue shows them before the first submission.
        let submissions = Submissions::default();
        exposition::at_zero(&submissions, ["ok", "refused"].map(|r| [("result", r)]));
        Recorder {
            submissions,
            decisions: Counter::default(),
            // 100 µs to about 100 s: a GA over a long queue is slow.
            decision_seconds: Histogram::new(exponential_buckets(1e-4, 4.0, 11)),
        }
    }
}

impl Recorder {
    /// Count one submission, accepted or refused.
    pub fn submitted(&self, ok: bool) {
        let result = if ok { "ok" } else { "refused" };
        self.submissions.get_or_create(&[("result", result)]).inc();
    }

    /// Count one decision that began at `started`.
    pub fn decided(&self, started: Instant) {
        self.decisions.inc();
        self.decision_seconds
            .observe(started.elapsed().as_secs_f64());
    }
}

const STATES: [(JobState, &str); 11] = [
    (JobState::Queued, "queued"),
    (JobState::Held, "held"),
    (JobState::Running, "running"),
    (JobState::Suspended, "suspended"),
    (JobState::Finished, "finished"),
    (JobState::Cancelled, "cancelled"),
    (JobState::Failed, "failed"),
    (JobState::CostLimit, "cost_limit"),
    (JobState::Dependent, "dependent"),
    (JobState::Timeout, "timeout"),
    (JobState::OutOfMemory, "out_of_memory"),
];

/// The queue's state, read at each scrape.
struct QueueState(Arc<Shared>);

impl std::fmt::Debug for QueueState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QueueState")
    }
}

impl Collector for QueueState {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (counts, starts, charged, utility) = {
            let q = self.0.lock_queue();
            let mut counts = [0i64; STATES.len()];
            let (mut starts, mut charged) = (0u64, 0i64);
            let mut utility = Utility::default();
            for j in q.jobs.values() {
                if let Some(i) = STATES.iter().position(|(s, _)| *s == j.rec.state) {
                    counts[i] += 1;
                }
                starts += u64::from(j.rec.attempts);
                charged = charged.saturating_add(j.rec.charged);
                utility.add(j);
            }
            (counts, starts, charged, utility)
        };
        let mut jobs = encoder.encode_descriptor(
            "rexec_batch_jobs",
            "Jobs the queue holds, by state",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for ((_, name), n) in STATES.iter().zip(counts) {
            ConstGauge::new(n).encode(jobs.encode_family(&[("state", *name)])?)?;
        }
        gauge(
            &mut encoder,
            "rexec_batch_processors",
            "Processors the selectors' nodes give the queue",
            i64::from(self.0.market_processors()),
        )?;
        counter(
            &mut encoder,
            "rexec_batch_starts",
            "Starts of the queue's jobs (a restart after a lost rank counts again)",
            starts,
        )?;
        counter(
            &mut encoder,
            "rexec_batch_charged_credits",
            "Credits charged to the queue's jobs",
            charged.max(0) as f64 / money::MICROS_PER_CREDIT as f64,
        )?;
        utility.encode(&mut encoder)
    }
}

/// The batch papers' measure over the ended jobs: the aggregate utility they
/// achieved ([`crate::history::achieved`]) and the most they could have
/// ([`crate::history::most`]), micro-credits.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Utility {
    /// Sum of the utility each ended job achieved.
    pub achieved: i128,
    /// Sum of each ended job's maximum utility.
    pub most: i128,
}

impl Utility {
    /// Counts job `j` if it ended.
    pub fn add(&mut self, j: &crate::queue::Job) {
        if j.ended() {
            self.achieved += i128::from(crate::history::achieved(j));
            self.most += i128::from(crate::history::most(j));
        }
    }

    fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let credits = |v: i128| v as f64 / money::MICROS_PER_CREDIT as f64;
        gauge(
            encoder,
            "rexec_batch_utility_achieved_credits",
            "Aggregate utility the ended jobs achieved: each job's utility at its completion (0 if cancelled or failed)",
            credits(self.achieved),
        )?;
        gauge(
            encoder,
            "rexec_batch_utility_max_credits",
            "Most utility the ended jobs could have achieved: each job's utility had it completed at once",
            credits(self.most),
        )
    }
}

/// The queue's registry over `shared`.
pub fn registry(shared: Arc<Shared>) -> Registry {
    let mut r = Registry::default();
    let recorder = shared.metrics.clone();
    r.register_collector(Box::new(QueueState(shared)));
    r.register(
        "rexec_batch_submissions",
        "Submissions, by result",
        recorder.submissions,
    );
    r.register(
        "rexec_batch_decisions",
        "Decisions taken over a non-empty queue",
        recorder.decisions,
    );
    r.register(
        "rexec_batch_decision_seconds",
        "Time to take a decision: snapshot, policy and starts",
        recorder.decision_seconds,
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submissions_and_decisions_are_counted() {
        let r = Recorder::default();
        r.submitted(true);
        r.submitted(true);
        r.submitted(false);
        r.decided(Instant::now());
        let mut reg = Registry::default();
        reg.register("rexec_batch_submissions", "s", r.submissions.clone());
        reg.register("rexec_batch_decisions", "d", r.decisions.clone());
        reg.register(
            "rexec_batch_decision_seconds",
            "t",
            r.decision_seconds.clone(),
        );
        let text = exposition::render(&reg);
        assert!(
            text.contains("rexec_batch_submissions_total{result=\"ok\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("rexec_batch_submissions_total{result=\"refused\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("rexec_batch_decisions_total 1\n"), "{text}");
        assert!(
            text.contains("rexec_batch_decision_seconds_count 1\n"),
            "{text}"
        );
    }

    #[test]
    fn a_fresh_queue_shows_both_submission_results_at_zero() {
        let r = Recorder::default();
        let mut reg = Registry::default();
        reg.register("rexec_batch_submissions", "s", r.submissions.clone());
        let text = exposition::render(&reg);
        for result in ["ok", "refused"] {
            let want = format!("rexec_batch_submissions_total{{result=\"{result}\"}} 0\n");
            assert!(text.contains(&want), "no {want:?} in\n{text}");
        }
    }
}
