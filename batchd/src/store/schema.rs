//! The queue's SQLite file: how it is opened (WAL journal and `synchronous =
//! FULL`, as the ledger: a committed submission survives a crash or a power
//! loss), its tables, and its schema version (`meta.schema_version`; a file of
//! another version is refused, never rewritten).
//!
//! `jobs` holds one row per job: the signed job exactly as submitted, its
//! arrival order (`seq`), and what the queue did with it (state, attempts, start
//! and end, nodes, charges, exit). `output` holds the kept stdout and stderr in
//! chunks, at most `max_output` bytes per job. `debits` is the journal of
//! charges not yet delivered to accountd ([`super::debits`]); it was added
//! without a version change, since an older file simply gains the empty table;
//! `rank_usage` ([`super::usage`]) likewise.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::StoreError;

/// Version stored in `meta.schema_version`.
pub const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs(
    seq INTEGER PRIMARY KEY,
    id INTEGER NOT NULL UNIQUE,
    user TEXT NOT NULL,
    signed BLOB NOT NULL,
    submitted_ms INTEGER NOT NULL,
    state INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    started_ms INTEGER,
    ended_ms INTEGER,
    nodes TEXT NOT NULL DEFAULT '',
    charged INTEGER NOT NULL DEFAULT 0,
    charge_seq INTEGER NOT NULL DEFAULT 0,
    done_ms INTEGER NOT NULL DEFAULT 0,
    exit BLOB,
    reason TEXT,
    truncated INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_user ON jobs(user, seq);
CREATE TABLE IF NOT EXISTS output(
    job INTEGER NOT NULL,
    stream INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY(job, stream, offset)
);
";

/// Mode of a new queue file: it holds every user's jobs and output.
pub const STORE_MODE: u32 = 0o600;

fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(STORE_MODE)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

fn sql(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sql {
        path: path.to_path_buf(),
        source,
    }
}

/// Opens (creating when missing) the queue file for writing, with the schema in
/// place and the epoch recorded; returns the connection and the epoch (UTC ms).
pub fn open_writer(path: &Path, now_ms: i64) -> Result<(Connection, i64), StoreError> {
    if path.is_dir() {
        return Err(StoreError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    create_private(path).map_err(|e| StoreError::NotWritable {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(sql(path))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(sql(path))?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(sql(path))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::NotWritable {
            path: path.to_path_buf(),
            detail: format!("could not switch to WAL (journal mode {mode})"),
        });
    }
    conn.execute_batch("PRAGMA synchronous=FULL;")
        .map_err(sql(path))?;
    conn.execute_batch(SCHEMA).map_err(sql(path))?;
    conn.execute_batch(super::debits::SCHEMA)
        .map_err(sql(path))?;
    super::debits::upgrade(&conn).map_err(sql(path))?;
    conn.execute_batch(super::usage::SCHEMA)
        .map_err(sql(path))?;
    conn.execute_batch(super::payer::SCHEMA)
        .map_err(sql(path))?;
    conn.execute_batch(super::arrays::SCHEMA)
        .map_err(sql(path))?;
    let get = |key: &str| {
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| {
            r.get::<_, String>(0)
        })
        .optional()
        .map_err(sql(path))
    };
    match get("schema_version")? {
        Some(v) if v != SCHEMA_VERSION.to_string() => {
            return Err(StoreError::SchemaVersion {
                store: path.display().to_string(),
                found: v,
            });
        }
        Some(_) => {}
        None => {
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('schema_version', ?1)",
                [SCHEMA_VERSION.to_string()],
            )
            .map_err(sql(path))?;
        }
    }
    let epoch = match get("epoch_ms")? {
        Some(v) => super::parse_epoch(&v, &path.display().to_string())?,
        None => {
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('epoch_ms', ?1)",
                [now_ms.to_string()],
            )
            .map_err(sql(path))?;
            now_ms
        }
    };
    Ok((conn, epoch))
}

/// A second connection for reading output while the writer commits.
pub fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql(path))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(sql(path))?;
    Ok(conn)
}
