//! Fencing of batch queues: the highest lease epoch this node has seen from each
//! queue (by its service name), and the refusal of a launch or kill that carries
//! a lower one. Several batchd may share one queue's database; one of them leads
//! at a time, under a lease whose epoch grows at each change of leader, and every
//! launch and kill it sends carries that epoch. A leader that was paused or cut
//! off and comes back still believes it leads; its epoch is below its
//! successor's, so once the successor has reached this node the old leader can
//! start nothing here.
//!
//! The epochs are kept in memory and, for each queue, in one file
//! `<[batch] started>.fence/<queue>` holding the number, written (temporary file,
//! `fsync`, rename, directory `fsync`) before the raised epoch is accepted, so a
//! restart of rexecd forgets nothing. Epoch 0 (a queue on SQLite, which has no
//! lease, or a queue older than the field) is accepted while nothing higher was
//! seen from that queue, so such queues behave as before.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::MarkerError;

/// Suffix of the fence directory's name after the started-rank marker directory's.
pub const FENCE_SUFFIX: &str = ".fence";

/// Why a queue's request was fenced off.
#[derive(Debug, thiserror::Error)]
pub enum Fenced {
    /// A lower epoch than one seen before.
    #[error(
        "queue {queue} sent lease epoch {epoch}, but this node has seen epoch {highest} from it: \
         a newer leader has replaced the sender, which may start nothing here"
    )]
    Stale {
        /// The queue.
        queue: String,
        /// What it sent.
        epoch: u64,
        /// The highest seen.
        highest: u64,
    },
    /// A raised epoch could not be recorded.
    #[error("cannot record lease epoch {epoch} of queue {queue}: {source}")]
    Record {
        /// The queue.
        queue: String,
        /// The epoch.
        epoch: u64,
        /// Why.
        source: MarkerError,
    },
}

/// The highest epoch seen from each queue (see the module doc).
#[derive(Debug)]
pub struct Fences {
    dir: PathBuf,
    seen: Mutex<HashMap<String, u64>>,
}

/// The fence directory beside the started-rank marker directory `started`.
pub fn dir_for(started: &Path) -> PathBuf {
    let mut dir = started.as_os_str().to_owned();
    dir.push(FENCE_SUFFIX);
    PathBuf::from(dir)
}

impl Fences {
    /// Reads the epochs recorded in `dir` (none when it does not exist yet).
    pub fn open(dir: &Path) -> Result<Fences, MarkerError> {
        let err = |path: &Path, source| MarkerError {
            path: path.to_path_buf(),
            source,
        };
        let mut seen = HashMap::new();
        if dir.exists() {
            for entry in fs::read_dir(dir).map_err(|e| err(dir, e))? {
                let path = entry.map_err(|e| err(dir, e))?.path();
                let Some(queue) = path.file_name().and_then(|n| n.to_str()) else {
                    continue;
                };
                if queue.starts_with('.') {
                    continue;
                }
                let text = fs::read_to_string(&path).map_err(|e| err(&path, e))?;
                let epoch = text.trim().parse::<u64>().map_err(|e| {
                    err(
                        &path,
                        std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                    )
                })?;
                seen.insert(queue.to_string(), epoch);
            }
        }
        Ok(Fences {
            dir: dir.to_path_buf(),
            seen: Mutex::new(seen),
        })
    }

    /// The highest epoch seen from `queue` (0 when none).
    pub fn highest(&self, queue: &str) -> u64 {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.get(queue).copied().unwrap_or(0)
    }

    /// Admits a request of `queue` carrying `epoch`: refused when a higher epoch
    /// was seen; a higher epoch than any seen is recorded on disk first.
    pub fn admit(&self, queue: &str, epoch: u64) -> Result<(), Fenced> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let highest = seen.get(queue).copied().unwrap_or(0);
        if epoch < highest {
            return Err(Fenced::Stale {
                queue: queue.to_string(),
                epoch,
                highest,
            });
        }
        if epoch > highest {
            self.record(queue, epoch).map_err(|source| Fenced::Record {
                queue: queue.to_string(),
                epoch,
                source,
            })?;
            seen.insert(queue.to_string(), epoch);
        }
        Ok(())
    }

    fn record(&self, queue: &str, epoch: u64) -> Result<(), MarkerError> {
        let err = |path: &Path, source| MarkerError {
            path: path.to_path_buf(),
            source,
        };
        if queue.is_empty()
            || queue.starts_with('.')
            || !queue
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            let bad = std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a queue name");
            return Err(err(&self.dir.join(queue), bad));
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| err(&self.dir, e))?;
        let path = self.dir.join(queue);
        let tmp = self.dir.join(format!(".{queue}.tmp"));
        let mut f = fs::File::create(&tmp).map_err(|e| err(&tmp, e))?;
        writeln!(f, "{epoch}").map_err(|e| err(&tmp, e))?;
        f.sync_all().map_err(|e| err(&tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| err(&path, e))?;
        fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| err(&self.dir, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lower_epoch_is_refused_and_the_highest_survives_a_restart() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = dir_for(&tmp.path().join("signed"));
        let f = Fences::open(&dir).unwrap();
        f.admit("batchd", 0).unwrap();
        f.admit("batchd", 3).unwrap();
        f.admit("batchd", 3).unwrap();
        let e = f.admit("batchd", 2).unwrap_err();
        assert!(e.to_string().contains("epoch 2"), "{e}");
        f.admit("other", 1).unwrap();
        let again = Fences::open(&dir).unwrap();
        assert_eq!(again.highest("batchd"), 3);
        assert!(matches!(
            again.admit("batchd", 0),
            Err(Fenced::Stale { .. })
        ));
        assert_eq!(again.highest("other"), 1);
    }
}
