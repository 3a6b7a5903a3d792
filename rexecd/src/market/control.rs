//! The closed-loop share controller: one multiplicative gain per job that corrects its
//! kernel weight so that measured CPU shares converge to the market model's.
//!
//! Open-loop weights (tickets proportional to bids) give the model's shares when every
//! job has enough runnable threads, but not otherwise: the kernel splits a group's
//! weight over the CPUs its threads sit on and does not water-fill, so three
//! single-threaded jobs bidding 40, 30 and 20 on two CPUs get about 0.80, 0.72 and
//! 0.47 CPU where the model says 0.889, 0.667 and 0.444.
//!
//! The law, applied every metering tick to each job the model gives CPU:
//!
//! 1. Measured shares are first scaled so that they sum to what the model hands out
//!    (`m_i' = m_i * sum(model) / sum(measured)`). The controller thus corrects how the
//!    node's CPU is *divided*, not how much of the machine rexecd's jobs get (other
//!    work outside rexecd's cgroup is not the market's to correct).
//! 2. `g_i <- g_i * clamp(((a_i + e) / (m_i' + e))^K, 1/S, S)` with `a_i` the model's
//!    allocation, `e` = 0.02 CPU (so a job measured at zero does not explode the
//!    step), gain exponent `K` = [`GAIN`] and step bound `S` = [`MAX_STEP`]. This is an
//!    integral controller in log space: the gain keeps growing while a job gets less
//!    than its share and shrinks while it gets more.
//! 3. The gains are divided by their geometric mean (only ratios of weights matter) and
//!    clamped to `[1/B, B]` with `B` = [`MAX_GAIN`]: the correction is bounded, so no
//!    job's weight moves more than a factor `B` from its bid's, and a job the model
//!    gives CPU is never starved.
//! 4. The job's weight is then `tickets_i * g_i`, mapped to the kernel's range as
//!    open-loop tickets are.
//!
//! Gains reset to 1 whenever jobs arrive, leave or change their bids (the target
//! moved, and an old correction is no guide to the new one), and stay at 1 while the
//! node is not contended (every runnable thread has a CPU, so there is nothing to
//! divide). Jobs the model gives no CPU (not runnable) keep their gain unchanged.
//!
//! Limits: the controller cannot give a job more CPU than its runnable threads can use
//! (the model never asks for that), and it corrects over ticks, so a change in demand
//! is followed within a few ticks, not instantly.

/// Exponent of the correction per tick (1 would jump straight to the ratio).
pub const GAIN: f64 = 0.6;
/// Largest factor one tick may change a gain by.
pub const MAX_STEP: f64 = 2.0;
/// Largest factor a gain may stand from 1 (either way).
pub const MAX_GAIN: f64 = 64.0;
/// CPUs added to both sides of the ratio, so tiny shares do not make huge steps.
const EPSILON: f64 = 0.02;

/// One job's input to a controller step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The model's allocation, CPUs.
    pub model: f64,
    /// CPU measured over the tick, CPUs.
    pub measured: f64,
}

/// One controller step over every job: updates `gains` in place (same order as
/// `samples`). Jobs with a zero model allocation keep their gain.
pub fn step(gains: &mut [f64], samples: &[Sample]) {
    debug_assert_eq!(gains.len(), samples.len());
    let active = |s: &Sample| s.model > 0.0;
    let model_sum: f64 = samples.iter().filter(|s| active(s)).map(|s| s.model).sum();
    let measured_sum: f64 = samples
        .iter()
        .filter(|s| active(s))
        .map(|s| s.measured.max(0.0))
        .sum();
    if model_sum <= 0.0 || measured_sum <= 0.0 {
        return;
    }
    let scale = model_sum / measured_sum;
    for (g, s) in gains.iter_mut().zip(samples) {
        if !active(s) {
            continue;
        }
        let measured = s.measured.max(0.0) * scale;
        let ratio = (s.model + EPSILON) / (measured + EPSILON);
        let factor = ratio.powf(GAIN).clamp(1.0 / MAX_STEP, MAX_STEP);
        *g = (*g * factor).clamp(1.0 / MAX_GAIN, MAX_GAIN);
    }
    normalize(gains, samples);
}

/// Divides the active gains by their geometric mean, then clamps them to the bound.
fn normalize(gains: &mut [f64], samples: &[Sample]) {
    let logs: Vec<f64> = gains
        .iter()
        .zip(samples)
        .filter(|(_, s)| s.model > 0.0)
        .map(|(g, _)| g.ln())
        .collect();
    if logs.is_empty() {
        return;
    }
    let mean = (logs.iter().sum::<f64>() / logs.len() as f64).exp();
    for (g, s) in gains.iter_mut().zip(samples) {
        if s.model > 0.0 {
            *g = (*g / mean).clamp(1.0 / MAX_GAIN, MAX_GAIN);
        }
    }
}

/// A job's corrected ticket count: `tickets * gain`, at least 1.
pub fn corrected_tickets(tickets: u64, gain: f64) -> u64 {
    let t = (tickets as f64 * gain).round();
    if t.is_finite() && t >= 1.0 {
        // Bounded: tickets <= 2^20 and gain <= MAX_GAIN.
        t as u64
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(model: f64, measured: f64) -> Sample {
        Sample { model, measured }
    }

    #[test]
    fn a_job_short_of_its_share_gains_weight_and_one_over_loses() {
        let mut g = vec![1.0; 3];
        step(&mut g, &[s(0.889, 0.80), s(0.667, 0.72), s(0.444, 0.47)]);
        assert!(g[0] > 1.0 && g[1] < 1.0 && g[2] < 1.0, "{g:?}");
    }

    #[test]
    fn on_target_nothing_moves() {
        let mut g = vec![1.0; 2];
        step(&mut g, &[s(1.0, 1.0), s(0.5, 0.5)]);
        assert!(g.iter().all(|x| (x - 1.0).abs() < 1e-9), "{g:?}");
    }

    #[test]
    fn outside_load_scales_measurements_first() {
        // Both jobs got half of what they should, in the right ratio: no correction.
        let mut g = vec![1.0; 2];
        step(&mut g, &[s(1.2, 0.6), s(0.8, 0.4)]);
        assert!(g.iter().all(|x| (x - 1.0).abs() < 1e-9), "{g:?}");
    }

    #[test]
    fn gains_stay_bounded_and_idle_jobs_keep_theirs() {
        let mut g = vec![1.0, 1.0, 3.0];
        for _ in 0..1000 {
            step(&mut g, &[s(1.0, 0.0), s(1.0, 2.0), s(0.0, 0.0)]);
        }
        assert!(g[0] <= MAX_GAIN && g[1] >= 1.0 / MAX_GAIN, "{g:?}");
        assert!(g[0] > 1.0 && g[1] < 1.0);
        assert_eq!(g[2], 3.0);
    }

    #[test]
    fn a_job_measured_at_zero_moves_at_most_one_step() {
        let mut g = vec![1.0, 1.0];
        step(&mut g, &[s(1.0, 0.0), s(1.0, 2.0)]);
        // After normalisation the ratio between the two is at most MAX_STEP squared.
        assert!(g[0] / g[1] <= MAX_STEP * MAX_STEP + 1e-9, "{g:?}");
    }

    #[test]
    fn corrected_tickets_never_drop_below_one() {
        assert_eq!(corrected_tickets(1, 1.0 / MAX_GAIN), 1);
        assert_eq!(corrected_tickets(1000, 2.0), 2000);
        assert_eq!(corrected_tickets(5, f64::NAN), 1);
    }
}
