//! Lee's genetic-algorithm scheduler. An individual is an ordering of the waiting jobs;
//! its fitness is the aggregate utility of the schedule EASY backfilling would build from
//! that ordering, projected forward with the jobs' estimates. A population is seeded with
//! the FIFO, priority and bid orderings plus random permutations, then evolved: parents
//! chosen with probability proportional to fitness (the second without replacement), the
//! zipper crossover that keeps a permutation, swap mutations, and the best individual ever
//! seen kept. Evolution stops after the configured generations or when the per-decision
//! wall-clock budget is spent, whichever comes first. Only the `genes` most eligible jobs
//! (by bid) are permuted; the rest follow in bid order.

use std::time::{Duration, Instant};

use super::backfill::{Backfill, order_by, schedule};
use super::{Decision, Policy, Snapshot};
use crate::rng::Rng;

/// The GA's knobs.
#[derive(Debug, Clone, Copy)]
pub struct GaConfig {
    /// Individuals per generation (Lee: 20).
    pub population: usize,
    /// Generations per decision (Lee: 100).
    pub generations: usize,
    /// Probability of one swap mutation per child.
    pub mutation: f64,
    /// How many of the most eligible jobs are permuted.
    pub genes: usize,
    /// Wall-clock budget per decision.
    pub budget: Duration,
}

impl Default for GaConfig {
    fn default() -> Self {
        GaConfig {
            population: 20,
            generations: 100,
            mutation: 0.3,
            genes: 24,
            budget: Duration::from_millis(50),
        }
    }
}

/// The GA scheduler with its own seeded generator.
#[derive(Debug, Clone)]
pub struct Ga {
    cfg: GaConfig,
    rng: Rng,
    /// Decisions that ran out of wall-clock budget before finishing their generations.
    pub budget_hits: u64,
}

impl Ga {
    /// A GA scheduler seeded with `seed`.
    pub fn new(cfg: GaConfig, seed: u64) -> Self {
        Ga {
            cfg,
            rng: Rng::new(seed),
            budget_hits: 0,
        }
    }
}

/// Aggregate utility (as `i128`) of rendering `order` (indices into `snap.queued`) with
/// EASY backfilling, projected with estimates.
pub fn render(snap: &Snapshot<'_>, order: &[usize]) -> i128 {
    let mut t = snap.now;
    // Projected running jobs, kept sorted by end.
    let mut running: Vec<(i64, i64)> = snap
        .running
        .iter()
        .map(|r| (r.estimated_end(snap.now), r.job.width as i64))
        .collect();
    running.sort_unstable();
    let mut free = snap.procs as i64 - running.iter().map(|r| r.1).sum::<i64>();
    let mut pending: Vec<usize> = order.to_vec();
    let mut total: i128 = 0;
    let insert = |running: &mut Vec<(i64, i64)>, e: (i64, i64)| {
        let pos = running.partition_point(|r| *r < e);
        running.insert(pos, e);
    };
    while !pending.is_empty() {
        let mut started = vec![false; pending.len()];
        let mut k = 0;
        while k < pending.len() {
            let q = &snap.queued[pending[k]];
            let w = q.job.width as i64;
            if w > free {
                break;
            }
            free -= w;
            let end = t + q.remaining_estimate();
            insert(&mut running, (end, w));
            total += q.job.utility.value_at(end - q.job.submit) as i128;
            started[k] = true;
            k += 1;
        }
        if k < pending.len() {
            let need = snap.queued[pending[k]].job.width as i64;
            let (mut avail, mut shadow) = (free, t);
            for &(e, w) in &running {
                if avail >= need {
                    break;
                }
                avail += w;
                shadow = e;
            }
            let mut extra = avail - need;
            for j in k + 1..pending.len() {
                let q = &snap.queued[pending[j]];
                let w = q.job.width as i64;
                let end = t + q.remaining_estimate();
                let in_time = end <= shadow;
                if w <= free && (in_time || w <= extra) {
                    free -= w;
                    if !in_time {
                        extra -= w;
                    }
                    insert(&mut running, (end, w));
                    total += q.job.utility.value_at(end - q.job.submit) as i128;
                    started[j] = true;
                }
            }
        }
        let mut j = 0;
        pending.retain(|_| {
            j += 1;
            !started[j - 1]
        });
        if pending.is_empty() || running.is_empty() {
            break;
        }
        // Advance to the next projected completion and release everything ending then.
        t = running[0].0.max(t);
        let gone = running.partition_point(|r| r.0 <= t);
        free += running[..gone].iter().map(|r| r.1).sum::<i64>();
        running.drain(..gone);
    }
    total
}

