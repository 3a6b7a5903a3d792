//! The SQLite schema of the ledger and how a database file is opened: WAL
//! journal, `synchronous=FULL` (a committed transaction survives power loss),
//! an append-only `entries` table guarded by triggers, `accounts` holding the
//! running balance updated in the same transaction as each entry, a unique
//! index on idempotency keys, and a `refusals` table, the audit trail of
//! refused requests (one row per request up to a budget per peer, then one
//! summary row with a `count`; see [`crate::refusals`]), an append-only
//! `claims` table, one row per started rank of a signed batch job, and an
//! append-only `rank_ends`, one row per claimed rank that ended (see
//! [`super::claims`]).
//!
//! Additive changes keep [`SCHEMA_VERSION`]: `refusals.count` is added to an
//! older file by `add_refusal_count`, and the `claims` and `rank_ends` tables
//! (with their triggers) by the `CREATE ... IF NOT EXISTS` of the schema
//! itself, on the first start of a newer accountd. An older accountd can still
//! open such a file: it ignores the tables and answers `Claim` (or `RankEnd`)
//! with `Unsupported`, so no rank starts through it unclaimed.
//!
//! Indexes are few on purpose: each one adds scattered page writes to every
//! group commit. `entries_idem` (unique keys, and per-job sums through the
//! `node/job/` key prefix) and `entries_user` (history) are all the write path
//! and the queries need; reports scan.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::StoreError;

/// Version stored in `meta.schema_version`: 2 since entries carry their
/// chain hash (a version-1 ledger is chained once on opening, see
/// [`chain_on_upgrade`]; an older accountd refuses a version-2 file, so none
/// appends unchained entries).
pub const SCHEMA_VERSION: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS accounts(
    user TEXT PRIMARY KEY,
    balance INTEGER NOT NULL,
    created_us INTEGER NOT NULL,
    created_by TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS entries(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at_us INTEGER NOT NULL,
    user TEXT NOT NULL REFERENCES accounts(user),
    amount INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('grant', 'adjust', 'debit', 'refund')),
    node TEXT,
    job TEXT,
    seq INTEGER,
    rank INTEGER,
    interval_start_us INTEGER,
    interval_end_us INTEGER,
    cpu_us INTEGER,
    idem_key TEXT,
    actor TEXT NOT NULL,
    reason TEXT,
    balance_after INTEGER NOT NULL,
    hash BLOB
);
CREATE UNIQUE INDEX IF NOT EXISTS entries_idem ON entries(idem_key);
CREATE INDEX IF NOT EXISTS entries_user ON entries(user, id);
CREATE TRIGGER IF NOT EXISTS entries_no_update BEFORE UPDATE ON entries
    BEGIN SELECT RAISE(ABORT, 'ledger entries are append-only'); END;
CREATE TRIGGER IF NOT EXISTS entries_no_delete BEFORE DELETE ON entries
    BEGIN SELECT RAISE(ABORT, 'ledger entries are append-only'); END;
