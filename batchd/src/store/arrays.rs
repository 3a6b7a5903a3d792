//! Job arrays in the store: one `arrays` row per array holds the signed job
//! once, and each task is a `jobs` row of its own (its state, attempts,
//! charges, output, like any job) whose `signed` column is empty: the task's
//! signed job is its array's, found by the task's arrival number, since the
//! tasks of one array take `count` consecutive numbers from `first_seq`. So
//! a 10,000-task array writes one signature and 10,000 small rows in one
//! transaction. The table was added without a schema version change (an older
//! file simply gains the empty table).

use std::collections::BTreeMap;
use std::sync::Arc;

use proto::batch::SignedJob;
use rusqlite::{Connection, params};

use super::JobRecord;

/// The table (created with the others).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS arrays(
    id INTEGER PRIMARY KEY,
    user TEXT NOT NULL,
    signed BLOB NOT NULL,
    submitted_ms INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    count INTEGER NOT NULL
);
";

/// An array as the store keeps it: the signed job and its tasks' records
/// (queued, in index order, with consecutive arrival numbers).
#[derive(Debug, Clone)]
pub struct ArrayRecord {
    /// The array's id (the spec's).
    pub id: u64,
    /// Its owner.
    pub user: String,
    /// The signed job, once for every task.
    pub signed: Arc<SignedJob>,
    /// Submission time, UTC ms.
    pub submitted_ms: i64,
    /// The tasks.
    pub tasks: Vec<JobRecord>,
}

/// Writes an array and its tasks (within the writer's savepoint; a task id that
/// exists fails the whole array).
pub(super) fn insert(conn: &Connection, a: &ArrayRecord) -> rusqlite::Result<()> {
    let signed = postcard::to_allocvec(a.signed.as_ref()).unwrap_or_default();
    let first_seq = a.tasks.first().map_or(0, |t| t.seq);
    conn.prepare_cached(
        "INSERT INTO arrays(id, user, signed, submitted_ms, first_seq, count)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        a.id as i64,
        a.user,
        signed,
        a.submitted_ms,
        first_seq,
        a.tasks.len() as i64
    ])?;
    if let Some(p) = a.tasks.first().and_then(|t| t.payer.as_ref()) {
        super::payer::insert(conn, a.id, p)?;
    }
    let mut task = conn.prepare_cached(
        "INSERT INTO jobs(seq, id, user, signed, submitted_ms, state)
         VALUES (?1, ?2, ?3, x'', ?4, ?5)",
    )?;
    for t in &a.tasks {
        task.execute(params![
            t.seq,
            t.id as i64,
            t.user,
            t.submitted_ms,
            t.state.code()
        ])?;
    }
    Ok(())
}

/// Every array's signed job and id by its first arrival number, with its task count.
pub(super) type Arrays = BTreeMap<i64, (u64, i64, Arc<SignedJob>)>;

/// The query of the arrays (the same SQL on both backends).
pub(super) const LOAD_SQL: &str = "SELECT id, signed, first_seq, count FROM arrays";

/// Reads the arrays (undecodable ones are left out: their tasks then fail to load).
pub(super) fn load(conn: &Connection) -> rusqlite::Result<Arrays> {
    let mut stmt = conn.prepare(LOAD_SQL)?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)? as u64,
            r.get::<_, Vec<u8>>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
        ))
    })?;
    let rows = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(decode(rows))
}

/// The arrays from their rows `(id, signed, first_seq, count)`.
pub(super) fn decode(rows: Vec<(u64, Vec<u8>, i64, i64)>) -> Arrays {
    let mut out = Arrays::new();
    for (id, blob, first, count) in rows {
        match postcard::from_bytes::<SignedJob>(&blob) {
            Ok(s) => {
                out.insert(first, (id, count, Arc::new(s)));
            }
            Err(e) => tracing::error!(array = id, error = %e, "a stored array does not decode"),
        }
    }
    out
}

/// The array a task row of arrival number `seq` belongs to: its id and signed job.
pub(super) fn of_task(arrays: &Arrays, seq: i64) -> Option<(u64, Arc<SignedJob>)> {
    let (first, (id, count, signed)) = arrays.range(..=seq).next_back()?;
    (seq < first + count).then(|| (*id, signed.clone()))
}
