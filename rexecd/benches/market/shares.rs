//! The arithmetic of shares: each job's CPUs over a run of usage samples, its
//! error against the model in points of one CPU, and how quickly the errors
//! settle after an event.

use std::time::Instant;

use crate::{CONVERGE_TARGET, CONVERGE_WINDOW, CONVERGED_POINTS, CaseResult, Convergence};

/// Index of the first sample at or after `at`.
pub(crate) fn index_at(samples: &[(Instant, Vec<u64>)], at: Instant) -> usize {
    samples
        .iter()
        .position(|(t, _)| *t >= at)
        .unwrap_or(samples.len().saturating_sub(2))
}

/// Each job's CPUs over the samples, relative to what the jobs together received and
/// scaled to the model's total.
pub(crate) fn measured_cpus(samples: &[(Instant, Vec<u64>)], model: &[f64]) -> Vec<f64> {
    let (first, last) = (&samples[0], &samples[samples.len() - 1]);
    let used: Vec<f64> = first
        .1
        .iter()
        .zip(&last.1)
        .map(|(a, b)| b.saturating_sub(*a) as f64)
        .collect();
    let total: f64 = used.iter().sum();
    let model_total: f64 = model.iter().sum();
    used.iter()
        .map(|u| {
            if total > 0.0 {
                u / total * model_total
            } else {
                0.0
            }
        })
        .collect()
}

/// Per-job errors in points of one CPU over the whole of `samples`, and the CPUs the jobs got.
pub(crate) fn window_errors(
    samples: &[(Instant, Vec<u64>)],
    model: &[f64],
    _cpus: u32,
) -> (Vec<f64>, f64) {
    let measured = measured_cpus(samples, model);
    let errors = measured
        .iter()
        .zip(model)
        .map(|(m, a)| (m - a).abs() * 100.0)
        .collect();
    let (first, last) = (&samples[0], &samples[samples.len() - 1]);
    let secs = last.0.duration_since(first.0).as_secs_f64().max(1e-9);
    let got = first
        .1
        .iter()
        .zip(&last.1)
        .map(|(a, b)| b.saturating_sub(*a) as f64)
        .sum::<f64>()
        / 1e9
        / secs;
    (errors, got)
}

/// How the shares over one-second windows approach the model after the event at the
/// first sample: when the first window has every job within [`CONVERGED_POINTS`], and
/// how many windows ending [`CONVERGE_TARGET`] or more after it do.
pub(crate) fn convergence(
    samples: &[(Instant, Vec<u64>)],
    model: &[f64],
    cpus: u32,
) -> Convergence {
    let start = samples[0].0;
    let mut c = Convergence {
        first: None,
        windows: 0,
        within: 0,
        worst_window: 0.0,
    };
    for end in 1..samples.len() {
        let t = samples[end].0;
        if t < start + CONVERGE_WINDOW {
            continue;
        }
        let begin = samples[..end]
            .iter()
            .rposition(|(s, _)| *s <= t - CONVERGE_WINDOW)
            .unwrap_or(0);
        let (errors, _) = window_errors(&samples[begin..=end], model, cpus);
        let ok = errors.iter().all(|&e| e <= CONVERGED_POINTS);
        if ok && c.first.is_none() {
            c.first = Some(t.duration_since(start));
        }
        if t >= start + CONVERGE_TARGET {
            c.windows += 1;
            c.within += usize::from(ok);
            c.worst_window = errors.iter().copied().fold(c.worst_window, f64::max);
        }
    }
    c
}

pub(crate) fn summarize(errors: &[f64], converged: Convergence) -> CaseResult {
    CaseResult {
        mean: errors.iter().sum::<f64>() / errors.len().max(1) as f64,
        worst: errors.iter().copied().fold(0.0, f64::max),
        converged,
    }
}

pub(crate) fn round2(v: &[f64]) -> Vec<f64> {
    v.iter().map(|x| (x * 100.0).round() / 100.0).collect()
}
