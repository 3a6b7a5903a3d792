//! The connection to PostgreSQL: settings (`[store] postgres`, a password
//! file, TLS to the database with rustls), connecting, the prepared
//! statements of a connection, and [`Link`], a connection that comes back by
//! itself after the server went away.
//!
//! A link does not probe its connection before each use (that was one round
//! trip per group commit): a connection the server ended (a restart) is found
//! out by the first statement of the next transaction, which is sent again,
//! once, on a new connection. Only that first statement is ever sent again,
//! and it has written nothing, so nothing can be applied twice.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use postgres::{Client, Statement};
use proto::account::{AccountError, ErrorCode};

use super::StoreError;
use crate::store::rows::storage;

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

/// Prepared statements of one connection, by SQL text.
pub type Cache = Arc<Mutex<HashMap<&'static str, Statement>>>;

/// A PostgreSQL error as a retryable storage error, with its cause.
pub fn pg_storage(e: postgres::Error) -> AccountError {
    storage(describe(&e))
}

/// A PostgreSQL error on one line with its cause: the server's own message
/// for an error the server sent (`FATAL: password authentication failed for
/// user "accountd"`), otherwise the client's error followed by each error in
/// its source chain (`error connecting to server: Connection refused (os
/// error 111)`), never only "db error".
pub fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        );
        if let Some(detail) = db.detail() {
            text.push_str(&format!("; {detail}"));
        }
        if let Some(hint) = db.hint() {
            text.push_str(&format!("; hint: {hint}"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

/// Whether `e` says the connection itself is gone (closed, broken, or ended
/// by the server: SQLSTATE classes 08 and 57P), so that a new one may do
/// what this one could not.
pub fn is_lost(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(code) => {
            let code = code.code();
            code.starts_with("08") || code.starts_with("57P")
        }
        None => std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>()),
    }
}

/// The prepared statement of `sql` on `c`, prepared on first use.
pub fn prepared(
    c: &mut impl postgres::GenericClient,
    cache: &Cache,
    sql: &'static str,
) -> Result<Statement, postgres::Error> {
    let cached = cache.lock().ok().and_then(|m| m.get(sql).cloned());
    if let Some(s) = cached {
        return Ok(s);
    }
    let s = c.prepare(sql)?;
    if let Ok(mut m) = cache.lock() {
        m.insert(sql, s.clone());
    }
    Ok(s)
}

fn pg_error(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Postgres(format!("{what}: {e}"))
}

/// How long PostgreSQL lets a session of ours sit inside a transaction waiting
/// for its next statement (`idle_in_transaction_session_timeout`) before it ends
/// the session and releases its locks. Our write transactions send their
/// statements back to back, and they hold locks that the other instances wait
/// for: accountd's the head row, batchd's the lease row (`FOR SHARE`) and its
/// numbering lock. When an instance's host drops off the network mid-transaction,
/// nothing else ends the session (the server waits for a client that can no longer
/// send; TCP keepalive is hours by default): the other instances would wait until
/// the host came back (batchd's `lease::tests` shows a takeover waiting on the
/// lease row for as long as it is let). Longer than a busy machine's pause between two
/// statements, and than a standby's promotion; short enough that a takeover stays
/// within its 5 s. Reading transactions, which hold no row lock and may stream a
/// whole ledger (the audit), turn it off for themselves ([`NO_IDLE_LIMIT`]).
pub const IDLE_IN_TRANSACTION_LIMIT: &str = "2s";

/// Put after a reading transaction's `BEGIN`: no idle limit inside it.
pub const NO_IDLE_LIMIT: &str = "SET LOCAL idle_in_transaction_session_timeout = 0";

/// Connects once, with TLS when a CA is configured; the session's idle limit
/// inside a transaction is [`IDLE_IN_TRANSACTION_LIMIT`].
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
    let mut client = client.map_err(|e| pg_error("cannot connect to PostgreSQL", describe(&e)))?;
    client
        .batch_execute(&format!(
            "SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_LIMIT}'"
        ))
        .map_err(|e| pg_error("cannot set the session's idle limit", describe(&e)))?;
    Ok(client)
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
    /// A link over the connection `client` made with `cfg`.
    pub fn new(cfg: PgConfig, role: &'static str, client: Client) -> Link {
        Link {
            cfg,
            role,
            client: Some(client),
            cache: Cache::default(),
            lost: false,
        }
    }

    /// The connection's prepared statements.
    pub fn cache(&self) -> Cache {
        self.cache.clone()
    }

    /// Forgets a connection found gone, saying so once per loss.
    pub fn lose(&mut self) {
        self.client = None;
        if !self.lost {
            tracing::warn!(
                connection = self.role,
                "lost the connection to PostgreSQL; reconnecting"
            );
            self.lost = true;
        }
    }

    /// The connection and its statements, connecting again when there is
    /// none or it closed.
    fn client(&mut self) -> Result<(&mut Client, Cache), AccountError> {
        if self.client.as_ref().is_some_and(Client::is_closed) {
            self.lose();
        }
        if self.client.is_none() {
            let c = connect(&self.cfg).map_err(|e| {
                AccountError::new(ErrorCode::Storage, format!("{e}; retry shortly"))
            })?;
            if self.lost {
                tracing::info!(connection = self.role, "reconnected to PostgreSQL");
                self.lost = false;
            }
            self.cache = Cache::default();
            self.client = Some(c);
        }
        let cache = self.cache.clone();
        match self.client.as_mut() {
            Some(c) => Ok((c, cache)),
            None => Err(storage("no connection to PostgreSQL")),
        }
    }

    /// Runs `first`, the first statement of a unit of work, which has
    /// written nothing when it fails: when it failed because the connection
    /// was gone, runs it once more on a new connection.
    pub fn first<T>(
        &mut self,
        mut first: impl FnMut(&mut Client, &Cache) -> Result<T, postgres::Error>,
    ) -> Result<T, AccountError> {
        let (c, cache) = self.client()?;
        match first(c, &cache) {
            Err(e) if is_lost(&e) => {
                self.lose();
                let (c, cache) = self.client()?;
                first(c, &cache).map_err(pg_storage)
            }
            r => r.map_err(pg_storage),
        }
    }

    /// Takes the connection out for a transaction begun on it (by
    /// [`Link::first`]); [`Link::end`] gives it back.
    pub fn take(&mut self) -> Result<Client, AccountError> {
        self.client
            .take()
            .ok_or_else(|| storage("no connection to PostgreSQL"))
    }

    /// Rolls back whatever a failed first statement may have left open (a
    /// `BEGIN` that succeeded before the statement after it failed).
    pub fn abandon(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = self.end(c, "ROLLBACK");
        }
    }

    /// Ends the transaction open on `c` with `sql` (`COMMIT` or `ROLLBACK`)
    /// and keeps the connection. When that fails the connection is dropped
    /// (the server then rolls back whatever is open on it) and the next use
    /// connects again, so no transaction is ever left open.
    pub fn end(&mut self, mut c: Client, sql: &str) -> Result<(), postgres::Error> {
        let ended = c.batch_execute(sql);
        match &ended {
            Ok(()) => self.client = Some(c),
            Err(e) if is_lost(e) => self.lose(),
            Err(_) => {}
        }
        ended
    }
}
