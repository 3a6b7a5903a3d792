//! Choosing the nodes of a job through the selectors: ask for N nodes by a
//! policy, open a session to each (TCP, mutual TLS with the node's
//! certificate checked against the name the selector gave, `Hello`), and
//! replace every node that fails before anything starts there.
//!
//! A node fails this way when it cannot be reached, its TLS handshake fails,
//! its certificate names another node (a forged announcement: someone else's
//! address under a real node's name), or it turns the session away (busy).
//! The client then asks a selector again with every node it already has or
//! has given up on in `exclude`, at most [`ROUNDS`] selections in all, so a
//! forged announcement costs one try and never receives a job.
//!
//! The sessions stay open and carry the launch ([`crate::launch`]); one rank
//! runs on each chosen node, in the order the selector ranked them. A launch
//! refused after the job is fixed (a per-user limit, no credit) still fails
//! the whole job, as with configured nodes.

use std::time::Duration;

use clients::selector::{AskAnyError, Selectors};
use proto::select::SelectQuery;
use tokio::task::JoinSet;
use tokio_rustls::TlsConnector;

use crate::config::NodeEntry;
use crate::exit::{Class, Error};
use crate::plan::RankTarget;
use crate::select::ASK_TIMEOUT;
use clients::node::{Session, SessionError};

/// Most selections (the first and the replacements) for one job.
pub const ROUNDS: usize = 4;

/// How long a chosen node may take to accept a session before it is replaced.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What to ask the selectors for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// How many nodes (one rank each).
    pub count: u32,
    /// The policy's name.
    pub policy: String,
    /// Price cap, micro-credits per minute.
    pub max_price: Option<i64>,
    /// Expected CPU length, milliseconds.
    pub expected_cpu_ms: Option<u64>,
}

impl Wanted {
    /// The select query for `need` more nodes, excluding `exclude`.
    pub fn query(&self, need: u32, exclude: Vec<String>) -> SelectQuery {
        SelectQuery {
            count: need,
            policy: self.policy.clone(),
            max_price: self.max_price,
            exclude,
            expected_cpu_ms: self.expected_cpu_ms,
        }
    }
}

/// The nodes chosen, with their open sessions, in rank order.
pub struct Chosen {
    /// One rank per node.
    pub ranks: Vec<RankTarget>,
    /// The open session of each rank.
    pub sessions: Vec<Option<Session>>,
}

/// A node given up on, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The node.
    pub node: NodeEntry,
    /// Why, in one line.
    pub why: String,
}

/// Why no set of nodes could be chosen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChooseError {
    /// The selectors gave no answer (or refused).
    #[error("{error}{}", rejected_lines(.rejected))]
    Select {
        /// What the selectors said.
        error: AskAnyError,
        /// Nodes given up on before.
        rejected: Vec<Rejected>,
    },
    /// A node refused in a way another node would too (the user is unknown
    /// there, has no credit, ...).
    #[error("node {} at {}: {}", .node.name, .node.addr, unprefixed(&.node.name, .error))]
    Refused {
        /// The node.
        node: NodeEntry,
        /// Why.
        error: SessionError,
    },
    /// The rounds ran out.
    #[error(
        "could not find {count} working node{} in {rounds} selections{}",
        if *.count == 1 { "" } else { "s" },
        rejected_lines(.rejected)
    )]
    Exhausted {
        /// Nodes wanted.
        count: u32,
        /// Selections made.
        rounds: usize,
        /// Nodes given up on.
        rejected: Vec<Rejected>,
    },
}

impl ChooseError {
    /// The client's error for this: a selectors' failure keeps its class
    /// (see [`crate::exit::selector_class`]), a refusal the node's (the
    /// market's refusal of the bid, a program that cannot start), running
    /// out of working nodes is a failure.
    pub fn into_error(self) -> Error {
        match self {
            ChooseError::Select { error, rejected } if rejected.is_empty() => {
                Error::Selectors(error)
            }
            ChooseError::Select { error, rejected } => {
                // Nodes were given up on: too few working ones is the
                // cluster's state, whatever the selectors say now.
                let class = Class::Failed;
                let mut lines = crate::exit::selector_lines(&error, false);
                lines.extend(
                    rejected_lines(&rejected)
                        .lines()
                        .skip(1)
                        .map(str::to_string),
                );
                Error::Lines { lines, class }
            }
            refused @ ChooseError::Refused { .. } => {
                let class = match &refused {
                    ChooseError::Refused { error, .. } => crate::agent::class(error),
                    _ => Class::Failed,
                };
                Error::Lines {
                    lines: vec![refused.to_string()],
                    class,
                }
            }
            other => Error::Failed(other.to_string()),
        }
    }
}

