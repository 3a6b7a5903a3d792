//! Job cgroups: one parent cgroup owned by rexecd and one child `job-<id>` per job, in
//! the hierarchy that holds the `cpu` controller.
//!
//! [`CgroupBackend`] is the file protocol of one cgroup version, implemented by
//! [`v1::V1Cgroups`] and [`v2::V2Cgroups`] and dispatched by [`AnyCgroup`];
//! [`detect`] finds out which one a host needs. [`JobCgroups`] builds the job life
//! cycle on top: create, join (for the spawn layer), weights, metering, teardown and the
//! start-up sweep of stale cgroups. Sub-modules: `error` (the error type), `weight`
//! (ranges and ticket-to-weight mapping), `procstat` (runnable threads from `/proc`),
//! `jobs` (the manager), `fs` (path-carrying file helpers), `cpuset` (cpu lists and the
//! checks and writes that confine a node to its own CPUs), `quota` (CFS bandwidth
//! limits), `dynmods` (the `favordynmods` mount option that keeps migrations into a job
//! cgroup from waiting for an RCU grace period), `memory` (per-rank memory limits and
//! how a kill for memory shows).

pub mod cpuset;
pub mod detect;
pub mod dynmods;
pub mod error;
mod fs;
mod jobs;
pub mod memory;
mod peak;
pub mod procstat;
pub mod quota;
pub mod v1;
pub mod v2;
pub mod weight;

use std::fs::File;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::Signal;

pub use cpuset::{CpuListError, CpuSet};
pub use detect::Hierarchy;
pub use error::{CgroupError, Result};
pub use jobs::{JobCgroups, JobSample};
pub use quota::CpuQuota;
pub use weight::{WeightRange, weights_for_tickets};

use crate::sys::{self, ProcessId};

/// cgroup version of a hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// Legacy per-controller hierarchies.
    V1,
    /// The unified hierarchy.
    V2,
}

/// The name of rexecd's parent cgroup, relative to each hierarchy's mount point, for
/// example `rexec` or `rexec-node3` (so several rexecd on one machine do not collide).
/// Nested names like `rexec/node3` are allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentName(PathBuf);

impl ParentName {
    /// Validates a name: relative, no `.` or `..`, components of `[A-Za-z0-9._-]`, and
    /// not itself of the form `job-<n>` (that is a job directory).
    ///
    /// ```
    /// use rexecd::cgroup::ParentName;
    /// assert!(ParentName::new("rexec-node1").is_ok());
    /// assert!(ParentName::new("rexec/node1").is_ok());
    /// assert!(ParentName::new("../etc").is_err());
    /// assert!(ParentName::new("/abs").is_err());
    /// ```
    pub fn new(name: &str) -> Result<ParentName> {
        let bad = |reason| CgroupError::InvalidName {
            name: name.to_string(),
            reason,
        };
        if name.is_empty() || name.len() > 200 {
            return Err(bad("must be 1 to 200 characters"));
        }
        let path = Path::new(name);
        for part in path.components() {
            let Component::Normal(part) = part else {
                return Err(bad("must be a relative path without '.' or '..'"));
            };
            let part = part.to_str().unwrap_or("");
            let ok = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.';
            if part.is_empty() || part.starts_with('.') || !part.bytes().all(ok) {
                return Err(bad("use only letters, digits, '-', '_' and '.'"));
            }
            if fs::parse_job_dir(part).is_some() {
                return Err(bad("job-<n> is reserved for job cgroups"));
            }
        }
        Ok(ParentName(path.to_path_buf()))
    }

    /// The name as a relative path.
    pub fn as_path(&self) -> &Path {
        &self.0
    }
}

/// Opened `cgroup.procs` files of one job (one per hierarchy), ready for a child process
/// to write `0` to before its `exec`. Opened before the child exists so that it needs
/// no path lookup and no allocation.
#[derive(Debug)]
pub struct CgroupJoin {
    paths: Vec<PathBuf>,
    files: Vec<File>,
}

impl CgroupJoin {
    /// The `cgroup.procs` paths, in the order of the files.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Gives up the open files (for [`crate::sys::child::ChildSetup`]).
    pub fn into_files(self) -> Vec<File> {
        self.files
    }

    /// Writes the pid of an already running process into every hierarchy of the job
    /// (for processes the spawn layer did not start, e.g. in tests).
    pub fn add_process(&self, pid: ProcessId) -> Result<()> {
        for path in &self.paths {
            fs::write(path, &pid.0.to_string())?;
        }
        Ok(())
    }

    fn open(paths: Vec<PathBuf>) -> Result<CgroupJoin> {
        let files = paths
            .iter()
            .map(|p| fs::open_for_write(p))
            .collect::<Result<_>>()?;
        Ok(CgroupJoin { paths, files })
    }
}

