//! What to start where: the rank-to-node placement, the job id, and the
//! `Launch` message of each rank (environment with the `REXEC_*` variables,
//! working directory, terminal).
//!
//! Placement without a selector (a later issue brings vexecd): with
//! `--nodes`, the list in order, cycled or cut to `-n N`; without it, the
//! first N nodes of the configuration file in file order, cycling when the
//! file lists fewer than N.

use money::Bid;
use proto::node::{JobId, Launch, WindowSize};

use crate::MAX_RANKS;
use crate::config::{Config, NodeEntry};

/// Variables the client sets per rank (any inherited value is replaced).
pub const RANK_VARS: [&str; 4] = ["REXEC_RANK", "REXEC_NRANKS", "REXEC_NODES", "REXEC_JOB"];

/// Why no placement could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// `--nodes` named a node the configuration does not list.
    #[error("node {node:?} is not in {config} [nodes]; add it there or pick one of: {known}")]
    UnknownNode {
        /// The name given.
        node: String,
        /// The configuration file.
        config: String,
        /// The names it does list.
        known: String,
    },
    /// `--nodes` had an empty entry or no entry.
    #[error("--nodes has an empty entry; write it like --nodes n1,n2")]
    EmptyNodeName,
    /// No `--nodes` and no way to find a node in the configuration.
    #[error(
        "no nodes: {config} has no [nodes], no [selectors] and no [discovery] table, so rexec \
         knows no node; {}",
        crate::config::ADD_NODES
    )]
    NoNodes {
        /// The configuration file.
        config: String,
    },
    /// More ranks than allowed.
    #[error("{0} ranks is too many; at most {MAX_RANKS}")]
    TooManyRanks(usize),
}

/// One rank and the node that runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankTarget {
    /// The rank, `0..nranks`.
    pub rank: u32,
    /// The node.
    pub node: NodeEntry,
}

/// Ranks in rank order, by the rule in the module docs.
pub fn place(
    config: &Config,
    nodes: Option<&[String]>,
    nranks: Option<u32>,
) -> Result<Vec<RankTarget>, PlanError> {
    let pool: Vec<NodeEntry> = match nodes {
        Some(list) => {
            if list.is_empty() {
                return Err(PlanError::EmptyNodeName);
            }
            let mut pool = Vec::with_capacity(list.len());
            for name in list {
                let name = name.trim();
                if name.is_empty() {
                    return Err(PlanError::EmptyNodeName);
                }
                let entry = config.node(name).ok_or_else(|| PlanError::UnknownNode {
                    node: name.to_string(),
                    config: config.path.display().to_string(),
                    known: known_names(config),
                })?;
                pool.push(entry.clone());
            }
            pool
        }
        None => config.nodes.clone(),
    };
    if pool.is_empty() {
        return Err(PlanError::NoNodes {
            config: config.path.display().to_string(),
        });
    }
    let n = match (nranks, nodes) {
        (Some(n), _) => n as usize,
        (None, Some(_)) => pool.len(),
        (None, None) => 1,
    };
    if n > MAX_RANKS as usize {
        return Err(PlanError::TooManyRanks(n));
    }
    Ok((0..n)
        .map(|i| RankTarget {
            rank: i as u32,
            node: pool[i % pool.len()].clone(),
        })
        .collect())
}

fn known_names(config: &Config) -> String {
    if config.nodes.is_empty() {
        return "(none)".to_string();
    }
    config
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Everything the ranks of one job share.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// The job id.
    pub job: JobId,
    /// The bid on every node.
    pub bid: Bid,
    /// Program and arguments.
    pub argv: Vec<String>,
    /// The client's environment without the per-rank variables.
    pub env: Vec<(String, String)>,
    /// The client's working directory, when it is valid UTF-8.
    pub cwd: Option<String>,
    /// Rank 0's terminal size under `-t`.
    pub terminal: Option<WindowSize>,
    /// The node names in rank order.
    pub nodes: Vec<String>,
    /// Memory per rank (`--mem`), bytes; `None`: each node's default.
    pub mem_bytes: Option<u64>,
}

impl JobSpec {
    /// The spec for `ranks`, taking the environment and working directory
    /// from this process.
    pub fn from_process(
        ranks: &[RankTarget],
        bid: Bid,
        argv: Vec<String>,
        terminal: Option<WindowSize>,
    ) -> JobSpec {
        JobSpec {
            job: new_job_id(),
            bid,
            argv,
            env: process_env(),
            cwd: process_cwd(),
            terminal,
            nodes: ranks.iter().map(|r| r.node.name.clone()).collect(),
            mem_bytes: None,
        }
    }

