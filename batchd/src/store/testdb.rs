//! Test queues on both backends, so that one set of tests proves both: a
//! SQLite file in a temporary directory, or a database on a real PostgreSQL
//! server of the test's own (`testhost::both`, the fixture the ledger's tests
//! share too). [`both_async!`] turns one test body into a `sqlite` and a
//! `postgres` test.

pub use testhost::both::{Kind, Place};

use super::{Location, PgConfig};

/// A place for a queue; dropping it removes it (and stops its server). The
/// SQLite file is `q.db` in [`Place::dir`], the database `queue`.
pub struct TestDb(Place);

impl std::ops::Deref for TestDb {
    type Target = Place;
    fn deref(&self) -> &Place {
        &self.0
    }
}

impl TestDb {
    /// A place for an empty queue on `kind` (nothing created yet).
    pub fn new(kind: Kind) -> TestDb {
        TestDb(Place::new(kind, "q.db", "queue"))
    }

    /// Where the queue is.
    pub fn location(&self) -> Location {
        match self.conninfo() {
            None => Location::Sqlite(self.path()),
            Some(conninfo) => Location::Postgres(PgConfig {
                conninfo,
                password_file: None,
                ca: None,
            }),
        }
    }

    /// Runs SQL behind the store's back: the SQLite or the PostgreSQL text.
    pub fn exec(&self, lite: &str, pg: &str) {
        match &self.server {
            None => rusqlite::Connection::open(self.path())
                .unwrap()
                .execute_batch(lite)
                .unwrap(),
            Some(s) => drop(s.psql("queue", pg)),
        }
    }

    /// One value a query returns, as text (the same SQL on both).
    pub fn text(&self, sql: &str) -> String {
        match &self.server {
            None => rusqlite::Connection::open(self.path())
                .unwrap()
                .query_row(sql, [], |r| {
                    r.get_ref(0).map(|v| match v {
                        rusqlite::types::ValueRef::Integer(n) => n.to_string(),
                        rusqlite::types::ValueRef::Text(t) => {
                            String::from_utf8_lossy(t).into_owned()
                        }
                        other => format!("{other:?}"),
                    })
                })
                .unwrap(),
            Some(s) => s.psql("queue", sql),
        }
    }
}

pub(crate) use testhost::both_async;
