//! Finds the cgroup hierarchies from `/proc/self/mountinfo` and decides which one holds
//! the `cpu` controller: unified (cgroup v2 only), legacy (v1 only) or hybrid (v1
//! controllers with a cgroup2 mount beside them). On a hybrid host the v1 `cpu` mount
//! wins when it exists, because then the kernel cannot offer `cpu` on cgroup2.
//!
//! The parser takes the mountinfo text and a root directory that is prefixed to every
//! mount point, so tests can point it at a fake cgroupfs in a temporary directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::{CgroupError, Result};
use super::fs;

/// The v1 controllers this crate uses, by the hierarchy (mount point) each is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V1Mounts {
    /// Hierarchy with `cpu` (weights).
    pub cpu: PathBuf,
    /// Hierarchy with `cpuacct` (usage), often the same as `cpu`.
    pub cpuacct: Option<PathBuf>,
    /// Hierarchy with `pids`.
    pub pids: Option<PathBuf>,
    /// Hierarchy with `freezer`.
    pub freezer: Option<PathBuf>,
    /// Hierarchy with `memory` (per-rank memory limits, `--mem`).
    pub memory: Option<PathBuf>,
    /// Hierarchy with `cpuset` (used only when the node is pinned to CPUs, and to clean
    /// up what a pinned run left).
    pub cpuset: Option<PathBuf>,
}

/// Which cgroup version the `cpu` controller lives on, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// cgroup v1 (legacy or hybrid host).
    V1(V1Mounts),
    /// cgroup v2, mounted at `root`.
    V2 {
        /// The cgroup2 mount point.
        root: PathBuf,
    },
}

/// Every cgroup mount found in mountinfo.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mounts {
    /// v1 controller name to mount point (first mount of each controller wins).
    pub v1: BTreeMap<String, PathBuf>,
    /// The first cgroup2 mount point, if any.
    pub unified: Option<PathBuf>,
}

/// Parses mountinfo text; mount points are re-rooted under `root` (use `/` for the host).
///
/// ```
/// use std::path::Path;
/// let text = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
///             41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
/// let m = rexecd::cgroup::detect::parse_mountinfo(text, Path::new("/")).unwrap();
/// assert_eq!(m.v1["cpu"], Path::new("/sys/fs/cgroup/cpu,cpuacct"));
/// assert_eq!(m.unified.as_deref(), Some(Path::new("/sys/fs/cgroup/unified")));
/// ```
pub fn parse_mountinfo(text: &str, root: &Path) -> Result<Mounts> {
    let mut mounts = Mounts::default();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |detail: &str| CgroupError::Mountinfo {
            line: index + 1,
            detail: detail.to_string(),
        };
        let fields: Vec<&str> = line.split(' ').collect();
        let mount_point = fields.get(4).ok_or_else(|| bad("fewer than 5 fields"))?;
        let dash = fields
            .iter()
            .skip(6)
            .position(|f| *f == "-")
            .map(|p| p + 6)
            .ok_or_else(|| bad("no '-' separator"))?;
        let fstype = fields
            .get(dash + 1)
            .ok_or_else(|| bad("no filesystem type"))?;
        let super_opts = fields.get(dash + 3).copied().unwrap_or("");
        let path = reroot(root, &unescape(mount_point));
        match *fstype {
            "cgroup2" => {
                mounts.unified.get_or_insert(path);
            }
            "cgroup" => {
                for opt in super_opts.split(',') {
                    if is_controller(opt) {
                        mounts
                            .v1
                            .entry(opt.to_string())
                            .or_insert_with(|| path.clone());
                    }
                }
            }
            _ => {}
        }
    }
    Ok(mounts)
}

/// Decides where `cpu` is, given mountinfo text and the root it is relative to. On v2
/// this reads `<mount>/cgroup.controllers` to check that `cpu` is offered.
pub fn detect_from(mountinfo: &str, root: &Path) -> Result<Hierarchy> {
    let mounts = parse_mountinfo(mountinfo, root)?;
    if let Some(cpu) = mounts.v1.get("cpu") {
        return Ok(Hierarchy::V1(V1Mounts {
            cpu: cpu.clone(),
            cpuacct: mounts.v1.get("cpuacct").cloned(),
            pids: mounts.v1.get("pids").cloned(),
            freezer: mounts.v1.get("freezer").cloned(),
            memory: mounts.v1.get("memory").cloned(),
            cpuset: mounts.v1.get("cpuset").cloned(),
        }));
    }
    let Some(unified) = mounts.unified else {
        return Err(CgroupError::NoCpuController);
    };
    let controllers = fs::read(&unified.join("cgroup.controllers"))?;
    if controllers.split_whitespace().any(|c| c == "cpu") {
        Ok(Hierarchy::V2 { root: unified })
    } else {
        Err(CgroupError::NoCpuController)
    }
}