    /// The `Launch` message of `rank`.
    ///
    /// ```
    /// use rexec::plan::JobSpec;
    /// use proto::node::JobId;
    /// let spec = JobSpec {
    ///     job: JobId(0xab), bid: money::Bid::from_credits(2), argv: vec!["hostname".into()],
    ///     env: vec![("PATH".into(), "/bin".into())], cwd: Some("/tmp".into()),
    ///     terminal: None, nodes: vec!["n1".into(), "n2".into()], mem_bytes: None,
    /// };
    /// let l = spec.launch(1);
    /// assert_eq!((l.rank, l.nranks, l.bid), (1, 2, money::Bid::from_credits(2)));
    /// assert!(l.env.contains(&("REXEC_NODES".into(), "n1,n2".into())));
    /// assert!(l.env.contains(&("REXEC_JOB".into(), "00000000000000ab".into())));
    /// assert_eq!(l.validate(), Ok(()));
    /// ```
    pub fn launch(&self, rank: u32) -> Launch {
        let mut env = self.env.clone();
        env.push(("REXEC_RANK".into(), rank.to_string()));
        env.push(("REXEC_NRANKS".into(), self.nodes.len().to_string()));
        env.push(("REXEC_NODES".into(), self.nodes.join(",")));
        env.push(("REXEC_JOB".into(), self.job.to_string()));
        Launch {
            job: self.job,
            rank,
            nranks: self.nodes.len() as u32,
            bid: self.bid,
            argv: self.argv.clone(),
            env,
            cwd: self.cwd.clone(),
            terminal: if rank == 0 { self.terminal } else { None },
            options: proto::node::RankOptions {
                mem_bytes: self.mem_bytes,
                ..Default::default()
            },
        }
    }
}

/// This process's environment as a job takes it: the variables whose name and
/// value are valid UTF-8, without the per-rank variables ([`RANK_VARS`]).
pub fn process_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| !RANK_VARS.contains(&k.as_str()))
        .collect()
}

/// This process's working directory, when it is valid UTF-8.
pub fn process_cwd() -> Option<String> {
    std::env::current_dir()
        .ok()
        .and_then(|p| p.into_os_string().into_string().ok())
}

/// A fresh random job id from the operating system's generator (`getrandom`), or
/// the clock mixed with the process id if that fails. Never 0.
pub fn new_job_id() -> JobId {
    let id = getrandom::u64().unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        nanos.rotate_left(17) ^ u64::from(std::process::id()).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    });
    JobId(id.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn config() -> Config {
        let text = "ca = \"c\"\ncert = \"u\"\nkey = \"k\"\n[nodes]\nb = \"h:1\"\na = \"h:2\"\nc = \"h:3\"\n";
        Config::parse(Path::new("/x/c.toml"), text).unwrap()
    }

    fn names(r: &[RankTarget]) -> Vec<&str> {
        r.iter().map(|t| t.node.name.as_str()).collect()
    }

    #[test]
    fn config_order_cycles_and_defaults_to_one_rank() {
        let c = config();
        assert_eq!(names(&place(&c, None, None).unwrap()), ["b"]);
        assert_eq!(
            names(&place(&c, None, Some(5)).unwrap()),
            ["b", "a", "c", "b", "a"]
        );
    }

    #[test]
    fn node_list_sets_the_count_and_may_repeat() {
        let c = config();
        let list = ["c".to_string(), "c".to_string(), "a".to_string()];
        let r = place(&c, Some(&list), None).unwrap();
        assert_eq!(names(&r), ["c", "c", "a"]);
        assert_eq!(r[2].rank, 2);
        assert_eq!(names(&place(&c, Some(&list), Some(2)).unwrap()), ["c", "c"]);
        assert_eq!(
            names(&place(&c, Some(&list[2..]), Some(2)).unwrap()),
            ["a", "a"]
        );
    }

    #[test]
    fn a_config_without_any_node_source_says_what_to_add() {
        let c = Config::parse(
            Path::new("/x/c.toml"),
            "ca = \"c\"\ncert = \"u\"\nkey = \"k\"\n",
        )
        .unwrap();
        let e = place(&c, None, None).unwrap_err().to_string();
        assert!(
            e.contains("/x/c.toml has no [nodes], no [selectors] and no [discovery]"),
            "{e}"
        );
        for add in [
            "add a [nodes] table",
            "[selectors] table",
            "[discovery] table",
        ] {
            assert!(e.contains(add), "{add} in {e}");
        }
        assert!(e.contains("name = \"host:port\" of each node"), "{e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }

    #[test]
    fn unknown_and_empty_names_are_refused() {
        let c = config();
        let e = place(&c, Some(&["zz".to_string()]), None).unwrap_err();
        assert!(e.to_string().contains("\"zz\" is not in /x/c.toml"), "{e}");
        assert!(e.to_string().contains("b, a, c"), "{e}");
        let e = place(&c, Some(&["a".to_string(), String::new()]), None).unwrap_err();
        assert_eq!(e, PlanError::EmptyNodeName);
    }

    #[test]
    fn job_ids_differ() {
        assert_ne!(new_job_id(), new_job_id());
    }
}
