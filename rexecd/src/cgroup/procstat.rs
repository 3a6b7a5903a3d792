//! Runnable demand from `/proc`: the number of threads of a job in state `R` (running
//! or waiting for a CPU). One small read of `/proc/<tid>/stat` per thread; threads that
//! exit while we look are simply not counted. The proc root is injectable for tests.

use std::path::Path;

use crate::sys::ProcessId;

/// The scheduler state letter of a `/proc/<id>/stat` line (`R`, `S`, `D`, `Z`, ...).
/// The command name may contain spaces and parentheses, so the state is found after the
/// last `)`.
///
/// ```
/// use rexecd::cgroup::procstat::stat_state;
/// assert_eq!(stat_state("42 (a) b) R 1 42 42 0"), Some('R'));
/// assert_eq!(stat_state("garbage"), None);
/// ```
pub fn stat_state(line: &str) -> Option<char> {
    let after = &line[line.rfind(')')? + 1..];
    let state = after.trim_start().chars().next()?;
    state.is_ascii_alphabetic().then_some(state)
}

/// Counts the ids in `threads` whose `<proc_root>/<id>/stat` reports state `R`.
pub fn count_runnable(proc_root: &Path, threads: &[ProcessId]) -> u32 {
    let mut runnable = 0;
    for tid in threads {
        let path = proc_root.join(tid.0.to_string()).join("stat");
        // A thread that exited between listing and reading is not demand; skip it.
        if let Ok(line) = std::fs::read_to_string(&path)
            && stat_state(&line) == Some('R')
        {
            runnable += 1;
        }
    }
    runnable
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_parse_with_hostile_names() {
        assert_eq!(stat_state("1 (sh) S 0 1 1"), Some('S'));
        assert_eq!(stat_state("7 (x) R (y) D 1"), Some('D'));
        assert_eq!(stat_state("7 () Z"), Some('Z'));
        assert_eq!(stat_state("7 (x)"), None);
        assert_eq!(stat_state("7 (x) 5"), None);
    }

    #[test]
    fn counts_only_runnable_and_skips_vanished_threads() {
        let dir = tempfile::tempdir().unwrap();
        for (tid, state) in [(10, 'R'), (11, 'S'), (12, 'R'), (13, 'D')] {
            let d = dir.path().join(tid.to_string());
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("stat"), format!("{tid} (w) {state} 1 1 1 0\n")).unwrap();
        }
        let threads: Vec<ProcessId> = [10, 11, 12, 13, 99].map(ProcessId).to_vec();
        assert_eq!(count_runnable(dir.path(), &threads), 2);
    }

    #[test]
    fn this_thread_is_runnable_while_it_reads() {
        let me = ProcessId(nix::unistd::gettid().as_raw());
        assert_eq!(count_runnable(Path::new("/proc"), &[me]), 1);
    }
}
