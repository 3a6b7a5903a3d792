//! cgroup v2: one unified tree. The parent gets `+cpu`, `+pids` and `+memory` in its
//! `cgroup.subtree_control` (and so does every ancestor up to the mount, where the
//! controllers are offered), each job is one directory with `cpu.weight`, `cpu.stat`
//! (`usage_usec`), `cgroup.procs`, `cgroup.threads`, `cgroup.freeze`/`cgroup.events`,
//! and `cgroup.kill` on kernels since 5.14.
//!
//! A node pinned to CPUs also needs `cpuset`: `+cpuset` in the `cgroup.subtree_control`
//! of every level from the mount down to the parent's parent, then `cpuset.cpus` on the
//! parent. Job cgroups need nothing more: without `cpuset` of their own they run on
//! their parent's CPUs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::cpuset::{self, CpuSet};
use super::error::{CgroupError, Result};
use super::fs::{keyed_value, parse_u64};
use super::{
    CgroupBackend, CgroupJoin, CgroupVersion, CpuQuota, ParentName, WeightRange, fs, kill_each,
};
use crate::sys::ProcessId;

/// Controllers enabled for job cgroups, when the kernel offers them.
const CONTROLLERS: [&str; 3] = ["cpu", "pids", "memory"];
/// The CPUs a v2 cgroup can really use.
const EFFECTIVE_CPUS: &str = "cpuset.cpus.effective";
/// The kernel's own `cpu.max` period, written back with `max` when a limit is removed.
const DEFAULT_PERIOD_US: u64 = 100_000;

/// The v2 backend: the cgroup2 mount point and the parent name.
#[derive(Debug, Clone)]
pub struct V2Cgroups {
    root: PathBuf,
    parent: PathBuf,
    cpus: Option<CpuSet>,
}

impl V2Cgroups {
    /// A backend over the cgroup2 mount `root` with rexecd's parent at `root/parent`.
    pub fn new(root: PathBuf, parent: &ParentName) -> V2Cgroups {
        V2Cgroups {
            root,
            parent: parent.as_path().to_path_buf(),
            cpus: None,
        }
    }

    /// The same backend, confining the parent (and so every job) to `cpus`.
    pub fn with_cpus(mut self, cpus: CpuSet) -> V2Cgroups {
        self.cpus = Some(cpus);
        self
    }

    /// Enables each of [`CONTROLLERS`] that `dir` offers (its `cgroup.controllers`) in
    /// its `cgroup.subtree_control`, one write per controller so a failure names it;
    /// with `cpuset`, also `cpuset`, which must then be offered.
    fn enable_controllers(dir: &Path, cpuset: bool) -> Result<()> {
        let offered = fs::read(&dir.join("cgroup.controllers"))?;
        let control = dir.join("cgroup.subtree_control");
        let enabled = fs::read(&control)?;
        let has = |text: &str, name: &str| text.split_whitespace().any(|c| c == name);
        if cpuset && !has(&offered, "cpuset") {
            return Err(CgroupError::ControllerMissing {
                controller: "cpuset",
                path: dir.to_path_buf(),
            });
        }
        let wanted = CONTROLLERS.iter().chain(cpuset.then_some(&"cpuset"));
        for name in wanted {
            if has(&offered, name) && !has(&enabled, name) {
                fs::write(&control, &format!("+{name}"))?;
            }
        }
        Ok(())
    }

    /// Checks the node's CPUs against the machine (the root's effective CPUs) and the
    /// parent's parent, then writes them to the parent's `cpuset.cpus`.
    fn pin_parent(&self, cpus: &CpuSet) -> Result<()> {
        let parent = self.parent_path();
        let above = parent.parent().unwrap_or(&self.root);
        cpuset::check_available(
            cpus,
            &self.root.join(EFFECTIVE_CPUS),
            &above.join(EFFECTIVE_CPUS),
        )?;
        cpuset::write_list(&parent.join("cpuset.cpus"), cpus)
    }

    fn file(&self, id: u64, name: &str) -> PathBuf {
        self.job_path(id).join(name)
    }
}

impl CgroupBackend for V2Cgroups {
    fn version(&self) -> CgroupVersion {
        CgroupVersion::V2
    }

    fn parent_path(&self) -> PathBuf {
        self.root.join(&self.parent)
    }

    fn job_path(&self, id: u64) -> PathBuf {
        fs::job_path(&self.root, &self.parent, id)
    }

    fn cpus(&self) -> Option<&CpuSet> {
        self.cpus.as_ref()
    }

    fn create_parent(&self) -> Result<()> {
        let pinned = self.cpus.is_some();
        let mut dir = self.root.clone();
        // cpuset is enabled above the parent only: the parent's cpuset.cpus is what
        // confines the jobs.
        let levels = self.parent.components().count();
        let made = (|| {
            Self::enable_controllers(&dir, pinned)?;
            for (depth, part) in self.parent.components().enumerate() {
                dir.push(part);
                fs::create_dir(&dir)?;
                Self::enable_controllers(&dir, pinned && depth + 1 < levels)?;
            }
            match &self.cpus {
                Some(cpus) => self.pin_parent(cpus),
                None => Ok(()),
            }
        })();
        if made.is_err() && pinned {
            // Refused: leave no empty cgroup behind (one holding jobs stays).
            let _ = self.remove_parent();
        }
        made
    }

