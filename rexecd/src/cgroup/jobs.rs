//! [`JobCgroups`], the job life cycle on top of a [`CgroupBackend`]: create a job
//! cgroup, hand out its join files, set weights from tickets and bandwidth limits,
//! meter usage and runnable demand, destroy it (an empty one is removed at once; one
//! with processes is frozen, killed, thawed, waited for and removed) and sweep cgroups
//! that an earlier run left behind.

use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use super::error::{CgroupError, Result};
use super::{
    AnyCgroup, CgroupBackend, CgroupJoin, CgroupVersion, CpuQuota, CpuSet, Hierarchy, ParentName,
    WeightRange, detect, procstat,
};
use crate::sys::ProcessId;

/// How long to wait for a freeze before killing anyway (a task in uninterruptible sleep
/// can hold a freeze up; SIGKILL still reaches it once it wakes).
const FREEZE_WAIT: Duration = Duration::from_millis(200);
/// How long one kill round waits for the cgroup to empty.
const ROUND_WAIT: Duration = Duration::from_millis(250);
/// Give up killing after this long.
const KILL_DEADLINE: Duration = Duration::from_secs(5);
/// Longest a usage read may take for its moment to count as known: a read that took
/// longer (the reading thread kept off the CPU around it, as rexecd's own threads are
/// beside a market weighted far above them) is made again, up to [`USAGE_TRIES`] times.
const USAGE_SLACK: Duration = Duration::from_millis(2);
const USAGE_TRIES: u32 = 3;
/// rmdir retries (the kernel can report EBUSY for a moment after the last task exits).
const RMDIR_TRIES: u32 = 50;
const POLL: Duration = Duration::from_millis(5);

/// One metering sample of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSample {
    /// Total CPU time used so far.
    pub usage: Duration,
    /// When `usage` was read: the middle of the read, taken around it and not after the
    /// rest of the sample, so that a thread kept waiting between reads cannot date a
    /// usage later than it was (a rate over too long a window, then one over a
    /// millisecond, once read as a 511-CPU demand that ended a placement).
    pub at: Instant,
    /// Threads in state R (running or waiting for a CPU) at the time of the sample.
    pub runnable: u32,
    /// Threads in the job.
    pub threads: u32,
    /// Time its run queues spent throttled so far (see [`CgroupBackend::throttled`]);
    /// `None` where the kernel does not say (no `cpu.stat`, or no such line).
    pub throttled: Option<Duration>,
}

/// rexecd's parent cgroup and the job cgroups below it.
#[derive(Debug, Clone)]
pub struct JobCgroups {
    backend: AnyCgroup,
    proc_root: PathBuf,
}

impl JobCgroups {
    /// Detects the host's layout and opens (creating if needed) the parent `parent`.
    pub fn detect(parent: &ParentName) -> Result<JobCgroups> {
        JobCgroups::open(detect::detect()?, parent)
    }

    /// Opens (creating if needed) the parent `parent` in a known hierarchy.
    pub fn open(hierarchy: Hierarchy, parent: &ParentName) -> Result<JobCgroups> {
        JobCgroups::with_backend(AnyCgroup::new(hierarchy, parent))
    }

    /// Detects the host's layout and opens the parent `parent`, confined to `cpus` when
    /// given (each CPU must exist and be one the parent may use).
    pub fn detect_pinned(parent: &ParentName, cpus: Option<CpuSet>) -> Result<JobCgroups> {
        JobCgroups::open_pinned(detect::detect()?, parent, cpus)
    }

    /// Opens the parent `parent` in a known hierarchy, confined to `cpus` when given.
    pub fn open_pinned(
        hierarchy: Hierarchy,
        parent: &ParentName,
        cpus: Option<CpuSet>,
    ) -> Result<JobCgroups> {
        JobCgroups::with_backend(AnyCgroup::pinned(hierarchy, parent, cpus))
    }

    /// Uses `backend` as is, creating its parent cgroup (and pinning it to the
    /// backend's CPUs). cgroup v1 refuses to narrow a cpuset below what its children
    /// hold (EBUSY): those children are jobs of an earlier run, pinned elsewhere, which
    /// the start-up sweep would remove anyway; they are removed first, then the parent
    /// is pinned again.
    pub fn with_backend(backend: AnyCgroup) -> Result<JobCgroups> {
        let jobs = JobCgroups {
            backend,
            proc_root: PathBuf::from("/proc"),
        };
        match jobs.backend.create_parent() {
            Err(CgroupError::Write { source, path, .. })
                if source.raw_os_error() == Some(nix::libc::EBUSY)
                    && jobs.backend.cpus().is_some() =>
            {
                tracing::warn!(file = %path.display(),
                    "job cgroups of an earlier run hold other CPUs; removing them first");
                jobs.sweep_stale()?;
                jobs.backend.create_parent()?;
            }
            other => other?,
        }
        Ok(jobs)
    }

