//! cgroup v1: the job lives in several hierarchies at once. Its directory is created in
//! the `cpu` hierarchy (weights: `cpu.shares`) and, where they are mounted separately, in
//! the `cpuacct` (usage: `cpuacct.usage`, nanoseconds), `pids`, `freezer`
//! (`freezer.state`) and `memory` (limits, see [`super::memory`]) hierarchies. A job's processes are the union of the `cgroup.procs`
//! of all of them; its threads are the `tasks` of the `cpu` hierarchy. v1 has no
//! `cgroup.kill`, so teardown signals every listed process.
//!
//! A node pinned to CPUs lives in the `cpuset` hierarchy too. There a new cgroup starts
//! with empty `cpuset.cpus` and `cpuset.mems` and takes no task until both are set, so
//! every level of the parent's path gets its parent's values when empty, the parent
//! gets the node's CPUs, and each job cgroup copies the parent's two files before any
//! process joins. An unpinned backend still cleans up a parent that an earlier pinned
//! run left in the `cpuset` hierarchy (its jobs are listed, killed and removed).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::cpuset::{self, CpuSet};
use super::detect::V1Mounts;
use super::error::{CgroupError, Result};
use super::fs::parse_u64;
use super::{
    CgroupBackend, CgroupJoin, CgroupVersion, CpuQuota, ParentName, WeightRange, fs, kill_each,
};

/// The v1 cpuset files a cgroup needs before it can take a task.
const CPUSET_FILES: [&str; 2] = ["cpuset.cpus", "cpuset.mems"];
/// The CPUs a v1 cpuset cgroup can really use.
const EFFECTIVE_CPUS: &str = "cpuset.effective_cpus";
use crate::sys::ProcessId;

/// The v1 backend: the mounts in use and the parent name.
#[derive(Debug, Clone)]
pub struct V1Cgroups {
    mounts: V1Mounts,
    parent: PathBuf,
    cpus: Option<CpuSet>,
}

impl V1Cgroups {
    /// A backend over `mounts` with rexecd's parent cgroup `parent` in each hierarchy.
    pub fn new(mounts: V1Mounts, parent: &ParentName) -> V1Cgroups {
        V1Cgroups {
            mounts,
            parent: parent.as_path().to_path_buf(),
            cpus: None,
        }
    }

    /// The same backend, confining the parent (and so every job) to `cpus` through the
    /// `cpuset` hierarchy.
    pub fn with_cpus(mut self, cpus: CpuSet) -> V1Cgroups {
        self.cpus = Some(cpus);
        self
    }

    /// The distinct hierarchies a job lives in, `cpu` first (and `cpuset` when pinned).
    pub fn hierarchies(&self) -> Vec<&Path> {
        let mut out: Vec<&Path> = vec![&self.mounts.cpu];
        let pinned = self.mounts.cpuset.as_ref().filter(|_| self.cpus.is_some());
        let others = [
            &self.mounts.cpuacct,
            &self.mounts.pids,
            &self.mounts.freezer,
            &self.mounts.memory,
        ];
        for mount in others.into_iter().flatten().chain(pinned) {
            if !out.contains(&mount.as_path()) {
                out.push(mount);
            }
        }
        out
    }

    /// The hierarchies to look in when listing, killing and removing: those a job lives
    /// in, plus `cpuset` when an earlier pinned run left the parent there.
    fn present_hierarchies(&self) -> Vec<&Path> {
        let mut out = self.hierarchies();
        if let Some(cpuset) = &self.mounts.cpuset
            && !out.contains(&cpuset.as_path())
            && cpuset.join(&self.parent).is_dir()
        {
            out.push(cpuset);
        }
        out
    }

    /// The `cpuset` mount when jobs live in it (pinned, or `cpuset` co-mounted with a
    /// hierarchy in use): its cgroups need CPUs and memory nodes before tasks.
    fn cpuset_in_use(&self) -> Option<&Path> {
        let cpuset = self.mounts.cpuset.as_deref()?;
        self.hierarchies().contains(&cpuset).then_some(cpuset)
    }

    /// Gives each level of the parent's path in the `cpuset` hierarchy its parent's
    /// CPUs and memory nodes where they are empty (new cgroups start empty).
    fn inherit_down_to_parent(&self, cpuset: &Path) -> Result<()> {
        let mut dir = cpuset.to_path_buf();
        for part in self.parent.components() {
            let up = dir.clone();
            dir.push(part);
            for file in CPUSET_FILES {
                if fs::read(&dir.join(file))?.trim().is_empty() {
                    fs::write(&dir.join(file), fs::read(&up.join(file))?.trim())?;
                }
            }
        }
        Ok(())
    }

