//! The whole queue read back from PostgreSQL at start, as the SQLite backend
//! reads its file.

use postgres::Client;

use super::pg_error;
use crate::store::{
    JOB_COLUMNS, JobRow, Loaded, PendingDebit, StoreError, arrays, decode_job, parse_epoch,
};

/// Reads the whole queue back, as [`crate::store::load_jobs`] does from SQLite.
pub fn load(c: &mut Client) -> Result<Loaded, StoreError> {
    let e = |e: postgres::Error| pg_error(&e);
    let store = "(PostgreSQL)";
    let arrays = arrays::decode(
        c.query(arrays::LOAD_SQL, &[])
            .map_err(e)?
            .iter()
            .map(|r| {
                (
                    r.get::<_, i64>(0) as u64,
                    r.get::<_, Vec<u8>>(1),
                    r.get::<_, i64>(2),
                    r.get::<_, i64>(3),
                )
            })
            .collect(),
    );
    let payers = c
        .query("SELECT job, account, max_cost FROM job_payer", &[])
        .map_err(e)?
        .iter()
        .map(|r| {
            (
                r.get::<_, i64>(0) as u64,
                crate::store::Payer {
                    account: r.get(1),
                    max_cost: r.get(2),
                },
            )
        })
        .collect();
    let rows = c
        .query(&format!("SELECT {JOB_COLUMNS} FROM jobs ORDER BY seq"), &[])
        .map_err(e)?;
    let mut jobs = Vec::with_capacity(rows.len());
    for r in rows {
        let row: JobRow = (
            r.get(0),
            r.get(1),
            r.get(2),
            r.get(3),
            r.get(4),
            r.get(5),
            r.get(6),
            r.get(7),
            r.get(8),
            r.get(9),
            r.get(10),
            r.get(11),
            r.get(12),
            r.get(13),
            r.get(14),
            r.get(15),
        );
        jobs.push(decode_job(row, &arrays, &payers, store)?);
    }
    let output = c
        .query(
            "SELECT job,
                    COALESCE(SUM(CASE WHEN stream = 1 THEN octet_length(data) END), 0)::BIGINT,
                    COALESCE(SUM(CASE WHEN stream = 2 THEN octet_length(data) END), 0)::BIGINT
             FROM output GROUP BY job ORDER BY job",
            &[],
        )
        .map_err(e)?
        .iter()
        .map(|r| {
            (
                r.get::<_, i64>(0) as u64,
                r.get::<_, i64>(1) as u64,
                r.get::<_, i64>(2) as u64,
            )
        })
        .collect();
    let epoch: String = c
        .query_one("SELECT value FROM meta WHERE key = 'epoch_ms'", &[])
        .map_err(e)?
        .get(0);
    let debits = c
        .query(
            r#"SELECT job, seq, "user", amount, start_us, end_us, account FROM debits
               WHERE refused IS NULL ORDER BY end_us, job, seq"#,
            &[],
        )
        .map_err(e)?
        .iter()
        .map(|r| PendingDebit {
            job: r.get::<_, i64>(0) as u64,
            seq: r.get::<_, i64>(1) as u64,
            user: r.get(2),
            amount: r.get(3),
            start_us: r.get::<_, i64>(4) as u64,
            end_us: r.get::<_, i64>(5) as u64,
            account: r.get(6),
        })
        .collect();
    Ok(Loaded {
        epoch_ms: parse_epoch(&epoch, store)?,
        jobs,
        output,
        debits,
    })
}
