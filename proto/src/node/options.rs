//! What a rank may use and where its output goes, beyond the first release of
//! [`super::Launch`]: [`RankOptions`], appended to `Launch` (an older client's launch
//! reads as the defaults: no limits, output to the session).

use serde::{Deserialize, Serialize};

/// Limits and output files of one rank.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankOptions {
    /// Memory for the rank's cgroup, bytes (`--mem`): over it the kernel kills the
    /// rank (out of memory). `None`: the node's default.
    pub mem_bytes: Option<u64>,
    /// The rank's time limit: SIGTERM when it has run this long, SIGKILL after the
    /// grace. `None`: no limit.
    pub time_limit: Option<TimeLimit>,
    /// A file for the rank's standard output (opened by the node as the user, relative
    /// to the working directory); `None`: sent over the session.
    pub stdout: Option<String>,
    /// A file for the rank's standard error, as `stdout`.
    pub stderr: Option<String>,
}

/// A rank's time limit (a batch job's `--length`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeLimit {
    /// How long the rank may run, milliseconds from its start on the node.
    pub length_ms: u64,
    /// How long after SIGTERM the node sends SIGKILL, milliseconds.
    pub kill_wait_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{JobId, Launch, WindowSize};

    /// `Launch` as first released, without `options`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct FirstLaunch {
        job: JobId,
        rank: u32,
        nranks: u32,
        bid: i64,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<String>,
        terminal: Option<WindowSize>,
    }

    #[test]
    fn launches_of_either_release_read_on_the_other() {
        let old = FirstLaunch {
            job: JobId(5),
            rank: 0,
            nranks: 1,
            bid: 7,
            argv: vec!["true".into()],
            env: vec![],
            cwd: Some("/tmp".into()),
            terminal: Some(WindowSize { rows: 2, cols: 3 }),
        };
        let bytes = postcard::to_stdvec(&old).unwrap();
        let new: Launch = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(new.options, RankOptions::default());
        assert_eq!(
            (new.job, new.bid.micros_per_minute(), new.terminal),
            (old.job, old.bid, old.terminal)
        );
        let mut with = new.clone();
        with.options = RankOptions {
            mem_bytes: Some(64 << 20),
            time_limit: Some(TimeLimit {
                length_ms: 1000,
                kill_wait_ms: 30_000,
            }),
            stdout: Some("out-%j".into()),
            stderr: None,
        };
        let bytes = postcard::to_stdvec(&with).unwrap();
        assert_eq!(postcard::from_bytes::<Launch>(&bytes).unwrap(), with);
        // An older node reads the new launch and ignores what it does not know.
        assert_eq!(postcard::from_bytes::<FirstLaunch>(&bytes).unwrap(), old);
    }
}
