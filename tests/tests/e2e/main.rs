//! End-to-end scenarios: real `rexecd` processes on loopback (several nodes,
//! each with its own port and cgroup parent) driven by the real `rexec`
//! binary, as a user at a shell would drive them.
//!
//! Build every binary first: `cargo build --workspace --bins`, then
//! `cargo test -p rexec-tests`.

mod admin;
mod bad_input;
mod batch_agree;
mod batch_arrays;
mod batch_ceiling;
mod batch_cli;
mod batch_ends;
mod batch_failures;
mod batch_lease;
mod batch_queue;
mod batch_run;
mod discovery;
mod discovery_proof;
mod exit_codes;
mod failures;
mod fault;
mod interrupt;
mod job_control;
mod launch;
mod ledger_ha;
mod ledger_pg;
mod ledger_pg_crash;
mod ledger_pg_failover;
mod limits;
mod market_ceiling;
mod market_charges;
mod market_checks;
mod market_crash;
mod market_discovery;
mod market_dry;
mod market_estimate;
mod market_figure4;
mod market_ledger;
mod market_page;
mod market_project_ceiling;
mod market_projects;
mod metrics;
mod metrics_cost;
mod mpi;
mod mpi_agent;
mod multihost;
mod revocation;
mod select;
mod signed_jobs;
mod skip;
mod stats;
mod stdin_full;
mod streams;
mod terminal;
