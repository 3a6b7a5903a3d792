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
use rusqlite::{Connection, OptionalExtension, params};

use super::ledger::storage;
use crate::validate::check_name;

/// Who first claimed a key, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRecord {
    /// The node that claimed it.
    pub node: String,
    /// SHA-256 of the signed spec it claimed.
    pub digest: Vec<u8>,
    /// When, UTC microseconds.
    pub at_us: i64,
}

/// Claims `c` for the node whose actor is `actor` (`node:NAME`, as authorised).
pub fn claim(conn: &Connection, c: &Claim, actor: &str, now: i64) -> Result<(), AccountError> {
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
    match existing(conn, c)? {
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
    conn.prepare_cached(
        "INSERT INTO claims(user, job, attempt, rank, node, digest, at_us)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut s| {
        s.execute(params![
            c.user,
            job,
            c.attempt,
            c.rank,
            node,
            &c.digest[..],
            now
        ])
    })
    .map_err(storage)?;
    Ok(())
}

/// The first claim of `c`'s key, if any.
pub fn existing(conn: &Connection, c: &Claim) -> Result<Option<ClaimRecord>, AccountError> {
    conn.prepare_cached(
        "SELECT node, digest, at_us FROM claims
         WHERE user = ?1 AND job = ?2 AND attempt = ?3 AND rank = ?4",
    )
    .and_then(|mut s| {
        s.query_row(params![c.user, c.job.to_string(), c.attempt, c.rank], |r| {
            Ok(ClaimRecord {
                node: r.get(0)?,
                digest: r.get(1)?,
                at_us: r.get(2)?,
            })
        })
        .optional()
    })
    .map_err(storage)
}

#[cfg(test)]
mod tests;
