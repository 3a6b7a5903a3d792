//! What each rank used, for the job history (`rexec history`): one row of
//! `rank_usage` per rank that exited, written when its node reports the exit (CPU
//! time from the `Exit`, peak memory from the node's `Usage` just before it, `NULL`
//! when the node does not count memory). The table was added without a schema
//! version change, as `debits` was: an older file gains it empty. A job's history
//! line sums its ranks' CPU time over every attempt and takes their largest peak.

use rusqlite::{Connection, OptionalExtension, params};

use super::{Reader, StoreError};

/// The table (created with the others).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS rank_usage(
    job INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    node TEXT NOT NULL,
    cpu_nanos INTEGER NOT NULL,
    peak_memory INTEGER,
    ended_ms INTEGER NOT NULL,
    PRIMARY KEY(job, attempt, rank)
);
";

/// One rank's end, as its node reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankUsage {
    /// The job.
    pub job: u64,
    /// Which start of it.
    pub attempt: u32,
    /// The rank.
    pub rank: u32,
    /// Its node.
    pub node: String,
    /// CPU time, user plus system, ns.
    pub cpu_nanos: u64,
    /// Peak memory, bytes, when the node counted it.
    pub peak_memory: Option<u64>,
    /// When the queue heard it, UTC ms.
    pub ended_ms: i64,
}

/// What a job's ranks used, summed over its ranks and attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JobUsage {
    /// CPU time of every rank that reported its end, ns; `None` if none did.
    pub cpu_nanos: Option<u64>,
    /// The largest rank peak, bytes; `None` unless every reported rank has one.
    pub peak_memory: Option<u64>,
}

pub(super) fn insert(conn: &Connection, u: &RankUsage) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO rank_usage(job, attempt, rank, node, cpu_nanos, peak_memory,
                ended_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        u.job as i64,
        u.attempt,
        u.rank,
        u.node,
        u.cpu_nanos.min(i64::MAX as u64) as i64,
        u.peak_memory.map(|p| p.min(i64::MAX as u64) as i64),
        u.ended_ms
    ])?;
    Ok(())
}

impl Reader {
    /// What job `id`'s ranks used, as their nodes reported it.
    pub fn job_usage(&self, id: u64) -> Result<JobUsage, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let sql = |source| StoreError::Sql {
            path: self.path.clone(),
            source,
        };
        let row = conn
            .prepare_cached(
                "SELECT SUM(cpu_nanos), MAX(peak_memory), COUNT(*), COUNT(peak_memory)
                 FROM rank_usage WHERE job = ?1 HAVING COUNT(*) > 0",
            )
            .map_err(sql)?
            .query_row([id as i64], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Option<i64>>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .optional()
            .map_err(sql)?;
        Ok(match row {
            None => JobUsage::default(),
            Some((cpu, peak, ranks, peaks)) => JobUsage {
                cpu_nanos: Some(cpu.max(0) as u64),
                peak_memory: peak.filter(|_| peaks == ranks).map(|p| p.max(0) as u64),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Store, Write};

    fn rank(job: u64, attempt: u32, rank: u32, cpu_ms: u64, peak: Option<u64>) -> Write {
        Write::RankUsage(Box::new(RankUsage {
            job,
            attempt,
            rank,
            node: format!("n{rank}"),
            cpu_nanos: cpu_ms * 1_000_000,
            peak_memory: peak,
            ended_ms: 7,
        }))
    }

    #[tokio::test]
    async fn a_jobs_usage_sums_its_ranks_cpu_and_knows_its_peak_only_from_every_rank() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let (store, _) = Store::open(&path, 8, 1).unwrap();
        for w in [
            rank(1, 0, 0, 1500, Some(4 << 20)),
            rank(1, 0, 1, 500, Some(9 << 20)),
            // A second attempt's rank adds its CPU time too.
            rank(1, 1, 0, 250, Some(1 << 20)),
            rank(2, 0, 0, 100, Some(1 << 20)),
            rank(2, 0, 1, 100, None),
        ] {
            store.write(w).await.unwrap();
        }
        // A repeated report of one rank replaces it.
        store
            .write(rank(1, 0, 1, 500, Some(9 << 20)))
            .await
            .unwrap();
        let reader = Reader::open(&path).unwrap();
        assert_eq!(
            reader.job_usage(1).unwrap(),
            JobUsage {
                cpu_nanos: Some(2_250_000_000),
                peak_memory: Some(9 << 20)
            }
        );
        assert_eq!(
            reader.job_usage(2).unwrap(),
            JobUsage {
                cpu_nanos: Some(200_000_000),
                peak_memory: None
            }
        );
        assert_eq!(reader.job_usage(3).unwrap(), JobUsage::default());
        store.close();
    }
}
