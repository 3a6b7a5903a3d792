//! `marketsim bench`: simulated jobs per second for each policy on a trace prepared as
//! Lee's study prepares it, as the batch section of `docs/BENCHMARKS.md`.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use batch::experiments::{self, TraceStudy, trace};
use batch::policy;

use crate::{read_swf, write};

/// Simulated jobs per second for every policy on the trace.
pub fn bench(swf: &Path, load: f64, out: Option<&Path>, names: &[String]) -> Result<()> {
    if !(load.is_finite() && load > 0.0) {
        bail!("--load must be a positive number, not {load}");
    }
    let trace = read_swf(swf)?;
    let st = TraceStudy {
        load,
        ..TraceStudy::default()
    };
    let (jobs, procs, compress) =
        experiments::trace_jobs(&trace, &st).context("preparing the trace")?;
    let fit = trace::LoadFit::of(&jobs, procs, load, compress);
    let mut md = String::new();
    let loadavg = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into());
    let _ = writeln!(md, "## batch: simulated jobs per second for each policy\n");
    let _ = writeln!(
        md,
        "Command: `cargo run --release -p batch --bin marketsim -- bench --swf {}` (prints this section; \
         `--out FILE` also writes it to FILE).\n\n\
         Workload: {} jobs of `{}` on {procs} processors, {fit}; Lee utility \
         functions, exact estimates. Time is the whole simulation (every decision and the simulator's bookkeeping), best of 3 \
         (GA: one run), with load average {loadavg} at the start (2 shared CPUs). Targets: FIFO, EASY, conservative, FIRSTPRICE, \
         Vickrey and vickrey-strict under 0.1 s for the whole workload; the GA within its per-decision budget ({:?}).\n",
        swf.display(),
        jobs.len(),
        swf.display(),
        st.ga.budget
    );
    let _ = writeln!(
        md,
        "| policy | seconds | jobs/s | decisions | mean decision (µs) | target | verdict |\n|---|---|---|---|---|---|---|"
    );
    for name in names {
        let name = &name.as_str();
        let reps = if *name == "ga" { 0 } else { 3 };
        let mut best = Duration::MAX;
        let mut decisions = 0;
        let mut budget_hits = 0;
        for _ in 0..reps {
            let mut p = policy::by_name(name, 1, st.ga).context("policy")?;
            let t = Instant::now();
            let res = batch::sim::simulate(&jobs, procs, p.as_mut())?;
            best = best.min(t.elapsed());
            decisions = res.decisions;
            let _ = &mut budget_hits;
        }
        if *name == "ga" {
            let mut g = batch::policy::ga::Ga::new(st.ga, 1);
            let t = Instant::now();
            let res = batch::sim::simulate(&jobs, procs, &mut g)?;
            best = best.min(t.elapsed());
            decisions = res.decisions;
            budget_hits = g.budget_hits;
        }
        let secs = best.as_secs_f64();
        let per = secs / decisions.max(1) as f64 * 1e6;
        let (target, ok) = match *name {
            "fifo" | "easy" | "conservative" | "firstprice" | "vickrey" | "vickrey-strict" => {
                ("< 0.1 s", secs < 0.1)
            }
            "ga" => (
                "each decision within budget",
                per <= st.ga.budget.as_secs_f64() * 1e6 * 1.2,
            ),
            _ => ("-", true),
        };
        let verdict = if target == "-" {
            "-".to_string()
        } else if ok {
            "met".to_string()
        } else {
            "**missed**".to_string()
        };
        let extra = if *name == "ga" {
            format!(" ({budget_hits} decisions hit the budget)")
        } else {
            String::new()
        };
        let line = format!(
            "| {name} | {secs:.3} | {:.0} | {decisions} | {per:.1} | {target} | {verdict}{extra} |",
            jobs.len() as f64 / secs
        );
        eprintln!("{line}");
        let _ = writeln!(md, "{line}");
    }
    print!("{md}");
    if let Some(o) = out {
        write(o, &md)?;
    }
    Ok(())
}
