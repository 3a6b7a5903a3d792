//! Starting a job: the terminal size, the [`Launch`] request
//! with its validation, and the [`Started`] answer.

use serde::{Deserialize, Serialize};

use money::Bid;

use crate::job::JobId;

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WindowSize {
    /// Rows.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

/// Start one rank of a job (client to node).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    /// The job's id, the same on every rank.
    pub job: JobId,
    /// This rank's number, `0..nranks`.
    pub rank: u32,
    /// How many ranks the job has in all.
    pub nranks: u32,
    /// Bid in micro-credits per minute of CPU (1 credit = 1 000 000); 0 runs free at the lowest weight.
    /// On the wire an `i64`; a negative one does not decode ([`crate::FrameError::BadBid`]).
    pub bid: Bid,
    /// The program and its arguments; `argv[0]` is looked up in the node's `PATH`.
    #[serde(deserialize_with = "crate::limits::args")]
    pub argv: Vec<String>,
    /// The complete environment for the program, as `(name, value)` pairs.
    #[serde(deserialize_with = "crate::limits::env")]
    pub env: Vec<(String, String)>,
    /// Absolute working directory; `None` means the user's home directory.
    pub cwd: Option<String>,
    /// `Some` to run the job on a terminal of this size (stdout and stderr
    /// then arrive merged as `Stdout`); `None` for plain pipes.
    pub terminal: Option<WindowSize>,
    /// Memory and time limits and output files (appended after the first release:
    /// an older client's launch reads as the defaults).
    #[serde(default, deserialize_with = "crate::limits::trailing")]
    pub options: super::RankOptions,
}

/// Start one rank of a job under a spending ceiling, or charged to a project
/// (client to node): `launch` (with a PMI channel when `pmi`, as
/// [`crate::node::ToNode::LaunchPmi`]), the account to charge (`rexec -A`),
/// and the most the whole job may be charged, `max_cost` micro-credits. The node
/// enforces the ceiling: each rank may be charged its share, `max_cost / nranks` (rank
/// `r` below `max_cost % nranks` one micro-credit more), and a rank whose
/// charges reach its share runs on at bid 0, where it is free, with one
/// [`crate::node::NoticeKind::CostLimit`] notice (`rexec --max-cost`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CappedLaunch {
    /// The rank to start.
    pub launch: Launch,
    /// Open a PMI channel too (`rexec --mpi`).
    pub pmi: bool,
    /// The most the whole job may be charged, micro-credits, not negative;
    /// `None` for no ceiling (a launch sent for its `account` alone).
    pub max_cost: Option<i64>,
    /// The project account charged (`rexec -A`; the job's owner must be one of
    /// its members); `None` for the owner's default project, or its personal
    /// account where it has none.
    pub account: Option<String>,
}

/// Rank `rank`'s share of a job's ceiling `max_cost` over `nranks` ranks:
/// `max_cost / nranks`, one micro-credit more below `max_cost % nranks`
/// (a negative ceiling counts as 0).
///
/// ```
/// assert_eq!(proto::node::rank_share(10, 0, 3), 4);
/// assert_eq!(proto::node::rank_share(10, 2, 3), 3);
/// ```
pub fn rank_share(max_cost: i64, rank: u32, nranks: u32) -> i64 {
    let n = i64::from(nranks.max(1));
    let r = i64::from(rank);
    let max = max_cost.max(0);
    max / n + i64::from(r < max % n)
}

impl CappedLaunch {
    /// What rank `launch.rank` may be charged: its share of `max_cost`.
    ///
    /// ```
    /// use proto::node::*;
    /// let launch = Launch {
    ///     job: JobId(1), rank: 0, nranks: 3, bid: Bid::from_credits(2), argv: vec!["p".into()],
    ///     env: vec![], cwd: None, terminal: None, options: RankOptions::default(),
    /// };
    /// let mut c = CappedLaunch { launch, pmi: false, max_cost: Some(10), account: None };
    /// assert_eq!(c.rank_ceiling(), Some(4));
    /// c.launch.rank = 2;
    /// assert_eq!(c.rank_ceiling(), Some(3));
    /// c.max_cost = None;
    /// assert_eq!(c.rank_ceiling(), None);
    /// ```
    pub fn rank_ceiling(&self) -> Option<i64> {
        Some(rank_share(
            self.max_cost?,
            self.launch.rank,
            self.launch.nranks,
        ))
    }

