//! The PostgreSQL backend: one database served by any number of accountd at
//! once. Module map: [`schema`] (tables, the version in `meta`, creation and
//! migration on start), [`rows`] (the [`Rows`](super::rows::Rows) of the
//! storage interface in PostgreSQL's SQL), [`batch`] (a group commit in a
//! constant number of statements), and here the connection: settings
//! (`[store] postgres`, a password file, TLS to the database with rustls),
//! connecting, and reconnecting by itself after the server went away.
//!
//! Concurrency across instances: every write transaction (one group commit)
//! first locks the single row of `head`, which holds the last entry id. So
//! write transactions of all instances take turns (each holds the lock for a
//! handful of statements per batch, see [`batch`]); each sees every earlier
//! commit, the debit key's uniqueness is decided by the database
//! (`entries.idem_key` is `UNIQUE`), balances are updated under their row
//! locks inside that transaction, and entry ids stay gapless (the audit's
//! deleted-entry check holds on PostgreSQL too). Reads run in `REPEATABLE READ
//! READ ONLY` transactions and never wait for writers.

pub mod batch;
pub mod rows;
pub mod schema;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use postgres::{Client, IsolationLevel, Statement};
use proto::account::{AccountError, ErrorCode};

use super::StoreError;
use super::rows::{Keep, Reader, Rows, Tx, Writer, storage};
pub use rows::Pg;

/// Where the ledger's PostgreSQL database is and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgConfig {
    /// libpq-style connection string (`host=… port=… dbname=… user=…`), without a password.
    pub conninfo: String,
    /// File holding the password (first line), when the server asks for one.
    pub password_file: Option<PathBuf>,
    /// CA certificate (PEM) of the database server: connect over TLS and verify it.
    pub ca: Option<PathBuf>,
}

/// How long the liveness check of a connection may take.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Prepared statements of one connection, by SQL text.
pub type Cache = Arc<Mutex<HashMap<&'static str, Statement>>>;

/// A PostgreSQL error as a retryable storage error, with the server's message.
pub fn pg_storage(e: postgres::Error) -> AccountError {
    match e.as_db_error() {
        Some(db) => storage(db),
        None => storage(e),
    }
}

fn pg_error(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Postgres(format!("{what}: {e}"))
}

/// Connects once, with TLS when a CA is configured.
pub fn connect(cfg: &PgConfig) -> Result<Client, StoreError> {
    let mut pc: postgres::Config = cfg
        .conninfo
        .parse()
        .map_err(|e| pg_error("invalid [store] postgres connection string", e))?;
    if pc.get_password().is_some() {
        return Err(StoreError::Postgres(
            "[store] postgres must not hold a password: put it in the file named by [store] password_file".into(),
        ));
    }
    if let Some(path) = &cfg.password_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| pg_error(&format!("cannot read password file {}", path.display()), e))?;
        pc.password(text.lines().next().unwrap_or("").as_bytes());
    }
    pc.application_name("accountd");
    let client = match &cfg.ca {
        None => pc.connect(postgres::NoTls),
        Some(ca) => pc.connect(tls(ca)?),
    };
    client.map_err(|e| pg_error("cannot connect to PostgreSQL", e))
}

