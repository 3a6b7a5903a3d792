//! The node's Prometheus metrics (`[metrics] listen`, served by
//! [`exposition::Endpoint`]): the market's live state read from the book at each
//! scrape, and the events the market and the sessions count as they happen
//! ([`MarketMeters`](crate::market::meters::MarketMeters), [`SessionMeters`]).
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `rexec_node_jobs` | gauge | |
//! | `rexec_node_ranks` | gauge | |
//! | `rexec_node_cpus` | gauge | |
//! | `rexec_node_price_credits_per_minute` | gauge | |
//! | `rexec_node_charging_credits_per_minute` | gauge | |
//! | `rexec_node_contended` | gauge (0/1) | |
//! | `rexec_node_share_error_max_cpus` | gauge | |
//! | `rexec_node_share_error_mean_cpus` | gauge | |
//! | `rexec_node_cpu_seconds_total` | counter | |
//! | `rexec_node_user_cpu_seconds_total` | counter | `user` |
//! | `rexec_node_charged_credits_total` | counter | |
//! | `rexec_node_debits_journaled_total` | counter | |
//! | `rexec_node_debits_delivered_total` | counter | |
//! | `rexec_node_debits_pending` | gauge | |
//! | `rexec_node_weight_writes_total` | counter | |
//! | `rexec_node_weight_write_seconds` | histogram | |
//! | `rexec_node_launch_seconds` | histogram | |
//! | `rexec_node_refusals_total` | counter | `reason` (an `ErrorCode`, snake case) |
//!
//! Nothing is labelled by job or rank: a node with any number of ranks exports the
//! same series, and per-rank shares are summarised as the largest and the mean
//! absolute difference between each rank's measured CPUs and the model's allocation
//! over the last metering tick. CPU time is the one figure by user (a series per
//! user who has run here since rexecd started, bounded by the cluster's accounts):
//! the CPU seconds the ranks' cgroups used, the same measure a rank's `Exit` and its
//! ledger debits carry, counted for ended ranks at their end and for running ranks
//! as of their last metering sample. Money is counted in micro-credits (`i64`) and shown in
//! credits only when encoded.

use std::sync::Arc;
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use proto::node::ErrorCode;

use crate::market::Market;
use crate::market::book::Book;

tokio::task_local! {
    /// When the connection a session task serves was accepted (set by the server
    /// around each connection), for the launch latency.
    pub static ACCEPTED: Instant;
}

/// Refusals by reason.
type Refusals = Family<[(&'static str, &'static str); 1], Counter>;

/// What sessions count: launch latency and refusals.
#[derive(Debug, Clone)]
pub struct SessionMeters {
    launch_seconds: Histogram,
    refusals: Refusals,
}

impl Default for SessionMeters {
    fn default() -> Self {
        // Every reason at 0, so a fresh node shows them before its first refusal.
        let refusals = Refusals::default();
        let codes = ErrorCode::ALL
            .iter()
            .copied()
            .chain([ErrorCode::Unknown(0)]);
        exposition::at_zero(&refusals, codes.map(|c| [("reason", reason(c))]));
        SessionMeters {
            // 1 ms to about 16 s.
            launch_seconds: Histogram::new(exponential_buckets(1e-3, 2.0, 15)),
            refusals,
        }
    }
}

impl SessionMeters {
    /// A rank is about to send `Started`: observe the time since its connection was
    /// accepted (nothing outside a connection's task).
    pub fn launched(&self) {
        if let Ok(accepted) = ACCEPTED.try_with(|t| *t) {
            self.launch_seconds
                .observe(accepted.elapsed().as_secs_f64());
        }
    }

    /// A request was refused with `code`.
    pub fn refused(&self, code: ErrorCode) {
        self.refusals
            .get_or_create(&[("reason", reason(code))])
            .inc();
    }
}

/// The bounded `reason` label of a refusal.
pub fn reason(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::IncompatibleVersion => "incompatible_version",
        ErrorCode::BadRequest => "bad_request",
        ErrorCode::Unsupported => "unsupported",
        ErrorCode::NotAuthorized => "not_authorized",
        ErrorCode::UnknownUser => "unknown_user",
        ErrorCode::NoCredit => "no_credit",
        ErrorCode::SpawnFailed => "spawn_failed",
        ErrorCode::NoSuchJob => "no_such_job",
        ErrorCode::Busy => "busy",
        ErrorCode::AccountUnavailable => "account_unavailable",
        ErrorCode::Internal => "internal",
        ErrorCode::BadBid => "bad_bid",
        _ => "other",
    }
}

/// The book's figures a scrape shows.
#[derive(Debug, Clone, Copy, PartialEq)]
struct BookFigures {
    jobs: usize,
    ranks: usize,
    cpus: u32,
    price_micros: i64,
    charging_micros: i64,
    contended: bool,
    share_error_max: f64,
    share_error_mean: f64,
}

