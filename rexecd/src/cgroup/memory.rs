//! Per-rank memory limits through the memory controller (`--mem`, rexecd's
//! `max_mem_per_rank`): the files of each cgroup version and how a kill for memory
//! shows in them.
//!
//! - v1 (the `memory` hierarchy): the limit is `memory.limit_in_bytes`, and
//!   `memory.memsw.limit_in_bytes` gets the same value where swap accounting exists,
//!   so a rank cannot swap past its limit instead of being stopped. A kill shows in
//!   `memory.oom_control` as `oom_kill N` (kernels since 4.13); older kernels lack that
//!   line, and then `memory.failcnt` (times the limit was hit) stands in for it.
//! - v2: the limit is `memory.max`, `memory.swap.max` is set to 0 where it exists, and
//!   a kill shows as `oom_kill N` in `memory.events`.
//!
//! In both, the kernel's OOM killer acts inside the job's cgroup only: other jobs on
//! the node are not touched.

use std::path::Path;

use super::error::Result;
use super::fs;
use super::fs::keyed_value;

/// Writes a v1 limit into the job's directory in the `memory` hierarchy.
pub(super) fn set_v1(dir: &Path, bytes: u64) -> Result<()> {
    fs::write(&dir.join("memory.limit_in_bytes"), &bytes.to_string())?;
    let memsw = dir.join("memory.memsw.limit_in_bytes");
    if memsw.exists() {
        fs::write(&memsw, &bytes.to_string())?;
    }
    Ok(())
}

/// Kills for memory in a v1 job directory (see the module doc).
pub(super) fn oom_kills_v1(dir: &Path) -> Result<u64> {
    let control = dir.join("memory.oom_control");
    let text = fs::read(&control)?;
    if text.lines().any(|l| l.starts_with("oom_kill ")) {
        return keyed_value(&control, &text, "oom_kill");
    }
    let failcnt = dir.join("memory.failcnt");
    fs::parse_u64(&failcnt, &fs::read(&failcnt)?)
}

/// Writes a v2 limit into the job's directory.
pub(super) fn set_v2(dir: &Path, bytes: u64) -> Result<()> {
    fs::write(&dir.join("memory.max"), &bytes.to_string())?;
    let swap = dir.join("memory.swap.max");
    if swap.exists() {
        fs::write(&swap, "0")?;
    }
    Ok(())
}

/// Kills for memory in a v2 job directory.
pub(super) fn oom_kills_v2(dir: &Path) -> Result<u64> {
    let events = dir.join("memory.events");
    keyed_value(&events, &fs::read(&events)?, "oom_kill")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn v1_limit_covers_swap_where_accounted_and_kills_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // Control files take each write whole; the fake ones start empty so that a
        // write shows alone.
        put(&d.join("memory.limit_in_bytes"), "");
        set_v1(d, 64 << 20).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("memory.limit_in_bytes")).unwrap(),
            "67108864"
        );
        assert!(!d.join("memory.memsw.limit_in_bytes").exists());
        put(&d.join("memory.limit_in_bytes"), "");
        put(&d.join("memory.memsw.limit_in_bytes"), "");
        set_v1(d, 1 << 20).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("memory.memsw.limit_in_bytes")).unwrap(),
            "1048576"
        );
        put(
            &d.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        );
        assert_eq!(oom_kills_v1(d).unwrap(), 2);
        // An old kernel without the oom_kill line: the limit's hit count stands in.
        put(
            &d.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\n",
        );
        put(&d.join("memory.failcnt"), "0\n");
        assert_eq!(oom_kills_v1(d).unwrap(), 0);
    }

    #[test]
    fn v2_limit_turns_swap_off_and_kills_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        put(&d.join("memory.max"), "");
        put(&d.join("memory.swap.max"), "");
        set_v2(d, 32 << 20).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("memory.max")).unwrap(),
            "33554432"
        );
        assert_eq!(
            std::fs::read_to_string(d.join("memory.swap.max")).unwrap(),
            "0"
        );
        put(
            &d.join("memory.events"),
            "low 0\nhigh 0\nmax 17\noom 1\noom_kill 1\noom_group_kill 0\n",
        );
        assert_eq!(oom_kills_v2(d).unwrap(), 1);
        let err = oom_kills_v2(&d.join("gone")).unwrap_err().to_string();
        assert!(err.contains("memory.events"), "{err}");
    }
}
