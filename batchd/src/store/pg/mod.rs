//! The PostgreSQL backend of the queue: the same tables as the SQLite file
//! ([`super::schema`] and the modules beside it), with `BIGINT` for integers
//! and `BYTEA` for blobs, the same meaning, and the same version in `meta`.
//! The connection settings are accountd's (`[store] postgres`, a password
//! file, TLS verified against a CA; see `accountd::store::pg::link`), and so
//! is the error text, which carries PostgreSQL's own reason.
//!
//! [`PgWriter`] is the writer thread's backend: a group is one transaction.
//! A submission whose id exists is refused alone (`ON CONFLICT DO NOTHING`,
//! and for an array a savepoint undoing its rows); a write that fails for
//! another reason is refused alone too, by rolling the group back and applying
//! it again without that write. Every write is conditional on the rows it
//! names, never on what this process remembers, so that several batchd may
//! later share one database. The schema is created under an advisory lock
//! (two instances starting at once create it once). [`PgReader`] serves the
//! daemon's reads on a thread of its own, since the synchronous client must
//! not run on the daemon's async runtime. A connection the server ended is
//! made again at the next use.
//!
//! Modules: `schema` (the tables and [`prepare`]), `load` ([`load`], the queue
//! read back), `writer` ([`PgWriter`]), `reader` ([`PgReader`]).

use postgres::Client;

use super::{PgConfig, StoreError};

mod load;
mod reader;
mod schema;
mod writer;

pub use load::load;
pub use reader::PgReader;
pub use schema::{SCHEMA, prepare};
pub use writer::PgWriter;

/// A PostgreSQL error as a store error, with PostgreSQL's own reason.
pub fn pg_error(e: &postgres::Error) -> StoreError {
    StoreError::Postgres(accountd::store::pg::describe(e))
}

/// Connects once (TLS and password file as configured) and names the
/// connection `batchd` in `pg_stat_activity`.
pub fn connect(cfg: &PgConfig) -> Result<Client, StoreError> {
    let mut c = accountd::store::pg::connect(cfg)
        .map_err(|e| StoreError::Postgres(format!("{e} ({})", cfg.conninfo)))?;
    c.batch_execute("SET application_name = 'batchd'")
        .map_err(|e| pg_error(&e))?;
    Ok(c)
}
