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
//!
//! Ends: when a claimed rank's program has exited, the node that claimed it
//! records the end ([`end`], a `RankEnd`, append-only table `rank_ends`), with
//! the job's signed width. Once as many ranks of one attempt have ended as the
//! job is wide, the job has run to its end, and every new claim of any attempt
//! of it is refused with [`ErrorCode::JobEnded`]: a queue whose store was
//! edited (a finished job set back to waiting) cannot start it again anywhere.
//! An attempt with a rank that never ended (its node was lost) does not count,
//! so the queue may still start the next attempt, up to the signed
//! `max_attempts`.

use proto::account::{AccountError, Claim, ErrorCode, RankEnd};

use super::rows::Rows;
pub use super::rows::{ClaimRecord, EndRecord};
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
        None => {
            if let Some((attempt, width)) = db.ended_attempt(&c.user, &job)? {
                return Err(AccountError::new(
                    ErrorCode::JobEnded,
                    format!(
                        "{what} refused: job {job} of user {} already ran to its end (attempt \
                         {attempt} ended on all {width} ranks); a finished job never starts again",
                        c.user
                    ),
                ));
            }
        }
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

/// Records that the rank `e.claim` names ended, for the node whose actor is
/// `actor`. Only the node that claimed the rank, with the claim's digest, may
/// record its end; a repeat is answered as the first (the node resends after a
/// lost reply or a restart).
pub fn end(db: &mut dyn Rows, e: &RankEnd, actor: &str, now: i64) -> Result<(), AccountError> {
    let c = &e.claim;
    let node = actor.strip_prefix("node:").ok_or_else(|| {
        AccountError::new(
            ErrorCode::Forbidden,
            format!(
                "{actor} may not record ends of batch ranks: only node certificates are accepted"
            ),
        )
    })?;
    check_name("user", &c.user)?;
    let what = format!(
        "the end of rank {} of attempt {} of job {} of user {}",
        c.rank, c.attempt, c.job, c.user
    );
    if e.width == 0 || c.rank >= e.width {
        return Err(AccountError::new(
            ErrorCode::Malformed,
            format!("{what} names width {}: the rank must be below it", e.width),
        ));
    }
    match existing(db, c)? {
        None => {
            return Err(AccountError::new(
                ErrorCode::Forbidden,
                format!("{what} refused: no node claimed that rank"),
            ));
        }
        Some(first) if first.node != node || first.digest != c.digest => {
            return Err(AccountError::new(
                ErrorCode::Forbidden,
                format!(
                    "{what} refused: node {} claimed that rank{}, not node {node}",
                    first.node,
                    if first.digest != c.digest {
                        " for a different signed job"
                    } else {
                        ""
                    }
                ),
            ));
        }
        Some(_) => {}
    }
    if db.end_of(c)?.is_some() {
        return Ok(());
    }
    db.insert_end(e, node, now)
}

/// The first claim of `c`'s key, if any.
pub fn existing(db: &mut dyn Rows, c: &Claim) -> Result<Option<ClaimRecord>, AccountError> {
    db.claim_of(c)
}

#[cfg(test)]
mod tests;