/// A node's message without the `node NAME: ` it may start with.
fn unprefixed(node: &str, e: &SessionError) -> String {
    let text = e.to_string();
    match text.strip_prefix(&format!("node {node}: ")) {
        Some(rest) => rest.to_string(),
        None => text,
    }
}

fn rejected_lines(rejected: &[Rejected]) -> String {
    rejected
        .iter()
        .map(|r| format!("\n  node {} at {}: {}", r.node.name, r.node.addr, r.why))
        .collect()
}

/// Whether a session failure happened before anything started on the
/// node, so that another node may take its place.
pub fn replaceable(e: &SessionError) -> bool {
    use proto::node::ErrorCode;
    match e {
        SessionError::Resolve { .. }
        | SessionError::Connect { .. }
        | SessionError::ConnectTimeout { .. }
        | SessionError::Tls(_)
        | SessionError::WrongPeer { .. }
        | SessionError::Frame(_)
        | SessionError::Closed
        | SessionError::Silent(_)
        | SessionError::NoSession(_)
        | SessionError::Unexpected { .. }
        | SessionError::Version(_) => true,
        // What is about this user or request would be refused everywhere.
        SessionError::Refused(r) => !matches!(
            r.code,
            ErrorCode::NoCredit
                | ErrorCode::NotAuthorized
                | ErrorCode::BadRequest
                | ErrorCode::SpawnFailed
        ),
    }
}

/// The nodes the selector offered that may be tried: not excluded, not
/// twice, at most `need`.
pub fn usable(offered: Vec<NodeEntry>, exclude: &[String], need: usize) -> Vec<NodeEntry> {
    let mut out: Vec<NodeEntry> = Vec::new();
    for n in offered {
        if out.len() == need {
            break;
        }
        if exclude.contains(&n.name) || out.iter().any(|o| o.name == n.name) {
            continue;
        }
        out.push(n);
    }
    out
}

/// Choose `wanted.count` nodes through `selectors` and open a session to
/// each, by the rule in the module docs. `note` hears what a `-v` user
/// should read; `timeout` is the sessions' silence limit.
pub async fn choose(
    connector: &TlsConnector,
    selectors: &mut Selectors,
    wanted: &Wanted,
    timeout: Duration,
    note: &dyn Fn(&str),
) -> Result<Chosen, ChooseError> {
    let mut kept: Vec<(NodeEntry, Session)> = Vec::new();
    let mut rejected: Vec<Rejected> = Vec::new();
    let mut rounds = 0;
    while kept.len() < wanted.count as usize && rounds < ROUNDS {
        rounds += 1;
        let need = wanted.count as usize - kept.len();
        let exclude: Vec<String> = kept
            .iter()
            .map(|(n, _)| n.name.clone())
            .chain(rejected.iter().map(|r| r.node.name.clone()))
            .collect();
        let op = wanted.query(need as u32, exclude.clone());
        let (by, views) = match selectors.ask(connector, &op, ASK_TIMEOUT).await {
            Ok(answer) => answer,
            Err(error) => return Err(ChooseError::Select { error, rejected }),
        };
        let via = &selectors.list()[by].name;
        let offered = views
            .iter()
            .map(|v| NodeEntry {
                name: v.name.clone(),
                addr: v.addr.to_string(),
            })
            .collect();
        let batch = usable(offered, &exclude, need);
        if batch.is_empty() {
            break;
        }
        for n in &batch {
            if let Some(v) = views.iter().find(|v| v.name == n.name) {
                note(&format!(
                    "selected {} ({}) by {} via {via}",
                    v.name,
                    describe(v),
                    wanted.policy
                ));
            }
        }
        let mut set = JoinSet::new();
        for (i, node) in batch.iter().cloned().enumerate() {
            let connector = connector.clone();
            set.spawn(async move {
                let open = Session::open(
                    &crate::agent::AGENT,
                    &connector,
                    &node.name,
                    &node.addr,
                    timeout,
                );
                let result = match tokio::time::timeout(PROBE_TIMEOUT, open).await {
                    Ok(r) => r.map_err(|e| (replaceable(&e), e)),
                    Err(_) => Err((true, SessionError::NoSession(PROBE_TIMEOUT))),
                };
                (i, result)
            });
        }
        let mut results: Vec<Option<Result<Session, (bool, SessionError)>>> =
            batch.iter().map(|_| None).collect();
        while let Some(joined) = set.join_next().await {
            if let Ok((i, r)) = joined {
                results[i] = Some(r);
            }
        }
        for (node, result) in batch.into_iter().zip(results) {
            match result {
                Some(Ok(session)) => kept.push((node, session)),
                Some(Err((false, error))) => return Err(ChooseError::Refused { node, error }),
                Some(Err((true, error))) => {
                    let why = error.to_string();
                    note(&format!(
                        "node {} at {}: {why}; asking for another",
                        node.name, node.addr
                    ));
                    rejected.push(Rejected { node, why });
                }
                None => rejected.push(Rejected {
                    node,
                    why: "the session task failed".into(),
                }),
            }
        }
    }
    if kept.len() < wanted.count as usize {
        return Err(ChooseError::Exhausted {
            count: wanted.count,
            rounds,
            rejected,
        });
    }
    let (nodes, sessions): (Vec<_>, Vec<_>) = kept.into_iter().unzip();
    Ok(Chosen {
        ranks: nodes
            .into_iter()
            .enumerate()
            .map(|(i, node)| RankTarget {
                rank: i as u32,
                node,
            })
            .collect(),
        sessions: sessions.into_iter().map(Some).collect(),
    })
}

