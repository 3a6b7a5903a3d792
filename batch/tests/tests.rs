//! The batch crate's integration tests, compiled as one binary.

mod cli;
mod policies;
mod properties;
mod swf;
mod utility;
mod workloads;
