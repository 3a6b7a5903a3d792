//! Lee's synthetic utility functions (thesis section 2.6): a start value drawn from a
//! normal distribution centred on the job's priority bin and scaled by its size
//! (processors times requested time), a deadline at `factor` times the job's reference
//! wait (at least 10 s), and about a third each of expected-linear, expected-exponential
//! and step decay between them. Times are measured from the job's ideal completion
//! (submission plus runtime), so a job that never waits earns its start value.

use crate::job::Job;
use crate::rng::Rng;
use crate::utility::{MICROS_PER_CREDIT, Micros, Utility};

/// Decay shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decay {
    /// Values drawn uniformly then sorted: mostly linear decay.
    Linear,
    /// Each value drawn below the previous one: steep early decay.
    Exponential,
    /// Flat, one drop, flat, then zero at the deadline.
    Step,
}

/// The generator's knobs.
#[derive(Debug, Clone, Copy)]
pub struct LeeConfig {
    /// Number of priorities (0 = highest).
    pub priorities: u8,
    /// Global maximum start value, credits per processor-minute.
    pub globmax: f64,
    /// Deadline = `factor` * reference wait (Lee: 2).
    pub factor: f64,
    /// Intermediate breakpoints for linear and exponential decay.
    pub points: usize,
    /// Seed.
    pub seed: u64,
}

impl Default for LeeConfig {
    fn default() -> Self {
        LeeConfig {
            priorities: 3,
            globmax: 1.0,
            factor: 2.0,
            points: 4,
            seed: 1,
        }
    }
}

/// One utility function for a job of `width` x `estimate` seconds at `priority`, with its
/// reference wait, and the decay shape chosen.
pub fn generate_one(
    rng: &mut Rng,
    cfg: &LeeConfig,
    priority: u8,
    width: u32,
    estimate: i64,
    ref_wait: i64,
) -> (Vec<(i64, Micros)>, Decay) {
    let n = cfg.priorities.max(1) as f64;
    let bin = n - 1.0 - (priority.min(cfg.priorities.saturating_sub(1)) as f64);
    let mean = (bin + 0.5) / n * cfg.globmax;
    let unscaled = rng.normal(mean, cfg.globmax / n / 2.0).max(0.0);
    let start =
        (unscaled * width as f64 * (estimate as f64 / 60.0) * MICROS_PER_CREDIT as f64) as Micros;
    let deadline = ((cfg.factor * ref_wait as f64).round() as i64).max(10);
    let decay = match rng.index(3) {
        0 => Decay::Linear,
        1 => Decay::Exponential,
        _ => Decay::Step,
    };
    let mut pts = vec![(0, start)];
    match decay {
        Decay::Step => {
            let t1 = rng.range(1, (deadline - 2).max(1) as u64) as i64;
            let mid = rng.range(0, start.max(0) as u64) as Micros;
            pts.push((t1, start));
            if t1 + 1 < deadline {
                pts.push((t1 + 1, mid));
            }
            if t1 + 1 < deadline - 1 {
                pts.push((deadline - 1, mid));
            }
        }
        Decay::Linear | Decay::Exponential => {
            let mut times: Vec<i64> = Vec::new();
            let want = cfg.points.min((deadline - 1).max(0) as usize);
            while times.len() < want {
                let t = rng.range(1, (deadline - 1) as u64) as i64;
                if !times.contains(&t) {
                    times.push(t);
                }
            }
            times.sort_unstable();
            let mut vals: Vec<Micros> = Vec::new();
            let mut last = start.max(0);
            for _ in 0..times.len() {
                let v = rng.range(0, last as u64) as Micros;
                if decay == Decay::Exponential {
                    last = v;
                }
                vals.push(v);
            }
            vals.sort_unstable_by(|a, b| b.cmp(a));
            pts.extend(times.into_iter().zip(vals));
        }
    }
    pts.push((deadline, 0));
    (pts, decay)
}

/// Gives every job a Lee utility function; `ref_wait[i]` is job `i`'s reference wait.
/// Returns how many of each decay shape were drawn (linear, exponential, step).
pub fn assign(jobs: &mut [Job], ref_wait: &[i64], cfg: &LeeConfig) -> [usize; 3] {
    let mut rng = Rng::new(cfg.seed);
    let mut counts = [0; 3];
    for (j, &w) in jobs.iter_mut().zip(ref_wait) {
        let (pts, decay) = generate_one(&mut rng, cfg, j.queue, j.width, j.estimate, w);
        counts[decay as usize] += 1;
        // Breakpoints are strictly increasing and non-negative by construction.
        let u = Utility::new(pts).unwrap_or_else(|_| Utility::constant(0));
        j.utility = u.shifted(j.runtime);
        j.class = j.queue;
    }
    counts
}

/// Gives each job a random priority: `weights[p]` is the chance of priority `p`.
pub fn assign_priorities(jobs: &mut [Job], weights: &[f64], seed: u64) {
    let mut rng = Rng::new(seed);
    let total: f64 = weights.iter().sum();
    for j in jobs.iter_mut() {
        let mut x = rng.unit() * total;
        let mut p = weights.len().saturating_sub(1);
        for (k, &w) in weights.iter().enumerate() {
            if x < w {
                p = k;
                break;
            }
            x -= w;
        }
        j.queue = p as u8;
    }
}
