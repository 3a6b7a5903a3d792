//! The live nodes a selector knows: the selectors of the configuration are
//! found ([`crate::find::selectors`]) and asked in turn until one answers
//! with its listing, and the listing's nodes become the entries the admin
//! commands and `--nodes` address (by name, each once, names no node
//! certificate could carry set aside).

use clients::selector::{AskAnyError, Selectors};
use proto::select::{NodeList, NodeView, NodesQuery};
use tokio_rustls::TlsConnector;

use crate::config::{Config, NodeEntry};
use crate::exit::{Class, Error};
use crate::find::FindError;
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
/// let (nodes, bad) = rexec::live::entries(&[v("n2", 2), v("n1", 1), v("Bad Name", 3)]);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn view(name: &str, port: u16) -> NodeView {
        NodeView {
            name: name.into(),
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            status: crate::find::idle_node_status(),
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
