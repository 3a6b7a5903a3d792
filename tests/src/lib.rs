//! Support for the end-to-end scenarios in `tests/e2e/`: real `rexecd`
//! daemons on loopback, the real `rexec` client, and ways to look at the
//! machine from outside.
//!
//! Module map:
//! - [`batch`]: the batch market: nodes, accountd, vexecd and a real
//!   `batchd`; signing and submitting jobs as the test user.
//! - [`chromium`]: headless Chromium loading a page: its DOM after the page's
//!   timers ran, or a screenshot.
//! - [`cluster`]: [`cluster::Cluster`], a PKI plus N daemons and a client
//!   configuration; stops the daemons and checks cgroups on drop.
//! - [`fault`]: the whole cluster on network-namespace hosts (two control
//!   hosts, a database host, three nodes, a client) under faults, with users
//!   at work, recovery times and the checks after each fault.
//! - [`market`]: a real accountd, nodes configured to charge through it,
//!   and reading balances, history, `rexec jobs` and `rexec -v` as users do.
//! - [`netns`]: hosts in network namespaces on a bridge (multi-host tests).
//! - [`node`]: one `rexecd` process: flags, log, ready file, start-up.
//! - [`selectors`]: nodes announcing on loopback multicast, real vexecd
//!   selectors, client configurations that name selectors or only the group.
//! - [`postgres`]: a real PostgreSQL server in a temporary directory (the
//!   ledger's second backend; `testhost::postgres`, re-exported).
//! - [`prometheus`]: a real Prometheus server scraping the daemons, and PromQL
//!   queries through its HTTP API.
//! - [`rexec`]: running the `rexec` binary and collecting what it prints.
//! - [`procs`]: processes found by an environment mark, their states, and
//!   job cgroup directories.
//! - [`proxy`]: a TCP relay that delays connections (a slow node).
//! - [`pty`]: running `rexec` on a real pseudo-terminal (raw mode, resize, typing).
//! - [`stop`]: a file that ends jobs once a scenario has checked them.
//! - [`ssh`]: a throwaway OpenSSH server on loopback (benchmarks against ssh).
//! - [`pattern`]: a deterministic binary stream checked byte for byte as it
//!   arrives (the `rexec-testgen` binary writes it on the nodes).
//!
//! The daemons and the client are located next to the test executable
//! (`target/debug/`); run `cargo build --workspace --bins` before
//! `cargo test -p rexec-tests`.
//!
//! ```
//! let data = rexec_tests::pattern::stream(1, 1000);
//! let mut check = rexec_tests::pattern::Verifier::new(1);
//! check.feed(&data);
//! assert_eq!((check.len(), check.mismatch), (1000, None));
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod accountd;
pub mod batch;
pub mod chromium;
pub mod cluster;
pub mod fault;
pub mod market;
pub mod netns;
pub mod node;
pub mod pattern;
pub mod procs;
pub mod prometheus;
pub mod proxy;
pub mod pty;
pub mod ready;
pub mod rexec;
pub mod selectors;
pub mod ssh;
pub mod stop;

pub use testhost::postgres;

pub use cluster::can_run;

use std::time::{Duration, Instant};

/// Poll `cond` until it holds or `limit` passes ([`testhost::wait::until`]);
/// returns how long it took, or `None` when it never held.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    testhost::wait::until(limit, || cond().then(|| start.elapsed()))
}
