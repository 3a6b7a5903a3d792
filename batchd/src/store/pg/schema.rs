//! The queue's tables on PostgreSQL, and their creation under an advisory lock
//! (two instances starting at once create them once), with the version and the
//! epoch recorded in `meta`.

use postgres::Client;

use super::pg_error;
use crate::store::{StoreError, parse_epoch, schema::SCHEMA_VERSION};

/// The tables, as [`crate::store::schema`] and its neighbours have them in SQLite.
pub const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS meta(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs(
    seq BIGINT PRIMARY KEY,
    id BIGINT NOT NULL UNIQUE,
    "user" TEXT NOT NULL,
    signed BYTEA NOT NULL,
    submitted_ms BIGINT NOT NULL,
    state BIGINT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    started_ms BIGINT,
    ended_ms BIGINT,
    nodes TEXT NOT NULL DEFAULT '',
    charged BIGINT NOT NULL DEFAULT 0,
    charge_seq BIGINT NOT NULL DEFAULT 0,
    done_ms BIGINT NOT NULL DEFAULT 0,
    exit BYTEA,
    reason TEXT,
    truncated BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_user ON jobs("user", seq);
CREATE TABLE IF NOT EXISTS output(
    job BIGINT NOT NULL,
    stream BIGINT NOT NULL,
    "offset" BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY(job, stream, "offset")
);
CREATE TABLE IF NOT EXISTS debits(
    job BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    "user" TEXT NOT NULL,
    amount BIGINT NOT NULL,
    start_us BIGINT NOT NULL,
    end_us BIGINT NOT NULL,
    refused TEXT,
    account TEXT,
    PRIMARY KEY(job, seq)
);
CREATE TABLE IF NOT EXISTS rank_usage(
    job BIGINT NOT NULL,
    attempt BIGINT NOT NULL,
    rank BIGINT NOT NULL,
    node TEXT NOT NULL,
    cpu_nanos BIGINT NOT NULL,
    peak_memory BIGINT,
    ended_ms BIGINT NOT NULL,
    PRIMARY KEY(job, attempt, rank)
);
CREATE TABLE IF NOT EXISTS job_payer(
    job BIGINT PRIMARY KEY,
    account TEXT,
    max_cost BIGINT
);
CREATE TABLE IF NOT EXISTS lease(
    queue TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS arrays(
    id BIGINT PRIMARY KEY,
    "user" TEXT NOT NULL,
    signed BYTEA NOT NULL,
    submitted_ms BIGINT NOT NULL,
    first_seq BIGINT NOT NULL,
    count BIGINT NOT NULL
);
"#;

/// The advisory lock key under which the schema is created ("batchd" in ASCII).
const SCHEMA_LOCK: i64 = 0x6261_7463_6864;

/// Creates the tables when missing and records the version and the epoch
/// (`now_ms` when the queue is new); refuses another version. Returns the
/// epoch.
pub fn prepare(c: &mut Client, now_ms: i64) -> Result<i64, StoreError> {
    let e = |e: postgres::Error| pg_error(&e);
    let mut tx = c.transaction().map_err(e)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .map_err(e)?;
    tx.batch_execute(SCHEMA).map_err(e)?;
    let insert = "INSERT INTO meta(key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING";
    tx.execute(insert, &[&"schema_version", &SCHEMA_VERSION.to_string()])
        .map_err(e)?;
    tx.execute(insert, &[&"epoch_ms", &now_ms.to_string()])
        .map_err(e)?;
    let get = |tx: &mut postgres::Transaction<'_>, key: &str| -> Result<String, StoreError> {
        let row = tx
            .query_one("SELECT value FROM meta WHERE key = $1", &[&key])
            .map_err(e)?;
        Ok(row.get(0))
    };
    let version = get(&mut tx, "schema_version")?;
    if version != SCHEMA_VERSION.to_string() {
        return Err(StoreError::SchemaVersion {
            store: "(PostgreSQL)".into(),
            found: version,
        });
    }
    let epoch = get(&mut tx, "epoch_ms")?;
    tx.commit().map_err(e)?;
    parse_epoch(&epoch, "(PostgreSQL)")
}
