//! `marketsim run`: one workload (an SWF trace valued with Lee's utility functions, or a
//! synthetic one), every asked policy simulated and checked, then the metrics table, the
//! waits and delays by bid class, and optionally the metrics CSV (with the classes' columns)
//! and the per-job schedule CSV.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use batch::experiments::{self, trace};
use batch::job::Job;
use batch::policy::ga::GaConfig;
use batch::workload::lee::LeeConfig;
use batch::workload::swf::{self, ToJobs};
use batch::workload::synth::generate;

use clap::Args;

use crate::{Synth, policies, read_swf, write};

/// What `run` is asked.
#[derive(Args)]
pub struct RunArgs {
    /// Policies, comma-separated, or "all".
    #[arg(long, default_value = "all")]
    policy: String,
    /// SWF trace (otherwise a synthetic workload); its jobs get Lee utility functions
    /// drawn with --seed.
    #[arg(long)]
    swf: Option<PathBuf>,
    /// With --swf: divide submit times by this to raise the load.
    #[arg(long, default_value_t = 1.0)]
    compress: f64,
    /// Write the metrics as CSV here, one row per policy, with each bid class's jobs, mean
    /// and median wait and mean delay as classC_* columns.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write the per-job schedule here as CSV, one row per run segment:
    /// policy,job,submit,start,stop,width,charged (seconds; the job's charge in
    /// micro-credits on its completing segment, 0 on earlier suspended ones).
    #[arg(long)]
    schedule: Option<PathBuf>,
    /// GA wall-clock budget per decision, milliseconds.
    #[arg(long, default_value_t = 50)]
    ga_budget_ms: u64,
    #[command(flatten)]
    synth: Synth,
}

/// The jobs and machine size of an SWF trace, valued with Lee's utility functions.
fn trace_workload(path: &Path, a: &RunArgs, ga: GaConfig) -> Result<(Vec<Job>, u32)> {
    let f = read_swf(path)?;
    let procs = swf::max_procs(&f).unwrap_or(a.synth.procs);
    let how = ToJobs {
        procs,
        pad: a.synth.pad,
        compress: a.compress,
    };
    let (mut jobs, skipped) = swf::to_jobs(&f, how).with_context(|| path.display().to_string())?;
    eprintln!(
        "{}: {} jobs ({skipped} records without a runtime or width skipped) on {procs} processors, \
         arrivals {} (offered load {:.2})",
        path.display(),
        jobs.len(),
        trace::describe_compression(a.compress.max(1e-9)),
        trace::offered_load(&jobs, procs)
    );
    let lee = LeeConfig {
        seed: a.synth.seed,
        ..LeeConfig::default()
    };
    let weights = experiments::TraceStudy::default().priority_weights;
    let drawn = trace::value_trace_jobs(&mut jobs, procs, &lee, &weights, ga)?;
    eprintln!(
        "utilities: Lee's generator, seed {} (--seed), deadline {} times each job's wait under EASY; \
         priorities {}",
        lee.seed,
        lee.factor,
        if drawn {
            "drawn 20% high, 50% normal, 30% low (the trace has none)"
        } else {
            "from the trace's queue field"
        }
    );
    Ok((jobs, procs))
}

pub fn run(a: &RunArgs) -> Result<()> {
    let names = policies(&a.policy)?;
    let ga = GaConfig {
        budget: Duration::from_millis(a.ga_budget_ms),
        ..GaConfig::default()
    };
    let (jobs, procs) = match &a.swf {
        Some(p) => trace_workload(p, a, ga)?,
        None => {
            let cfg = a.synth.config();
            eprintln!("synthetic workload, seed {}: {cfg:?}", cfg.seed);
            (generate(&cfg), cfg.procs)
        }
    };
    let mut ms = Vec::new();
    let mut schedule = format!("{}\n", batch::schedule::HEADER);
    for (k, n) in names.iter().enumerate() {
        eprintln!("[{}/{}] {n}", k + 1, names.len());
        let (m, res) = experiments::run(&jobs, procs, n, a.synth.seed, ga)?;
        batch::check::check_schedule(&jobs, &res)
            .map_err(|e| anyhow::anyhow!("{n}: schedule check failed: {e}"))?;
        schedule.push_str(&batch::schedule::rows(&jobs, &res));
        ms.push(m);
    }
    print!("{}", experiments::metrics_table(&ms));
    print!(
        "\nWait and delay by bid class (class 0 bids highest):\n\n{}",
        experiments::class_table(&ms)
    );
    if let Some(c) = &a.csv {
        write(c, &experiments::metrics_csv_by_class("run", &ms))?;
    }
    if let Some(s) = &a.schedule {
        write(s, &schedule)?;
    }
    Ok(())
}
