//! What each rank used, for the job history (`rexec history`): one row of
//! `rank_usage` per rank that exited, written when its node reports the exit (CPU
//! time from the `Exit`, peak memory from the node's `Usage` just before it, `NULL`
//! when the node does not count memory). The table was added without a schema
//! version change, as `debits` was: an older file gains it empty. A job's history
//! line sums its ranks' CPU time over every attempt and takes their largest peak.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, params};

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

/// What a job's ranks used from its usage row: the sum of CPU time, the
/// largest peak, the count of ranks and of ranks with a peak (`None`: no rank).
pub(super) fn usage_of(row: Option<(i64, Option<i64>, i64, i64)>) -> JobUsage {
    match row {
        None => JobUsage::default(),
        Some((cpu, peak, ranks, peaks)) => JobUsage {
            cpu_nanos: Some(cpu.max(0) as u64),
            peak_memory: peak.filter(|_| peaks == ranks).map(|p| p.max(0) as u64),
        },
    }
}

/// The query of a job's usage row on SQLite (its one parameter the job). SQLite
/// answers in the process, so a history asks it once per job.
const USAGE_SQL: &str =
    "SELECT CAST(SUM(cpu_nanos) AS BIGINT), MAX(peak_memory), COUNT(*), COUNT(peak_memory)
     FROM rank_usage WHERE job = $1 HAVING COUNT(*) > 0";

/// The query of many jobs' usage rows on PostgreSQL, in one round trip (its one
/// parameter an array of jobs): asked once per job, a history of a few hundred
/// jobs cost as many round trips, each queued on the reading thread behind a
/// follower's reads of the whole queue.
pub(super) const USAGES_SQL_PG: &str = "SELECT job, CAST(SUM(cpu_nanos) AS BIGINT),
            MAX(peak_memory), COUNT(*), COUNT(peak_memory)
     FROM rank_usage WHERE job = ANY($1) GROUP BY job";

/// What the ranks of each job of `ids` used (every id present).
pub(super) fn jobs_usage(
    conn: &Connection,
    ids: &[u64],
) -> rusqlite::Result<HashMap<u64, JobUsage>> {
    let mut stmt = conn.prepare_cached(USAGE_SQL)?;
    let mut out = HashMap::with_capacity(ids.len());
    for &id in ids {
        let row = stmt
            .query_row([id as i64], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()?;
        out.insert(id, usage_of(row));
    }
    Ok(out)
}