    /// Gives a new job cgroup in the `cpuset` hierarchy the parent's CPUs and memory
    /// nodes, without which no process could join it.
    fn copy_cpuset_from_parent(&self, cpuset: &Path, job: &Path) -> Result<()> {
        let parent = cpuset.join(&self.parent);
        for file in CPUSET_FILES {
            fs::write(&job.join(file), fs::read(&parent.join(file))?.trim())?;
        }
        Ok(())
    }

    /// Checks the node's CPUs against the machine (the `cpuset` root) and the parent's
    /// parent, then writes them to the parent's `cpuset.cpus`.
    fn pin_parent(&self, cpuset: &Path, cpus: &CpuSet) -> Result<()> {
        let parent = cpuset.join(&self.parent);
        let above = parent.parent().unwrap_or(cpuset);
        cpuset::check_available(
            cpus,
            &cpuset.join(EFFECTIVE_CPUS),
            &above.join(EFFECTIVE_CPUS),
        )?;
        cpuset::write_list(&parent.join("cpuset.cpus"), cpus)
    }

    fn job_dir(&self, base: &Path, id: u64) -> PathBuf {
        fs::job_path(base, &self.parent, id)
    }

    fn freezer_state(&self, id: u64) -> Option<PathBuf> {
        let freezer = self.mounts.freezer.as_ref()?;
        Some(self.job_dir(freezer, id).join("freezer.state"))
    }
}

impl CgroupBackend for V1Cgroups {
    fn version(&self) -> CgroupVersion {
        CgroupVersion::V1
    }

    fn parent_path(&self) -> PathBuf {
        self.mounts.cpu.join(&self.parent)
    }

    fn job_path(&self, id: u64) -> PathBuf {
        self.job_dir(&self.mounts.cpu, id)
    }

    fn cpus(&self) -> Option<&CpuSet> {
        self.cpus.as_ref()
    }

    fn create_parent(&self) -> Result<()> {
        if self.cpus.is_some() && self.mounts.cpuset.is_none() {
            return Err(CgroupError::ControllerMissing {
                controller: "cpuset",
                path: self.mounts.cpu.clone(),
            });
        }
        for base in self.hierarchies() {
            fs::create_dirs(base, &self.parent)?;
        }
        let Some(cpuset) = self.cpuset_in_use() else {
            return Ok(());
        };
        let pinned = self
            .inherit_down_to_parent(cpuset)
            .and_then(|()| match &self.cpus {
                Some(cpus) => self.pin_parent(cpuset, cpus),
                None => Ok(()),
            });
        if pinned.is_err() {
            // Refused: leave no empty cgroup behind (one holding jobs stays).
            let _ = self.remove_parent();
        }
        pinned
    }

    fn remove_parent(&self) -> Result<()> {
        for base in self.present_hierarchies() {
            fs::remove_dir(&base.join(&self.parent))?;
            // Shared ancestors of a nested name go too, when nobody else uses them.
            let mut up = self.parent.parent();
            while let Some(dir) = up.filter(|d| !d.as_os_str().is_empty()) {
                if fs::remove_dir(&base.join(dir)).is_err() {
                    break;
                }
                up = dir.parent();
            }
        }
        Ok(())
    }

