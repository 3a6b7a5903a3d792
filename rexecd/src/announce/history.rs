//! The node's availability history on disk: loaded at start (a missing file
//! starts a new history; a corrupt one is moved aside with a warning and a new
//! history starts: start-up never fails over it), saved atomically (see
//! [`discovery::profile::file::save`]) whenever a slot closes and at shutdown.

use std::path::{Path, PathBuf};

use discovery::profile::History;
use discovery::profile::file::{self, HistoryFileError};

/// Loads the history at `path`, or starts a new one merging `weeks` weeks.
pub fn load(path: &Path, weeks: usize) -> History {
    match file::load(path) {
        Ok(h) => {
            let samples: u64 = h
                .weeks()
                .flat_map(|w| w.slots.iter())
                .map(|s| u64::from(s.samples))
                .sum();
            tracing::info!(path = %path.display(), weeks = h.weeks().count(), samples,
                "availability history loaded");
            h
        }
        Err(HistoryFileError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            tracing::info!(path = %path.display(), "no availability history yet; starting one");
            History::new(weeks)
        }
        Err(e @ HistoryFileError::Corrupt { .. }) => {
            let aside = aside_name(path);
            match std::fs::rename(path, &aside) {
                Ok(()) => tracing::warn!(error = %e, kept = %aside.display(),
                    "availability history unreadable; kept aside, starting a new one"),
                Err(r) => tracing::warn!(error = %e, move_error = %r,
                    "availability history unreadable and cannot be moved aside; starting a new one (it will be overwritten)"),
            }
            History::new(weeks)
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the availability history; starting a new one");
            History::new(weeks)
        }
    }
}

/// `path` with `.corrupt-<unix seconds>` appended.
fn aside_name(path: &Path) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".corrupt-{secs}"));
    PathBuf::from(name)
}

/// Saves `history` atomically, creating the directory when missing.
pub fn save(history: &History, path: &Path) -> Result<(), HistoryFileError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.is_dir()
    {
        std::fs::create_dir_all(dir).map_err(|source| HistoryFileError::Io {
            path: dir.to_path_buf(),
            op: "create directory",
            source,
        })?;
    }
    file::save(history, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_corrupt_and_saved_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/availability");
        let mut h = load(&path, 3);
        assert_eq!((h.window(), h.weeks().count()), (3, 0));
        assert!(h.record(1_704_067_200, 0.5));
        save(&h, &path).unwrap();
        assert_eq!(load(&path, 3), h);

        std::fs::write(&path, b"not a history").unwrap();
        let fresh = load(&path, 2);
        assert_eq!((fresh.window(), fresh.weeks().count()), (2, 0));
        assert!(!path.exists(), "the corrupt file was moved aside");
        let kept: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("availability.corrupt-"))
            .collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
    }
}
