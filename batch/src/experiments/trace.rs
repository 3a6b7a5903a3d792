//! Lee's trace study (her Tables 4.1 and 4.2) and the preparation of trace jobs that
//! `marketsim run --swf` shares with it: arrivals compressed or stretched to an offered
//! load, priorities drawn where the trace has none, and Lee utility functions whose
//! deadlines come from each job's wait under EASY (a trace records no valuations); and
//! what the fitted arrivals offer, against what was asked and what the trace offered.

use std::fmt;

use thiserror::Error;

use super::run;
use crate::job::Job;
use crate::metrics::Metrics;
use crate::policy::ga::GaConfig;
use crate::sim::SimError;
use crate::workload::lee::{self, LeeConfig};
use crate::workload::swf::{self, JobsError, Swf, ToJobs};

/// Why a trace study could not run.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StudyError {
    /// The trace's records are not a workload.
    #[error(transparent)]
    Jobs(#[from] JobsError),
    /// A simulation failed.
    #[error(transparent)]
    Sim(#[from] SimError),
}

/// One line of the trace study.
#[derive(Debug, Clone)]
pub struct TraceRow {
    /// Estimates: "exact" or "padded xN".
    pub estimates: String,
    /// Metrics per policy.
    pub metrics: Vec<Metrics>,
}

/// Options of Lee's trace study.
#[derive(Debug, Clone, Copy)]
pub struct TraceStudy {
    /// Use the first this many records (0 = all).
    pub jobs: usize,
    /// Offered load to compress (or stretch) arrivals to.
    pub load: f64,
    /// Padding factors to try (1.0 = exact runtimes).
    pub pads: [f64; 2],
    /// Lee utility generator settings.
    pub lee: LeeConfig,
    /// Chances of priorities 0 (high), 1, 2.
    pub priority_weights: [f64; 3],
    /// GA settings.
    pub ga: GaConfig,
}

impl Default for TraceStudy {
    fn default() -> Self {
        TraceStudy {
            jobs: 0,
            load: 0.85,
            pads: [1.0, 2.0],
            lee: LeeConfig::default(),
            priority_weights: [0.2, 0.5, 0.3],
            ga: GaConfig::default(),
        }
    }
}

/// Jobs of the trace study: arrivals compressed (or stretched) so the offered load is
/// `load`, priorities drawn, Lee utilities generated from each job's wait under EASY with
/// exact estimates (the trace has no waits). Returns the jobs with exact estimates, the
/// machine size and the factor arrival times were divided by.
pub fn trace_jobs(trace: &Swf, st: &TraceStudy) -> Result<(Vec<Job>, u32, f64), StudyError> {
    let procs = swf::max_procs(trace).unwrap_or(256);
    let mut t = trace.clone();
    if st.jobs > 0 {
        t.records.truncate(st.jobs);
        t.lines.truncate(st.jobs);
    }
    let how = ToJobs {
        procs,
        pad: 1.0,
        compress: 1.0,
    };
    let (raw, _) = swf::to_jobs(&t, how)?;
    let compress = st.load / offered_load(&raw, procs);
    let (mut jobs, _) = swf::to_jobs(&t, ToJobs { compress, ..how })?;
    for j in &mut jobs {
        j.estimate = j.runtime;
    }
    value_trace_jobs(&mut jobs, procs, &st.lee, &st.priority_weights, st.ga)?;
    Ok((jobs, procs, compress))
}

/// Lee's comparison on a trace: each policy with each estimate padding.
pub fn trace_study(
    jobs: &[Job],
    procs: u32,
    st: &TraceStudy,
    policies: &[&str],
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<TraceRow>, SimError> {
    let mut rows = Vec::new();
    for &pad in &st.pads {
        let mut js = jobs.to_vec();
        for j in &mut js {
            j.estimate = ((j.runtime as f64 * pad).ceil() as i64).max(j.runtime);
        }
        let mut ms = Vec::new();
        for p in policies {
            progress(&format!("trace, estimates x{pad}: {p}"));
            let (m, res) = run(&js, procs, p, st.lee.seed, st.ga)?;
            crate::check::check_schedule(&js, &res).map_err(|why| SimError::Policy {
                policy: p.to_string(),
                now: 0,
                why,
            })?;
            ms.push(m);
        }
        rows.push(TraceRow {
            estimates: if pad == 1.0 {
                "exact".into()
            } else {
                format!("padded x{pad}")
            },
            metrics: ms,
        });
    }
    Ok(rows)
}

/// Work offered over capacity from the first to the last arrival (a span of at least one
/// second).
pub fn offered_load(jobs: &[Job], procs: u32) -> f64 {
    let work: f64 = jobs.iter().map(|j| j.work() as f64).sum();
    let first = jobs.iter().map(|j| j.submit).min().unwrap_or(0);
    let last = jobs.iter().map(|j| j.submit).max().unwrap_or(1);
    work / (procs as f64 * (last - first).max(1) as f64)
}

/// How a trace's arrivals were fitted to an asked offered load ([`trace_jobs`]), and the
/// load the fitted jobs actually offer. Shown, it reads "arrivals compressed 23.3 times:
/// offered load 0.85 (the trace's own 0.04)", and names the asked load whenever the
/// offered one differs from it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadFit {
    /// The offered load asked for.
    pub asked: f64,
    /// The trace's own offered load, before its arrivals were divided.
    pub raw: f64,
    /// What arrival times were divided by.
    pub compress: f64,
    /// The offered load of the fitted jobs ([`offered_load`]).
    pub offered: f64,
    /// Every job arrives in the same second, so no compressing or stretching changes the
    /// offered load.
    pub one_instant: bool,
}

impl LoadFit {
    /// The fit of `jobs`, prepared by [`trace_jobs`] for the load `asked`, which divided
    /// their arrival times by `compress` (that is, `asked` over the trace's own load).
    pub fn of(jobs: &[Job], procs: u32, asked: f64, compress: f64) -> Self {
        let first = jobs.iter().map(|j| j.submit).min();
        LoadFit {
            asked,
            raw: asked / compress,
            compress,
            offered: offered_load(jobs, procs),
            one_instant: first == jobs.iter().map(|j| j.submit).max(),
        }
    }
}

impl fmt::Display for LoadFit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.one_instant {
            write!(f, "every job arrives in the same second")?;
        } else {
            write!(f, "arrivals {}", describe_compression(self.compress))?;
        }
        write!(
            f,
            ": offered load {:.2} (the trace's own {:.2}",
            self.offered, self.raw
        )?;
        if format!("{:.2}", self.offered) != format!("{:.2}", self.asked) {
            write!(f, "; asked {:.2}", self.asked)?;
            if self.one_instant {
                write!(f, ", which no stretching reaches")?;
            }
        }
        write!(f, ")")
    }
}

/// "compressed 23.3 times" or "stretched 2.0 times": what dividing arrival times by
/// `compress` did.
pub fn describe_compression(compress: f64) -> String {
    if compress >= 1.0 {
        format!("compressed {compress:.1} times")
    } else {
        format!("stretched {:.1} times", 1.0 / compress)
    }
}

/// Gives trace jobs priorities (drawn with `weights` when every job is in queue 0, i.e.
/// the trace has none) and Lee utility functions whose deadlines are `lee.factor` times
/// each job's wait under EASY. Returns whether priorities were drawn.
pub fn value_trace_jobs(
    jobs: &mut [Job],
    procs: u32,
    lee: &LeeConfig,
    weights: &[f64; 3],
    ga: GaConfig,
) -> Result<bool, SimError> {
    let draw = jobs.iter().all(|j| j.queue == 0);
    if draw {
        lee::assign_priorities(jobs, weights, lee.seed);
    }
    let (_, res) = run(jobs, procs, "easy", 0, ga)?;
    let waits: Vec<i64> = jobs
        .iter()
        .zip(&res.outcomes)
        .map(|(j, o)| o.start - j.submit)
        .collect();
    lee::assign(jobs, &waits, lee);
    Ok(draw)
}
