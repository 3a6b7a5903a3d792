//! rexecd, the per-node daemon of the rexec market (library part).
//!
//! Module map:
//! - [`cgroup`]: rexecd's parent cgroup and one child cgroup per job, on cgroup v1 or
//!   v2 (detected from mountinfo): creation, CPU weights from tickets, metering of CPU
//!   usage and runnable threads, teardown that kills everything in the job, and the
//!   start-up sweep of stale job cgroups.
//! - [`spawn`]: resolving the job's Unix user and building the command that starts the
//!   program as that user, inside the job cgroup, from an explicit environment.
//! - [`sys`]: the only module with `unsafe` code: newtyped ids, account lookups,
//!   signals, and the async-signal-safe work a child does between fork and exec.
#![deny(missing_docs)]

pub mod cgroup;
pub mod spawn;
#[allow(unsafe_code)]
pub mod sys;
