//! accountd: the credit ledger of the rexec market.
//!
//! Module map:
//! - [`amount`] — decimal credits as text to and from `i64` micro-credits.
//! - [`time`] — UTC wall-clock times for the ledger record and the CLI.
//! - [`validate`] — checks on names, reasons and amounts from the network.
//! - [`journal`] — the node-side append-only journal of unacknowledged charges.
//! - [`store`] — the SQLite ledger: schema, writes, queries, audit, and the
//!   writer thread that group-commits.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod amount;
pub mod journal;
pub mod store;
pub mod time;
pub mod validate;
