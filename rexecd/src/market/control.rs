//! The closed-loop share controller: per job, a correction to its kernel weight that
//! drives the CPU time it receives to what the market model entitles it to.
//!
//! Open-loop weights (tickets proportional to bids) give the model's shares when every
//! job has enough runnable threads, but not otherwise: the kernel splits a group's
//! weight over the CPUs its threads sit on and does not water-fill, so three
//! single-threaded jobs bidding 40, 30 and 20 on two CPUs get about 0.80, 0.72 and
//! 0.47 CPU where the model says 0.889, 0.667 and 0.444.
//!
//! The law (see docs/ARCHITECTURE.md, "Closed-loop shares", for the gains and why it
//! is stable), every metering tick of `dt` seconds, for each job the model gives CPU:
//!
//! 1. Measured CPU is scaled so that the jobs' sum is what the model hands out
//!    (`m_i' = m_i * sum(model) / sum(measured)`): the controller corrects how the
//!    node's CPU is *divided*, not how much of the machine rexecd's jobs get.
//! 2. Lag, the CPU time the model entitled the job to since the market last changed
//!    less what it received: `L_i += (a_i - m_i') * dt`, clamped to `±LAG_MAX` (what
//!    stride scheduling bounds; a job cannot bank an unbounded claim). The lag is an
//!    exact integral of every sample, so noise averages out in it instead of steering.
//! 3. Filtered rate error: `e_i <- e_i + ALPHA * ((a_i - m_i') - e_i)` (an exponentially
//!    weighted moving average of one-tick samples).
//! 4. Integral: `I_i += KI * L_i * dt` while the lag is inside its bound (a lag at its
//!    bound is one the kernel is not paying back: integrating it is windup), leaking
//!    with time constant `TAU_I` and clamped to `±I_MAX`.
//! 5. Log-gain target: `I_i + KP * L_i + KR * e_i`; integrals and targets are kept at
//!    mean zero over the jobs (only ratios of weights matter), the gain moves towards
//!    its target by at most `MAX_STEP` (a factor) a tick, then the gains are divided
//!    by their geometric mean and clamped to `[1/MAX_GAIN, MAX_GAIN]`.
//!
//! The weight is then `tickets_i * g_i`. The state resets whenever jobs arrive, leave
//! or re-bid (the target moved) and stays at rest while the node is not contended.
//! [`caps`] holds the second lever, CFS bandwidth caps at the model's allocations, and
//! [`placement`] the third, single-threaded jobs confined to CPUs on a schedule.

/// Weight of a new one-tick sample in the filtered rate error.
pub const ALPHA: f64 = 0.35;
/// Log-gain per CPU-second of lag (proportional on lag).
pub const KP: f64 = 2.0;
/// Log-gain per CPU-second of lag per second (integral of lag).
pub const KI: f64 = 0.6;
/// Time constant of the integral's leak, seconds.
pub const TAU_I: f64 = 10.0;
/// Largest integral, either way, log-gain.
pub const I_MAX: f64 = std::f64::consts::LN_2 * 2.0;
/// Log-gain per CPU of filtered rate error (damping).
pub const KR: f64 = 1.0;
/// Largest lag, either way, CPU-seconds.
pub const LAG_MAX: f64 = 0.5;
/// Largest factor one tick may change a gain by.
pub const MAX_STEP: f64 = 1.3;
/// Largest factor a gain may stand from 1 (either way).
pub const MAX_GAIN: f64 = 64.0;
/// Longest tick the law integrates over, seconds (a stalled engine is not a long lag).
const DT_MAX: f64 = 2.0;
/// Shortest tick whose rates the law (and the demand a rank's rate implies, and the
/// caps' reach) believes, seconds: the kernel adds a running thread's time to its
/// counters at its scheduler ticks (every few milliseconds), so a tick of a
/// millisecond (two ticks back to back) measures noise: once 511 CPUs for a
/// single-threaded job. Such a tick is left out (the law loses its milliseconds).
pub const MIN_DT: f64 = 0.1;

