//! `rexec nodes [--length DURATION] [--policy P] [-v]`: the nodes one
//! selector knows, as an aligned table: name, address, price (credits per
//! minute: the sum of the bids competing there, paid or not), CPUs, idle
//! CPUs, jobs, load, predicted completion of a job of `--length` CPU time,
//! and the age of the node's last announcement. `-`
//! marks what is unknown. Rows come by name, or in the order `--policy`
//! would choose them (the selector ranks every node it knows).
//!
//! Exit status: 0 with a table, 1 when no selector answered, 2 for a usage
//! or configuration error (a policy every selector refuses is one).

use clients::selector::{AskAnyError, Selectors};
use proto::select::{NodeList, NodeView, NodesQuery, SelectQuery};
use tokio_rustls::TlsConnector;

use crate::cli::NodesArgs;
use crate::config::{Config, NodeEntry};
use crate::exit::{Class, Error};
use crate::find::FindError;
use crate::say;
use crate::select::ASK_TIMEOUT;

/// A selector's listing of the live nodes it knows.
#[derive(Debug)]
pub struct Listed {
    /// The selectors found, in the order they were asked, with the connection
    /// of the one that answered open.
    pub selectors: Selectors,
    /// The index in `selectors.list()` of the one that answered.
    pub by: usize,
    /// Its answer.
    pub list: NodeList,
}