/// Detects the host's layout from `/proc/self/mountinfo`.
pub fn detect() -> Result<Hierarchy> {
    let path = Path::new("/proc/self/mountinfo");
    detect_from(&fs::read(path)?, Path::new("/"))
}

fn is_controller(opt: &str) -> bool {
    matches!(
        opt,
        "cpu" | "cpuacct" | "pids" | "freezer" | "cpuset" | "memory"
    )
}

fn reroot(root: &Path, mount_point: &str) -> PathBuf {
    root.join(mount_point.trim_start_matches('/'))
}

/// Undoes the kernel's octal escapes (`\040` for a space and so on) in mountinfo paths.
pub(super) fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            let digits = &bytes[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let value = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                if let Ok(byte) = u8::try_from(value) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's layout: v1 controllers, each on its own hierarchy, plus an empty
    /// cgroup2 at /sys/fs/cgroup/unified.
    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    /// A legacy host with cpu and cpuacct co-mounted and optional fields present.
    const LEGACY: &str = "\
25 18 0:22 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
28 25 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:11 - cgroup cgroup rw,cpu,cpuacct
29 25 0:26 / /sys/fs/cgroup/pids rw,nosuid shared:12 - cgroup cgroup rw,pids
";

    /// A unified host (systemd default today).
    const UNIFIED: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    #[test]
    fn hybrid_with_cpu_on_v1_detects_v1() {
        let root = Path::new("/");
        let found = detect_from(HYBRID, root).unwrap();
        assert_eq!(
            found,
            Hierarchy::V1(V1Mounts {
                cpu: "/sys/fs/cgroup/cpu".into(),
                cpuacct: Some("/sys/fs/cgroup/cpuacct".into()),
                pids: Some("/sys/fs/cgroup/pids".into()),
                freezer: Some("/sys/fs/cgroup/freezer".into()),
                memory: Some("/sys/fs/cgroup/memory".into()),
                cpuset: Some("/sys/fs/cgroup/cpuset".into()),
            })
        );
        let mounts = parse_mountinfo(HYBRID, root).unwrap();
        assert_eq!(mounts.unified, Some("/sys/fs/cgroup/unified".into()));
        assert!(
            !mounts.v1.contains_key("name=systemd"),
            "only the controllers we use"
        );
    }

    #[test]
    fn legacy_with_comounted_cpuacct() {
        let found = detect_from(LEGACY, Path::new("/fake")).unwrap();
        let Hierarchy::V1(m) = found else {
            panic!("expected v1")
        };
        assert_eq!(m.cpu, Path::new("/fake/sys/fs/cgroup/cpu,cpuacct"));
        assert_eq!(m.cpuacct.as_deref(), Some(m.cpu.as_path()));
        assert_eq!(m.freezer, None);
        assert_eq!(m.memory, None);
        assert_eq!(m.cpuset, None);
    }

    #[test]
    fn unified_reads_controllers_under_the_injected_root() {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("sys/fs/cgroup");
        std::fs::create_dir_all(&mount).unwrap();
        std::fs::write(
            mount.join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        let found = detect_from(UNIFIED, dir.path()).unwrap();
        assert_eq!(
            found,
            Hierarchy::V2 {
                root: mount.clone()
            }
        );

        std::fs::write(mount.join("cgroup.controllers"), "memory pids\n").unwrap();
        assert!(matches!(
            detect_from(UNIFIED, dir.path()),
            Err(CgroupError::NoCpuController)
        ));
    }

    #[test]
    fn unified_without_controllers_file_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let err = detect_from(UNIFIED, dir.path()).unwrap_err().to_string();
        assert!(err.contains("cgroup.controllers"), "{err}");
    }

    #[test]
    fn nothing_mounted_is_a_clear_error() {
        let text = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n";
        assert!(matches!(
            detect_from(text, Path::new("/")),
            Err(CgroupError::NoCpuController)
        ));
    }

    #[test]
    fn malformed_lines_are_errors_not_panics() {
        for text in ["garbage", "1 2 3 4 /x rw no-separator", "1 2 3 4 /x rw -"] {
            let err = parse_mountinfo(text, Path::new("/")).unwrap_err();
            assert!(
                matches!(err, CgroupError::Mountinfo { line: 1, .. }),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn escaped_mount_points_are_decoded() {
        let text = "1 2 0:1 / /cg\\040dir rw - cgroup cgroup rw,cpu\n";
        let m = parse_mountinfo(text, Path::new("/")).unwrap();
        assert_eq!(m.v1["cpu"], Path::new("/cg dir"));
        assert_eq!(unescape("a\\134b\\"), "a\\b\\");
    }

    #[test]
    fn detects_this_host() {
        // Whatever the machine is, detection must not fail to parse its mountinfo.
        let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        parse_mountinfo(&text, Path::new("/")).unwrap();
    }
}
