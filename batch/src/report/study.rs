//! The experiments behind `docs/ECONOMICS.md`, run and collected for the prose, charts
//! and CSV: the batch paper's five sweeps (Chun and Culler), Lee's trace study, and
//! Geweke's delays by bid class and price against load, sequential and parallel.

use std::fmt::Write;

use crate::experiments::trace::LoadFit;
use crate::experiments::{
    self, Param, Point, StudyError, TraceRow, TraceStudy, trace_jobs, trace_study,
};
use crate::metrics::Metrics;
use crate::sim::SimError;
use crate::workload::swf::Swf;
use crate::workload::synth::SynthConfig;

/// The policies of the sweeps.
pub const SWEEP_POLICIES: [&str; 4] = ["sjf", "priofifo", "firstprice", "firstprice-preempt"];
/// The policies of the trace study, in the order of Lee's ranking.
pub const LEE_POLICIES: [&str; 4] = ["ga", "priofifo", "easy", "conservative"];
/// The loads of Geweke's study.
pub const GEWEKE_LOADS: [f64; 6] = [0.5, 0.7, 0.8, 0.9, 1.0, 1.1];

/// One sweep of the batch paper.
#[derive(Debug, Clone)]
pub struct SweepSpec {
    /// Short name (file names, `--param`).
    pub key: &'static str,
    /// The paper's figure it corresponds to.
    pub figure: &'static str,
    /// The knob.
    pub param: Param,
    /// Its values.
    pub values: &'static [f64],
}

/// The sweeps' base workload and seeds per point.
pub fn chun_base(quick: bool) -> (SynthConfig, u64) {
    let base = SynthConfig {
        jobs: if quick { 500 } else { 2000 },
        procs: 32,
        load: 0.9,
        burst: 32,
        max_width: 1,
        spread: 100.0,
        tolerance: 1.0,
        seed: 1,
        ..SynthConfig::default()
    };
    (base, if quick { 1 } else { 3 })
}

/// The five sweeps of the batch paper's Figures 2 to 4.
pub fn chun_sweeps() -> Vec<SweepSpec> {
    let s = |key, figure, param, values| SweepSpec {
        key,
        figure,
        param,
        values,
    };
    vec![
        s(
            "spread",
            "2a",
            Param::Spread,
            &[1.0, 3.0, 10.0, 30.0, 100.0, 300.0],
        ),
        s(
            "tolerance",
            "2b, 4",
            Param::Tolerance,
            &[8.0, 4.0, 2.0, 1.0, 0.5, 0.25],
        ),
        s(
            "burst",
            "2c, 3 (sequential)",
            Param::Burst,
            &[1.0, 4.0, 8.0, 16.0, 32.0, 64.0],
        ),
        s("load", "2d", Param::Load, &[0.5, 0.6, 0.7, 0.8, 0.9, 1.0]),
        s(
            "width",
            "2e, 3 (parallel)",
            Param::Width,
            &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
        ),
    ]
}

/// Runs one sweep on `base`.
pub fn run_sweep(
    spec: &SweepSpec,
    base: &SynthConfig,
    seeds: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Point>, SimError> {
    experiments::sweep(
        base,
        spec.param,
        spec.values,
        &SWEEP_POLICIES,
        seeds,
        progress,
    )
}

/// Lee's trace study as run.
#[derive(Debug, Clone)]
pub struct LeeRun {
    /// Its options.
    pub st: TraceStudy,
    /// Jobs simulated.
    pub jobs: usize,
    /// Processors.
    pub procs: u32,
    /// How its arrivals were fitted to the study's load, and the load they offer.
    pub load: LoadFit,
    /// One row per estimate padding.
    pub rows: Vec<TraceRow>,
}

/// Runs Lee's study on `trace` (its first 2000 jobs when `quick`).
pub fn run_lee(
    trace: &Swf,
    quick: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<LeeRun, StudyError> {
    let st = TraceStudy {
        jobs: if quick { 2000 } else { 0 },
        ..TraceStudy::default()
    };
    let (jobs, procs, compress) = trace_jobs(trace, &st)?;
    let rows = trace_study(&jobs, procs, &st, &LEE_POLICIES, progress)?;
    Ok(LeeRun {
        st,
        jobs: jobs.len(),
        procs,
        load: LoadFit::of(&jobs, procs, st.load, compress),
        rows,
    })
}

/// Geweke's study at one load.
#[derive(Debug, Clone, Copy)]
pub struct GewekeRow {
    /// Offered load.
    pub load: f64,
    /// Mean delays (s): FIFO high and low bidders, Vickrey high and low bidders.
    pub fifo_high: f64,
    /// See `fifo_high`.
    pub fifo_low: f64,
    /// See `fifo_high`.
    pub vickrey_high: f64,
    /// See `fifo_high`.
    pub vickrey_low: f64,
    /// Vickrey's time-weighted mean price, credits per processor-hour.
    pub price: f64,
    /// Vickrey's suspensions.
    pub suspensions: u64,
}

/// Geweke's study for one job width.
#[derive(Debug, Clone)]
pub struct GewekeRun {
    /// The workload at every load.
    pub base: SynthConfig,
    /// One row per load.
    pub rows: Vec<GewekeRow>,
}

fn delay(m: &Metrics, class: u8) -> f64 {
    m.by_class
        .iter()
        .find(|x| x.class == class)
        .map(|x| x.delay_mean)
        .unwrap_or(0.0)
}

/// Runs Geweke's study for jobs 1 to `width` processors wide.
pub fn run_geweke(
    width: u32,
    quick: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<GewekeRun, SimError> {
    let base = SynthConfig {
        jobs: if quick { 500 } else { 2000 },
        procs: 32,
        burst: 8,
        max_width: width,
        tolerance: 4.0,
        seed: 1,
        ..SynthConfig::default()
    };
    let mut rows = Vec::new();
    for load in GEWEKE_LOADS {
        progress(&format!("load {load}"));
        let (f, v) = experiments::geweke(&base, load)?;
        rows.push(GewekeRow {
            load,
            fifo_high: delay(&f, 0),
            fifo_low: delay(&f, 1),
            vickrey_high: delay(&v, 0),
            vickrey_low: delay(&v, 1),
            price: v.price_mean.unwrap_or(0.0) / 1e6,
            suspensions: v.preemptions,
        });
    }
    Ok(GewekeRun { base, rows })
}

/// CSV of Geweke's study, every width.
pub fn geweke_csv(runs: &[GewekeRun]) -> String {
    let mut s = String::from(
        "max_width,load,fifo_delay_high,fifo_delay_low,vickrey_delay_high,vickrey_delay_low,vickrey_price,vickrey_suspensions\n",
    );
    for run in runs {
        for r in &run.rows {
            let _ = writeln!(
                s,
                "{},{},{:.1},{:.1},{:.1},{:.1},{:.4},{}",
                run.base.max_width,
                r.load,
                r.fifo_high,
                r.fifo_low,
                r.vickrey_high,
                r.vickrey_low,
                r.price,
                r.suspensions
            );
        }
    }
    s
}

/// CSV of the trace study, every estimate padding.
pub fn lee_csv(run: &LeeRun) -> String {
    run.rows
        .iter()
        .enumerate()
        .map(|(k, row)| experiments::metrics_csv(&row.estimates, &row.metrics, k == 0))
        .collect()
}