/// Why no listing was had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListError {
    /// No selector to ask.
    #[error(transparent)]
    Find(#[from] FindError),
    /// No selector answered.
    #[error(transparent)]
    Ask(#[from] AskAnyError),
}

impl ListError {
    /// The client's error for this: a failure of the command (1), or a
    /// usage error (2) when the selectors refused the request as asked.
    pub fn into_error(self) -> Error {
        match self {
            ListError::Find(e) => Error::Incomplete(e.to_string()),
            ListError::Ask(e) => {
                let class = match crate::exit::selector_class(&e) {
                    Class::Usage => Class::Usage,
                    _ => Class::Incomplete,
                };
                Error::Lines {
                    lines: crate::exit::selector_lines(&e, false),
                    class,
                }
            }
        }
    }
}

/// The live nodes a selector knows: the selectors of `config` are found
/// ([`crate::find::selectors`]) and asked in turn ([`ask_any`]) until one
/// answers `Nodes`. `note` hears what a `-v` user should read.
pub async fn listing(
    config: &Config,
    connector: &TlsConnector,
    expected_cpu_ms: Option<u64>,
    note: &dyn Fn(&str),
) -> Result<Listed, ListError> {
    let mut selectors = crate::find::selectors(config, connector, note).await?;
    let query = NodesQuery { expected_cpu_ms };
    let (by, list) = selectors.ask(connector, &query, ASK_TIMEOUT).await?;
    let answered = &selectors.list()[by];
    note(&format!(
        "selector {} at {} answered: {} live node{}",
        answered.name,
        answered.addr,
        list.total,
        if list.total == 1 { "" } else { "s" }
    ));
    Ok(Listed {
        selectors,
        by,
        list,
    })
}

/// The nodes of a listing to address, by name, each name once; a name
/// that no node certificate could carry is left out (the second list).
///
/// ```
/// use proto::announce::NodeStatus;
/// use proto::select::NodeView;
/// let v = |name: &str, port: u16| NodeView {
///     name: name.into(),
///     addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
///     status: NodeStatus { cpus: 1, price: 0, charging: 0, contended: false,
///                          running_jobs: 0, runnable: 0, load_milli: 0, idle_milli: 1000,
///                          free_mem_mib: 1 },
///     idle_milli: 1000, speed_milli: None, predicted_ms: None, age_ms: 0,
/// };
/// let (nodes, bad) = rexec::nodes::entries(&[v("n2", 2), v("n1", 1), v("Bad Name", 3)]);
/// let names: Vec<_> = nodes.iter().map(|n| n.name.as_str()).collect();
/// assert_eq!(names, ["n1", "n2"]);
/// assert_eq!(nodes[0].addr, "127.0.0.1:1");
/// assert_eq!(bad, ["Bad Name"]);
/// ```
pub fn entries(views: &[NodeView]) -> (Vec<NodeEntry>, Vec<String>) {
    let mut nodes: Vec<NodeEntry> = Vec::with_capacity(views.len());
    let mut bad = Vec::new();
    for v in views {
        if certs::check_name(certs::Role::Node, &v.name).is_err() {
            bad.push(v.name.clone());
        } else if !nodes.iter().any(|n| n.name == v.name) {
            nodes.push(NodeEntry {
                name: v.name.clone(),
                addr: v.addr.to_string(),
            });
        }
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    (nodes, bad)
}

/// Run `rexec nodes`.
pub async fn run(args: &NodesArgs, config: Option<&std::path::Path>) -> Result<(), Error> {
    let config = crate::request::load(config)?;
    let expected_cpu_ms = crate::request::length(args.length.as_deref(), args.policy.as_deref())?;
    let connector = crate::request::connector(&config)?;
    let note = |m: &str| {
        if args.verbose {
            say(m);
        }
    };
    let Listed {
        selectors,
        by,
        list,
    } = listing(&config, &connector, expected_cpu_ms, &note)
        .await
        .map_err(ListError::into_error)?;
    let mut nodes = list.nodes;
    if let Some(policy) = &args.policy
        && !nodes.is_empty()
    {
        let count = nodes.len().min(proto::select::MAX_SELECT as usize) as u32;
        let mut q = SelectQuery::new(count, policy);
        q.expected_cpu_ms = expected_cpu_ms;
        // Ask the selector that listed them (on its open connection), so the
        // ranking covers the same nodes.
        let mut one = selectors;
        one.set_list(one.list()[by..=by].to_vec());
        match one.ask(&connector, &q, ASK_TIMEOUT).await {
            Ok((_, ranked)) => nodes = ranked,
            Err(e) => {
                let class = match crate::exit::selector_class(&e) {
                    Class::Usage => Class::Usage,
                    _ => Class::Incomplete,
                };
                let mut lines = crate::exit::selector_lines(&e, args.verbose);
                lines[0] = format!("--policy {policy}: {}", lines[0]);
                return Err(Error::Lines { lines, class });
            }
        }
    } else {
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
    }
    print!("{}", table(&nodes));
    if list.total > nodes.len() as u64 {
        say(&format!(
            "{} more nodes not listed (a listing holds at most {})",
            list.total - nodes.len() as u64,
            proto::select::MAX_LISTED
        ));
    }
    Ok(())
}

/// The table `rexec nodes` prints, header first, columns aligned.
///
/// ```
/// use proto::announce::NodeStatus;
/// use proto::select::NodeView;
/// let v = NodeView {
///     name: "n1".into(),
///     addr: "127.0.0.1:7001".parse().unwrap(),
///     status: NodeStatus { cpus: 4, price: 1_500_000, charging: 0, contended: true,
///                          running_jobs: 2, runnable: 3, load_milli: 2_250,
///                          idle_milli: 1_500, free_mem_mib: 1 },
///     idle_milli: 1_500,
///     speed_milli: None,
///     predicted_ms: None,
///     age_ms: 800,
/// };
/// let t = rexec::nodes::table(&[v]);
/// let rows: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
/// assert_eq!(rows[0], ["NODE", "ADDRESS", "PRICE/MIN", "CPUS", "IDLE", "JOBS", "LOAD", "PREDICTED", "AGE"]);
/// assert_eq!(rows[1], ["n1", "127.0.0.1:7001", "1.5", "4", "1.5", "2", "2.25", "-", "800ms"]);
/// ```
pub fn table(nodes: &[NodeView]) -> String {
    let header = [
        "NODE",
        "ADDRESS",
        "PRICE/MIN",
        "CPUS",
        "IDLE",
        "JOBS",
        "LOAD",
        "PREDICTED",
        "AGE",
    ];
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|v| {
            vec![
                v.name.clone(),
                v.addr.to_string(),
                money::format_credits(v.status.price),
                v.status.cpus.to_string(),
                crate::choose::milli(u64::from(v.idle_milli)),
                v.status.running_jobs.to_string(),
                crate::choose::milli(u64::from(v.status.load_milli)),
                v.predicted_ms.map_or("-".into(), show_ms),
                show_ms(v.age_ms),
            ]
        })
        .collect();
    // Text columns (name, address) to the left, numbers to the right.
    crate::columns::aligned(&header, &rows, 2)
}

/// Milliseconds as people read them: `850ms`, `12.5s`, `3m20s`, `2h05m`.
///
/// ```
/// use rexec::nodes::show_ms;
/// assert_eq!(show_ms(850), "850ms");
/// assert_eq!(show_ms(12_500), "12.5s");
/// assert_eq!(show_ms(200_000), "3m20s");
/// assert_eq!(show_ms(7_500_000), "2h05m");
/// assert_eq!(show_ms(200_000_000), "2d07h");
/// ```
pub fn show_ms(ms: u64) -> String {
    let s = ms / 1000;
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => {
            let tenths = (ms % 1000) / 100;
            if tenths == 0 {
                format!("{s}s")
            } else {
                format!("{s}.{tenths}s")
            }
        }
        60_000..3_600_000 => format!("{}m{:02}s", s / 60, s % 60),
        3_600_000..86_400_000 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// A node with one idle CPU and no jobs, as the tests' announcements carry.
#[cfg(test)]
pub(crate) fn idle_node_status() -> proto::announce::NodeStatus {
    proto::announce::NodeStatus {
        cpus: 1,
        price: 0,
        charging: 0,
        contended: false,
        running_jobs: 0,
        runnable: 0,
        load_milli: 0,
        idle_milli: 1000,
        free_mem_mib: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(name: &str, port: u16) -> NodeView {
        NodeView {
            name: name.into(),
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            status: idle_node_status(),
            idle_milli: 1000,
            speed_milli: None,
            predicted_ms: None,
            age_ms: 0,
        }
    }

    #[test]
    fn listed_nodes_come_by_name_once_each_and_unusable_names_are_set_aside() {
        let (nodes, bad) = entries(&[
            view("n10", 10),
            view("n2", 2),
            view("n2", 22),
            view("", 3),
            view("n1", 1),
        ]);
        let got: Vec<_> = nodes
            .iter()
            .map(|n| (n.name.as_str(), n.addr.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("n1", "127.0.0.1:1"),
                ("n10", "127.0.0.1:10"),
                ("n2", "127.0.0.1:2")
            ]
        );
        assert_eq!(bad, [""]);
        assert_eq!(entries(&[]), (Vec::new(), Vec::new()));
    }
}
