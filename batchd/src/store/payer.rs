//! Who pays for a job, as the queue resolved it at submission: the project
//! charged (the one signed with `-A`, else the owner's default project at
//! accountd, else none: the personal account) and the job's spending ceiling
//! (the lower of its signed `--max-cost` and the project's ceiling per job).
//! One row of `job_payer` per signed job (a single job's id, or an array's,
//! shared by its tasks). The table was added without a schema version change,
//! as `debits` was: an older file gains it empty, and its jobs are charged as
//! their signed terms say, as before.

use std::collections::HashMap;

use rusqlite::{Connection, params};

/// The table (created with the others).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS job_payer(
    job INTEGER PRIMARY KEY,
    account TEXT,
    max_cost INTEGER
);
";

/// Who pays for a job and up to what.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payer {
    /// The project charged, `None` for the owner's personal account.
    pub account: Option<String>,
    /// The job's spending ceiling, micro-credits, if any.
    pub max_cost: Option<i64>,
}

/// Records who pays for signed job `job` (within the writer's transaction).
pub(super) fn insert(conn: &Connection, job: u64, p: &Payer) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO job_payer(job, account, max_cost) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![job as i64, p.account, p.max_cost])?;
    Ok(())
}

/// Every recorded payer by signed job id.
pub(super) fn load(conn: &Connection) -> rusqlite::Result<HashMap<u64, Payer>> {
    let mut stmt = conn.prepare("SELECT job, account, max_cost FROM job_payer")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)? as u64,
            Payer {
                account: r.get(1)?,
                max_cost: r.get(2)?,
            },
        ))
    })?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payer_reads_back_as_written_and_a_file_without_any_reads_empty() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        assert!(load(&conn).unwrap().is_empty());
        let chem = Payer {
            account: Some("chem".into()),
            max_cost: Some(5_000_000),
        };
        insert(&conn, 7, &chem).unwrap();
        insert(&conn, 8, &Payer::default()).unwrap();
        let all = load(&conn).unwrap();
        assert_eq!(all[&7], chem);
        assert_eq!(all[&8], Payer::default());
    }
}
