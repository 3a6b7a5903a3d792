//! What a run delivered: aggregate utility (the batch paper's measure), waits (mean and
//! percentiles), bounded slowdown, utilisation, revenue and the market price, and waits
//! and delays by bid class.

use crate::job::Job;
use crate::sim::SimResult;
use crate::utility::Micros;

/// Summary of one simulation.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    /// Policy name.
    pub policy: String,
    /// Jobs.
    pub jobs: usize,
    /// Sum of every job's utility at its completion (micro-credits).
    pub utility: i128,
    /// Sum of every job's maximum utility (what an infinitely large machine would deliver).
    pub utility_max: i128,
    /// Mean wait before first start (s).
    pub wait_mean: f64,
    /// Median wait (s).
    pub wait_p50: i64,
    /// 90th percentile wait (s).
    pub wait_p90: i64,
    /// 99th percentile wait (s).
    pub wait_p99: i64,
    /// Longest wait (s).
    pub wait_max: i64,
    /// Mean bounded slowdown (runtimes bounded below at 10 s).
    pub bounded_slowdown: f64,
    /// Work done over processor-time from first arrival to last completion.
    pub utilisation: f64,
    /// Total charged (micro-credits).
    pub revenue: Micros,
    /// Time-weighted mean market price over the run (policies that set one).
    pub price_mean: Option<f64>,
    /// Suspensions and preemptions.
    pub preemptions: u64,
    /// Per bid class ([`Job::class`], 0 = the highest bidders), in class order.
    pub by_class: Vec<ClassMetrics>,
}

/// What one bid class of jobs got from a run.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassMetrics {
    /// The class ([`Job::class`]).
    pub class: u8,
    /// Its jobs.
    pub jobs: usize,
    /// Mean wait before first start (s).
    pub wait_mean: f64,
    /// Median wait before first start (s), nearest rank.
    pub wait_p50: i64,
    /// Mean delay (s): completion - submit - runtime, the wait plus any time suspended.
    pub delay_mean: f64,
}

/// The `p`-th percentile (0..=100) of sorted values, nearest rank.
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Computes the metrics of `res`, a run of `jobs`.
pub fn measure(jobs: &[Job], res: &SimResult) -> Metrics {
    let n = jobs.len();
    let mut waits: Vec<i64> = Vec::with_capacity(n);
    let (mut util, mut umax, mut bsd, mut work) = (0i128, 0i128, 0.0, 0i128);
    // Per class: waits and summed delay.
    let mut classes: std::collections::BTreeMap<u8, (Vec<i64>, f64)> = Default::default();
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    let mut revenue: Micros = 0;
    let mut preemptions = 0u64;
    for (j, o) in jobs.iter().zip(&res.outcomes) {
        waits.push(o.start - j.submit);
        util += j.utility.value_at(o.end - j.submit) as i128;
        umax += j.utility.max_value() as i128;
        let resp = (o.end - j.submit) as f64;
        bsd += (resp / j.runtime.max(10) as f64).max(1.0);
        work += j.work() as i128;
        first = first.min(j.submit);
        last = last.max(o.end);
        revenue += o.charge;
        preemptions += o.preempted as u64;
        let e = classes.entry(j.class).or_default();
        e.0.push(o.start - j.submit);
        e.1 += (o.end - j.submit - j.runtime) as f64;
    }
    waits.sort_unstable();
    let span = (last - first).max(1) as f64;
    let price_mean = (!res.prices.is_empty()).then(|| {
        let mut acc = 0.0;
        for (k, &(t, p)) in res.prices.iter().enumerate() {
            let until = res.prices.get(k + 1).map(|x| x.0).unwrap_or(last);
            acc += p as f64 * (until - t).max(0) as f64;
        }
        acc / (last - res.prices[0].0).max(1) as f64
    });
    Metrics {
        policy: res.policy.clone(),
        jobs: n,
        utility: util,
        utility_max: umax,
        wait_mean: mean(&waits),
        wait_p50: percentile(&waits, 50.0),
        wait_p90: percentile(&waits, 90.0),
        wait_p99: percentile(&waits, 99.0),
        wait_max: waits.last().copied().unwrap_or(0),
        bounded_slowdown: bsd / n.max(1) as f64,
        utilisation: work as f64 / (res.procs as f64 * span),
        revenue,
        price_mean,
        preemptions,
        by_class: classes
            .into_iter()
            .map(|(class, (mut waits, delay))| {
                waits.sort_unstable();
                ClassMetrics {
                    class,
                    jobs: waits.len(),
                    wait_mean: mean(&waits),
                    wait_p50: percentile(&waits, 50.0),
                    delay_mean: delay / waits.len().max(1) as f64,
                }
            })
            .collect(),
    }
}

fn mean(xs: &[i64]) -> f64 {
    xs.iter().sum::<i64>() as f64 / xs.len().max(1) as f64
}