impl BookFigures {
    fn of(book: &Book) -> BookFigures {
        let node = book.node();
        let mut jobs: Vec<_> = book.ranks().map(|((job, _), _)| *job).collect();
        jobs.dedup();
        // Only ranks measured over a tick have an error to show.
        let errors: Vec<f64> = book
            .ranks()
            .filter(|(_, r)| r.tick_secs > 0.0)
            .map(|(_, r)| (r.tick_cpus - r.model_milli as f64 / 1000.0).abs())
            .collect();
        let max = errors.iter().copied().fold(0.0, f64::max);
        let mean = if errors.is_empty() {
            0.0
        } else {
            errors.iter().sum::<f64>() / errors.len() as f64
        };
        BookFigures {
            jobs: jobs.len(),
            ranks: book.len(),
            cpus: node.cpus,
            price_micros: node.price.micros_per_minute(),
            charging_micros: node.charging.micros_per_minute(),
            contended: node.contended,
            share_error_max: max,
            share_error_mean: mean,
        }
    }
}

/// Credits (for display only) of `micros` micro-credits.
fn credits(micros: i64) -> f64 {
    micros as f64 / money::MICROS_PER_CREDIT as f64
}

use exposition::{counter, gauge};

/// The market's state, read at each scrape.
#[derive(Debug)]
struct NodeState(Arc<Market>);

impl Collector for NodeState {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let market = &self.0;
        let m = market.meters();
        let (f, cpu) = {
            let book = market.book();
            (BookFigures::of(&book), m.cpu_seconds_by_user(&book))
        };
        let e = &mut e;
        gauge(
            e,
            "rexec_node_jobs",
            "Jobs with a rank running here",
            f.jobs as i64,
        )?;
        gauge(e, "rexec_node_ranks", "Ranks running here", f.ranks as i64)?;
        gauge(
            e,
            "rexec_node_cpus",
            "CPUs the market sells",
            i64::from(f.cpus),
        )?;
        gauge(
            e,
            "rexec_node_price_credits_per_minute",
            "The node's price: the sum of the competing bids, credits per minute",
            credits(f.price_micros),
        )?;
        gauge(
            e,
            "rexec_node_charging_credits_per_minute",
            "What the node's ranks pay together now, credits per minute (0 while they run free)",
            credits(f.charging_micros),
        )?;
        gauge(
            e,
            "rexec_node_contended",
            "1 while runnable demand exceeds the CPUs, else 0",
            i64::from(f.contended),
        )?;
        gauge(
            e,
            "rexec_node_share_error_max_cpus",
            "Largest difference between a rank's measured CPUs and the model's, last tick",
            f.share_error_max,
        )?;
        gauge(
            e,
            "rexec_node_share_error_mean_cpus",
            "Mean difference between the ranks' measured CPUs and the model's, last tick",
            f.share_error_mean,
        )?;
        counter(
            e,
            "rexec_node_cpu_seconds",
            "CPU seconds used by jobs' ranks here (ended, and running as of the last tick)",
            cpu.values().sum::<f64>(),
        )?;
        let mut by_user = e.encode_descriptor(
            "rexec_node_user_cpu_seconds",
            "CPU seconds used by jobs' ranks here, by the user who owns them",
            None,
            MetricType::Counter,
        )?;
        for (user, secs) in &cpu {
            ConstCounter::new(*secs).encode(by_user.encode_family(&[("user", user.as_str())])?)?;
        }
        counter(
            e,
            "rexec_node_charged_credits",
            "Credits charged to jobs' owners (batch ranks excepted)",
            credits(m.charged_micros()),
        )?;
        counter(
            e,
            "rexec_node_debits_journaled",
            "Debits written to the debit journal",
            m.journaled_count(),
        )?;
        counter(
            e,
            "rexec_node_debits_delivered",
            "Debits accountd applied",
            m.delivered_count(),
        )?;
        gauge(
            e,
            "rexec_node_debits_pending",
            "Debits journaled and not yet settled by accountd",
            market.debits_pending() as i64,
        )?;
        counter(
            e,
            "rexec_node_weight_writes",
            "CPU weights written to job cgroups",
            m.weight_write_count(),
        )?;
        m.weight_write_seconds().encode(e.encode_descriptor(
            "rexec_node_weight_write_seconds",
            "Time to write one CPU weight",
            None,
            MetricType::Histogram,
        )?)
    }
}

/// The node's registry over `market` and `sessions`.
pub fn registry(market: Arc<Market>, sessions: &SessionMeters) -> exposition::Registry {
    let mut r = exposition::Registry::default();
    r.register_collector(Box::new(NodeState(market)));
    r.register(
        "rexec_node_launch_seconds",
        "Time from accepting a connection to a rank's Started",
        sessions.launch_seconds.clone(),
    );
    r.register(
        "rexec_node_refusals",
        "Requests refused, by reason",
        sessions.refusals.clone(),
    );
    r
}

#[cfg(test)]
mod tests;