    fn remove_parent(&self) -> Result<()> {
        fs::remove_dir(&self.parent_path())?;
        let mut up = self.parent.parent();
        while let Some(dir) = up.filter(|d| !d.as_os_str().is_empty()) {
            if fs::remove_dir(&self.root.join(dir)).is_err() {
                break;
            }
            up = dir.parent();
        }
        Ok(())
    }

    fn create_job(&self, id: u64) -> Result<()> {
        let dir = self.job_path(id);
        if fs::create_dir(&dir)? {
            Ok(())
        } else {
            Err(CgroupError::JobExists { path: dir })
        }
    }

    fn job_exists(&self, id: u64) -> bool {
        self.job_path(id).is_dir()
    }

    fn remove_job(&self, id: u64) -> Result<()> {
        fs::remove_dir(&self.job_path(id))
    }

    fn job_ids(&self) -> Result<Vec<u64>> {
        fs::job_dirs(&self.parent_path())
    }

    fn open_join(&self, id: u64) -> Result<CgroupJoin> {
        CgroupJoin::open(vec![self.file(id, "cgroup.procs")])
    }

    fn set_weight(&self, id: u64, weight: u64) -> Result<()> {
        WeightRange::V2_WEIGHT.check(weight)?;
        let path = self.file(id, "cpu.weight");
        if !path.exists() && self.job_exists(id) {
            return Err(CgroupError::ControllerMissing {
                controller: "cpu",
                path: self.job_path(id),
            });
        }
        fs::write(&path, &weight.to_string())
    }

    fn weight(&self, id: u64) -> Result<u64> {
        let path = self.file(id, "cpu.weight");
        parse_u64(&path, &fs::read(&path)?)
    }

    fn set_quota(&self, id: u64, limit: Option<CpuQuota>) -> Result<()> {
        let path = self.file(id, "cpu.max");
        if !path.exists() && self.job_exists(id) {
            return Err(CgroupError::ControllerMissing {
                controller: "cpu",
                path: self.job_path(id),
            });
        }
        fs::write(&path, &CpuQuota::v2_line(limit, DEFAULT_PERIOD_US))
    }

    fn quota(&self, id: u64) -> Result<Option<CpuQuota>> {
        let path = self.file(id, "cpu.max");
        CpuQuota::parse_v2(&path, &fs::read(&path)?)
    }

    fn usage(&self, id: u64) -> Result<Duration> {
        let path = self.file(id, "cpu.stat");
        let usec = keyed_value(&path, &fs::read(&path)?, "usage_usec")?;
        Ok(Duration::from_micros(usec))
    }

    fn throttled(&self, id: u64) -> Result<Duration> {
        let path = self.file(id, "cpu.stat");
        let usec = keyed_value(&path, &fs::read(&path)?, "throttled_usec")?;
        Ok(Duration::from_micros(usec))
    }

    fn threads(&self, id: u64) -> Result<Vec<ProcessId>> {
        fs::read_ids(&self.file(id, "cgroup.threads"))
    }

    fn procs(&self, id: u64) -> Result<Vec<ProcessId>> {
        let mut pids = fs::read_ids(&self.file(id, "cgroup.procs"))?;
        pids.sort_unstable();
        pids.dedup();
        Ok(pids)
    }

    fn freeze(&self, id: u64) -> Result<bool> {
        let path = self.file(id, "cgroup.freeze");
        if path.exists() {
            fs::write(&path, "1").map(|()| true)
        } else {
            Ok(false)
        }
    }

    fn is_frozen(&self, id: u64) -> Result<bool> {
        let path = self.file(id, "cgroup.events");
        if !path.exists() {
            return Ok(false);
        }
        Ok(keyed_value(&path, &fs::read(&path)?, "frozen")? == 1)
    }

    fn thaw(&self, id: u64) -> Result<()> {
        let path = self.file(id, "cgroup.freeze");
        if path.exists() {
            fs::write(&path, "0")
        } else {
            Ok(())
        }
    }

    fn set_memory_limit(&self, id: u64, bytes: u64) -> Result<()> {
        if !self.file(id, "memory.max").exists() && self.job_exists(id) {
            return Err(CgroupError::ControllerMissing {
                controller: "memory",
                path: self.job_path(id),
            });
        }
        super::memory::set_v2(&self.job_path(id), bytes)
    }

    fn oom_kills(&self, id: u64) -> Result<u64> {
        if !self.file(id, "memory.events").exists() && self.job_exists(id) {
            return Ok(0);
        }
        super::memory::oom_kills_v2(&self.job_path(id))
    }

    fn kill_all(&self, id: u64) -> Result<()> {
        let path = self.file(id, "cgroup.kill");
        if path.exists() {
            fs::write(&path, "1")
        } else {
            kill_each(&self.job_path(id), &self.procs(id)?)
        }
    }
}
