//! accountd: the credit ledger of the rexec market.
//!
//! Module map:
//! - [`amount`] — decimal credits as text to and from `i64` micro-credits.
//! - [`authz`] — which certificate role may do what.
//! - [`client`] — one TLS connection to accountd and request/response calls.
//! - [`config`] — the TOML configuration file.
//! - [`time`] — UTC wall-clock times for the ledger record and the CLI.
//! - [`validate`] — checks on names, reasons and amounts from the network.
//! - [`ctl`] — accountctl's settings and output formats.
//! - [`debit`] — the node's debit client: journal, delivery, retries.
//! - [`journal`] — the node-side append-only journal of unacknowledged charges.
//! - [`server`] — the TLS server: accept, authorise, dispatch, shut down.
//! - [`store`] — the SQLite ledger: schema, writes, queries, audit, and the
//!   writer thread that group-commits.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod amount;
pub mod authz;
pub mod client;
pub mod config;
pub mod ctl;
pub mod debit;
pub mod journal;
pub mod server;
pub mod store;
pub mod time;
pub mod validate;