    /// Checks the launch ([`Launch::validate`]) and that the ceiling is not negative.
    pub fn validate(&self) -> Result<(), LaunchError> {
        self.launch.validate()?;
        if let Some(c) = self.max_cost.filter(|c| *c < 0) {
            return Err(LaunchError::NegativeCeiling(c));
        }
        Ok(())
    }
}

/// Why a [`Launch`] cannot be carried out as sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// No program was named.
    #[error("no program to run: argv is empty or argv[0] is empty")]
    NoProgram,
    /// `rank` is not below `nranks`.
    #[error("rank {rank} is out of range for a job of {nranks} ranks")]
    BadRank {
        /// The rank sent.
        rank: u32,
        /// The rank count sent.
        nranks: u32,
    },
    /// A string holds a NUL byte, which no program argument, variable or path can.
    #[error("{0} contains a NUL byte")]
    Nul(&'static str),
    /// More arguments or environment variables than the protocol carries.
    #[error("too many {what}: {count} (at most {max})")]
    TooMany {
        /// "arguments" or "environment variables".
        what: &'static str,
        /// How many there are.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// An environment variable name is empty or contains `=`.
    #[error("environment variable name {0:?} is empty or contains '='")]
    BadEnvName(String),
    /// The working directory is not an absolute path.
    #[error("working directory {0:?} is not an absolute path")]
    RelativeCwd(String),
    /// The spending ceiling is negative.
    #[error("a spending ceiling of {0} micro-credits is negative; give 0 or more")]
    NegativeCeiling(i64),
    /// An output file name is empty, too long or holds a NUL byte.
    #[error("output file {0:?} is empty, longer than 4096 bytes or holds a NUL byte")]
    BadOutputFile(String),
}

impl Launch {
    /// Check the request's own consistency (the node still checks
    /// permissions, credit and the program's existence).
    ///
    /// ```
    /// use proto::node::*;
    /// let mut launch = Launch {
    ///     job: JobId(1), rank: 0, nranks: 4, bid: Bid::from_credits(2),
    ///     argv: vec!["./prog".into()], env: vec![("HOME".into(), "/home/ann".into())],
    ///     cwd: Some("/home/ann".into()), terminal: None, options: RankOptions::default(),
    /// };
    /// assert_eq!(launch.validate(), Ok(()));
    /// launch.rank = 4;
    /// assert_eq!(launch.validate(), Err(LaunchError::BadRank { rank: 4, nranks: 4 }));
    /// ```
    pub fn validate(&self) -> Result<(), LaunchError> {
        if self.argv.first().is_none_or(|p| p.is_empty()) {
            return Err(LaunchError::NoProgram);
        }
        if self.argv.len() > crate::limits::MAX_ARGS {
            return Err(LaunchError::TooMany {
                what: "arguments",
                count: self.argv.len(),
                max: crate::limits::MAX_ARGS,
            });
        }
        if self.env.len() > crate::limits::MAX_ENV {
            return Err(LaunchError::TooMany {
                what: "environment variables",
                count: self.env.len(),
                max: crate::limits::MAX_ENV,
            });
        }
        if self.rank >= self.nranks {
            return Err(LaunchError::BadRank {
                rank: self.rank,
                nranks: self.nranks,
            });
        }
        if self.argv.iter().any(|a| a.contains('\0')) {
            return Err(LaunchError::Nul("an argument"));
        }
        for (name, value) in &self.env {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return Err(LaunchError::BadEnvName(name.clone()));
            }
            if value.contains('\0') {
                return Err(LaunchError::Nul("an environment value"));
            }
        }
        if let Some(cwd) = &self.cwd {
            if cwd.contains('\0') {
                return Err(LaunchError::Nul("the working directory"));
            }
            if !cwd.starts_with('/') {
                return Err(LaunchError::RelativeCwd(cwd.clone()));
            }
        }
        for file in [&self.options.stdout, &self.options.stderr]
            .into_iter()
            .flatten()
        {
            if file.is_empty() || file.len() > crate::output::MAX_PATTERN || file.contains('\0') {
                return Err(LaunchError::BadOutputFile(file.clone()));
            }
        }
        Ok(())
    }
}

/// The rank is running (node to client).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    /// The job.
    pub job: JobId,
    /// The rank that started.
    pub rank: u32,
    /// Process id of the rank's first process on the node, for admins.
    pub pid: u32,
}
