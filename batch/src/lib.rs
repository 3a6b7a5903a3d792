//! The batch market of rexec market: how a market should order a batch queue, after Chun
//! and Culler's market-based batch schedulers, Geweke's Vickrey economy and Lee's utility
//! functions with a genetic-algorithm scheduler. Pure library, no I/O except SWF text; the
//! `marketsim` binary drives it.
//!
//! Map of the crate:
//!
//! - [`utility`]: piecewise-linear utility functions of completion time, in micro-credits.
//! - [`job`]: a batch job and its time-varying bid.
//! - [`workload`]: the SWF reader and writer, the batch paper's synthetic generator and
//!   Lee's synthetic utility functions.
//! - [`policy`]: the [`policy::Policy`] trait (snapshot in, start / suspend decisions out)
//!   and every policy: FIFO, EASY, conservative, SJF, PRIOFIFO, FIRSTPRICE (with and
//!   without preemption), Vickrey, GA.
//! - [`sim`]: the event-driven simulator around a policy.
//! - [`check`]: an independent checker of finished schedules.
//! - [`schedule`]: the per-job schedule as CSV (`marketsim run --schedule`), and reading
//!   it back for the checker.
//! - [`metrics`]: aggregate utility, waits, slowdown, utilisation, revenue, price.
//! - [`experiments`]: the sweeps and trace studies that regenerate `docs/ECONOMICS.md`.
//! - [`report`]: `docs/ECONOMICS.md` itself: the studies run, their prose, charts and CSV.
//! - [`svg`]: line charts written as plain SVG.
//! - [`rng`]: the seeded generator behind every random choice.
//!
//! Plots are written by hand as SVG ([`svg`], about a hundred lines) rather than with a
//! plotting crate: the charts are simple line series, and `plotters` would add a
//! dependency tree larger than this crate for them.
//!
//! ```
//! use batch::policy::{firstprice::FirstPrice, Policy};
//! use batch::workload::synth::{generate, SynthConfig};
//! use batch::{metrics::measure, sim::simulate};
//! let jobs = generate(&SynthConfig { jobs: 200, ..SynthConfig::default() });
//! let res = simulate(&jobs, 32, &mut FirstPrice { preempt: false }).unwrap();
//! batch::check::check_schedule(&jobs, &res).unwrap();
//! assert!(measure(&jobs, &res).utility > 0);
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod check;
pub mod experiments;
pub mod job;
pub mod metrics;
pub mod policy;
pub mod report;
pub mod rng;
pub mod schedule;
pub mod sim;
pub mod svg;
pub mod utility;
pub mod workload;
