//! cgroup v1: the job lives in several hierarchies at once. Its directory is created in
//! the `cpu` hierarchy (weights: `cpu.shares`) and, where they are mounted separately, in
//! the `cpuacct` (usage: `cpuacct.usage`, nanoseconds), `pids` and `freezer`
//! (`freezer.state`) hierarchies. A job's processes are the union of the `cgroup.procs`
//! of all of them; its threads are the `tasks` of the `cpu` hierarchy. v1 has no
//! `cgroup.kill`, so teardown signals every listed process.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::detect::V1Mounts;
use super::error::{CgroupError, Result};
use super::{
    CgroupBackend, CgroupJoin, CgroupVersion, ParentName, WeightRange, fs, kill_each, parse_u64,
};
use crate::sys::ProcessId;

/// The v1 backend: the mounts in use and the parent name.
#[derive(Debug, Clone)]
pub struct V1Cgroups {
    mounts: V1Mounts,
    parent: PathBuf,
}

impl V1Cgroups {
    /// A backend over `mounts` with rexecd's parent cgroup `parent` in each hierarchy.
    pub fn new(mounts: V1Mounts, parent: &ParentName) -> V1Cgroups {
        V1Cgroups {
            mounts,
            parent: parent.as_path().to_path_buf(),
        }
    }

    /// The distinct hierarchies a job lives in, `cpu` first.
    pub fn hierarchies(&self) -> Vec<&Path> {
        let mut out: Vec<&Path> = vec![&self.mounts.cpu];
        let others = [
            &self.mounts.cpuacct,
            &self.mounts.pids,
            &self.mounts.freezer,
        ];
        for mount in others.into_iter().flatten() {
            if !out.contains(&mount.as_path()) {
                out.push(mount);
            }
        }
        out
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

    fn create_parent(&self) -> Result<()> {
        for base in self.hierarchies() {
            fs::create_dirs(base, &self.parent)?;
        }
        Ok(())
    }

    fn remove_parent(&self) -> Result<()> {
        for base in self.hierarchies() {
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
        for base in self.hierarchies() {
            let dir = self.job_dir(base, id);
            let outcome = match fs::create_dir(&dir) {
                Ok(true) => Ok(()),
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
            created.push(dir);
        }
        Ok(())
    }

    fn job_exists(&self, id: u64) -> bool {
        self.hierarchies()
            .into_iter()
            .any(|base| self.job_dir(base, id).is_dir())
    }

    fn remove_job(&self, id: u64) -> Result<()> {
        let mut first_error = None;
        for base in self.hierarchies() {
            if let Err(e) = fs::remove_dir(&self.job_dir(base, id)) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn job_ids(&self) -> Result<Vec<u64>> {
        let mut ids = Vec::new();
        for base in self.hierarchies() {
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

    fn threads(&self, id: u64) -> Result<Vec<ProcessId>> {
        fs::read_ids(&self.job_path(id).join("tasks"))
    }

    fn procs(&self, id: u64) -> Result<Vec<ProcessId>> {
        let mut pids = Vec::new();
        let mut found = false;
        for base in self.hierarchies() {
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
}
