//! The queue's debit journal: every charge the queue records for a job is also a
//! row of `debits` until accountd has it. The row is written in the same
//! transaction as the job's new charged total, deleted once accountd applied it
//! (or answered that it had, since the key makes a repeat change nothing), and
//! marked `refused` with accountd's reason when accountd will never take it, so
//! an admin can see it. At start the daemon reads back the rows still to
//! deliver: neither accountd being down for hours nor `kill -9` of the queue
//! loses a debit.

use rusqlite::{Connection, params};

/// One debit the queue owes accountd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingDebit {
    /// The job.
    pub job: u64,
    /// The debit's number within the job (its key is `(queue, job, seq)`).
    pub seq: u64,
    /// Whom to debit (with `account`, the member who spent).
    pub user: String,
    /// The project debited for `user` (`rexec submit -A`), `None` for `user`'s
    /// own account.
    pub account: Option<String>,
    /// Micro-credits.
    pub amount: i64,
    /// What it is for: from, microseconds since the Unix epoch.
    pub start_us: u64,
    /// To.
    pub end_us: u64,
}

/// The table (created with the others).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS debits(
    job INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    user TEXT NOT NULL,
    amount INTEGER NOT NULL,
    start_us INTEGER NOT NULL,
    end_us INTEGER NOT NULL,
    refused TEXT,
    PRIMARY KEY(job, seq)
);
";

/// Adds the `account` column to a table written before projects (NULL: the
/// user's own account, as those debits were).
pub(super) fn upgrade(conn: &Connection) -> rusqlite::Result<()> {
    let has = conn
        .prepare("SELECT 1 FROM pragma_table_info('debits') WHERE name = 'account'")?
        .exists([])?;
    if !has {
        conn.execute_batch("ALTER TABLE debits ADD COLUMN account TEXT;")?;
    }
    Ok(())
}

/// Records `d` as owed.
pub(super) fn insert(conn: &Connection, d: &PendingDebit) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO debits(job, seq, user, amount, start_us, end_us, refused, account)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7)",
    )?
    .execute(params![
        d.job as i64,
        d.seq as i64,
        d.user,
        d.amount,
        d.start_us as i64,
        d.end_us as i64,
        d.account
    ])?;
    Ok(())
}

/// accountd has debit `(job, seq)`.
pub(super) fn delivered(conn: &Connection, job: u64, seq: u64) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM debits WHERE job = ?1 AND seq = ?2")?
        .execute(params![job as i64, seq as i64])?;
    Ok(())
}

/// accountd will never take debit `(job, seq)`, for `why`.
pub(super) fn refused(conn: &Connection, job: u64, seq: u64, why: &str) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE debits SET refused = ?3 WHERE job = ?1 AND seq = ?2")?
        .execute(params![job as i64, seq as i64, why])?;
    Ok(())
}

/// The debits still to deliver, oldest first.
pub(super) fn pending(conn: &Connection) -> rusqlite::Result<Vec<PendingDebit>> {
    let mut stmt = conn.prepare(
        "SELECT job, seq, user, amount, start_us, end_us, account FROM debits
         WHERE refused IS NULL ORDER BY end_us, job, seq",
    )?;
    stmt.query_map([], |r| {
        Ok(PendingDebit {
            job: r.get::<_, i64>(0)? as u64,
            seq: r.get::<_, i64>(1)? as u64,
            user: r.get(2)?,
            amount: r.get(3)?,
            start_us: r.get::<_, i64>(4)? as u64,
            end_us: r.get::<_, i64>(5)? as u64,
            account: r.get(6)?,
        })
    })?
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_debits_table_from_before_projects_gains_the_account_column_and_keeps_its_rows() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE debits(job INTEGER NOT NULL, seq INTEGER NOT NULL, user TEXT NOT NULL,
             amount INTEGER NOT NULL, start_us INTEGER NOT NULL, end_us INTEGER NOT NULL,
             refused TEXT, PRIMARY KEY(job, seq));
             INSERT INTO debits VALUES (7, 1, 'alice', 5, 0, 1, NULL);",
        )
        .unwrap();
        upgrade(&conn).unwrap();
        upgrade(&conn).unwrap();
        let chem = PendingDebit {
            job: 7,
            seq: 2,
            user: "alice".into(),
            account: Some("chem".into()),
            amount: 6,
            start_us: 1,
            end_us: 2,
        };
        insert(&conn, &chem).unwrap();
        let rows = pending(&conn).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].seq, rows[0].account.as_deref()), (1, None));
        assert_eq!(rows[1], chem);
    }
}
