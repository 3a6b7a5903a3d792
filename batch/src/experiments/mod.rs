//! The studies behind `docs/ECONOMICS.md`, as library functions so tests can run small
//! versions: sweeps of the synthetic generator (the batch paper's Figures 2 to 4), Lee's
//! trace study (her Tables 4.1 and 4.2) and Geweke's bid-class and price study. Also
//! Markdown and CSV rendering of the results ([`render`]); the trace study and the trace
//! preparation `marketsim run --swf` shares with it are in [`trace`].

pub mod render;
pub mod trace;

pub use render::{
    class_table, metrics_csv, metrics_csv_by_class, metrics_table, sweep_csv, sweep_table,
};
pub use trace::{StudyError, TraceRow, TraceStudy, trace_jobs, trace_study};

use crate::job::Job;
use crate::metrics::{Metrics, measure};
use crate::policy::{self, ga::GaConfig};
use crate::sim::{SimError, SimResult, simulate};
use crate::workload::synth::{SynthConfig, generate};

/// Runs policy `name` on `jobs`.
pub fn run(
    jobs: &[Job],
    procs: u32,
    name: &str,
    seed: u64,
    ga: GaConfig,
) -> Result<(Metrics, SimResult), SimError> {
    let mut p = policy::by_name(name, seed, ga).ok_or_else(|| SimError::Policy {
        policy: name.to_string(),
        now: 0,
        why: format!("unknown policy (known: {})", policy::NAMES.join(", ")),
    })?;
    let res = simulate(jobs, procs, p.as_mut())?;
    Ok((measure(jobs, &res), res))
}

/// A generator knob to sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    /// Ratio of high to low valuations.
    Spread,
    /// Mean delay tolerance (multiple of job length); smaller = more sensitive.
    Tolerance,
    /// Jobs per burst.
    Burst,
    /// Offered load.
    Load,
    /// Widest job.
    Width,
}

impl Param {
    /// Parses a name as used on the command line.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "spread" => Param::Spread,
            "tolerance" => Param::Tolerance,
            "burst" => Param::Burst,
            "load" => Param::Load,
            "width" => Param::Width,
            _ => return None,
        })
    }

    /// Axis label.
    pub fn label(self) -> &'static str {
        match self {
            Param::Spread => "valuation spread (high/low)",
            Param::Tolerance => "delay tolerance (x job length)",
            Param::Burst => "jobs per burst",
            Param::Load => "offered load",
            Param::Width => "widest job (processors)",
        }
    }

    /// `base` with this knob set to `v`.
    pub fn apply(self, base: &SynthConfig, v: f64) -> SynthConfig {
        let mut c = *base;
        match self {
            Param::Spread => c.spread = v,
            Param::Tolerance => c.tolerance = v,
            Param::Burst => c.burst = v as u32,
            Param::Load => c.load = v,
            Param::Width => c.max_width = v as u32,
        }
        c
    }
}

/// One point of a sweep: the knob's value and, per policy, metrics averaged over seeds.
#[derive(Debug, Clone)]
pub struct Point {
    /// Knob value.
    pub x: f64,
    /// `(policy, mean aggregate utility in credits, mean wait s, utilisation)`.
    pub per_policy: Vec<(String, f64, f64, f64)>,
}

impl Point {
    /// Mean aggregate utility (credits) of `policy`.
    pub fn utility(&self, policy: &str) -> f64 {
        self.per_policy
            .iter()
            .find(|p| p.0 == policy)
            .map(|p| p.1)
            .unwrap_or(f64::NAN)
    }
}

/// Sweeps `param` over `values` on workloads from `base`, averaging `seeds` workloads
/// (seeds `base.seed`, `base.seed + 1`, ...) per point. Checks every schedule.
pub fn sweep(
    base: &SynthConfig,
    param: Param,
    values: &[f64],
    policies: &[&str],
    seeds: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Point>, SimError> {
    let mut out = Vec::new();
    for (k, &v) in values.iter().enumerate() {
        progress(&format!(
            "[{}/{}] {} = {v}",
            k + 1,
            values.len(),
            param.label()
        ));
        let mut acc: Vec<(String, f64, f64, f64)> = policies
            .iter()
            .map(|p| (p.to_string(), 0.0, 0.0, 0.0))
            .collect();
        for s in 0..seeds.max(1) {
            let mut cfg = param.apply(base, v);
            cfg.seed = base.seed + s;
            let jobs = generate(&cfg);
            for (a, p) in acc.iter_mut().zip(policies) {
                let (m, res) = run(&jobs, cfg.procs, p, cfg.seed, GaConfig::default())?;
                crate::check::check_schedule(&jobs, &res).map_err(|why| SimError::Policy {
                    policy: p.to_string(),
                    now: 0,
                    why,
                })?;
                a.1 += m.utility as f64 / 1e6 / seeds as f64;
                a.2 += m.wait_mean / seeds as f64;
                a.3 += m.utilisation / seeds as f64;
            }
        }
        out.push(Point {
            x: v,
            per_policy: acc,
        });
    }
    Ok(out)
}

/// Geweke's study at one load: FIFO (EASY) and Vickrey metrics on the same workload.
pub fn geweke(base: &SynthConfig, load: f64) -> Result<(Metrics, Metrics), SimError> {
    let cfg = SynthConfig { load, ..*base };
    let jobs = generate(&cfg);
    let (fifo, _) = run(&jobs, cfg.procs, "fifo", cfg.seed, GaConfig::default())?;
    let (vick, res) = run(&jobs, cfg.procs, "vickrey", cfg.seed, GaConfig::default())?;
    crate::check::check_schedule(&jobs, &res).map_err(|why| SimError::Policy {
        policy: "vickrey".into(),
        now: 0,
        why,
    })?;
    Ok((fifo, vick))
}