/// The file protocol of one cgroup version for rexecd's parent and its job cgroups. All
/// job operations name the job by its numeric id; the directory is `job-<id>`.
pub trait CgroupBackend {
    /// The cgroup version.
    fn version(&self) -> CgroupVersion;
    /// The weight range of this version.
    fn weight_range(&self) -> WeightRange {
        match self.version() {
            CgroupVersion::V1 => WeightRange::V1_SHARES,
            CgroupVersion::V2 => WeightRange::V2_WEIGHT,
        }
    }
    /// The parent directory in the `cpu` hierarchy.
    fn parent_path(&self) -> PathBuf;
    /// The job directory in the `cpu` hierarchy.
    fn job_path(&self, id: u64) -> PathBuf;
    /// The CPUs the node is confined to, if it is pinned.
    fn cpus(&self) -> Option<&CpuSet>;
    /// Creates the parent (and, on v2, enables `cpu` and `pids` for its children). A
    /// pinned backend checks its CPUs (each must exist and be allowed to the parent)
    /// and confines the parent to them through the cpuset controller.
    fn create_parent(&self) -> Result<()>;
    /// Removes the (empty) parent.
    fn remove_parent(&self) -> Result<()>;
    /// Creates the job cgroup; [`CgroupError::JobExists`] if it is already there.
    fn create_job(&self, id: u64) -> Result<()>;
    /// True if any directory of the job exists.
    fn job_exists(&self, id: u64) -> bool;
    /// Removes the job's directories (they must be empty of processes).
    fn remove_job(&self, id: u64) -> Result<()>;
    /// Ids of the job directories under the parent.
    fn job_ids(&self) -> Result<Vec<u64>>;
    /// Opens the job's `cgroup.procs` files for joining.
    fn open_join(&self, id: u64) -> Result<CgroupJoin>;
    /// Writes the CPU weight (`cpu.shares` on v1, `cpu.weight` on v2).
    fn set_weight(&self, id: u64, weight: u64) -> Result<()>;
    /// Reads the CPU weight back.
    fn weight(&self, id: u64) -> Result<u64>;
    /// Sets the CFS bandwidth limit (`cpu.cfs_quota_us` and `cpu.cfs_period_us` on v1,
    /// `cpu.max` on v2); `None` removes it.
    fn set_quota(&self, id: u64, limit: Option<CpuQuota>) -> Result<()>;
    /// Reads the CFS bandwidth limit back.
    fn quota(&self, id: u64) -> Result<Option<CpuQuota>>;
    /// Total CPU time used by the job so far.
    fn usage(&self, id: u64) -> Result<Duration>;
    /// Total time the job's run queues spent throttled by its CFS bandwidth limit so
    /// far, summed over CPUs (`cpu.stat`: v1 `throttled_time`, nanoseconds; v2
    /// `throttled_usec`): CPU the job wanted and its cap held back.
    fn throttled(&self, id: u64) -> Result<Duration>;
    /// Every thread of the job.
    fn threads(&self, id: u64) -> Result<Vec<ProcessId>>;
    /// Every process of the job, sorted and without duplicates.
    fn procs(&self, id: u64) -> Result<Vec<ProcessId>>;
    /// Starts freezing the job; `Ok(false)` when no freezer is available.
    fn freeze(&self, id: u64) -> Result<bool>;
    /// True once the freeze has completed.
    fn is_frozen(&self, id: u64) -> Result<bool>;
    /// Thaws the job (no-op without a freezer).
    fn thaw(&self, id: u64) -> Result<()>;
    /// Sends SIGKILL to every process of the job (`cgroup.kill` where it exists).
    fn kill_all(&self, id: u64) -> Result<()>;
    /// Limits the job's memory to `bytes` (see [`memory`]); over it the kernel kills
    /// a process of the job. [`CgroupError::ControllerMissing`] without the memory
    /// controller.
    fn set_memory_limit(&self, id: u64, bytes: u64) -> Result<()>;
    /// How many processes of the job the kernel killed for going over its memory
    /// limit (0 without the memory controller).
    fn oom_kills(&self, id: u64) -> Result<u64>;
}

/// A backend for either cgroup version, chosen at run time.
#[derive(Debug, Clone)]
pub enum AnyCgroup {
    /// cgroup v1.
    V1(v1::V1Cgroups),
    /// cgroup v2.
    V2(v2::V2Cgroups),
}

impl AnyCgroup {
    /// The backend for a detected hierarchy and parent name.
    pub fn new(hierarchy: Hierarchy, parent: &ParentName) -> AnyCgroup {
        match hierarchy {
            Hierarchy::V1(mounts) => AnyCgroup::V1(v1::V1Cgroups::new(mounts, parent)),
            Hierarchy::V2 { root } => AnyCgroup::V2(v2::V2Cgroups::new(root, parent)),
        }
    }

