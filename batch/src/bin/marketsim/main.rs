//! `marketsim`: compare batch queue policies on a workload before choosing one.
//!
//! `run` simulates policies on an SWF trace or a synthetic workload and prints a table
//! (and CSV, and the per-job schedule); `sweep` varies one generator knob and writes a table, CSV and SVG plot;
//! `doc` regenerates `docs/ECONOMICS.md` with every study; `bench` measures simulated jobs
//! per second and writes `docs/BENCHMARKS.md`. Progress goes to stderr. An error is one
//! line on stderr and exit status 1, never a stack trace.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use batch::experiments::{self, Param};
use batch::workload::swf;
use batch::workload::synth::SynthConfig;
use clap::{Args, Parser, Subcommand};

mod bench;
mod doc;
mod run;

#[derive(Parser)]
#[command(
    name = "marketsim",
    about = "Simulate batch queue policies: FIFO, EASY, conservative, SJF, PRIOFIFO, FIRSTPRICE, Vickrey, GA"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args, Clone)]
pub(crate) struct Synth {
    /// Jobs to generate.
    #[arg(long, default_value_t = 2000)]
    jobs: usize,
    /// Processors.
    #[arg(long, default_value_t = 32)]
    procs: u32,
    /// Offered load.
    #[arg(long, default_value_t = 0.9)]
    load: f64,
    /// Jobs per burst.
    #[arg(long, default_value_t = 8)]
    burst: u32,
    /// Widest job (1 = sequential).
    #[arg(long, default_value_t = 1)]
    max_width: u32,
    /// High/low valuation ratio.
    #[arg(long, default_value_t = 100.0)]
    spread: f64,
    /// Mean delay tolerance, multiple of job length.
    #[arg(long, default_value_t = 2.0)]
    tolerance: f64,
    /// Estimate padding factor.
    #[arg(long, default_value_t = 1.0)]
    pad: f64,
    /// Seed (printed).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl Synth {
    fn config(&self) -> SynthConfig {
        SynthConfig {
            jobs: self.jobs,
            procs: self.procs,
            load: self.load,
            burst: self.burst,
            max_width: self.max_width,
            spread: self.spread,
            tolerance: self.tolerance,
            pad: self.pad,
            seed: self.seed,
            ..SynthConfig::default()
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Run policies on one workload and print their metrics.
    Run(run::RunArgs),
    /// Sweep one generator knob; print a table, write CSV and an SVG plot.
    Sweep {
        /// spread | tolerance | burst | load | width
        #[arg(long)]
        param: String,
        /// Values, comma-separated.
        #[arg(long, value_delimiter = ',')]
        values: Vec<f64>,
        /// Policies, comma-separated.
        #[arg(long, default_value = "sjf,priofifo,firstprice,firstprice-preempt")]
        policies: String,
        /// Workloads (seeds) averaged per point.
        #[arg(long, default_value_t = 3)]
        seeds: u64,
        /// Output directory for CSV and SVG.
        #[arg(long, default_value = ".")]
        out: PathBuf,
        #[command(flatten)]
        synth: Synth,
    },
    /// Regenerate docs/ECONOMICS.md, its CSV files and plots.
    Doc {
        /// The docs directory.
        #[arg(long, default_value = "docs")]
        out: PathBuf,
        /// The SWF trace for Lee's study.
        #[arg(long)]
        swf: PathBuf,
        /// Smaller workloads, for a quick look (the committed doc is not quick).
        #[arg(long)]
        quick: bool,
    },
    /// Measure simulated jobs per second for each policy on an SWF trace.
    Bench {
        /// SWF trace.
        #[arg(long)]
        swf: PathBuf,
        /// Offered load to compress the trace to.
        #[arg(long, default_value_t = 0.85)]
        load: f64,
        /// Write the Markdown report here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Policies, comma-separated, or "all".
        #[arg(long, default_value = "all")]
        policies: String,
    },
}

pub(crate) fn policies(list: &str) -> Result<Vec<String>> {
    let names: Vec<String> = if list == "all" {
        batch::policy::NAMES.iter().map(|s| s.to_string()).collect()
    } else {
        list.split(',').map(|s| s.trim().to_string()).collect()
    };
    for n in &names {
        if !batch::policy::NAMES.contains(&n.as_str()) {
            bail!(
                "unknown policy {n:?}; known: {}",
                batch::policy::NAMES.join(", ")
            );
        }
    }
    Ok(names)
}

/// Reads an SWF file; a malformed file is one error line naming the file, the first bad
/// line and how many more there are.
pub fn read_swf(path: &Path) -> Result<swf::Swf> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    swf::parse(&text).map_err(|e| {
        let more = match e.0.len() {
            1 => String::new(),
            n => format!(
                " (and {} more malformed lines: {})",
                n - 1,
                e.0.iter()
                    .skip(1)
                    .take(10)
                    .map(|l| l.line.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
                    + if n > 11 { ", ..." } else { "" }
            ),
        };
        anyhow::anyhow!("{}: {}{more}", path.display(), e.0[0])
    })
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn main() -> ExitCode {
    match dispatch(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Printed here rather than returned, so RUST_BACKTRACE never adds a stack trace
            // to an input error.
            eprintln!("marketsim: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Run(a) => run::run(&a)?,
        Cmd::Sweep {
            param,
            values,
            policies: list,
            seeds,
            out,
            synth,
        } => {
            let p = Param::parse(&param).with_context(|| {
                format!("unknown --param {param:?}; use spread, tolerance, burst, load or width")
            })?;
            if values.is_empty() {
                bail!("--values needs at least one value");
            }
            let names = policies(&list)?;
            let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
            let base = synth.config();
            eprintln!("sweep {param} seeds {}..{}", base.seed, base.seed + seeds);
            let pts =
                experiments::sweep(&base, p, &values, &refs, seeds, &mut |m| eprintln!("{m}"))?;
            let ratios: Vec<(&str, &str)> = refs.iter().skip(1).map(|n| (*n, refs[0])).collect();
            print!("{}", experiments::sweep_table(&pts, p.label(), &ratios));
            write(
                &out.join(format!("sweep-{param}.csv")),
                &experiments::sweep_csv(&pts),
            )?;
            write(
                &out.join(format!("sweep-{param}.svg")),
                &batch::report::charts::sweep_chart(
                    &pts,
                    &format!("Aggregate utility vs {}", p.label()),
                    p.label(),
                    true,
                ),
            )?;
        }
        Cmd::Doc { out, swf, quick } => doc::generate(&out, &swf, quick)?,
        Cmd::Bench {
            swf: path,
            load,
            out,
            policies: list,
        } => bench::bench(&path, load, out.as_deref(), &policies(&list)?)?,
    }
    Ok(())
}
