//! batchd: the live batch queue of the rexec market. Users submit jobs they
//! signed; the queue keeps them durably, runs the batch market's policies (the
//! simulator's `batch::policy`, unchanged) over the processors the selectors'
//! nodes give it, starts each job's ranks on rexecd with `LaunchSigned`, keeps
//! their output, and charges their owners through accountd.
//!
//! Module map:
//! - [`config`]: the TOML file and flags.
//! - [`store`]: the SQLite file (WAL, `synchronous = FULL`) or the PostgreSQL
//!   database, and its group-committing writer.
//! - [`lease`]: which of several batchd on one database leads (decides and
//!   launches), and the epoch that fences a replaced leader.
//! - [`queue`]: the live queue in memory and the clients' view of it;
//!   [`arrays`]: job arrays in it.
//! - [`server`]: the TLS accept loop; [`ops`]: what each request does and who
//!   may ask; [`verify`]: checking a signed job at submission.
//! - [`market`]: the nodes and processors, from the selectors.
//! - [`sched`]: the decision loop (snapshot, policy, starts, suspensions,
//!   charges, failures, recovery after a restart); [`rank`]: one rank's
//!   session with its node.
//! - [`history`]: the record of ended jobs (`rexec history`) and the utility
//!   each achieved.
//! - [`limit`]: a job's time and memory limits, as the nodes report them.
//! - [`ledger`]: balances and debits at accountd.
//! - [`metrics`]: Prometheus metrics (`[metrics] listen`).
//! - [`start`]: putting it together (the binary's `run`).
//!
//! ```
//! use proto::batch::{JobSpec, Worth};
//! let spec = JobSpec { id: proto::node::JobId(1), user: "alice".into(), argv: vec!["true".into()],
//!     env: vec![], cwd: None, width: 4, length_s: 600, worth: Worth::Rate(2_000_000),
//!     priority: 0, max_attempts: 1, signed_at: 0, expires_at: 1, array: None, after: vec![],
//!     options: Default::default() };
//! // 2 credits per CPU-minute on 4 CPUs for 10 minutes.
//! assert_eq!(batchd::queue::cost_estimate(&spec), 80_000_000);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod arrays;
pub mod config;
pub mod history;
pub mod journal;
pub mod lease;
pub mod ledger;
pub mod limit;
pub mod market;
pub mod metrics;
pub mod ops;
pub mod queue;
pub mod rank;
pub mod sched;
pub mod server;
pub mod start;
pub mod store;
pub mod terms;
pub mod verify;

use std::sync::{Mutex, MutexGuard};

use tokio::sync::mpsc;
use tokio_rustls::TlsConnector;

/// What the server, the scheduler and the rank sessions share.
pub struct Shared {
    /// The configuration.
    pub cfg: config::Config,
    /// The live queue.
    pub queue: Mutex<queue::Queue>,
    /// The store's writer.
    pub store: store::Store,
    /// The store's reader (output).
    pub reader: store::Reader,
    /// accountd.
    pub ledger: ledger::Ledger,
    /// Recorded debits, to be delivered to accountd.
    pub journal: journal::Sender,
    /// The nodes, as last learnt.
    pub market: Mutex<market::Market>,
    /// TLS for dialling nodes, selectors and accountd.
    pub connector: TlsConnector,
    /// What signed jobs are checked against.
    pub verifier: verify::Verifier,
    /// Requests to the scheduler (cancels).
    pub commands: mpsc::UnboundedSender<sched::Command>,
    /// What the metrics count as it happens.
    pub metrics: metrics::Recorder,
    /// Whether this instance leads the queue, and at which epoch.
    pub lease: lease::Lease,
}

impl Shared {
    /// The queue, locked (a poisoned lock is taken over: the queue's data
    /// stays consistent between statements).
    pub fn lock_queue(&self) -> MutexGuard<'_, queue::Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The nodes, locked.
    pub fn lock_market(&self) -> MutexGuard<'_, market::Market> {
        self.market.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The processors the market gives the queue now.
    pub fn market_processors(&self) -> u32 {
        self.lock_market().procs()
    }
}

/// Now, UTC milliseconds since the Unix epoch.
pub fn unix_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
