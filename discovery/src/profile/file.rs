//! The history file: small, fixed layout, written atomically, read with
//! validation. A crash mid-save leaves the old file; a corrupt or foreign
//! file is a clear [`HistoryFileError`], never a panic.
//!
//! Layout (little-endian): `RXAH`, version 1, window (weeks merged), number
//! of weeks kept, a zero byte; per week its index (u64) and [`SLOTS`] pairs
//! of (samples u32, busy thousandths u32); then an FNV-1a 64 checksum of
//! everything before it. With the default window of 4 weeks: 32 KiB.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::{History, MAX_WINDOW_WEEKS, SLOTS, SlotCount, Week};
use crate::hash::fnv1a;

const MAGIC: [u8; 4] = *b"RXAH";
const VERSION: u8 = 1;
const HEADER: usize = 8;
const WEEK_LEN: usize = 8 + SLOTS * 8;
const MAX_LEN: usize = HEADER + MAX_WINDOW_WEEKS * WEEK_LEN + 8;

/// Why the history file cannot be saved or loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryFileError {
    /// Reading or writing failed.
    #[error("availability history {path}: {op}: {source}")]
    Io {
        /// The file (or its temporary sibling, or directory).
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a valid history; move it aside to start afresh.
    #[error(
        "availability history {path} is corrupt ({reason}); move it aside to start a new history"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The file's bytes for `history`.
pub fn to_bytes(history: &History) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + history.weeks.len() * WEEK_LEN + 8);
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(history.window as u8);
    out.push(history.weeks.len() as u8);
    out.push(0);
    for w in &history.weeks {
        out.extend_from_slice(&w.index.to_le_bytes());
        for s in &w.slots {
            out.extend_from_slice(&s.samples.to_le_bytes());
            out.extend_from_slice(&s.busy_milli.to_le_bytes());
        }
    }
    let sum = fnv1a(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Parse the file's bytes; the error says what is wrong (no path).
pub fn from_bytes(bytes: &[u8]) -> Result<History, String> {
    if bytes.len() < HEADER + 8 {
        return Err(format!("{} bytes is too short", bytes.len()));
    }
    if bytes[..4] != MAGIC {
        return Err("not an availability history (wrong magic bytes)".into());
    }
    if bytes[4] != VERSION {
        return Err(format!(
            "layout version {} is not supported (this build reads {VERSION})",
            bytes[4]
        ));
    }
    let window = bytes[5] as usize;
    let count = bytes[6] as usize;
    if !(1..=MAX_WINDOW_WEEKS).contains(&window) || count > window || bytes[7] != 0 {
        return Err(format!(
            "header gives {count} weeks in a window of {window}"
        ));
    }
    let want = HEADER + count * WEEK_LEN + 8;
    if bytes.len() != want {
        return Err(format!(
            "{} bytes where {count} weeks take {want}",
            bytes.len()
        ));
    }
    let (body, sum) = bytes.split_at(want - 8);
    let u32_at = |i: usize| u32::from_le_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
    if fnv1a(body) != u64::from_le_bytes(sum.try_into().map_err(|_| "checksum")?) {
        return Err("checksum mismatch (truncated or altered)".into());
    }
    let mut weeks: Vec<Week> = Vec::with_capacity(count);
    for k in 0..count {
        let at = HEADER + k * WEEK_LEN;
        let mut index = [0u8; 8];
        index.copy_from_slice(&body[at..at + 8]);
        let index = u64::from_le_bytes(index);
        if weeks.last().is_some_and(|w| w.index >= index) {
            return Err(format!("week {index} is out of order"));
        }
        let mut slots = Vec::with_capacity(SLOTS);
        for s in 0..SLOTS {
            let p = at + 8 + s * 8;
            let c = SlotCount {
                samples: u32_at(p),
                busy_milli: u32_at(p + 4),
            };
            if c.busy_milli as u64 > c.samples as u64 * 1000 {
                return Err(format!(
                    "week {index} slot {s} is busier than its samples allow"
                ));
            }
            slots.push(c);
        }
        weeks.push(Week { index, slots });
    }
    Ok(History::from_parts(window, weeks))
}

/// Save atomically: write a temporary file beside `path`, fsync it, rename
/// it over `path`, fsync the directory.
pub fn save(history: &History, path: &Path) -> Result<(), HistoryFileError> {
    fn io(p: &Path, op: &'static str) -> impl FnOnce(std::io::Error) -> HistoryFileError {
        let path = p.to_path_buf();
        move |source| HistoryFileError::Io { path, op, source }
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let write = || -> Result<(), HistoryFileError> {
        let mut f = File::create(&tmp).map_err(io(&tmp, "create"))?;
        f.write_all(&to_bytes(history)).map_err(io(&tmp, "write"))?;
        f.sync_all().map_err(io(&tmp, "fsync"))?;
        fs::rename(&tmp, path).map_err(io(path, "rename into place"))?;
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&dir, "fsync directory"))
    };
    let result = write();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Load and validate. A missing file is an `Io` error of kind `NotFound`
/// (the caller starts a new history); anything else wrong is `Corrupt`.
pub fn load(path: &Path) -> Result<History, HistoryFileError> {
    let io = |op| {
        move |source| HistoryFileError::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    };
    let f = File::open(path).map_err(io("open"))?;
    let mut bytes = Vec::new();
    f.take(MAX_LEN as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io("read"))?;
    if bytes.len() > MAX_LEN {
        return Err(HistoryFileError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("over {MAX_LEN} bytes"),
        });
    }
    from_bytes(&bytes).map_err(|reason| HistoryFileError::Corrupt {
        path: path.to_path_buf(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample_history() -> History {
        let mut h = History::new(3);
        for k in 0..5u64 {
            for s in (0..SLOTS as u64).step_by(7) {
                h.record(
                    1_704_067_200 + k * crate::clock::WEEK_SECS + s * 600,
                    (s % 3) as f64 / 2.0,
                );
            }
        }
        h
    }

    #[test]
    fn saves_and_loads_the_same_history() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("availability");
        let h = sample_history();
        save(&h, &path).unwrap();
        assert_eq!(load(&path).unwrap(), h);
        // Saving again replaces it and leaves no temporary file behind.
        save(&History::new(2), &path).unwrap();
        assert_eq!(load(&path).unwrap(), History::new(2));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn corrupt_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("availability");
        let good = to_bytes(&sample_history());
        for (bytes, needle) in [
            (good[..good.len() - 1].to_vec(), "bytes where"),
            (b"hello world, not a history".to_vec(), "wrong magic"),
            (
                {
                    let mut b = good.clone();
                    b[100] ^= 1;
                    b
                },
                "checksum",
            ),
            (
                {
                    let mut b = good.clone();
                    b[4] = 7;
                    b
                },
                "version 7",
            ),
        ] {
            fs::write(&path, &bytes).unwrap();
            let e = load(&path).unwrap_err().to_string();
            assert!(e.contains(needle) && e.contains("corrupt"), "{e}");
        }
        let e = load(&dir.path().join("missing")).unwrap_err();
        assert!(
            matches!(e, HistoryFileError::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound)
        );
    }

    proptest! {
        #[test]
        fn any_bytes_load_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let _ = from_bytes(&bytes);
        }

        #[test]
        fn flipped_bytes_never_panic(pos in 0usize..(HEADER + 3 * WEEK_LEN + 8), bit in 0u8..8) {
            let mut b = to_bytes(&sample_history());
            let pos = pos % b.len();
            b[pos] ^= 1 << bit;
            prop_assert!(from_bytes(&b).is_err());
        }
    }
}
