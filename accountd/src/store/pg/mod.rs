//! The PostgreSQL backend: one database served by any number of accountd at
//! once. Module map: [`schema`] (tables, the version in `meta`, creation and
//! migration on start), [`link`] (settings, connecting, and a connection
//! that comes back by itself after the server went away), [`rows`] (the
//! [`Rows`](super::rows::Rows) of the storage interface in PostgreSQL's SQL),
//! [`batch`] (a group commit in a constant number of statements),
//! [`prefetch`] (its read ahead, sent with `BEGIN`), and here the writer's
//! and the reader's transactions.
//!
//! Concurrency across instances: every write transaction (one group commit)
//! first locks the single row of `head`, which holds the last entry id. So
//! write transactions of all instances take turns (each holds the lock for
//! two round trips per batch, see [`batch`]); each sees every earlier
//! commit, the debit key's uniqueness is decided by the database
//! (`entries.idem_key` is `UNIQUE`), balances are updated under their row
//! locks inside that transaction, and entry ids stay gapless (the audit's
//! deleted-entry check holds on PostgreSQL too). Reads run in `REPEATABLE READ
//! READ ONLY` transactions and never wait for writers.

pub mod batch;
pub mod link;
pub mod prefetch;
pub mod rows;
pub mod schema;

use postgres::Client;
use proto::account::AccountError;

use super::StoreError;
use super::rows::{Keep, Reader, Rows, Tx, Writer, storage};
pub use link::{Cache, Link, PgConfig, connect, describe, pg_storage};
pub use rows::Pg;

/// Opens the writer's and the reader's connections, creating or migrating
/// the schema first (`create`: a database without a ledger gets one).
pub fn open(cfg: &PgConfig, create: bool) -> Result<(PgWriter, PgReader), StoreError> {
    let mut w = connect(cfg)?;
    schema::prepare(&mut w, create)?;
    let r = connect(cfg)?;
    Ok((
        PgWriter {
            link: Link::new(cfg.clone(), "writer", w),
            next: Default::default(),
        },
        PgReader(Link::new(cfg.clone(), "reader", r)),
    ))
}

/// The write side: group commits, each one transaction holding the head lock.
pub struct PgWriter {
    link: Link,
    /// The keys and accounts the next transaction reads ahead.
    next: (Vec<String>, Vec<String>),
}

/// A write transaction: the connection, taken out of its [`Link`] between
/// `BEGIN` and `COMMIT` or `ROLLBACK`.
impl Tx for Pg<Client> {
    fn rows(&mut self) -> &mut dyn Rows {
        self
    }

    fn savepoint(
        &mut self,
        work: &mut dyn FnMut(&mut dyn Rows) -> Keep,
    ) -> Result<(), AccountError> {
        // What the savepoint writes is flushed inside it, so a failure stays
        // with its job; what it learnt is kept only when it is released.
        self.flush()?;
        self.c.batch_execute("SAVEPOINT job").map_err(pg_storage)?;
        let before = self.pending.known();
        let keep = work(self);
        let flushed = if keep { self.flush() } else { Ok(()) };
        let end = match flushed {
            Ok(()) if keep => "RELEASE SAVEPOINT job",
            _ => {
                self.pending = before;
                "ROLLBACK TO SAVEPOINT job"
            }
        };
        self.c.batch_execute(end).map_err(pg_storage)?;
        flushed
    }

    fn prefetch(&mut self, keys: &[String], users: &[String]) -> Result<(), AccountError> {
        Pg::prefetch(self, keys, users)
    }
}

/// Runs a write transaction's work and writes what is pending: `Ok(true)`
/// to commit, `Ok(false)` to roll back.
fn run(
    tx: &mut Pg<Client>,
    work: &mut dyn FnMut(&mut dyn Tx) -> Keep,
) -> Result<Keep, AccountError> {
    if !work(tx) {
        return Ok(false);
    }
    if let Err(e) = tx.flush() {
        tracing::warn!(error = %e, "writing a group commit failed");
        return Ok(false);
    }
    Ok(true)
}

impl Writer for PgWriter {
    fn transaction(
        &mut self,
        work: &mut dyn FnMut(&mut dyn Tx) -> Keep,
    ) -> Result<Keep, AccountError> {
        // BEGIN, the head lock and the read ahead in one round trip (sent
        // again on a new connection if this one turns out to be gone).
        let (keys, users) = std::mem::take(&mut self.next);
        let sql = prefetch::begin_write(&keys, &users);
        let begun = self
            .link
            .first(|c, _| c.simple_query(&sql))
            .inspect_err(|_| self.link.abandon())?;
        let mut tx = Pg::new(self.link.take()?, self.link.cache());
        let outcome = tx
            .begun(&begun, &keys, &users)
            .and_then(|()| run(&mut tx, work));
        match outcome {
            Ok(true) => {
                self.link.end(tx.c, "COMMIT").map_err(|e| {
                    let e = link::describe(&e);
                    tracing::error!(error = %e, "group commit failed; nothing in the batch was acknowledged");
                    storage(e)
                })?;
                Ok(true)
            }
            Ok(false) => self
                .link
                .end(tx.c, "ROLLBACK")
                .map(|()| false)
                .map_err(pg_storage),
            Err(e) => {
                let _ = self.link.end(tx.c, "ROLLBACK");
                Err(e)
            }
        }
    }

    fn expect(&mut self, keys: &[String], users: &[String]) {
        self.next = (keys.to_vec(), users.to_vec());
    }

    fn head(&mut self) -> Result<Option<(i64, Vec<u8>)>, AccountError> {
        self.link.first(|c, cache| {
            let s = link::prepared(
                c,
                cache,
                "SELECT id, hash FROM entries ORDER BY id DESC LIMIT 1",
            )?;
            let row = c.query_opt(&s, &[])?;
            row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose()
        })
    }

    fn balances(&mut self) -> Result<i64, AccountError> {
        self.link.first(|c, cache| {
            let s = link::prepared(
                c,
                cache,
                "SELECT COALESCE(SUM(balance), 0)::BIGINT FROM accounts",
            )?;
            c.query_one(&s, &[])?.try_get(0)
        })
    }
}

/// The read side: each question on one consistent snapshot.
pub struct PgReader(Link);

impl Reader for PgReader {
    fn read(&mut self, work: &mut dyn FnMut(&mut dyn Rows)) -> Result<(), AccountError> {
        self.0.first(|c, _| {
            c.batch_execute(&format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; {}",
                link::NO_IDLE_LIMIT
            ))
        })?;
        let mut tx = Pg::new(self.0.take()?, self.0.cache());
        work(&mut tx);
        self.0.end(tx.c, "COMMIT").map_err(pg_storage)
    }
}
