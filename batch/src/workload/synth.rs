//! The batch paper's synthetic workloads: bursts of jobs with normally distributed burst
//! interarrival times, normally distributed lengths, widths fixed at 1 (sequential) or
//! uniform up to a maximum, bimodal valuations (80% low, 20% high, the high mode `spread`
//! times the low one) and the batch utility shape whose delay tolerance sets users'
//! sensitivity to delay. Arrivals are scaled so the offered load is what was asked.
//! Seeded and reproducible.

use crate::job::Job;
use crate::rng::Rng;
use crate::utility::{MICROS_PER_CREDIT, Utility};

/// The generator's knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SynthConfig {
    /// Jobs to generate.
    pub jobs: usize,
    /// Processors in the machine (the paper: 32).
    pub procs: u32,
    /// Offered load: work submitted over capacity during the arrival period.
    pub load: f64,
    /// Jobs per burst (1 = no bursts).
    pub burst: u32,
    /// Widest job; widths are uniform in `1..=max_width` (1 = sequential).
    pub max_width: u32,
    /// Mean job length (seconds); lengths are normal with a standard deviation of half this.
    pub mean_runtime: f64,
    /// How much more the high-value mode is worth than the low one (the paper: 100).
    pub spread: f64,
    /// Fraction of high-value jobs (the paper: 0.2).
    pub high_fraction: f64,
    /// Mean delay tolerance as a multiple of job length (smaller = more sensitive);
    /// each job's tolerance is uniform in `[0.5, 1.5]` times this.
    pub tolerance: f64,
    /// Estimates are `runtime * pad` (1.0 = exact).
    pub pad: f64,
    /// Seed.
    pub seed: u64,
}

impl Default for SynthConfig {
    fn default() -> Self {
        SynthConfig {
            jobs: 2000,
            procs: 32,
            load: 0.9,
            burst: 8,
            max_width: 1,
            mean_runtime: 3600.0,
            spread: 100.0,
            high_fraction: 0.2,
            tolerance: 2.0,
            pad: 1.0,
            seed: 1,
        }
    }
}

/// Generates a workload; job ids are 1-based in arrival order.
pub fn generate(cfg: &SynthConfig) -> Vec<Job> {
    let mut rng = Rng::new(cfg.seed);
    let procs = cfg.procs.max(1);
    let max_w = cfg.max_width.clamp(1, procs);
    let mut jobs = Vec::with_capacity(cfg.jobs);
    let mut work = 0.0;
    for k in 0..cfg.jobs {
        let runtime = rng
            .normal(cfg.mean_runtime, cfg.mean_runtime / 2.0)
            .max(cfg.mean_runtime / 20.0)
            .max(1.0) as i64;
        let width = rng.range(1, max_w as u64) as u32;
        let high = rng.chance(cfg.high_fraction);
        // Value per processor-hour in credits: low mode mean 1, high mode mean `spread`.
        let mode = if high { cfg.spread.max(1.0) } else { 1.0 };
        let rate = rng.normal(mode, mode / 4.0).max(mode / 20.0);
        let value =
            (rate * width as f64 * runtime as f64 / 3600.0 * MICROS_PER_CREDIT as f64) as i64;
        let tol = cfg.tolerance * rng.uniform(0.5, 1.5);
        // PRIOFIFO queues, optimally used (the paper's footnote): high-value jobs in the top
        // queue, the low-value jobs split by whether they value above their mode's mean.
        let queue = if high {
            0
        } else if rate >= 1.0 {
            1
        } else {
            2
        };
        work += (runtime * width as i64) as f64;
        jobs.push(Job {
            id: k as u64 + 1,
            submit: 0,
            width,
            runtime,
            estimate: ((runtime as f64 * cfg.pad).ceil() as i64).max(runtime),
            utility: Utility::batch(runtime, value, tol),
            queue,
            class: if high { 0 } else { 1 },
        });
    }
    // Bursts arrive with normally distributed gaps whose mean sets the offered load.
    let burst = cfg.burst.max(1) as usize;
    let bursts = jobs.len().div_ceil(burst).max(1);
    let span = work / (cfg.load.max(0.01) * procs as f64);
    let gap = span / bursts as f64;
    let mut t = 0.0;
    for chunk in jobs.chunks_mut(burst) {
        for j in chunk.iter_mut() {
            j.submit = t as i64;
        }
        t += rng.normal(gap, gap / 2.0).max(0.0);
    }
    jobs
}
