//! `accountctl migrate --from CONFIG --to CONFIG`: copies the ledger one
//! accountd config file names into the empty ledger another names (SQLite to
//! PostgreSQL or back; see [`crate::store::migrate`] for what is copied and
//! checked). Run it with every accountd of both stopped.

use std::path::Path;

use super::audit::{OfflineAuditError, open_ledger, postgres_of, settings};
use crate::config::ConfigError;
use crate::store::lite::{LiteReader, LiteWriter};
use crate::store::migrate::{MigrateError, Migrated, migrate};
use crate::store::rows::{Reader, Writer};
use crate::store::{pg, schema};

/// Why `accountctl migrate` failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CtlMigrateError {
    /// A ledger could not be opened.
    #[error(transparent)]
    Open(#[from] OfflineAuditError),
    /// The copy was refused or does not check out.
    #[error(transparent)]
    Migrate(#[from] MigrateError),
}

/// Copies the ledger of config `from` into the (empty) ledger of config `to`.
pub fn run(from: &Path, to: &Path) -> Result<Migrated, CtlMigrateError> {
    let mut source = open_ledger(&settings(from).map_err(OfflineAuditError::from)?)?;
    let target = settings(to).map_err(OfflineAuditError::from)?;
    let (mut w, mut r): (Box<dyn Writer>, Box<dyn Reader>) =
        match postgres_of(&target).map_err(OfflineAuditError::from)? {
            Some(cfg) => {
                let (w, r) = pg::open(&cfg, true).map_err(OfflineAuditError::from)?;
                (Box::new(w), Box::new(r))
            }
            None => {
                let db = target
                    .database
                    .clone()
                    .ok_or(OfflineAuditError::Config(ConfigError::Missing("database")))?;
                let w = schema::open_writer(&db, true).map_err(OfflineAuditError::from)?;
                let r = schema::open_reader(&db).map_err(OfflineAuditError::from)?;
                (Box::new(LiteWriter(w)), Box::new(LiteReader(r)))
            }
        };
    Ok(migrate(&mut *source, &mut *w, &mut *r)?)
}