/// `price 0.5/min, 2 idle CPUs[, predicted 95s]` for `-v`.
pub fn describe(v: &proto::select::NodeView) -> String {
    let mut text = format!(
        "price {}/min, {} idle CPU{}",
        money::format_credits(v.status.price),
        crate::show::milli(u64::from(v.idle_milli)),
        if v.idle_milli == 1000 { "" } else { "s" }
    );
    if let Some(p) = v.predicted_ms {
        text.push_str(&format!(", predicted {}", crate::show::show_ms(p)));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(name: &str) -> NodeEntry {
        NodeEntry {
            name: name.into(),
            addr: "127.0.0.1:1".into(),
        }
    }

    #[test]
    fn offered_nodes_skip_the_excluded_and_repeats() {
        let got = usable(
            vec![n("n1"), n("n2"), n("n2"), n("n3"), n("n4")],
            &["n1".to_string()],
            2,
        );
        assert_eq!(got, [n("n2"), n("n3")]);
        assert!(usable(vec![n("n1")], &["n1".to_string()], 1).is_empty());
    }

    #[test]
    fn failures_before_the_start_are_replaced_and_refusals_of_the_user_are_not() {
        use proto::node::{ErrorCode, ErrorReply};
        let refused = |c| SessionError::Refused(ErrorReply::new(c, "x"));
        assert!(replaceable(&refused(ErrorCode::Busy)));
        assert!(replaceable(&SessionError::WrongPeer {
            addr: "a:1".into(),
            expected: "node n1".into(),
            got: "node n9".into(),
        }));
        assert!(replaceable(&SessionError::Connect {
            addr: "a:1".into(),
            source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        }));
        assert!(!replaceable(&refused(ErrorCode::NoCredit)));
        assert!(replaceable(&refused(ErrorCode::UnknownUser)));
        assert!(replaceable(&refused(ErrorCode::AccountUnavailable)));
        assert!(!replaceable(&refused(ErrorCode::NotAuthorized)));
    }

    #[test]
    fn the_query_carries_the_exclusions_and_the_terms() {
        let w = Wanted {
            count: 3,
            policy: "history".into(),
            max_price: Some(500_000),
            expected_cpu_ms: Some(90_000),
        };
        let q = w.query(1, vec!["n1".into()]);
        assert_eq!((q.count, q.policy.as_str()), (1, "history"));
        assert_eq!(q.exclude, ["n1"]);
        assert_eq!(
            (q.max_price, q.expected_cpu_ms),
            (Some(500_000), Some(90_000))
        );
    }
}