    /// The CPUs the node is confined to, if it is pinned.
    pub fn cpus(&self) -> Option<&CpuSet> {
        self.backend.cpus()
    }

    /// Reads thread states below `proc_root` instead of `/proc` (for tests).
    pub fn with_proc_root(mut self, proc_root: impl Into<PathBuf>) -> JobCgroups {
        self.proc_root = proc_root.into();
        self
    }

    /// The backend, for operations not wrapped here.
    pub fn backend(&self) -> &AnyCgroup {
        &self.backend
    }

    /// The cgroup version in use.
    pub fn version(&self) -> CgroupVersion {
        self.backend.version()
    }

    /// The kernel's weight range for this version.
    pub fn weight_range(&self) -> WeightRange {
        self.backend.weight_range()
    }

    /// Sets the parent cgroup's CPU weight against its siblings, the rest of the
    /// machine: `weight` in cgroup v2 units (1 to 10000, the kernel's default 100),
    /// written as `cpu.weight` on v2 and as `cpu.shares` = weight x 1024 / 100 on v1
    /// (the default 100 is the kernel's 1024). Returns the value written. Only
    /// rexecd's own parent is touched; what other work gets is the kernel's answer
    /// to this weight against theirs (see OPERATIONS, "Background work").
    pub fn set_parent_weight(&self, weight: u64) -> Result<u64> {
        WeightRange::V2_WEIGHT.check(weight)?;
        let (file, value) = match self.version() {
            CgroupVersion::V2 => ("cpu.weight", weight),
            CgroupVersion::V1 => (
                "cpu.shares",
                WeightRange::V1_SHARES
                    .check((weight * 1024 / 100).max(WeightRange::V1_SHARES.min))?,
            ),
        };
        super::fs::write(&self.parent_path().join(file), &value.to_string())?;
        Ok(value)
    }

    /// The parent cgroup's CPU weight as the kernel holds it (`cpu.shares` on v1,
    /// `cpu.weight` on v2).
    pub fn parent_weight(&self) -> Result<u64> {
        let file = match self.version() {
            CgroupVersion::V2 => "cpu.weight",
            CgroupVersion::V1 => "cpu.shares",
        };
        let path = self.parent_path().join(file);
        let text = super::fs::read(&path)?;
        text.trim().parse().map_err(|_| CgroupError::Parse {
            path,
            detail: format!("{:?} is not a weight", text.trim()),
        })
    }

    /// The job's directory in the `cpu` hierarchy (for logs and diagnostics).
    pub fn job_path(&self, id: u64) -> PathBuf {
        self.backend.job_path(id)
    }

    /// Creates the cgroup of job `id`.
    pub fn create_job(&self, id: u64) -> Result<()> {
        self.backend.create_job(id)
    }

    /// Opens the files a new process writes to so that it is born in the job.
    pub fn join(&self, id: u64) -> Result<CgroupJoin> {
        self.backend.open_join(id)
    }

    /// Sets one job's kernel weight (checked against [`Self::weight_range`]).
    pub fn set_weight(&self, id: u64, weight: u64) -> Result<()> {
        self.backend.set_weight(id, weight)
    }

    /// Sets (or, with `None`, removes) one job's CFS bandwidth limit.
    pub fn set_quota(&self, id: u64, limit: Option<CpuQuota>) -> Result<()> {
        self.backend.set_quota(id, limit)
    }

    /// Limits one job's memory (see [`super::memory`]).
    pub fn set_memory_limit(&self, id: u64, bytes: u64) -> Result<()> {
        self.backend.set_memory_limit(id, bytes)
    }

    /// How many of the job's processes the kernel killed for memory.
    pub fn oom_kills(&self, id: u64) -> Result<u64> {
        self.backend.oom_kills(id)
    }

    /// Reads one job's kernel weight back.
    pub fn weight(&self, id: u64) -> Result<u64> {
        self.backend.weight(id)
    }

    /// Total CPU time the job has used.
    pub fn usage(&self, id: u64) -> Result<Duration> {
        self.backend.usage(id)
    }

    /// Number of the job's threads that are runnable right now.
    pub fn runnable(&self, id: u64) -> Result<u32> {
        let threads = self.backend.threads(id)?;
        Ok(procstat::count_runnable(&self.proc_root, &threads))
    }

    /// The job's usage and the moment it stood so: the middle of the read, made again
    /// while a read takes longer than [`USAGE_SLACK`] (the tightest of the tries wins).
    fn usage_at(&self, id: u64) -> Result<(Duration, Instant)> {
        let read = || -> Result<(Duration, Instant, Duration)> {
            let before = Instant::now();
            let usage = self.backend.usage(id)?;
            let span = before.elapsed();
            Ok((usage, before + span / 2, span))
        };
        let mut best = read()?;
        for _ in 1..USAGE_TRIES {
            if best.2 <= USAGE_SLACK {
                break;
            }
            let again = read()?;
            if again.2 < best.2 {
                best = again;
            }
        }
        Ok((best.0, best.1))
    }

