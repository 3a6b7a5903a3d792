//! Small file helpers shared by the v1 and v2 code: read, write, list and parse control files,
//! always turning an I/O error into a [`CgroupError`] that names the path.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::error::{CgroupError, Result};
use crate::sys::ProcessId;

/// Reads a whole control file.
pub(crate) fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|source| CgroupError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `data` to a control file in one `write(2)`, as the kernel expects.
pub(crate) fn write(path: &Path, data: &str) -> Result<()> {
    let err = |source: io::Error| CgroupError::Write {
        path: path.to_path_buf(),
        data: data.to_string(),
        source,
    };
    let mut file = fs::OpenOptions::new().write(true).open(path).map_err(err)?;
    file.write_all(data.as_bytes()).map_err(err)
}

/// Opens a control file for writing later (for example from a child before `exec`).
pub(crate) fn open_for_write(path: &Path) -> Result<fs::File> {
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|source| CgroupError::Open {
            path: path.to_path_buf(),
            source,
        })
}

/// Reads a list of ids, one a line (`cgroup.procs`, `cgroup.threads`, `tasks`).
pub(crate) fn read_ids(path: &Path) -> Result<Vec<ProcessId>> {
    let text = read(path)?;
    parse_ids(&text).map_err(|detail| CgroupError::Parse {
        path: path.to_path_buf(),
        detail,
    })
}

/// Parses one id a line; blank lines are ignored.
pub(crate) fn parse_ids(text: &str) -> std::result::Result<Vec<ProcessId>, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| match l.parse::<i32>() {
            Ok(n) if n > 0 => Ok(ProcessId(n)),
            _ => Err(format!("{l:?} is not a process id")),
        })
        .collect()
}

/// Creates one directory (not its parents); `Ok(false)` when it already existed.
pub(crate) fn create_dir(path: &Path) -> Result<bool> {
    match fs::create_dir(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(source) => Err(CgroupError::CreateDir {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Creates `base/rel` and every missing directory between them.
pub(crate) fn create_dirs(base: &Path, rel: &Path) -> Result<()> {
    let mut dir = base.to_path_buf();
    for part in rel.components() {
        dir.push(part);
        create_dir(&dir)?;
    }
    Ok(())
}

/// Removes a cgroup directory; a directory that is already gone is fine.
pub(crate) fn remove_dir(path: &Path) -> Result<()> {
    match fs::remove_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(CgroupError::RemoveDir {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Names of the subdirectories of `dir` that look like `job-<u64>`, as ids; a missing
/// `dir` has none.
pub(crate) fn job_dirs(dir: &Path) -> Result<Vec<u64>> {
    let err = |source| CgroupError::ReadDir {
        path: dir.to_path_buf(),
        source,
    };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(err(e)),
    };
    let mut ids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(err)?;
        let is_dir = entry.file_type().map_err(err)?.is_dir();
        if let (true, Some(id)) = (is_dir, entry.file_name().to_str().and_then(parse_job_dir)) {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// The directory name of a job cgroup.
pub(crate) fn job_dir_name(id: u64) -> String {
    format!("job-{id}")
}

/// The id in a `job-<u64>` directory name.
pub(crate) fn parse_job_dir(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("job-")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `base/parent/job-<id>`.
pub(crate) fn job_path(base: &Path, parent: &Path, id: u64) -> PathBuf {
    base.join(parent).join(job_dir_name(id))
}

/// Parses a single unsigned integer file such as `cpu.shares` or `cpuacct.usage`.
pub(crate) fn parse_u64(path: &Path, text: &str) -> Result<u64> {
    text.trim().parse().map_err(|_| CgroupError::Parse {
        path: path.to_path_buf(),
        detail: format!("expected an unsigned integer, found {:?}", text.trim()),
    })
}

/// The value of `key` in a flat keyed file such as `cpu.stat` or `cgroup.events`.
pub(crate) fn keyed_value(path: &Path, text: &str, key: &str) -> Result<u64> {
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if words.next() == Some(key) {
            let value = words.next().unwrap_or("");
            return parse_u64(path, value);
        }
    }
    Err(CgroupError::Parse {
        path: path.to_path_buf(),
        detail: format!("no {key} line"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_and_reject_garbage() {
        assert_eq!(
            parse_ids("12\n\n345\n").unwrap(),
            vec![ProcessId(12), ProcessId(345)]
        );
        assert!(parse_ids("12\nabc\n").is_err());
        assert!(parse_ids("0\n").is_err());
        assert!(parse_ids("").unwrap().is_empty());
    }

    #[test]
    fn job_dir_names_round_trip() {
        assert_eq!(parse_job_dir(&job_dir_name(42)), Some(42));
        assert_eq!(parse_job_dir("job-"), None);
        assert_eq!(parse_job_dir("job-+1"), None);
        assert_eq!(parse_job_dir("job-99999999999999999999999"), None);
        assert_eq!(parse_job_dir("other"), None);
    }

    #[test]
    fn write_error_names_path_and_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("cpu.weight");
        let err = write(&path, "100").unwrap_err().to_string();
        assert!(
            err.contains("cpu.weight") && err.contains("\"100\""),
            "{err}"
        );
    }
}
