//! The node side of the rexec market's ledger: everything a node (rexecd) needs to
//! charge users through accountd, without linking the ledger server or SQLite.
//!
//! Module map:
//! - [`journal`]: the append-only, fsynced file that holds every charge a node has
//!   decided on until accountd has acknowledged (or definitively refused) it.
//! - [`debit`]: [`debit::DebitClient`], which writes each charge to the journal first
//!   and then delivers it to accountd in order, retrying with backoff.
//!
//! The connection to accountd itself is `clients::account`, shared with `accountctl`,
//! rexecd's credit check and the benchmarks.
//!
//! ```
//! use ledger_client::journal::Journal;
//! let dir = tempfile::tempdir().unwrap();
//! let journal = Journal::open(&dir.path().join("debits.journal")).unwrap();
//! assert!(journal.pending().is_empty());
//! assert_eq!(journal.discarded_tail, 0);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod debit;
pub mod journal;