    /// Usage, runnable threads and thread count in one go.
    pub fn sample(&self, id: u64) -> Result<JobSample> {
        let (usage, at) = self.usage_at(id)?;
        let threads = self.backend.threads(id)?;
        Ok(JobSample {
            usage,
            at,
            runnable: procstat::count_runnable(&self.proc_root, &threads),
            threads: u32::try_from(threads.len()).unwrap_or(u32::MAX),
            throttled: self.backend.throttled(id).ok(),
        })
    }

    /// The job's threads.
    pub fn threads(&self, id: u64) -> Result<Vec<ProcessId>> {
        self.backend.threads(id)
    }

    /// The job's processes.
    pub fn procs(&self, id: u64) -> Result<Vec<ProcessId>> {
        self.backend.procs(id)
    }

    /// Ids of the job cgroups under the parent.
    pub fn jobs(&self) -> Result<Vec<u64>> {
        self.backend.job_ids()
    }

    /// Kills every process of the job and removes its cgroup. Each round freezes the
    /// job (so nothing can fork in between), sends SIGKILL to all of it, thaws it and
    /// waits for it to empty; then the directory is removed, retrying while the kernel
    /// says busy. A job that does not exist is already destroyed.
    pub fn destroy(&self, id: u64) -> Result<()> {
        if !self.backend.job_exists(id) {
            return Ok(());
        }
        // The common end: the job's only process has exited and been reaped. An empty
        // cgroup stays empty (only its own members fork into it), so it is removed at
        // once, without the freeze and kill rounds; if the kernel still calls it busy,
        // the rounds below take over.
        if self.backend.procs(id).is_ok_and(|p| p.is_empty()) && self.backend.remove_job(id).is_ok()
        {
            return Ok(());
        }
        let deadline = Instant::now() + KILL_DEADLINE;
        loop {
            // Freezing only closes the fork race; if it fails, kill anyway.
            let frozen = self.backend.freeze(id).unwrap_or_else(|e| {
                tracing::warn!(job = id, error = %e, "cannot freeze job; killing unfrozen");
                false
            });
            if frozen {
                // Never return between freeze and thaw: a job left frozen cannot die.
                let _ = wait_until(FREEZE_WAIT, || self.backend.is_frozen(id));
            }
            let killed = self.backend.kill_all(id);
            if frozen {
                self.backend.thaw(id)?;
            }
            killed?;
            if wait_until(ROUND_WAIT, || Ok(self.backend.procs(id)?.is_empty()))? {
                break;
            }
            if Instant::now() >= deadline {
                return Err(CgroupError::StillPopulated {
                    path: self.backend.job_path(id),
                    pids: self.backend.procs(id)?.iter().map(|p| p.0).collect(),
                });
            }
        }
        remove_with_retry(|| self.backend.remove_job(id))
    }

    /// Destroys every job cgroup under the parent (left by an earlier run) and returns
    /// their ids. Call at start-up, before accepting jobs. Every job is attempted; the
    /// first failure is returned after all were tried.
    pub fn sweep_stale(&self) -> Result<Vec<u64>> {
        let ids = self.backend.job_ids()?;
        let mut first_error = None;
        for &id in &ids {
            if let Err(e) = self.destroy(id) {
                tracing::warn!(job = id, error = %e, "cannot remove stale job cgroup");
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(ids), Err)
    }

    /// Removes the parent cgroup (it must hold no jobs any more).
    pub fn remove_parent(&self) -> Result<()> {
        remove_with_retry(|| self.backend.remove_parent())
    }

    /// The parent's directory in the `cpu` hierarchy.
    pub fn parent_path(&self) -> PathBuf {
        self.backend.parent_path()
    }
}

/// Polls `done` every few milliseconds for up to `limit`; returns its last answer.
fn wait_until(limit: Duration, mut done: impl FnMut() -> Result<bool>) -> Result<bool> {
    let end = Instant::now() + limit;
    loop {
        if done()? {
            return Ok(true);
        }
        if Instant::now() >= end {
            return Ok(false);
        }
        thread::sleep(POLL);
    }
}

/// Retries an rmdir while the kernel answers EBUSY (tasks still leaving).
fn remove_with_retry(mut remove: impl FnMut() -> Result<()>) -> Result<()> {
    let mut tries = 0;
    loop {
        match remove() {
            Err(CgroupError::RemoveDir { source, .. })
                if source.raw_os_error() == Some(nix::libc::EBUSY) && tries < RMDIR_TRIES =>
            {
                tries += 1;
                thread::sleep(POLL * 2);
            }
            other => return other,
        }
    }
}
