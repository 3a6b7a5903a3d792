//! accountd: the credit ledger of the rexec market, its admin/user CLI
//! (`accountctl`) and the client library nodes use to charge.
//!
//! Module map:
//! - Server: [`server`] (TLS accept, dispatch, graceful shutdown), [`authz`]
//!   (which certificate role may do what), [`store`] (the SQLite ledger:
//!   schema, writes, queries, audit, and the group-committing writer thread),
//!   [`refusals`] (the bounded audit trail of refused requests, and cutting
//!   off a peer that keeps sending them), [`config`] (the TOML file),
//!   [`metrics`] (Prometheus metrics, with `[metrics] listen`).
//! - The node side lives in the `ledger-client` crate (so rexecd links
//!   neither this server nor SQLite) and is re-exported here: [`debit`] (the
//!   debit client: journal first, then delivery with retries) and [`journal`]
//!   (the append-only file of unsettled charges). The client connection to
//!   accountd is `clients::account`.
//! - [`ctl`]: accountctl's settings and output formats.
//! - Shared: [`time`] (UTC times for the record and the CLI), [`validate`] (checks on
//!   names, reasons and amounts from the network).
//!   Amounts of credits are parsed and printed by the `money` crate.
//!
//! ```
//! use money::{format_credits_fixed, parse_credits};
//! let micros = parse_credits("2.5").unwrap();
//! assert_eq!(micros, 2_500_000);
//! assert_eq!(format_credits_fixed(-micros), "-2.500000");
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod authz;
pub mod config;
pub mod ctl;
pub mod metrics;
pub mod refusals;
pub mod server;
pub mod store;
pub mod time;
pub mod validate;

pub use ledger_client::{debit, journal};
