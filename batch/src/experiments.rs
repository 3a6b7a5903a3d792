//! The studies behind `docs/ECONOMICS.md`, as library functions so tests can run small
//! versions: sweeps of the synthetic generator (the batch paper's Figures 2 to 4), Lee's
//! trace study (her Tables 4.1 and 4.2) and Geweke's bid-class and price study. Also
//! Markdown and CSV rendering of the results.

use std::fmt::Write;

use crate::job::Job;
use crate::metrics::{Metrics, measure};
use crate::policy::{self, ga::GaConfig};
use crate::sim::{SimError, SimResult, simulate};
use crate::workload::lee::{self, LeeConfig};
use crate::workload::swf::{self, Swf, ToJobs};
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

/// CSV of a sweep: `x,policy,utility_credits,wait_mean_s,utilisation`.
pub fn sweep_csv(points: &[Point]) -> String {
    let mut s = String::from("x,policy,utility_credits,wait_mean_s,utilisation\n");
    for p in points {
        for (name, u, w, util) in &p.per_policy {
            let _ = writeln!(s, "{},{name},{u:.3},{w:.1},{util:.4}", p.x);
        }
    }
    s
}

/// Markdown table of a sweep: utility per policy and `num/den` ratios.
pub fn sweep_table(points: &[Point], label: &str, ratios: &[(&str, &str)]) -> String {
    let mut s = String::new();
    let names: Vec<&str> = points
        .first()
        .map(|p| p.per_policy.iter().map(|x| x.0.as_str()).collect())
        .unwrap_or_default();
    let _ = write!(s, "| {label} |");
    for n in &names {
        let _ = write!(s, " {n} |");
    }
    for (a, b) in ratios {
        let _ = write!(s, " {a}/{b} |");
    }
    s.push('\n');
    s.push_str(&"|---".repeat(1 + names.len() + ratios.len()));
    s.push_str("|\n");
    for p in points {
        let _ = write!(s, "| {} |", p.x);
        for n in &names {
            let _ = write!(s, " {:.0} |", p.utility(n));
        }
        for (a, b) in ratios {
            let _ = write!(s, " {:.2} |", p.utility(a) / p.utility(b));
        }
        s.push('\n');
    }
    s
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
    /// Offered load to compress arrivals to.
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

/// Jobs of the trace study: compressed to `load`, priorities drawn, Lee utilities
/// generated from each job's wait under EASY with exact estimates (the trace has no waits).
/// Returns the jobs with exact estimates, the machine size and the compression factor.
pub fn trace_jobs(trace: &Swf, st: &TraceStudy) -> Result<(Vec<Job>, u32, f64), SimError> {
    let procs = swf::max_procs(trace).unwrap_or(256);
    let mut t = trace.clone();
    if st.jobs > 0 {
        t.records.truncate(st.jobs);
    }
    let how = ToJobs {
        procs,
        pad: 1.0,
        compress: 1.0,
    };
    let (raw, _) = swf::to_jobs(&t, how);
    let work: f64 = raw.iter().map(|j| j.work() as f64).sum();
    let first = raw.iter().map(|j| j.submit).min().unwrap_or(0);
    let last = raw.iter().map(|j| j.submit).max().unwrap_or(1);
    let offered = work / (procs as f64 * (last - first).max(1) as f64);
    let compress = (st.load / offered).max(1.0);
    let (mut jobs, _) = swf::to_jobs(&t, ToJobs { compress, ..how });
    for j in &mut jobs {
        j.estimate = j.runtime;
    }
    lee::assign_priorities(&mut jobs, &st.priority_weights, st.lee.seed);
    let (_, res) = run(&jobs, procs, "easy", 0, st.ga)?;
    let waits: Vec<i64> = jobs
        .iter()
        .zip(&res.outcomes)
        .map(|(j, o)| o.start - j.submit)
        .collect();
    lee::assign(&mut jobs, &waits, &st.lee);
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

/// Markdown table of metrics, one row per policy.
pub fn metrics_table(ms: &[Metrics]) -> String {
    let mut s = String::from(
        "| policy | aggregate utility (credits) | % of max | mean wait (s) | p50 | p90 | p99 | max wait | bounded slowdown | utilisation | revenue (credits) | mean price (credits/proc-h) | preemptions |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for m in ms {
        let _ = writeln!(
            s,
            "| {} | {:.4e} | {:.1}% | {:.0} | {} | {} | {} | {} | {:.2} | {:.3} | {:.0} | {} | {} |",
            m.policy,
            m.utility as f64 / 1e6,
            100.0 * m.utility as f64 / (m.utility_max as f64).max(1.0),
            m.wait_mean,
            m.wait_p50,
            m.wait_p90,
            m.wait_p99,
            m.wait_max,
            m.bounded_slowdown,
            m.utilisation,
            m.revenue as f64 / 1e6,
            m.price_mean
                .map(|p| format!("{:.3}", p / 1e6))
                .unwrap_or_else(|| "-".into()),
            m.preemptions
        );
    }
    s
}

/// CSV of metrics, one row per policy, with a leading label column.
pub fn metrics_csv(label: &str, ms: &[Metrics], header: bool) -> String {
    let mut s = String::new();
    if header {
        s.push_str("label,policy,utility_credits,utility_max_credits,wait_mean_s,wait_p50_s,wait_p90_s,wait_p99_s,wait_max_s,bounded_slowdown,utilisation,revenue_credits,price_mean_credits,preemptions\n");
    }
    for m in ms {
        let _ = writeln!(
            s,
            "{label},{},{:.3},{:.3},{:.1},{},{},{},{},{:.3},{:.4},{:.3},{},{}",
            m.policy,
            m.utility as f64 / 1e6,
            m.utility_max as f64 / 1e6,
            m.wait_mean,
            m.wait_p50,
            m.wait_p90,
            m.wait_p99,
            m.wait_max,
            m.bounded_slowdown,
            m.utilisation,
            m.revenue as f64 / 1e6,
            m.price_mean
                .map(|p| format!("{:.4}", p / 1e6))
                .unwrap_or_default(),
            m.preemptions
        );
    }
    s
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
