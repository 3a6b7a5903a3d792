//! Cheap cgroup migrations: the kernel's `favordynmods` mount option.
//!
//! Every move of a process into a cgroup (the job's first process writing `0` to its
//! `cgroup.procs`, in every v1 hierarchy or the v2 one) takes the kernel's global
//! `cgroup_threadgroup_rwsem` for writing. That lock is a per-CPU rwsem kept in a fast
//! mode for readers (every fork, exit and thread creation), and a writer that finds it in
//! fast mode first waits for an RCU grace period: 6 to 26 ms on this 2-CPU machine under
//! load, by far the largest piece of a launch. A second migration within one grace period
//! is cheap (0.1 to 0.3 ms), so only a node that launches rarely pays it every time.
//!
//! `favordynmods` (Linux 6.0 and later) keeps the lock in its slow mode for good: a
//! migration no longer waits, at the price of a slightly costlier fork and exit for every
//! process on the host (the kernel's cgroup-v2 documentation describes the trade). The
//! lock is one for the whole host, whatever hierarchy carries the option, so setting it on
//! any cgroup2 mount also speeds up the v1 hierarchies of a hybrid host like this one.
//!
//! [`favor`] remounts each cgroup2 mount that lacks the option, keeping the options it
//! has (a bare remount would drop `nsdelegate` or `memory_recursiveprot`). It stays set
//! after rexecd exits, as a sysctl would: several rexecd may share the host. A host with
//! no cgroup2 mount at all is left as it is.

use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};

use super::detect::unescape;
use super::error::{CgroupError, Result};
use super::fs;

/// The mount option.
pub const OPTION: &str = "favordynmods";

/// What [`favor`] found or did on one cgroup2 mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It already had the option.
    AlreadySet(PathBuf),
    /// It was remounted with it.
    Remounted(PathBuf),
}

/// A cgroup2 mount as mountinfo shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup2Mount {
    /// The mount point.
    pub path: PathBuf,
    /// Its super options, e.g. `rw,nsdelegate,memory_recursiveprot`.
    pub options: String,
}

impl Cgroup2Mount {
    /// Whether `favordynmods` is already among its options.
    pub fn has_option(&self) -> bool {
        self.options.split(',').any(|o| o == OPTION)
    }

    /// The data for a remount that adds `favordynmods` and keeps the cgroup options it
    /// has (`rw`/`ro` are mount flags, not data), and whether it is read-only.
    pub fn remount_data(&self) -> (String, bool) {
        let mut read_only = false;
        let mut keep: Vec<&str> = Vec::new();
        for opt in self.options.split(',').filter(|o| !o.is_empty()) {
            match opt {
                "rw" => {}
                "ro" => read_only = true,
                other => keep.push(other),
            }
        }
        if !keep.contains(&OPTION) {
            keep.push(OPTION);
        }
        (keep.join(","), read_only)
    }
}

/// The cgroup2 mounts in mountinfo text (each mount point once, first wins).
pub fn cgroup2_mounts(mountinfo: &str) -> Vec<Cgroup2Mount> {
    let mut out: Vec<Cgroup2Mount> = Vec::new();
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().skip(6).position(|f| *f == "-").map(|p| p + 6) else {
            continue;
        };
        if fields.get(dash + 1) != Some(&"cgroup2") {
            continue;
        }
        let Some(point) = fields.get(4) else { continue };
        let path = PathBuf::from(unescape(point));
        if out.iter().any(|m| m.path == path) {
            continue;
        }
        let options = fields.get(dash + 3).copied().unwrap_or("").to_string();
        out.push(Cgroup2Mount { path, options });
    }
    out
}

/// Sets `favordynmods` on every cgroup2 mount of this host that lacks it. An empty
/// answer: the host has no cgroup2 mount (the option cannot be set).
pub fn favor() -> Result<Vec<Outcome>> {
    let text = fs::read(Path::new("/proc/self/mountinfo"))?;
    let mut done = Vec::new();
    for m in cgroup2_mounts(&text) {
        if m.has_option() {
            done.push(Outcome::AlreadySet(m.path));
            continue;
        }
        let (data, read_only) = m.remount_data();
        let mut flags = MsFlags::MS_REMOUNT;
        if read_only {
            flags |= MsFlags::MS_RDONLY;
        }
        mount(
            None::<&str>,
            &m.path,
            None::<&str>,
            flags,
            Some(data.as_str()),
        )
        .map_err(|errno| CgroupError::Remount {
            path: m.path.clone(),
            options: data.clone(),
            source: errno.into(),
        })?;
        done.push(Outcome::Remounted(m.path));
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "\
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
35 24 0:30 / /sys/fs/cgroup\\040x rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
36 24 0:31 / /mnt/ro ro shared:9 - cgroup2 cgroup2 ro,favordynmods
";

    #[test]
    fn finds_only_cgroup2_mounts_with_their_options() {
        let mounts = cgroup2_mounts(HOST);
        let paths: Vec<&Path> = mounts.iter().map(|m| m.path.as_path()).collect();
        assert_eq!(
            paths,
            [
                Path::new("/sys/fs/cgroup/unified"),
                Path::new("/sys/fs/cgroup x"),
                Path::new("/mnt/ro")
            ]
        );
        assert!(!mounts[0].has_option());
        assert!(mounts[2].has_option());
    }

    #[test]
    fn a_remount_keeps_the_cgroup_options_and_the_read_only_flag() {
        let mounts = cgroup2_mounts(HOST);
        assert_eq!(
            mounts[0].remount_data(),
            ("favordynmods".to_string(), false)
        );
        assert_eq!(
            mounts[1].remount_data(),
            (
                "nsdelegate,memory_recursiveprot,favordynmods".to_string(),
                false
            )
        );
        assert_eq!(mounts[2].remount_data(), ("favordynmods".to_string(), true));
    }

    #[test]
    fn malformed_lines_are_skipped() {
        assert!(cgroup2_mounts("garbage\n1 2 3\n\n").is_empty());
    }
}