fn zipper(rng: &mut Rng, a: &[usize], b: &[usize]) -> Vec<usize> {
    let mut child = Vec::with_capacity(a.len());
    let mut seen = std::collections::HashSet::with_capacity(a.len());
    let (mut ia, mut ib) = (0, 0);
    while child.len() < a.len() {
        let (p, i) = if rng.chance(0.5) {
            (a, &mut ia)
        } else {
            (b, &mut ib)
        };
        while *i < p.len() && seen.contains(&p[*i]) {
            *i += 1;
        }
        if *i < p.len() {
            seen.insert(p[*i]);
            child.push(p[*i]);
            *i += 1;
        }
    }
    child
}

fn pick(rng: &mut Rng, weights: &[f64], skip: Option<usize>) -> usize {
    let total: f64 = weights
        .iter()
        .enumerate()
        .filter(|&(i, _)| Some(i) != skip)
        .map(|(_, w)| w)
        .sum();
    let mut x = rng.unit() * total;
    for (i, &w) in weights.iter().enumerate() {
        if Some(i) == skip {
            continue;
        }
        if x < w {
            return i;
        }
        x -= w;
    }
    (0..weights.len())
        .rev()
        .find(|&i| Some(i) != skip)
        .unwrap_or(0)
}

impl Policy for Ga {
    fn name(&self) -> String {
        "ga".into()
    }

    fn decide(&mut self, snap: &Snapshot<'_>) -> Decision {
        // The budget covers the whole decision, ranking included.
        let started = Instant::now();
        let now = snap.now;
        let bids: Vec<i64> = snap
            .queued
            .iter()
            .map(|q| q.job.bid_at(now, q.remaining_estimate()))
            .collect();
        let by_bid = order_by(snap, |i| std::cmp::Reverse(bids[i]));
        let demand: u32 = snap.queued.iter().map(|q| q.job.width).sum();
        if demand <= snap.free() || snap.queued.len() < 2 {
            return schedule(snap, &by_bid, Backfill::Easy);
        }
        let genes_n = self.cfg.genes.clamp(2, by_bid.len());
        let genes: Vec<usize> = by_bid[..genes_n].to_vec();
        let tail: Vec<usize> = by_bid[genes_n..].to_vec();
        let in_genes = |i: &usize| genes.contains(i);
        let mut pop: Vec<Vec<usize>> = vec![genes.clone()];
        for seed in [
            order_by(snap, |i| snap.queued[i].job.submit),
            order_by(snap, |i| snap.queued[i].job.queue),
        ] {
            pop.push(seed.into_iter().filter(in_genes).collect());
        }
        while pop.len() < self.cfg.population.max(2) {
            let mut p = genes.clone();
            self.rng.shuffle(&mut p);
            pop.push(p);
        }
        let mut fit: Vec<i128> = pop.iter().map(|p| render(snap, p)).collect();
        let mut best = (fit[0], pop[0].clone());
        for (f, p) in fit.iter().zip(&pop) {
            if *f > best.0 {
                best = (*f, p.clone());
            }
        }
        // A generation is not begun unless it can end within the budget, judged by
        // how long the last one took.
        let mut last = Duration::ZERO;
        for _ in 0..self.cfg.generations {
            if started.elapsed() + last >= self.cfg.budget {
                self.budget_hits += 1;
                break;
            }
            let generation = Instant::now();
            let min = *fit.iter().min().unwrap_or(&0);
            let weights: Vec<f64> = fit.iter().map(|&f| (f - min) as f64 + 1.0).collect();
            let mut next = vec![best.1.clone()];
            while next.len() < pop.len() {
                let a = pick(&mut self.rng, &weights, None);
                let b = pick(&mut self.rng, &weights, Some(a));
                let mut child = zipper(&mut self.rng, &pop[a], &pop[b]);
                if self.rng.chance(self.cfg.mutation) {
                    let (x, y) = (self.rng.index(child.len()), self.rng.index(child.len()));
                    child.swap(x, y);
                }
                next.push(child);
            }
            pop = next;
            fit = pop.iter().map(|p| render(snap, p)).collect();
            for (f, p) in fit.iter().zip(&pop) {
                if *f > best.0 {
                    best = (*f, p.clone());
                }
            }
            last = generation.elapsed();
        }
        let mut order = best.1;
        order.extend(tail);
        schedule(snap, &order, Backfill::Easy)
    }
}
