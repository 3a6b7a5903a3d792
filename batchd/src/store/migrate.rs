//! Moving a queue between backends (`batchd migrate --from STORE --to
//! STORE`, SQLite to PostgreSQL or back): every row of every table (jobs with
//! their seq and state, arrays, kept output, the debit journal, rank usage,
//! and `meta` with the queue's epoch) is copied from the source into an empty
//! target in one transaction, then the target is checked: its canonical dump
//! ([`super::dump`]) must equal the source's. A target that holds any job,
//! array, output, debit or usage row is refused before a row is written. Run
//! it with every batchd of both stopped.

use super::dump::{Dump, LiteTables, PgTables, TABLES, Tables};
use super::{Location, StoreError, pg, schema};

/// Why a migration did not happen or did not check out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrateError {
    /// A config file naming a store could not be read.
    #[error("{0}")]
    Config(String),
    /// Source and target are the same store.
    #[error("the source and the target are the same store")]
    Same,
    /// The source does not exist.
    #[error("there is no queue file {0}")]
    NoSource(String),
    /// The target already holds a queue.
    #[error("the target already holds {0}: migrate only into an empty queue")]
    NotEmpty(String),
    /// Reading or writing failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The copy does not match the source.
    #[error("the copy does not match the source: {0}")]
    Mismatch(String),
}

/// What was copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// Jobs, counting each task of an array.
    pub jobs: usize,
    /// Arrays.
    pub arrays: usize,
    /// Chunks of kept output.
    pub output: usize,
    /// Debit journal rows.
    pub debits: usize,
    /// Rank usage rows.
    pub ranks: usize,
}

/// The store a `batchd migrate` argument names: a batchd config file
/// (`*.toml`: its `[store]`), a `postgres://` or `postgresql://` URL, or
/// else a SQLite file.
pub fn location(arg: &str) -> Result<Location, MigrateError> {
    if arg.starts_with("postgres://") || arg.starts_with("postgresql://") {
        return Ok(Location::Postgres(super::PgConfig {
            conninfo: arg.to_string(),
            password_file: None,
            ca: None,
        }));
    }
    let path = std::path::Path::new(arg);
    if path.extension().is_some_and(|e| e == "toml") {
        let text = std::fs::read_to_string(path)
            .map_err(|e| MigrateError::Config(format!("cannot read {arg}: {e}")))?;
        let table = daemon::config::parse::<crate::config::Settings>(path, &text)
            .map_err(|e| MigrateError::Config(e.to_string()))?;
        let s: crate::config::Settings =
            daemon::config::layer(table, &crate::config::Flags::default())
                .map_err(|e| MigrateError::Config(e.to_string()))?;
        return s
            .store
            .location()
            .map_err(|e| MigrateError::Config(format!("{arg}: {e}")));
    }
    Ok(Location::Sqlite(path.to_path_buf()))
}

/// Opens the queue at `at` for copying, its schema in place (`create`: a
/// SQLite file that does not exist is made; otherwise it is refused).
pub fn open(at: &Location, create: bool) -> Result<Box<dyn Tables>, MigrateError> {
    let now = crate::unix_now_ms();
    Ok(match at {
        Location::Sqlite(path) => {
            if !create && !path.exists() {
                return Err(MigrateError::NoSource(path.display().to_string()));
            }
            Box::new(LiteTables(schema::open_writer(path, now)?.0))
        }
        Location::Postgres(cfg) => {
            let mut c = pg::connect(cfg)?;
            pg::prepare(&mut c, now)?;
            Box::new(PgTables(c))
        }
    })
}

/// The canonical dump of the queue at `at` (which must exist).
pub fn dump(at: &Location) -> Result<Dump, MigrateError> {
    Ok(open(at, false)?.dump()?)
}

/// Copies the queue at `from` into the empty queue at `to` and checks the copy.
pub fn migrate(from: &Location, to: &Location) -> Result<Migrated, MigrateError> {
    if from == to {
        return Err(MigrateError::Same);
    }
    let source = open(from, false)?.dump()?;
    let mut target = open(to, true)?;
    for t in TABLES.iter().filter(|t| t.name != "meta") {
        let n = target.read(t)?.len();
        if n > 0 {
            return Err(MigrateError::NotEmpty(format!("{n} rows of {}", t.name)));
        }
    }
    let tables: Vec<_> = TABLES
        .iter()
        .zip(&source.0)
        .map(|(t, (_, rows))| (t, rows))
        .collect();
    target.write(&tables)?;
    let copy = target.dump()?;
    if let Some(diff) = source.first_difference(&copy) {
        return Err(MigrateError::Mismatch(diff));
    }
    Ok(Migrated {
        jobs: source.rows("jobs").len(),
        arrays: source.rows("arrays").len(),
        output: source.rows("output").len(),
        debits: source.rows("debits").len(),
        ranks: source.rows("rank_usage").len(),
    })
}

#[cfg(test)]
mod tests;
