//! The event-driven simulator: arrivals and completions are events; after each batch of
//! events at one instant the policy sees a [`Snapshot`] and its [`Decision`] is checked and
//! applied. A processor freed by a job's end is given out at that end, not at a later
//! tick: the live queue (`batchd`) decides at each end too, so [`simulate_ms`] replays
//! a live run to the millisecond. It records every run segment (so an independent checker can audit the
//! schedule), per-job outcomes, charges, the market price over time and reservations.
//! A policy that breaks the rules (starts an unknown job, overcommits the machine) or
//! leaves work waiting forever is an error, never a panic.
//!
//! This module holds the types and the event loop; [`engine`] holds the state and one
//! method per kind of event (completion, arrival, decision).

mod engine;

use std::collections::HashMap;

use thiserror::Error;

use crate::job::{Job, JobId};
use crate::policy::Policy;
use crate::utility::Micros;

/// Why a simulation could not finish.
#[derive(Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SimError {
    /// A job the machine can never run, or with impossible times.
    #[error("job {id}: {why}")]
    InvalidJob {
        /// The job.
        id: JobId,
        /// What is wrong.
        why: String,
    },
    /// The policy broke a rule.
    #[error("policy {policy} at t={now}: {why}")]
    Policy {
        /// Policy name.
        policy: String,
        /// When.
        now: i64,
        /// What it did.
        why: String,
    },
    /// Run times given for a different number of jobs.
    #[error("{runtimes} run times for {jobs} jobs")]
    Runtimes {
        /// Jobs.
        jobs: usize,
        /// Run times.
        runtimes: usize,
    },
    /// Jobs wait, nothing runs, nothing will arrive, and the policy starts nothing.
    #[error("policy {policy} stalled at t={now} with {waiting} jobs waiting")]
    Stalled {
        /// Policy name.
        policy: String,
        /// When.
        now: i64,
        /// Jobs left waiting.
        waiting: usize,
    },
}

/// One stretch of a job holding its processors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// The job.
    pub job: JobId,
    /// Start (seconds).
    pub start: i64,
    /// End (seconds).
    pub end: i64,
    /// Processors held.
    pub width: u32,
}

/// What happened to one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// First start.
    pub start: i64,
    /// Completion.
    pub end: i64,
    /// Times suspended or preempted.
    pub preempted: u32,
    /// What the job paid (micro-credits).
    pub charge: Micros,
}

/// A finished simulation.
#[derive(Debug, Clone)]
pub struct SimResult {
    /// Policy name.
    pub policy: String,
    /// Processors.
    pub procs: u32,
    /// Outcomes in the order of the input jobs.
    pub outcomes: Vec<Outcome>,
    /// Every run segment, in the order they ended.
    pub segments: Vec<Segment>,
    /// `(time, price)` whenever a market policy set its price.
    pub prices: Vec<(i64, Micros)>,
    /// `(time, job, promised start)` for every reservation a policy reported.
    pub reservations: Vec<(i64, JobId, i64)>,
    /// Policy calls.
    pub decisions: u64,
}

impl SimResult {
    /// A run of `policy` on `procs` processors with nothing recorded yet.
    pub fn empty(policy: &str, procs: u32) -> Self {
        SimResult {
            policy: policy.to_string(),
            procs,
            outcomes: Vec::new(),
            segments: Vec::new(),
            prices: Vec::new(),
            reservations: Vec::new(),
            decisions: 0,
        }
    }
}

/// Checks that `jobs` can be simulated on `procs` processors.
pub fn validate(jobs: &[Job], procs: u32) -> Result<(), SimError> {
    let mut seen = HashMap::new();
    for j in jobs {
        let bad = |why: &str| SimError::InvalidJob {
            id: j.id,
            why: why.to_string(),
        };
        if seen.insert(j.id, ()).is_some() {
            return Err(bad("duplicate id"));
        }
        if j.width == 0 || j.width > procs {
            return Err(bad(&format!("width {} not in 1..={procs}", j.width)));
        }
        if j.runtime < 1 || j.estimate < j.runtime {
            return Err(bad("runtime must be >= 1 and estimate >= runtime"));
        }
        if j.submit < 0 {
            return Err(bad("negative submit time"));
        }
    }
    Ok(())
}

/// Runs `jobs` on `procs` processors under `policy`.
pub fn simulate(jobs: &[Job], procs: u32, policy: &mut dyn Policy) -> Result<SimResult, SimError> {
    validate(jobs, procs)?;
    let runtime_ms = jobs
        .iter()
        .map(|j| j.runtime.saturating_mul(1000))
        .collect();
    run(
        engine::Sim::new(jobs, runtime_ms, 1000, procs, policy.name()),
        policy,
    )
}

/// Runs `jobs` on `procs` processors under `policy`, job `i` running
/// `runtime_ms[i]` milliseconds (its `runtime` is only what the policy is shown),
/// as the live queue ran them: each end is an instant of its own, to the
/// millisecond, and the policy decides there, seeing whole seconds (see
/// [`engine`]). Every time in the result is in milliseconds.
pub fn simulate_ms(
    jobs: &[Job],
    runtime_ms: &[i64],
    procs: u32,
    policy: &mut dyn Policy,
) -> Result<SimResult, SimError> {
    validate(jobs, procs)?;
    if runtime_ms.len() != jobs.len() {
        return Err(SimError::Runtimes {
            jobs: jobs.len(),
            runtimes: runtime_ms.len(),
        });
    }
    if let Some((j, _)) = jobs.iter().zip(runtime_ms).find(|(_, r)| **r < 1) {
        return Err(SimError::InvalidJob {
            id: j.id,
            why: "run time must be at least 1 ms".into(),
        });
    }
    let sim = engine::Sim::new(jobs, runtime_ms.to_vec(), 1, procs, policy.name());
    run(sim, policy)
}

/// The event loop: at each instant, ends, then arrivals, then one decision.
fn run(mut sim: engine::Sim<'_>, policy: &mut dyn Policy) -> Result<SimResult, SimError> {
    while let Some(now) = sim.next_instant() {
        sim.complete_due(now);
        sim.admit_arrivals(now);
        let decision = policy.decide(&sim.snapshot(now));
        sim.apply(now, decision)?;
        sim.check_progress(now)?;
    }
    Ok(sim.finish())
}

#[cfg(test)]
mod tests;
