//! Read-only questions to the ledger: a user's balance, pages of history and
//! the charge report grouped by user, node or day.

use proto::account::{
    AccountBalance, AccountError, DebitKey, EntryKind, ErrorCode, HistoryPage, LedgerEntry,
    MAX_HISTORY_PAGE, MeterInterval, ReportBy, ReportRow,
};
use rusqlite::{Connection, Row, params};

use super::ledger::{balance_of, storage};

/// A user's balance, or [`ErrorCode::UnknownUser`].
pub fn balance(conn: &Connection, user: &str) -> Result<AccountBalance, AccountError> {
    crate::validate::check_name("user", user)?;
    let balance = balance_of(conn, user)?.ok_or_else(|| {
        AccountError::new(
            ErrorCode::UnknownUser,
            format!("no account for user {user:?}"),
        )
    })?;
    Ok(AccountBalance {
        user: user.to_string(),
        balance,
    })
}

/// Columns read by [`entry_from_row`], in order.
pub const ENTRY_COLUMNS: &str = "id, at_us, user, amount, kind, node, job, seq, rank, \
     interval_start_us, interval_end_us, cpu_us, actor, reason, balance_after";

/// Builds a [`LedgerEntry`] from a row selected with [`ENTRY_COLUMNS`].
pub fn entry_from_row(r: &Row<'_>) -> rusqlite::Result<LedgerEntry> {
    let kind: String = r.get(4)?;
    let node: Option<String> = r.get(5)?;
    let job: Option<String> = r.get(6)?;
    let seq: Option<i64> = r.get(7)?;
    let key = match (node, job, seq) {
        (Some(node), Some(job), Some(seq)) => Some(DebitKey {
            node,
            job,
            seq: seq.max(0) as u64,
        }),
        _ => None,
    };
    let start: Option<i64> = r.get(9)?;
    let end: Option<i64> = r.get(10)?;
    let interval = match (start, end) {
        (Some(s), Some(e)) => Some(MeterInterval {
            start_us: s.max(0) as u64,
            end_us: e.max(0) as u64,
        }),
        _ => None,
    };
    let cpu: Option<i64> = r.get(11)?;
    Ok(LedgerEntry {
        id: r.get(0)?,
        at_us: r.get(1)?,
        user: r.get(2)?,
        amount: r.get(3)?,
        kind: EntryKind::parse(&kind).unwrap_or(EntryKind::Adjust),
        key,
        rank: r.get(8)?,
        interval,
        cpu_us: cpu.map(|c| c.max(0) as u64),
        actor: r.get(12)?,
        reason: r.get(13)?,
        balance_after: r.get(14)?,
    })
}

/// One page of a user's entries, oldest first.
pub fn history(
    conn: &Connection,
    user: &str,
    since_us: Option<i64>,
    until_us: Option<i64>,
    after_id: Option<i64>,
    limit: u32,
) -> Result<HistoryPage, AccountError> {
    balance(conn, user)?;
    let limit = limit.clamp(1, MAX_HISTORY_PAGE);
    let sql = format!(
        "SELECT {ENTRY_COLUMNS} FROM entries
         WHERE user = ?1 AND id > ?2 AND at_us >= ?3 AND at_us < ?4
         ORDER BY id LIMIT ?5"
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(storage)?;
    let rows = stmt
        .query_map(
            params![
                user,
                after_id.unwrap_or(0),
                since_us.unwrap_or(i64::MIN),
                until_us.unwrap_or(i64::MAX),
                i64::from(limit) + 1
            ],
            entry_from_row,
        )
        .map_err(storage)?;
    let mut entries = rows.collect::<Result<Vec<_>, _>>().map_err(storage)?;
    let next_after = if entries.len() > limit as usize {
        entries.truncate(limit as usize);
        entries.last().map(|e| e.id)
    } else {
        None
    };
    Ok(HistoryPage {
        entries,
        next_after,
    })
}

/// Net credits charged, CPU time and distinct jobs, grouped as asked.
pub fn report(
    conn: &Connection,
    by: ReportBy,
    since_us: Option<i64>,
    until_us: Option<i64>,
) -> Result<Vec<ReportRow>, AccountError> {
    let group = match by {
        ReportBy::User => "user",
        ReportBy::Node => "node",
        ReportBy::Day => "date(at_us / 1000000, 'unixepoch')",
        _ => {
            return Err(AccountError::new(
                ErrorCode::Unsupported,
                "this accountd does not know that report grouping; use user, node or day",
            ));
        }
    };
    let sql = format!(
        "SELECT {group} AS k, SUM(amount), SUM(COALESCE(cpu_us, 0)),
                COUNT(DISTINCT node || '/' || job)
         FROM entries
         WHERE kind IN ('debit', 'refund') AND at_us >= ?1 AND at_us < ?2
         GROUP BY k ORDER BY k"
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(storage)?;
    let rows = stmt
        .query_map(
            params![since_us.unwrap_or(i64::MIN), until_us.unwrap_or(i64::MAX)],
            |r| {
                let net: i64 = r.get(1)?;
                let cpu: i64 = r.get(2)?;
                let jobs: i64 = r.get(3)?;
                Ok(ReportRow {
                    key: r.get(0)?,
                    charged: net.checked_neg().unwrap_or(i64::MAX),
                    cpu_us: cpu.max(0) as u64,
                    jobs: jobs.max(0) as u64,
                })
            },
        )
        .map_err(storage)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(storage)
}
