//! The error type of the cgroup layer. Every I/O failure names the file or directory it
//! happened on, and a failed write also carries the data that was written.

use std::io;
use std::path::PathBuf;

/// Something the cgroup layer could not do. Each message is one line that names the path
/// and says what to check.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CgroupError {
    /// Reading a control file failed.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the kernel said.
        source: io::Error,
    },
    /// Writing a control file failed.
    #[error("cannot write {data:?} to {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The data that was written.
        data: String,
        /// What the kernel said.
        source: io::Error,
    },
    /// Opening a control file (for a later write) failed.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// What the kernel said.
        source: io::Error,
    },
    /// Creating a cgroup directory failed.
    #[error("cannot create cgroup {path}: {source} (is the hierarchy mounted and are we root?)")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// What the kernel said.
        source: io::Error,
    },
    /// The job cgroup already exists (an earlier run left it; sweep stale cgroups first).
    #[error("cgroup {path} already exists; run the stale-cgroup sweep before reusing job ids")]
    JobExists {
        /// The directory.
        path: PathBuf,
    },
    /// Removing a cgroup directory failed.
    #[error("cannot remove cgroup {path}: {source}")]
    RemoveDir {
        /// The directory.
        path: PathBuf,
        /// What the kernel said.
        source: io::Error,
    },
    /// Listing a cgroup directory failed.
    #[error("cannot list {path}: {source}")]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// What the kernel said.
        source: io::Error,
    },
    /// A control file held something this code does not understand.
    #[error("unexpected content in {path}: {detail}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// Remounting a cgroup2 hierarchy (to add `favordynmods`) failed.
    #[error("cannot remount {path} with options {options:?}: {source}")]
    Remount {
        /// The mount point.
        path: PathBuf,
        /// The options asked for.
        options: String,
        /// What the kernel said.
        source: io::Error,
    },
    /// A line of mountinfo could not be parsed.
    #[error("malformed mountinfo line {line}: {detail}")]
    Mountinfo {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        detail: String,
    },
    /// No mounted hierarchy offers the cpu controller.
    #[error(
        "no cgroup hierarchy with the cpu controller is mounted; mount cgroup2 or the v1 cpu controller"
    )]
    NoCpuController,
    /// A controller this operation needs is not available for the cgroup.
    #[error("the {controller} controller is not available at {path}; enable or mount it")]
    ControllerMissing {
        /// Controller name, e.g. `cpu` or `cpuacct`.
        controller: &'static str,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The configured parent cgroup name is not a safe relative path.
    #[error("invalid parent cgroup name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A weight outside the kernel's range for this cgroup version.
    #[error("cpu weight {weight} is outside the kernel range [{min}, {max}]")]
    WeightOutOfRange {
        /// The weight asked for.
        weight: u64,
        /// Smallest allowed.
        min: u64,
        /// Largest allowed.
        max: u64,
    },
    /// `cpus` names no CPU.
    #[error("the node's cpu set is empty; name at least one CPU, e.g. cpus = \"0-1\"")]
    EmptyCpuSet,
    /// A CPU of the configured set does not exist (is not online) on this machine.
    #[error("CPU {cpu} does not exist on this machine: its CPUs are {online} (from {path})")]
    NoSuchCpu {
        /// The CPU.
        cpu: u32,
        /// The CPUs the machine has.
        online: super::CpuSet,
        /// Where they were read.
        path: PathBuf,
    },
    /// A CPU of the configured set is one rexecd's parent cgroup may not use.
    #[error("CPU {cpu} is not available to rexecd's parent cgroup: {path} allows only {allowed}")]
    CpuNotAllowed {
        /// The CPU.
        cpu: u32,
        /// The CPUs the parent's parent allows.
        allowed: super::CpuSet,
        /// Where they were read.
        path: PathBuf,
    },
    /// Signalling a process of the job failed for a reason other than it being gone.
    #[error("cannot kill process {pid} of cgroup {path}: {source}")]
    Kill {
        /// The process.
        pid: i32,
        /// The cgroup it was listed in.
        path: PathBuf,
        /// What the kernel said.
        source: nix::errno::Errno,
    },
    /// Processes survived every kill round.
    #[error(
        "cgroup {path} still holds processes {pids:?} after killing; check for tasks stuck in the kernel (state D)"
    )]
    StillPopulated {
        /// The cgroup.
        path: PathBuf,
        /// What was left.
        pids: Vec<i32>,
    },
}

/// Result alias for the cgroup layer.
pub type Result<T> = std::result::Result<T, CgroupError>;
