//! `accountctl audit --anchors FILE --ledger CONFIG`: the audit run on the
//! ledger's database itself (SQLite file or PostgreSQL, as accountd's config
//! file names it, opened read-only), followed by the check of every signed
//! chain head in FILE: each must carry a valid signature of the cluster's
//! accountd (a forged head is refused outright), and the ledger must still
//! hold each anchored hash at the anchored entry. This is what catches a
//! rewrite of the whole table with every hash recomputed.

use std::path::Path;

use proto::account::{AccountError, AuditReport};

use crate::config::{ConfigError, Flags, Settings};
use crate::store::anchors::{self, AnchorError};
use crate::store::pg::{self, Cache, Pg};
use crate::store::rows::Rows;
use crate::store::{StoreError, audit, lite::Lite, schema};

/// Why the offline audit could not run (problems found are not errors).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OfflineAuditError {
    /// accountd's config file is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The ledger cannot be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An anchor cannot be read, or is forged.
    #[error(transparent)]
    Anchor(#[from] AnchorError),
    /// Reading the ledger failed.
    #[error("{0}")]
    Ledger(AccountError),
}

/// The settings of accountd's config file `config` (the file alone, no flags).
pub fn settings(config: &Path) -> Result<Settings, ConfigError> {
    Settings::layered(Settings::read(config)?, &Flags::default())
}

/// The PostgreSQL settings of `s`, if its ledger is in PostgreSQL.
pub fn postgres_of(s: &Settings) -> Result<Option<pg::PgConfig>, ConfigError> {
    match &s.store {
        Some(store) => store.postgres(),
        None => Ok(None),
    }
}

/// The ledger `s` names, opened for reading only.
pub fn open_ledger(s: &Settings) -> Result<Box<dyn Rows>, OfflineAuditError> {
    Ok(match postgres_of(s)? {
        Some(cfg) => Box::new(Pg::new(pg::connect(&cfg)?, Cache::default())),
        None => {
            let db = s.database.clone().ok_or(ConfigError::Missing("database"))?;
            Box::new(Lite(schema::open_reader(&db)?))
        }
    })
}

/// Audits the ledger accountd's config file `config` names, and checks it
/// against the signed heads in `anchors_file`.
pub fn offline(config: &Path, anchors_file: &Path) -> Result<AuditReport, OfflineAuditError> {
    let s = settings(config)?;
    let ca = s.tls.ca.clone().ok_or(ConfigError::Missing("ca"))?;
    let mut rows = open_ledger(&s)?;
    let kept = anchors::read(anchors_file)?;
    for a in &kept {
        a.verify(&ca)?;
    }
    let mut report = audit::audit(&mut *rows).map_err(OfflineAuditError::Ledger)?;
    let found = anchors::check(&mut *rows, &kept).map_err(OfflineAuditError::Ledger)?;
    report.problems.extend(found);
    Ok(report)
}
