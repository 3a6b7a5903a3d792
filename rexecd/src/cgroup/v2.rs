//! cgroup v2: one unified tree. The parent gets `+cpu` and `+pids` in its
//! `cgroup.subtree_control` (and so does every ancestor up to the mount, where the
//! controllers are offered), each job is one directory with `cpu.weight`, `cpu.stat`
//! (`usage_usec`), `cgroup.procs`, `cgroup.threads`, `cgroup.freeze`/`cgroup.events`,
//! and `cgroup.kill` on kernels since 5.14.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::error::{CgroupError, Result};
use super::{
    CgroupBackend, CgroupJoin, CgroupVersion, ParentName, WeightRange, fs, kill_each, parse_u64,
};
use crate::sys::ProcessId;

/// Controllers enabled for job cgroups, when the kernel offers them.
const CONTROLLERS: [&str; 2] = ["cpu", "pids"];

/// The v2 backend: the cgroup2 mount point and the parent name.
#[derive(Debug, Clone)]
pub struct V2Cgroups {
    root: PathBuf,
    parent: PathBuf,
}

impl V2Cgroups {
    /// A backend over the cgroup2 mount `root` with rexecd's parent at `root/parent`.
    pub fn new(root: PathBuf, parent: &ParentName) -> V2Cgroups {
        V2Cgroups {
            root,
            parent: parent.as_path().to_path_buf(),
        }
    }

    /// Enables each of [`CONTROLLERS`] that `dir` offers (its `cgroup.controllers`) in
    /// its `cgroup.subtree_control`, one write per controller so a failure names it.
    fn enable_controllers(dir: &Path) -> Result<()> {
        let offered = fs::read(&dir.join("cgroup.controllers"))?;
        let control = dir.join("cgroup.subtree_control");
        let enabled = fs::read(&control)?;
        for name in CONTROLLERS {
            let has = |text: &str| text.split_whitespace().any(|c| c == name);
            if has(&offered) && !has(&enabled) {
                fs::write(&control, &format!("+{name}"))?;
            }
        }
        Ok(())
    }

    fn file(&self, id: u64, name: &str) -> PathBuf {
        self.job_path(id).join(name)
    }
}

/// The value of `key` in a flat keyed file such as `cpu.stat` or `cgroup.events`.
pub fn keyed_value(path: &Path, text: &str, key: &str) -> Result<u64> {
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

    fn create_parent(&self) -> Result<()> {
        let mut dir = self.root.clone();
        Self::enable_controllers(&dir)?;
        for part in self.parent.components() {
            dir.push(part);
            fs::create_dir(&dir)?;
            Self::enable_controllers(&dir)?;
        }
        Ok(())
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

    fn usage(&self, id: u64) -> Result<Duration> {
        let path = self.file(id, "cpu.stat");
        let usec = keyed_value(&path, &fs::read(&path)?, "usage_usec")?;
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

    fn kill_all(&self, id: u64) -> Result<()> {
        let path = self.file(id, "cgroup.kill");
        if path.exists() {
            fs::write(&path, "1")
        } else {
            kill_each(&self.job_path(id), &self.procs(id)?)
        }
    }
}