    /// The backend for a hierarchy and parent name, confined to `cpus` when given
    /// (without: as [`AnyCgroup::new`]).
    pub fn pinned(hierarchy: Hierarchy, parent: &ParentName, cpus: Option<CpuSet>) -> AnyCgroup {
        match (AnyCgroup::new(hierarchy, parent), cpus) {
            (AnyCgroup::V1(b), Some(cpus)) => AnyCgroup::V1(b.with_cpus(cpus)),
            (AnyCgroup::V2(b), Some(cpus)) => AnyCgroup::V2(b.with_cpus(cpus)),
            (any, None) => any,
        }
    }
}

macro_rules! delegate {
    ($self:ident, $b:ident => $e:expr) => {
        match $self {
            AnyCgroup::V1($b) => $e,
            AnyCgroup::V2($b) => $e,
        }
    };
}

impl CgroupBackend for AnyCgroup {
    fn version(&self) -> CgroupVersion {
        delegate!(self, b => b.version())
    }
    fn parent_path(&self) -> PathBuf {
        delegate!(self, b => b.parent_path())
    }
    fn job_path(&self, id: u64) -> PathBuf {
        delegate!(self, b => b.job_path(id))
    }
    fn cpus(&self) -> Option<&CpuSet> {
        delegate!(self, b => b.cpus())
    }
    fn create_parent(&self) -> Result<()> {
        delegate!(self, b => b.create_parent())
    }
    fn remove_parent(&self) -> Result<()> {
        delegate!(self, b => b.remove_parent())
    }
    fn create_job(&self, id: u64) -> Result<()> {
        delegate!(self, b => b.create_job(id))
    }
    fn job_exists(&self, id: u64) -> bool {
        delegate!(self, b => b.job_exists(id))
    }
    fn remove_job(&self, id: u64) -> Result<()> {
        delegate!(self, b => b.remove_job(id))
    }
    fn job_ids(&self) -> Result<Vec<u64>> {
        delegate!(self, b => b.job_ids())
    }
    fn open_join(&self, id: u64) -> Result<CgroupJoin> {
        delegate!(self, b => b.open_join(id))
    }
    fn set_weight(&self, id: u64, weight: u64) -> Result<()> {
        delegate!(self, b => b.set_weight(id, weight))
    }
    fn weight(&self, id: u64) -> Result<u64> {
        delegate!(self, b => b.weight(id))
    }
    fn set_quota(&self, id: u64, limit: Option<CpuQuota>) -> Result<()> {
        delegate!(self, b => b.set_quota(id, limit))
    }
    fn quota(&self, id: u64) -> Result<Option<CpuQuota>> {
        delegate!(self, b => b.quota(id))
    }
    fn usage(&self, id: u64) -> Result<Duration> {
        delegate!(self, b => b.usage(id))
    }
    fn throttled(&self, id: u64) -> Result<Duration> {
        delegate!(self, b => b.throttled(id))
    }
    fn threads(&self, id: u64) -> Result<Vec<ProcessId>> {
        delegate!(self, b => b.threads(id))
    }
    fn procs(&self, id: u64) -> Result<Vec<ProcessId>> {
        delegate!(self, b => b.procs(id))
    }
    fn freeze(&self, id: u64) -> Result<bool> {
        delegate!(self, b => b.freeze(id))
    }
    fn is_frozen(&self, id: u64) -> Result<bool> {
        delegate!(self, b => b.is_frozen(id))
    }
    fn thaw(&self, id: u64) -> Result<()> {
        delegate!(self, b => b.thaw(id))
    }
    fn kill_all(&self, id: u64) -> Result<()> {
        delegate!(self, b => b.kill_all(id))
    }
    fn set_memory_limit(&self, id: u64, bytes: u64) -> Result<()> {
        delegate!(self, b => b.set_memory_limit(id, bytes))
    }
    fn oom_kills(&self, id: u64) -> Result<u64> {
        delegate!(self, b => b.oom_kills(id))
    }
}

/// SIGKILLs each pid; a process that is already gone is not an error.
fn kill_each(cgroup: &Path, pids: &[ProcessId]) -> Result<()> {
    for &pid in pids {
        match sys::send_signal(pid, Signal::SIGKILL) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(source) => {
                return Err(CgroupError::Kill {
                    pid: pid.0,
                    path: cgroup.to_path_buf(),
                    source,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_names_are_validated() {
        for bad in [
            "",
            ".",
            "a/../b",
            "/a",
            "with space",
            "job-3",
            "x/job-4",
            ".hidden",
        ] {
            assert!(ParentName::new(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["rexec", "rexec-node_1.x", "rexec/node1", "job-x"] {
            assert!(ParentName::new(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn integers_parse_with_path_in_error() {
        let p = Path::new("/x/cpu.shares");
        assert_eq!(fs::parse_u64(p, "1024\n").unwrap(), 1024);
        let err = fs::parse_u64(p, "max").unwrap_err().to_string();
        assert!(
            err.contains("/x/cpu.shares") && err.contains("max"),
            "{err}"
        );
    }
}

#[cfg(test)]
mod fake_tests;
