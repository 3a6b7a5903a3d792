//! `docs/ECONOMICS.md` as a library: [`study`] runs the experiments (the batch paper's
//! sweeps, Lee's trace study, Geweke's bid classes and price), [`prose`] writes the
//! Markdown with the verdicts computed from the numbers, [`charts`] draws the SVG plots;
//! the CSV files come from [`crate::experiments::render`] and [`study::geweke_csv`].
//! `marketsim doc` only runs these and writes the files.

pub mod charts;
pub mod prose;
pub mod study;