/// One job's controller state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct State {
    /// The weight's correction factor.
    pub gain: f64,
    /// Entitled less received since the last reset, CPU-seconds.
    pub lag: f64,
    /// Filtered rate error (model less measured), CPUs.
    pub error: f64,
    /// Integral term, log-gain.
    pub integral: f64,
}

impl Default for State {
    fn default() -> State {
        State {
            gain: 1.0,
            lag: 0.0,
            error: 0.0,
            integral: 0.0,
        }
    }
}

/// One job's input to a controller step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The model's allocation, CPUs.
    pub model: f64,
    /// CPU measured over the tick, CPUs.
    pub measured: f64,
    /// Length of the tick, seconds.
    pub dt: f64,
}

/// One controller step over every job: updates `states` in place (same order as
/// `samples`). Jobs with a zero model allocation keep their state.
pub fn step(states: &mut [State], samples: &[Sample]) {
    debug_assert_eq!(states.len(), samples.len());
    let active = |s: &Sample| s.model > 0.0 && s.dt >= MIN_DT;
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
    for (st, s) in states.iter_mut().zip(samples) {
        if !active(s) {
            continue;
        }
        let dt = s.dt.min(DT_MAX);
        let short = s.model - s.measured.max(0.0) * scale;
        st.lag = (st.lag + short * dt).clamp(-LAG_MAX, LAG_MAX);
        st.error += ALPHA * (short - st.error);
        // Anti-windup: the integral leaks, and stops following a lag at its bound (the
        // kernel is not paying that lag back, whatever the weight).
        st.integral *= (1.0 - dt / TAU_I).max(0.0);
        if st.lag.abs() < LAG_MAX {
            st.integral += KI * st.lag * dt;
        }
        st.integral = st.integral.clamp(-I_MAX, I_MAX);
    }
    // Only ratios of weights matter: integrals and targets are kept at mean zero, so
    // that what the gains are divided by never builds up in them.
    center(states, samples, |st| &mut st.integral);
    let targets: Vec<f64> = states
        .iter()
        .map(|st| st.integral + KP * st.lag + KR * st.error)
        .collect();
    let mean_target = mean(
        targets
            .iter()
            .zip(samples)
            .filter(|(_, s)| active(s))
            .map(|(t, _)| *t),
    );
    let max_step = MAX_STEP.ln();
    for ((st, s), target) in states.iter_mut().zip(samples).zip(targets) {
        if !active(s) {
            continue;
        }
        let now = st.gain.ln();
        let to = target - mean_target;
        st.gain = (now + (to - now).clamp(-max_step, max_step)).exp();
    }
    normalize(states, samples);
}

/// Mean of `values`; 0 for none.
fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

/// Subtracts the mean of one field over the jobs the model gives CPU.
fn center(states: &mut [State], samples: &[Sample], field: impl Fn(&mut State) -> &mut f64) {
    let m = mean(
        states
            .iter_mut()
            .zip(samples)
            .filter(|(_, s)| s.model > 0.0)
            .map(|(st, _)| *field(st)),
    );
    for (st, s) in states.iter_mut().zip(samples) {
        if s.model > 0.0 {
            *field(st) -= m;
        }
    }
}

/// Divides the active gains by their geometric mean, then clamps them to the bound.
fn normalize(states: &mut [State], samples: &[Sample]) {
    let logs: Vec<f64> = states
        .iter()
        .zip(samples)
        .filter(|(_, s)| s.model > 0.0)
        .map(|(st, _)| st.gain.ln())
        .collect();
    if logs.is_empty() {
        return;
    }
    let mean = (logs.iter().sum::<f64>() / logs.len() as f64).exp();
    for (st, s) in states.iter_mut().zip(samples) {
        if s.model > 0.0 {
            st.gain = (st.gain / mean).clamp(1.0 / MAX_GAIN, MAX_GAIN);
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

pub mod caps;
pub mod placement;

#[cfg(test)]
mod tests;
