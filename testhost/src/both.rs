//! One test body proved on both of a store's backends (the ledger's and the
//! queue's): a SQLite file in a temporary directory, or a database on a real
//! PostgreSQL server of the test's own ([`crate::postgres`]). [`Place`] is where
//! the store goes on the backend a [`Kind`] names; [`both!`](crate::both!) and
//! [`both_async!`](crate::both_async!) turn one test body into a `sqlite` and a
//! `postgres` test. What a store opens there, and how a test reads behind its
//! back, stay the store's own.

use std::path::PathBuf;

use crate::postgres::Postgres;

/// Which backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SQLite.
    Lite,
    /// PostgreSQL.
    Pg,
}

/// A place for a store on one backend; dropping it removes it (and stops its server).
pub struct Place {
    /// The temporary directory (the SQLite file is in it).
    pub dir: tempfile::TempDir,
    /// The server, on PostgreSQL, with one empty database [`Place::database`].
    pub server: Option<Postgres>,
    file: &'static str,
    database: &'static str,
}

impl Place {
    /// A place on `kind` for a store kept in SQLite file `file` or in PostgreSQL
    /// database `database` (created empty; nothing else created yet).
    pub fn new(kind: Kind, file: &'static str, database: &'static str) -> Place {
        let dir = tempfile::tempdir().expect("temporary directory");
        let server = (kind == Kind::Pg).then(|| Postgres::with_database(database));
        Place {
            dir,
            server,
            file,
            database,
        }
    }

    /// The SQLite file (meaningless on PostgreSQL).
    pub fn path(&self) -> PathBuf {
        self.dir.path().join(self.file)
    }

    /// The PostgreSQL database's name.
    pub fn database(&self) -> &'static str {
        self.database
    }

    /// The connection string of the database (on PostgreSQL).
    pub fn conninfo(&self) -> Option<String> {
        self.server.as_ref().map(|s| s.conninfo(self.database))
    }
}

/// Each `#[test] fn name(kind: Kind) { body }` becomes a module `name` with tests
/// `sqlite` and `postgres` running the body on that backend.
#[macro_export]
macro_rules! both {
    ($(#[test] fn $name:ident($kind:ident: Kind) $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            fn run($kind: $crate::both::Kind) $body
            #[test]
            fn sqlite() {
                run($crate::both::Kind::Lite)
            }
            #[test]
            fn postgres() {
                run($crate::both::Kind::Pg)
            }
        }
    )*};
}

/// [`both!`](crate::both!) for async bodies, on a multi-threaded runtime of
/// `workers` threads: `both_async! { workers = 4; #[test] async fn name(kind: Kind) { … } }`.
#[macro_export]
macro_rules! both_async {
    (workers = $workers:literal; $(#[test] async fn $name:ident($kind:ident: Kind) $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            async fn run($kind: $crate::both::Kind) $body
            #[::tokio::test(flavor = "multi_thread", worker_threads = $workers)]
            async fn sqlite() {
                run($crate::both::Kind::Lite).await
            }
            #[::tokio::test(flavor = "multi_thread", worker_threads = $workers)]
            async fn postgres() {
                run($crate::both::Kind::Pg).await
            }
        }
    )*};
}
