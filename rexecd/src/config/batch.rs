//! The `[batch]` table: who may start ranks of users' signed batch jobs on this node
//! (`ToNode::LaunchSigned`), and where the node remembers the ranks it started.
//!
//! ```toml
//! [batch]
//! queues = ["batchd"]                  # service certificates that may start signed ranks
//! started = "/var/lib/rexecd/signed"   # one marker per started rank (default: JOURNAL.started)
//! ```
//!
//! `queues` defaults to `["batchd"]`; an empty list refuses every signed launch. The
//! `started` directory holds a marker per `(user, job, attempt, rank)` this node ever
//! started (until the job's signature expires), so a replay to this node is refused
//! even after the rank ended or rexecd restarted (accountd answers a node's repeated
//! claim `Claimed`, so it cannot tell a replay to the same node from a retry).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::ConfigError;

/// The queue service name allowed by default.
pub const DEFAULT_QUEUE: &str = "batchd";

/// Suffix of the started-rank marker directory's name after the debit journal's
/// (one journal per rexecd, so one marker directory per rexecd too).
pub const STARTED_SUFFIX: &str = ".started";

/// The `[batch]` table as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchFile {
    /// Service names that may send `LaunchSigned`.
    pub queues: Option<Vec<String>>,
    /// Directory of started-rank markers.
    pub started: Option<PathBuf>,
}

/// The resolved `[batch]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchConfig {
    /// Service certificate names that may start signed ranks.
    pub queues: Vec<String>,
    /// Where started ranks are remembered.
    pub started: PathBuf,
}

impl BatchConfig {
    /// Checks the table; `journal` is the debit journal's path (the markers default to
    /// the directory `JOURNAL.started` beside it).
    ///
    /// ```
    /// use rexecd::config::batch::{BatchConfig, BatchFile};
    /// let c = BatchConfig::resolve(BatchFile::default(), std::path::Path::new("/v/debits.journal")).unwrap();
    /// assert_eq!(c.queues, ["batchd"]);
    /// assert_eq!(c.started, std::path::Path::new("/v/debits.journal.started"));
    /// ```
    pub fn resolve(file: BatchFile, journal: &Path) -> Result<BatchConfig, ConfigError> {
        let queues = file
            .queues
            .unwrap_or_else(|| vec![DEFAULT_QUEUE.to_string()]);
        for q in &queues {
            certs::check_name(certs::Role::Service, q).map_err(|e| ConfigError::Invalid {
                key: "batch.queues",
                value: q.clone(),
                reason: e.to_string(),
            })?;
        }
        let started = match file.started {
            Some(p) if p.is_relative() => {
                return Err(ConfigError::Invalid {
                    key: "batch.started",
                    value: p.display().to_string(),
                    reason: "use an absolute path".to_string(),
                });
            }
            Some(p) => p,
            None => {
                let mut dir = journal.as_os_str().to_owned();
                dir.push(STARTED_SUFFIX);
                PathBuf::from(dir)
            }
        };
        Ok(BatchConfig { queues, started })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_are_service_names_and_started_is_absolute() {
        let j = Path::new("/v/j");
        let bad = BatchFile {
            queues: Some(vec!["Bad Name".into()]),
            started: None,
        };
        let e = BatchConfig::resolve(bad, j).unwrap_err().to_string();
        assert!(e.contains("batch.queues"), "{e}");
        let rel = BatchFile {
            queues: Some(vec![]),
            started: Some("rel".into()),
        };
        let e = BatchConfig::resolve(rel, j).unwrap_err().to_string();
        assert!(e.contains("absolute"), "{e}");
        let ok = BatchFile {
            queues: Some(vec!["q1".into(), "batchd".into()]),
            started: Some("/s".into()),
        };
        let c = BatchConfig::resolve(ok, j).unwrap();
        assert_eq!(c.queues, ["q1", "batchd"]);
        assert_eq!(c.started, Path::new("/s"));
    }
}