fn tls(ca: &std::path::Path) -> Result<tokio_postgres_rustls::MakeRustlsConnect, StoreError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(ca)
        .map_err(|e| pg_error(&format!("cannot read the database CA {}", ca.display()), e))?;
    for cert in certs {
        let cert = cert.map_err(|e| pg_error(&format!("bad PEM in {}", ca.display()), e))?;
        roots
            .add(cert)
            .map_err(|e| pg_error(&format!("bad certificate in {}", ca.display()), e))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(certs::crypto_provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| pg_error("TLS to the database", e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// One connection that comes back by itself: when the server went away, the
/// next use connects again. The loss and the recovery are each logged once.
pub struct Link {
    cfg: PgConfig,
    role: &'static str,
    client: Option<Client>,
    cache: Cache,
    lost: bool,
}

impl Link {
    fn new(cfg: PgConfig, role: &'static str, client: Client) -> Link {
        Link {
            cfg,
            role,
            client: Some(client),
            cache: Cache::default(),
            lost: false,
        }
    }

    /// The live connection, connecting again if it was lost. A connection the
    /// server ended (a restart) may not know it yet, so each use first checks
    /// it with an empty query: one round trip per group commit or query.
    fn get(&mut self) -> Result<(&mut Client, Cache), AccountError> {
        let alive = match self.client.as_mut() {
            Some(c) => !c.is_closed() && c.is_valid(PROBE_TIMEOUT).is_ok(),
            None => false,
        };
        if !alive {
            self.client = None;
        }
        if self.client.is_none() {
            if !self.lost {
                tracing::warn!(
                    connection = self.role,
                    "lost the connection to PostgreSQL; reconnecting"
                );
                self.lost = true;
            }
            let c = connect(&self.cfg).map_err(|e| {
                AccountError::new(ErrorCode::Storage, format!("{e}; retry shortly"))
            })?;
            tracing::info!(connection = self.role, "reconnected to PostgreSQL");
            self.lost = false;
            self.cache = Cache::default();
            self.client = Some(c);
        }
        let cache = self.cache.clone();
        match self.client.as_mut() {
            Some(c) => Ok((c, cache)),
            None => Err(storage("no connection to PostgreSQL")),
        }
    }
}

/// Opens the writer's and the reader's connections, creating or migrating
/// the schema first (`create`: a database without a ledger gets one).
pub fn open(cfg: &PgConfig, create: bool) -> Result<(PgWriter, PgReader), StoreError> {
    let mut w = connect(cfg)?;
    schema::prepare(&mut w, create)?;
    let r = connect(cfg)?;
    Ok((
        PgWriter(Link::new(cfg.clone(), "writer", w)),
        PgReader(Link::new(cfg.clone(), "reader", r)),
    ))
}

/// The write side: group commits, each one transaction holding the head lock.
pub struct PgWriter(Link);

impl Tx for Pg<postgres::Transaction<'_>> {
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
        let sp = self.c.transaction().map_err(pg_storage)?;
        let mut sp = Pg::new(sp, self.cache.clone());
        sp.pending = self.pending.known();
        let keep = work(&mut sp);
        let flushed = if keep { sp.flush() } else { Ok(()) };
        match flushed {
            Ok(()) if keep => {
                let Pg { c, pending, .. } = sp;
                c.commit().map_err(pg_storage)?;
                self.pending = pending;
                Ok(())
            }
            Ok(()) => sp.c.rollback().map_err(pg_storage),
            Err(e) => {
                sp.c.rollback().map_err(pg_storage)?;
                Err(e)
            }
        }
    }

    fn prefetch(&mut self, keys: &[String], users: &[String]) -> Result<(), AccountError> {
        Pg::prefetch(self, keys, users)
    }
}

impl Writer for PgWriter {
    fn transaction(
        &mut self,
        work: &mut dyn FnMut(&mut dyn Tx) -> Keep,
    ) -> Result<Keep, AccountError> {
        let (client, cache) = self.0.get()?;
        let tx = client.transaction().map_err(pg_storage)?;
        let mut tx = Pg::new(tx, cache);
        tx.lock_head()?;
        if !work(&mut tx) {
            tx.c.rollback().map_err(pg_storage)?;
            return Ok(false);
        }
        if let Err(e) = tx.flush() {
            tracing::warn!(error = %e, "writing a group commit failed");
            tx.c.rollback().map_err(pg_storage)?;
            return Ok(false);
        }
        tx.c.commit().map_err(|e| {
            tracing::error!(error = %e, "group commit failed; nothing in the batch was acknowledged");
            storage(e)
        })?;
        Ok(true)
    }

    fn head(&mut self) -> Result<Option<(i64, Vec<u8>)>, AccountError> {
        let (client, _) = self.0.get()?;
        let row = client
            .query_opt("SELECT id, hash FROM entries ORDER BY id DESC LIMIT 1", &[])
            .map_err(pg_storage)?;
        row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .transpose()
            .map_err(pg_storage)
    }

    fn balances(&mut self) -> Result<i64, AccountError> {
        let (client, _) = self.0.get()?;
        client
            .query_one(
                "SELECT COALESCE(SUM(balance), 0)::BIGINT FROM accounts",
                &[],
            )
            .and_then(|r| r.try_get(0))
            .map_err(pg_storage)
    }
}

/// The read side: each question on one consistent snapshot.
pub struct PgReader(Link);

impl Reader for PgReader {
    fn read(&mut self, work: &mut dyn FnMut(&mut dyn Rows)) -> Result<(), AccountError> {
        let (client, cache) = self.0.get()?;
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(pg_storage)?;
        let mut tx = Pg::new(tx, cache);
        work(&mut tx);
        tx.c.commit().map_err(pg_storage)
    }
}
