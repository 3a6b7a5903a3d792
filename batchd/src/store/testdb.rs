//! Test queues on both backends, so that one set of tests proves both: a
//! SQLite file in a temporary directory, or a database on a real PostgreSQL
//! server of the test's own (the fixture the end-to-end tests share, included
//! by path as accountd's tests do). [`both_async!`] turns one test body into
//! a `sqlite` and a `postgres` test.

pub use testhost::postgres as server;

use super::{Location, PgConfig};

/// Which backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SQLite.
    Lite,
    /// PostgreSQL.
    Pg,
}

/// A place for a queue; dropping it removes it (and stops its server).
pub struct TestDb {
    /// The temporary directory (SQLite's file is `q.db` in it).
    pub dir: tempfile::TempDir,
    /// The server, on PostgreSQL.
    pub server: Option<server::Postgres>,
}

impl TestDb {
    /// A place for an empty queue on `kind` (nothing created yet).
    pub fn new(kind: Kind) -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let server = (kind == Kind::Pg).then(|| server::Postgres::with_database("queue"));
        TestDb { dir, server }
    }

    /// Where the queue is.
    pub fn location(&self) -> Location {
        match &self.server {
            None => Location::Sqlite(self.dir.path().join("q.db")),
            Some(s) => Location::Postgres(PgConfig {
                conninfo: s.conninfo("queue"),
                password_file: None,
                ca: None,
            }),
        }
    }

    /// Runs SQL behind the store's back: the SQLite or the PostgreSQL text.
    pub fn exec(&self, lite: &str, pg: &str) {
        match &self.server {
            None => rusqlite::Connection::open(self.dir.path().join("q.db"))
                .unwrap()
                .execute_batch(lite)
                .unwrap(),
            Some(s) => drop(s.psql("queue", pg)),
        }
    }

    /// One value a query returns, as text (the same SQL on both).
    pub fn text(&self, sql: &str) -> String {
        match &self.server {
            None => rusqlite::Connection::open(self.dir.path().join("q.db"))
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

/// Each `async fn name(kind) { body }` becomes a module `name` with tests
/// `sqlite` and `postgres` running the body on that backend.
macro_rules! both_async {
    ($(#[test] async fn $name:ident($kind:ident: Kind) $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            async fn run($kind: Kind) $body
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                run(Kind::Lite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                run(Kind::Pg).await
            }
        }
    )*};
}

pub(crate) use both_async;
