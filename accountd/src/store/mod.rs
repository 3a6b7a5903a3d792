//! The ledger's storage: one writer thread that applies queued writes in
//! group commits, plus one reader thread for queries and audits, over either
//! backend of the storage interface ([`rows`]): a SQLite file ([`lite`],
//! [`schema`]; the embedded default) or a PostgreSQL database ([`pg`], which
//! several accountd may serve at once). The ledger's rules ([`ledger`],
//! [`claims`], [`query`], [`audit`], [`projects`], [`spend`]) are written once, against [`rows::Rows`].
//! Async callers talk to both threads through channels ([`Store`]).
//!
//! Group commit: the writer takes every request waiting in its queue (up to
//! `max_batch`), applies each inside its own savepoint of one transaction,
//! commits once (an fsync under `synchronous=FULL`), and only then answers
//! all of them. Nothing is acknowledged before it is durable.

pub mod anchors;
pub mod audit;
pub mod chain;
pub mod claims;
pub mod ledger;
pub mod lite;
pub mod migrate;
pub mod pg;
pub mod projects;
pub mod query;
pub mod rows;
pub mod schema;
pub mod spend;
mod sums;
mod threads;

use std::path::PathBuf;

pub use threads::{Refusal, Store, StoreConfig};

/// Why the ledger could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No file at the path and creation was not asked for.
    #[error(
        "database {path} does not exist: check --database, or pass --init to create a new ledger"
    )]
    Missing {
        /// The path.
        path: PathBuf,
    },
    /// The path is a directory.
    #[error("database path {path} is a directory: point --database at a file")]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// SQLite could not open it.
    #[error("cannot open database {path}: {source}")]
    Open {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: rusqlite::Error,
    },
    /// It opened but cannot be written.
    #[error("database {path} is not writable ({detail}): fix its permissions or its directory's")]
    NotWritable {
        /// The path.
        path: PathBuf,
        /// What SQLite said.
        detail: String,
    },
    /// It is not an accountd ledger.
    #[error(
        "{path} is not an accountd ledger: point --database at the right file, or --init a new one at a new path"
    )]
    NotALedger {
        /// The path.
        path: PathBuf,
    },
    /// Written by another schema version.
    #[error(
        "database {path} has schema version {found}, this accountd knows version {}",
        schema::SCHEMA_VERSION
    )]
    SchemaVersion {
        /// The path.
        path: PathBuf,
        /// The version found.
        found: String,
    },
    /// Any other SQLite failure while preparing the file.
    #[error("database {path}: {source}")]
    Sql {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: rusqlite::Error,
    },
    /// The PostgreSQL database could not be reached or prepared.
    #[error("{0}")]
    Postgres(String),
    /// The anchor signer could not be set up.
    #[error("cannot sign chain heads: {0}")]
    Anchors(String),
    /// A storage thread could not be started.
    #[error("cannot start the storage thread: {0}")]
    Thread(std::io::Error),
}

#[cfg(test)]
mod testdb;
#[cfg(test)]
mod tests;