CREATE TABLE IF NOT EXISTS refusals(
    id INTEGER PRIMARY KEY,
    at_us INTEGER NOT NULL,
    role TEXT NOT NULL,
    name TEXT NOT NULL,
    op TEXT NOT NULL,
    code TEXT NOT NULL,
    message TEXT NOT NULL,
    count INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS project_docs(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
";

/// The append-only tables of batch ranks, `claims` and `rank_ends`: one key
/// (user, job, attempt, rank), the node and the spec's digest; a rank's end
/// holds the width of its attempt too. Each refuses updates and deletes.
fn claim_tables() -> String {
    let table = |name: &str, width: &str, what: &str| {
        format!(
            "CREATE TABLE IF NOT EXISTS {name}(
    user TEXT NOT NULL,
    job TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    node TEXT NOT NULL,
    digest BLOB NOT NULL,{width}
    at_us INTEGER NOT NULL,
    PRIMARY KEY (user, job, attempt, rank)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS {name}_no_update BEFORE UPDATE ON {name}
    BEGIN SELECT RAISE(ABORT, '{what} are append-only'); END;
CREATE TRIGGER IF NOT EXISTS {name}_no_delete BEFORE DELETE ON {name}
    BEGIN SELECT RAISE(ABORT, '{what} are append-only'); END;
"
        )
    };
    table("claims", "", "batch claims")
        + &table(
            "rank_ends",
            "\n    width INTEGER NOT NULL,",
            "batch rank ends",
        )
}

/// The whole schema: [`SCHEMA`] and the [`claim_tables`].
fn schema() -> String {
    format!("{SCHEMA}{}", claim_tables())
}

/// Brings a ledger written before `refusals.count` existed up to date: the
/// column is added with its default (every older row stands for one request).
/// Additive, so the schema version is unchanged and an older accountd can still
/// open the file (its rows get the default).
fn add_refusal_count(conn: &Connection) -> rusqlite::Result<()> {
    let has_count: bool = conn
        .prepare("SELECT 1 FROM pragma_table_info('refusals') WHERE name = 'count'")?
        .exists([])?;
    if !has_count {
        conn.execute_batch("ALTER TABLE refusals ADD COLUMN count INTEGER NOT NULL DEFAULT 1;")?;
    }
    Ok(())
}

/// Chains a version-1 ledger, once: adds the `hash` column and hashes every
/// entry in id order (the append-only trigger is lifted for that one
/// transaction and put back by the schema), and records in `meta` up to which
/// entry the chain was computed on upgrade (`chained_on_upgrade`: those
/// entries are as trustworthy as the file was at that moment; the chain
/// proves what came after).
pub fn chain_on_upgrade(conn: &Connection) -> rusqlite::Result<()> {
    let has_hash: bool = conn
        .prepare("SELECT 1 FROM pragma_table_info('entries') WHERE name = 'hash'")?
        .exists([])?;
    if !has_hash {
        conn.execute_batch("ALTER TABLE entries ADD COLUMN hash BLOB;")?;
    }
    conn.execute_batch("DROP TRIGGER IF EXISTS entries_no_update;")?;
    let sql = format!(
        "SELECT {} FROM entries ORDER BY id",
        super::query::ENTRY_COLUMNS.join(", ")
    );
    let mut prev = super::chain::GENESIS;
    let mut last = 0;
    {
        let mut read = conn.prepare(&sql)?;
        let mut update = conn.prepare("UPDATE entries SET hash = ?1 WHERE id = ?2")?;
        let mut rows = read.query([])?;
        while let Some(r) = rows.next()? {
            let cols = super::lite::entry_columns(r)?;
            prev = super::chain::entry_hash(&prev, &cols);
            last = cols.id;
            update.execute(rusqlite::params![&prev[..], cols.id])?;
        }
    }
    conn.execute_batch(&schema())?;
    conn.execute(
        "INSERT INTO meta(key, value) VALUES ('chained_on_upgrade', ?1)
         ON CONFLICT(key) DO NOTHING",
        [last.to_string()],
    )?;
    if last > 0 {
        tracing::warn!(
            entries = last,
            "chained the existing ledger on upgrade: entries 1 to {last} are hashed as found; the chain proves what follows"
        );
    }
    Ok(())
}

/// Mode of a new ledger: every user's balance and history is in it, and users
/// may read only their own (through accountd). SQLite gives the `-wal` and
/// `-shm` files the database file's mode.
pub const LEDGER_MODE: u32 = 0o600;

/// Creates an empty ledger file readable by its owner only, before SQLite
/// would create it with 0644. Someone else creating it first is fine: SQLite
/// then opens theirs.
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(LEDGER_MODE)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Opens the ledger for writing. A missing file is created only when `create`
/// is set; anything that is not a writable accountd ledger is an error naming
/// the path.
pub fn open_writer(path: &Path, create: bool) -> Result<Connection, StoreError> {
    let p = path.to_path_buf();
    if path.is_dir() {
        return Err(StoreError::NotAFile { path: p });
    }
    let exists = path.exists();
    if !exists && !create {
        return Err(StoreError::Missing { path: p });
    }
    if !exists {
        create_private(path).map_err(|e| StoreError::NotWritable {
            path: p.clone(),
            detail: e.to_string(),
        })?;
    }
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = Connection::open_with_flags(path, flags).map_err(|source| StoreError::Open {
        path: p.clone(),
        source,
    })?;
    if conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(true) {
        return Err(StoreError::NotWritable {
            path: p,
            detail: "the file is read-only".into(),
        });
    }
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|source| StoreError::Open {
            path: p.clone(),
            source,
        })?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(|e| classify(&p, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::NotWritable {
            path: p,
            detail: format!("could not switch to WAL (journal mode {mode})"),
        });
    }
    conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")
        .map_err(|e| classify(&p, e))?;
    let has_meta: bool = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'",
            [],
            |_| Ok(true),
        )
        .optional()
        .map_err(|e| classify(&p, e))?
        .unwrap_or(false);
    if !has_meta && !create {
        return Err(StoreError::NotALedger { path: p });
    }
    conn.execute_batch(&schema()).map_err(|e| classify(&p, e))?;
    add_refusal_count(&conn).map_err(|e| classify(&p, e))?;
    let version: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key='schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| classify(&p, e))?;
    match version.as_deref() {
        Some("1") => {
            let tx = conn.unchecked_transaction().map_err(|e| classify(&p, e))?;
            chain_on_upgrade(&tx).map_err(|e| classify(&p, e))?;
            tx.execute(
                "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
                [SCHEMA_VERSION.to_string()],
            )
            .map_err(|e| classify(&p, e))?;
            tx.commit().map_err(|e| classify(&p, e))?;
        }
        Some(v) if v != SCHEMA_VERSION.to_string() => {
            return Err(StoreError::SchemaVersion {
                path: p,
                found: v.to_string(),
            });
        }
        Some(_) => {}
        None => {
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('schema_version', ?1)",
                [SCHEMA_VERSION.to_string()],
            )
            .map_err(|e| classify(&p, e))?;
        }
    }
    // A real write proves the file and its directory (for -wal/-shm) are writable.
    conn.execute(
        "INSERT INTO meta(key, value) VALUES ('last_start_us', ?1)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [crate::time::now_us().to_string()],
    )
    .map_err(|e| classify(&p, e))?;
    Ok(conn)
}

/// Opens a second connection for queries (the writer must have opened the file first).
pub fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let p = path.to_path_buf();
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| StoreError::Open {
        path: p.clone(),
        source,
    })?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .and_then(|_| conn.execute_batch("PRAGMA query_only=ON;"))
        .map_err(|e| classify(&p, e))?;
    Ok(conn)
}

fn classify(path: &Path, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode as C;
    let path = path.to_path_buf();
    match e.sqlite_error_code() {
        Some(C::ReadOnly) | Some(C::CannotOpen) | Some(C::PermissionDenied) => {
            StoreError::NotWritable {
                path,
                detail: e.to_string(),
            }
        }
        Some(C::NotADatabase) => StoreError::NotALedger { path },
        _ => StoreError::Sql { path, source: e },
    }
}
