//! Test ledgers on both backends, so that one set of tests proves both: a
//! SQLite file in a temporary directory, or a database on a real PostgreSQL
//! server of the test's own (`testhost::both`, the fixture the queue's tests
//! share too). [`both!`] and [`both_async!`] turn one test body into a
//! `sqlite` and a `postgres` test.

pub use testhost::both::{Kind, Place};
pub use testhost::postgres as server;

use super::pg::{Cache, Pg, PgConfig};
use super::rows::Rows;
use super::{StoreConfig, lite::Lite, schema};

/// A fresh empty ledger; dropping it removes it (and stops its server). The
/// SQLite file is `l.db` in [`Place::dir`], the database `ledger`.
pub struct TestDb(Place);

impl std::ops::Deref for TestDb {
    type Target = Place;
    fn deref(&self) -> &Place {
        &self.0
    }
}

impl TestDb {
    /// An empty ledger on `kind` (schema created).
    pub fn new(kind: Kind) -> TestDb {
        let db = TestDb(Place::new(kind, "l.db", "ledger"));
        // Async tests call this on a runtime thread, where the synchronous
        // PostgreSQL client cannot start its own runtime.
        std::thread::scope(|s| s.spawn(|| drop(db.rows())).join().unwrap());
        db
    }

    /// The PostgreSQL settings of the ledger (on PostgreSQL).
    pub fn pg_config(&self) -> Option<PgConfig> {
        self.conninfo().map(|conninfo| PgConfig {
            conninfo,
            password_file: None,
            ca: None,
        })
    }

    /// A new connection to the ledger as rows, each statement its own transaction.
    pub fn rows(&self) -> Box<dyn Rows> {
        match self.pg_config() {
            None => Box::new(Lite(schema::open_writer(&self.path(), true).unwrap())),
            Some(cfg) => {
                let mut c = super::pg::connect(&cfg).unwrap();
                super::pg::schema::prepare(&mut c, true).unwrap();
                Box::new(Pg::new(c, Cache::default()))
            }
        }
    }

    /// A connection for reading what was written behind the ledger's back
    /// (nothing is created or repaired on opening).
    pub fn reader(&self) -> Box<dyn Rows> {
        match self.pg_config() {
            None => Box::new(Lite(schema::open_reader(&self.path()).unwrap())),
            Some(cfg) => Box::new(Pg::new(super::pg::connect(&cfg).unwrap(), Cache::default())),
        }
    }

    /// A store configuration for this ledger.
    pub fn store_config(&self, max_batch: usize, max_entry: i64) -> StoreConfig {
        StoreConfig {
            path: self.path(),
            create: true,
            postgres: self.pg_config(),
            anchors: None,
            max_batch,
            max_entry,
        }
    }

    /// Runs SQL behind the ledger's back (tampering, failures); the SQLite or
    /// the PostgreSQL text, whichever fits.
    pub fn exec(&self, lite: &str, pg: &str) {
        match &self.server {
            None => rusqlite::Connection::open(self.path())
                .unwrap()
                .execute_batch(lite)
                .unwrap(),
            Some(s) => {
                s.psql("ledger", pg);
            }
        }
    }

    /// Runs SQL behind the ledger's back that should fail: its error text.
    pub fn exec_err(&self, lite: &str, pg: &str) -> String {
        match &self.server {
            None => rusqlite::Connection::open(self.path())
                .unwrap()
                .execute_batch(lite)
                .unwrap_err()
                .to_string(),
            Some(s) => s.try_psql("ledger", pg).unwrap_err(),
        }
    }

    /// One integer a query returns (the same SQL on both).
    pub fn scalar(&self, sql: &str) -> i64 {
        match &self.server {
            None => rusqlite::Connection::open(self.path())
                .unwrap()
                .query_row(sql, [], |r| r.get(0))
                .unwrap(),
            Some(s) => s.psql("ledger", sql).parse().unwrap(),
        }
    }
}

pub(crate) use testhost::{both, both_async};
