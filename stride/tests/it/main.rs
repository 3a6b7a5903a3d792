//! Property and scenario tests of the stride crate, compiled as one test binary.

mod bound;
mod demo;
mod figure4;
mod market;
mod sched;
