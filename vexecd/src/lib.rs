//! vexecd, the selector: it listens to the announcements of nodes, keeps the
//! ones heard recently, and answers "select N nodes by POLICY". The table,
//! policies and simulation touch no socket and read no clock: the caller
//! feeds them datagrams and passes the time in. The [`daemon`] (the `vexecd`
//! binary) is the part that does I/O; the client of a selector is
//! `clients::selector`.
//!
//! Module map:
//! - [`clock`] and [`profile`] (from the `discovery` crate, which nodes
//!   share): the time a caller passes in, and the availability history after
//!   HP's Ring Leader with its compact summary and completion prediction.
//! - [`table`]: the node table: ingests datagrams, drops and counts bad,
//!   foreign and stale ones, forgets nodes not heard within the window.
//! - [`select`]: the select request, its typed errors, and the ranking
//!   entry point over the table.
//! - [`policy`]: one trait, one small module per selection policy.
//! - [`rng`]: the injectable, seedable random source of the `random` policy.
//! - [`sim`]: a synthetic week of desktop availability and the placement
//!   simulation comparing policies by completion ratio.
//! - [`daemon`]: the `vexecd` daemon: config, announcement receiver, the
//!   selector protocol over mutual TLS, counters.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use proto::announce::{Announcement, Kind, NodeStatus};
//! use vexecd::{clock::Now, select::SelectRequest, table::{NodeTable, TableConfig}, rng::{SeedableRng, SplitMix64}};
//!
//! let mut table = NodeTable::new(TableConfig::default());
//! let now = Now { instant: Instant::now(), unix_secs: 1_700_000_000 };
//! for (i, price) in [(1, 5_000_000), (2, 1_000_000), (3, 3_000_000)] {
//!     let a = Announcement {
//!         cluster: proto::announce::DEFAULT_CLUSTER.into(),
//!         summary: None,
//!         name: format!("node{i}"),
//!         addr: format!("10.0.0.{i}:7400").parse().unwrap(),
//!         incarnation: 1, seq: 0, period_ms: 2000,
//!         kind: Kind::Node(NodeStatus { cpus: 4, price, charging: 0, contended: false, running_jobs: 1, runnable: 1, load_milli: 1000 , idle_milli: 4000, free_mem_mib: 8192 }),
//!     };
//!     table.ingest(&a.encode().unwrap(), None, now.instant);
//! }
//! let picked = table
//!     .select(&SelectRequest::new(2, "lowest-price".parse().unwrap()), now, &mut SplitMix64::seed_from_u64(7))
//!     .unwrap();
//! let names: Vec<_> = picked.iter().map(|n| n.name.as_str()).collect();
//! assert_eq!(names, ["node2", "node3"]);
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use discovery::{clock, profile};

pub mod daemon;
pub mod policy;
pub mod rng;
pub mod select;
pub mod sim;
pub mod table;
