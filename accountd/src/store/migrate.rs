//! Moving a ledger between backends (`accountctl migrate`): every account,
//! entry (with its id and chain hash, unchanged), batch claim and rank end is copied
//! (and project document, see [`super::projects`])
//! from the source into an empty target in one transaction, then the target
//! is checked: as many entries, every balance equal, the same chain head, and
//! its own audit (sums, keys, chain) clean. Entries stream from the source into
//! the target one at a time, so memory does not grow with the ledger's length
//! (the chain head covers every entry's content, and the audit checks the chain). A target that holds anything is
//! refused before a row is written. Refused requests (`refusals`) are not
//! copied: they are the old store's audit trail and stay with it.

use proto::account::AccountError;

use super::audit;
use super::query::EntryColumns;
use super::rows::{EntryRow, Reader, Rows, Writer};

/// Why a migration did not happen or did not check out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrateError {
    /// The target already holds a ledger.
    #[error("the target already holds {0}: migrate only into an empty ledger")]
    NotEmpty(String),
    /// Reading or writing failed.
    #[error("{0}")]
    Ledger(#[from] AccountError),
    /// The copy does not match the source.
    #[error("the copy does not match the source: {0}")]
    Mismatch(String),
}

/// What was copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// Accounts copied.
    pub accounts: usize,
    /// Entries copied.
    pub entries: usize,
    /// Claims copied.
    pub claims: usize,
    /// Ends of claimed ranks copied.
    pub ends: usize,
    /// Project documents copied (projects, their members and income, and
    /// users' default projects).
    pub projects: usize,
}

/// Entries counted, and the last one's chain hash, of a stream of entries.
#[derive(Debug, Default, PartialEq, Eq)]
struct Streamed {
    count: usize,
    head: Option<Vec<u8>>,
}

/// Counts the entries of `db` and finds its chain head, one entry at a time.
fn stream_of(db: &mut dyn Rows) -> Result<Streamed, AccountError> {
    let mut seen = Streamed::default();
    db.each_chained(&mut |_, _, hash| {
        seen.count += 1;
        seen.head = hash;
    })?;
    Ok(seen)
}

/// Writes one source entry into the target under the same id.
fn copy_entry(
    rows: &mut dyn Rows,
    e: &EntryColumns,
    idem: &Option<String>,
    hash: &Option<Vec<u8>>,
) -> Result<(), MigrateError> {
    let id = rows.next_entry_id()?;
    if id != e.id {
        return Err(MigrateError::Mismatch(format!(
            "the source's entry ids are not consecutive (entry {} would become {id})",
            e.id
        )));
    }
    let key = match (&e.node, &e.job, e.seq, idem) {
        (Some(n), Some(j), Some(s), Some(k)) => Some((n.as_str(), j.as_str(), s, k.as_str())),
        _ => None,
    };
    rows.insert_entry(&EntryRow {
        id,
        hash: hash.as_deref().unwrap_or_default(),
        at_us: e.at_us,
        user: &e.user,
        amount: e.amount,
        kind: &e.kind,
        key,
        rank: e.rank,
        interval: match e.interval {
            (Some(s), Some(t)) => Some((s, t)),
            _ => None,
        },
        cpu_us: e.cpu_us,
        actor: &e.actor,
        reason: e.reason.as_deref(),
        balance_after: e.balance_after,
    })?;
    Ok(())
}

/// Copies `source` into the empty ledger behind `target`, then checks the
/// copy through `check` (a reader of the target).
pub fn migrate(
    source: &mut dyn Rows,
    target: &mut dyn Writer,
    check: &mut dyn Reader,
) -> Result<Migrated, MigrateError> {
    let accounts = source.accounts()?;
    let mut entries = Streamed::default();
    let claims = source.claims()?;
    let ends = source.ends()?;
    let docs = super::projects::documents(source)?;
    let mut failed: Option<MigrateError> = None;
    let kept = target.transaction(&mut |tx| {
        let mut copy = || -> Result<(), MigrateError> {
            entries = Streamed::default();
            let rows = tx.rows();
            let held = rows.accounts()?.len();
            if held > 0 || rows.last_hash()?.is_some() {
                return Err(MigrateError::NotEmpty(format!("{held} accounts")));
            }
            for a in &accounts {
                rows.insert_account(&a.user, a.created_us, &a.created_by)?;
                rows.set_balance(&a.user, a.balance)?;
            }
            let mut copied: Result<(), MigrateError> = Ok(());
            source.each_chained(&mut |e, idem, hash| {
                if copied.is_ok() {
                    copied = copy_entry(rows, &e, &idem, &hash);
                    if copied.is_ok() {
                        entries.count += 1;
                        entries.head = hash;
                    }
                }
            })?;
            copied?;
            for (c, r) in &claims {
                rows.insert_claim(c, &r.node, r.at_us)?;
            }
            for (e, r) in &ends {
                rows.insert_end(e, &r.node, r.at_us)?;
            }
            for (k, v) in &docs {
                rows.put_doc(k, v)?;
            }
            Ok(())
        };
        match copy() {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    if !kept {
        return Err(MigrateError::Mismatch("the copy was rolled back".into()));
    }
    let mut verdict: Result<(), MigrateError> = Ok(());
    check.read(&mut |rows| {
        verdict = verify(rows, &accounts, &entries, claims.len(), ends.len()).and_then(|()| {
            if super::projects::documents(rows)? == docs {
                Ok(())
            } else {
                Err(MigrateError::Mismatch("the projects differ".into()))
            }
        })
    })?;
    verdict?;
    Ok(Migrated {
        accounts: accounts.len(),
        entries: entries.count,
        claims: claims.len(),
        ends: ends.len(),
        projects: docs.len(),
    })
}

/// The copy has the source's entries, balances and chain head, and audits clean.
fn verify(
    rows: &mut dyn Rows,
    accounts: &[super::rows::AccountRow],
    entries: &Streamed,
    claims: usize,
    ends: usize,
) -> Result<(), MigrateError> {
    let (got_claims, got_ends) = (rows.claims()?.len(), rows.ends()?.len());
    if (got_claims, got_ends) != (claims, ends) {
        return Err(MigrateError::Mismatch(format!(
            "{got_claims} claims and {got_ends} rank ends copied of {claims} and {ends}"
        )));
    }
    let copied = rows.accounts()?;
    if copied != accounts {
        return Err(MigrateError::Mismatch(
            "the accounts or balances differ".into(),
        ));
    }
    let copy = stream_of(rows)?;
    if copy.count != entries.count {
        return Err(MigrateError::Mismatch(format!(
            "{} entries copied of {}",
            copy.count, entries.count
        )));
    }
    if copy.head != entries.head {
        return Err(MigrateError::Mismatch("the chain heads differ".into()));
    }
    let report = audit::audit(rows)?;
    if let Some(p) = report.problems.first() {
        return Err(MigrateError::Mismatch(format!(
            "the copy's audit fails: {}",
            p.what
        )));
    }
    Ok(())
}