    fn create_job(&self, id: u64) -> Result<()> {
        let mut created: Vec<PathBuf> = Vec::new();
        let cpuset = self.cpuset_in_use();
        for base in self.hierarchies() {
            let dir = self.job_dir(base, id);
            let outcome = match fs::create_dir(&dir) {
                Ok(true) => {
                    created.push(dir.clone());
                    if cpuset == Some(base) {
                        self.copy_cpuset_from_parent(base, &dir)
                    } else {
                        Ok(())
                    }
                }
                Ok(false) => Err(CgroupError::JobExists { path: dir.clone() }),
                Err(e) => Err(e),
            };
            if let Err(e) = outcome {
                // Undo this call's work so a failed create leaves nothing behind.
                for done in created {
                    let _ = fs::remove_dir(&done);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    fn job_exists(&self, id: u64) -> bool {
        self.present_hierarchies()
            .into_iter()
            .any(|base| self.job_dir(base, id).is_dir())
    }

    fn remove_job(&self, id: u64) -> Result<()> {
        let mut first_error = None;
        for base in self.present_hierarchies() {
            if let Err(e) = fs::remove_dir(&self.job_dir(base, id)) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn job_ids(&self) -> Result<Vec<u64>> {
        let mut ids = Vec::new();
        for base in self.present_hierarchies() {
            ids.extend(fs::job_dirs(&base.join(&self.parent))?);
        }
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    fn open_join(&self, id: u64) -> Result<CgroupJoin> {
        let paths = self
            .hierarchies()
            .into_iter()
            .map(|base| self.job_dir(base, id).join("cgroup.procs"))
            .collect();
        CgroupJoin::open(paths)
    }

    fn set_weight(&self, id: u64, weight: u64) -> Result<()> {
        WeightRange::V1_SHARES.check(weight)?;
        fs::write(&self.job_path(id).join("cpu.shares"), &weight.to_string())
    }

    fn weight(&self, id: u64) -> Result<u64> {
        let path = self.job_path(id).join("cpu.shares");
        parse_u64(&path, &fs::read(&path)?)
    }

    fn set_quota(&self, id: u64, limit: Option<CpuQuota>) -> Result<()> {
        let dir = self.job_path(id);
        match limit {
            // The period first: the quota is checked against it.
            Some(q) => {
                fs::write(&dir.join("cpu.cfs_period_us"), &q.period_us.to_string())?;
                fs::write(&dir.join("cpu.cfs_quota_us"), &q.quota_us.to_string())
            }
            None => fs::write(&dir.join("cpu.cfs_quota_us"), "-1"),
        }
    }

    fn quota(&self, id: u64) -> Result<Option<CpuQuota>> {
        let dir = self.job_path(id);
        let path = dir.join("cpu.cfs_quota_us");
        let text = fs::read(&path)?;
        let quota: i64 = text.trim().parse().map_err(|_| CgroupError::Parse {
            path: path.clone(),
            detail: format!("expected an integer, found {:?}", text.trim()),
        })?;
        let path = dir.join("cpu.cfs_period_us");
        let period = parse_u64(&path, &fs::read(&path)?)?;
        Ok(CpuQuota::from_v1(quota, period))
    }

    fn usage(&self, id: u64) -> Result<Duration> {
        let Some(cpuacct) = &self.mounts.cpuacct else {
            return Err(CgroupError::ControllerMissing {
                controller: "cpuacct",
                path: self.job_path(id),
            });
        };
        let path = self.job_dir(cpuacct, id).join("cpuacct.usage");
        Ok(Duration::from_nanos(parse_u64(&path, &fs::read(&path)?)?))
    }

    fn throttled(&self, id: u64) -> Result<Duration> {
        let path = self.job_path(id).join("cpu.stat");
        let ns = fs::keyed_value(&path, &fs::read(&path)?, "throttled_time")?;
        Ok(Duration::from_nanos(ns))
    }

    fn threads(&self, id: u64) -> Result<Vec<ProcessId>> {
        fs::read_ids(&self.job_path(id).join("tasks"))
    }

    fn procs(&self, id: u64) -> Result<Vec<ProcessId>> {
        let mut pids = Vec::new();
        let mut found = false;
        for base in self.present_hierarchies() {
            let dir = self.job_dir(base, id);
            // A half-created (or half-removed) job lacks some hierarchies; skip those.
            if !dir.is_dir() {
                continue;
            }
            found = true;
            pids.extend(fs::read_ids(&dir.join("cgroup.procs"))?);
        }
        if !found {
            // No directory at all: report the cpu one as missing.
            return fs::read_ids(&self.job_path(id).join("cgroup.procs"));
        }
        pids.sort_unstable();
        pids.dedup();
        Ok(pids)
    }

    fn freeze(&self, id: u64) -> Result<bool> {
        match self.freezer_state(id) {
            Some(path) if path.exists() => fs::write(&path, "FROZEN").map(|()| true),
            _ => Ok(false),
        }
    }

    fn is_frozen(&self, id: u64) -> Result<bool> {
        match self.freezer_state(id) {
            Some(path) if path.exists() => Ok(fs::read(&path)?.trim() == "FROZEN"),
            _ => Ok(false),
        }
    }

    fn thaw(&self, id: u64) -> Result<()> {
        match self.freezer_state(id) {
            Some(path) if path.exists() => fs::write(&path, "THAWED"),
            _ => Ok(()),
        }
    }

    fn kill_all(&self, id: u64) -> Result<()> {
        kill_each(&self.job_path(id), &self.procs(id)?)
    }

    fn set_memory_limit(&self, id: u64, bytes: u64) -> Result<()> {
        let Some(memory) = &self.mounts.memory else {
            return Err(CgroupError::ControllerMissing {
                controller: "memory",
                path: self.job_path(id),
            });
        };
        super::memory::set_v1(&self.job_dir(memory, id), bytes)
    }

    fn oom_kills(&self, id: u64) -> Result<u64> {
        match &self.mounts.memory {
            Some(memory) => super::memory::oom_kills_v1(&self.job_dir(memory, id)),
            None => Ok(0),
        }
    }
}
