//! Read-only questions to the ledger: a user's balance, pages of history and
//! the charge report grouped by user, node or day.

use proto::account::{
    AccountBalance, AccountError, ErrorCode, HistoryPage, MAX_HISTORY_PAGE, ReportBy, ReportRow,
};

use super::rows::Rows;
/// An entry's stored columns, kept with the storage interface; named here too,
/// where the history's readers have always found them.
pub use super::rows::{ENTRY_COLUMNS, EntryColumns};

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
