//! Claims of signed batch ranks: the ledger's record that a node started rank
//! `rank` of attempt `attempt` of a user's signed job, so that no `(user, job,
//! attempt, rank)` starts twice anywhere in the cluster (see
//! `proto::batch`). The table is append-only like `entries` (triggers refuse
//! updates and deletes), and its primary key is the uniqueness.
//!
//! The first claim wins and records the node, the digest of the signed spec and
//! the time. A repeat from the same node with the same digest is answered
//! `Claimed` again (the node retries after a lost reply and must not strand the
//! rank); from another node it is [`ErrorCode::AlreadyClaimed`]; with another
//! digest (a different job under the same id) it is [`ErrorCode::KeyConflict`].
//! Like every ledger write, each refusal is decided before the first write.

use proto::account::{AccountError, Claim, ErrorCode};

pub use super::rows::ClaimRecord;
use super::rows::Rows;
use crate::validate::check_name;

/// Claims `c` for the node whose actor is `actor` (`node:NAME`, as authorised).
pub fn claim(db: &mut dyn Rows, c: &Claim, actor: &str, now: i64) -> Result<(), AccountError> {
    let node = actor.strip_prefix("node:").ok_or_else(|| {
        AccountError::new(
            ErrorCode::Forbidden,
            format!("{actor} may not claim batch ranks: only node certificates are accepted"),
        )
    })?;
    check_name("user", &c.user)?;
    let job = c.job.to_string();
    let what = format!(
        "rank {} of attempt {} of job {job} of user {}",
        c.rank, c.attempt, c.user
    );
    match existing(db, c)? {
        None => {}
        Some(first) if first.digest != c.digest => {
            return Err(AccountError::new(
                ErrorCode::KeyConflict,
                format!(
                    "{what} was claimed by node {} for a different signed job (digest differs); refusing it",
                    first.node
                ),
            ));
        }
        Some(first) if first.node == node => return Ok(()),
        Some(first) => {
            return Err(AccountError::new(
                ErrorCode::AlreadyClaimed,
                format!(
                    "{what} was already started by node {} at {}; a signed rank runs once",
                    first.node,
                    crate::time::format_time(first.at_us)
                ),
            ));
        }
    }
    db.insert_claim(c, node, now)
}

/// The first claim of `c`'s key, if any.
pub fn existing(db: &mut dyn Rows, c: &Claim) -> Result<Option<ClaimRecord>, AccountError> {
    db.claim_of(c)
}

#[cfg(test)]
mod tests;
