//! A job cgroup's peak memory, read once as the rank ends (before its cgroup is
//! destroyed) for the queue's job history: `memory.peak` on v2, and
//! `memory.max_usage_in_bytes` in the `memory` hierarchy on v1. Only what the kernel
//! counted is reported: when the memory controller is not set up for the job (not
//! enabled on v2, no job cgroup in the v1 `memory` hierarchy, or a kernel without
//! `memory.peak`), the peak is unknown (`None`), never estimated.

use std::path::{Path, PathBuf};

use super::fs::parse_u64;
use super::{CgroupVersion, JobCgroups, detect, fs};

impl JobCgroups {
    /// The most memory job `id`'s cgroup used, bytes; `None` when the kernel does not
    /// count it for this job.
    pub fn peak_memory(&self, id: u64) -> Option<u64> {
        let job = self.job_path(id);
        let file = match self.version() {
            CgroupVersion::V2 => job.join("memory.peak"),
            CgroupVersion::V1 => {
                let mountinfo = fs::read(Path::new("/proc/self/mountinfo")).ok()?;
                v1_memory_dir(&job, &mountinfo)?.join("memory.max_usage_in_bytes")
            }
        };
        parse_u64(&file, &fs::read(&file).ok()?).ok()
    }
}

/// The job's directory in the v1 `memory` hierarchy: its path below the hierarchy that
/// holds `job` (the `cpu` one), taken to the `memory` mount found in `mountinfo`.
fn v1_memory_dir(job: &Path, mountinfo: &str) -> Option<PathBuf> {
    let root = Path::new("/");
    let memory = mountinfo.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        let mut fs = fs.split(' ');
        let (fstype, super_opts) = (fs.next()?, fs.nth(1)?);
        let is_memory = fstype == "cgroup" && super_opts.split(',').any(|o| o == "memory");
        let point = mount.split(' ').nth(4)?;
        is_memory.then(|| root.join(detect::unescape(point).trim_start_matches('/')))
    })?;
    let mounts = detect::parse_mountinfo(mountinfo, root).ok()?;
    let below = mounts
        .v1
        .values()
        .filter_map(|m| job.strip_prefix(m).ok())
        .min_by_key(|rel| rel.components().count())?;
    Some(memory.join(below))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v1_memory_dir_is_the_jobs_path_below_the_memory_mount() {
        let text = "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
                    33 31 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let job = Path::new("/sys/fs/cgroup/cpu/rexec-n1/job-7");
        assert_eq!(
            v1_memory_dir(job, text).unwrap(),
            Path::new("/sys/fs/cgroup/memory/rexec-n1/job-7")
        );
        let without = "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
        assert_eq!(v1_memory_dir(job, without), None);
    }

    #[test]
    fn v2_reads_memory_peak_and_knows_nothing_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cgroup");
        for d in [root.clone(), root.join("rexec-p")] {
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cgroup.controllers"), "cpu memory").unwrap();
            std::fs::write(d.join("cgroup.subtree_control"), "").unwrap();
        }
        let parent = super::super::ParentName::new("rexec-p").unwrap();
        let jobs = JobCgroups::open(detect::Hierarchy::V2 { root }, &parent).unwrap();
        std::fs::create_dir_all(jobs.job_path(4)).unwrap();
        assert_eq!(jobs.peak_memory(4), None);
        std::fs::write(jobs.job_path(4).join("memory.peak"), "1048576\n").unwrap();
        assert_eq!(jobs.peak_memory(4), Some(1_048_576));
        assert_eq!(jobs.peak_memory(5), None);
    }
}
