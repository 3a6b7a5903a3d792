//! Read-only questions to the ledger: a user's balance, pages of history and
//! the charge report grouped by user, node or day.

use proto::account::{
    AccountBalance, AccountError, DebitKey, EntryKind, ErrorCode, HistoryPage, LedgerEntry,
    MAX_HISTORY_PAGE, MeterInterval, ReportBy, ReportRow,
};

use super::rows::Rows;

/// A user's balance, or [`ErrorCode::UnknownUser`].
pub fn balance(db: &mut dyn Rows, user: &str) -> Result<AccountBalance, AccountError> {
    crate::validate::check_name("user", user)?;
    let balance = db.balance_of(user)?.ok_or_else(|| {
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

/// Columns read into an [`EntryColumns`], in order (each backend quotes `user`
/// its own way).
pub const ENTRY_COLUMNS: [&str; 15] = [
    "id",
    "at_us",
    "user",
    "amount",
    "kind",
    "node",
    "job",
    "seq",
    "rank",
    "interval_start_us",
    "interval_end_us",
    "cpu_us",
    "actor",
    "reason",
    "balance_after",
];

/// One entry's columns as stored ([`ENTRY_COLUMNS`]), before they become a
/// [`LedgerEntry`].
#[derive(Debug, Clone)]
pub struct EntryColumns {
    /// `id`.
    pub id: i64,
    /// `at_us`.
    pub at_us: i64,
    /// `user`.
    pub user: String,
    /// `amount`.
    pub amount: i64,
    /// `kind`.
    pub kind: String,
    /// `node`.
    pub node: Option<String>,
    /// `job`.
    pub job: Option<String>,
    /// `seq`.
    pub seq: Option<i64>,
    /// `rank`.
    pub rank: Option<i64>,
    /// `interval_start_us`, `interval_end_us`.
    pub interval: (Option<i64>, Option<i64>),
    /// `cpu_us`.
    pub cpu_us: Option<i64>,
    /// `actor`.
    pub actor: String,
    /// `reason`.
    pub reason: Option<String>,
    /// `balance_after`.
    pub balance_after: i64,
}

impl From<EntryColumns> for LedgerEntry {
    fn from(c: EntryColumns) -> LedgerEntry {
        let key = match (c.node, c.job, c.seq) {
            (Some(node), Some(job), Some(seq)) => Some(DebitKey {
                node,
                job,
                seq: seq.max(0) as u64,
            }),
            _ => None,
        };
        let interval = match c.interval {
            (Some(s), Some(e)) => Some(MeterInterval {
                start_us: s.max(0) as u64,
                end_us: e.max(0) as u64,
            }),
            _ => None,
        };
        LedgerEntry {
            id: c.id,
            at_us: c.at_us,
            user: c.user,
            amount: c.amount,
            kind: EntryKind::parse(&c.kind).unwrap_or(EntryKind::Adjust),
            key,
            rank: c.rank.and_then(|r| u32::try_from(r).ok()),
            interval,
            cpu_us: c.cpu_us.map(|c| c.max(0) as u64),
            actor: c.actor,
            reason: c.reason,
            balance_after: c.balance_after,
        }
    }
}

/// One page of a user's entries, oldest first.
pub fn history(
    db: &mut dyn Rows,
    user: &str,
    since_us: Option<i64>,
    until_us: Option<i64>,
    after_id: Option<i64>,
    limit: u32,
) -> Result<HistoryPage, AccountError> {
    balance(db, user)?;
    let limit = limit.clamp(1, MAX_HISTORY_PAGE);
    let mut entries = db.history(
        user,
        after_id.unwrap_or(0),
        since_us.unwrap_or(i64::MIN),
        until_us.unwrap_or(i64::MAX),
        i64::from(limit) + 1,
    )?;
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
    db: &mut dyn Rows,
    by: ReportBy,
    since_us: Option<i64>,
    until_us: Option<i64>,
) -> Result<Vec<ReportRow>, AccountError> {
    db.report(
        by,
        since_us.unwrap_or(i64::MIN),
        until_us.unwrap_or(i64::MAX),
    )
}

/// The refusal of a report grouping this accountd does not know.
pub fn unknown_grouping() -> AccountError {
    AccountError::new(
        ErrorCode::Unsupported,
        "this accountd does not know that report grouping; use user, node or day",
    )
}
