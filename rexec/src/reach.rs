//! How the client reaches the nodes outside a run: the configuration it
//! loads, the TLS connector of every connection, the nodes an admin command
//! asks (`--nodes`, `[nodes]`, or a selector's listing), and one short
//! session to each of them, asked concurrently.
//!
//! The nodes asked: those of `--nodes`, else every node of the
//! configuration's `[nodes]` table in file order. A configuration without
//! `[nodes]` but with `[selectors]` or `[discovery]` asks a selector for
//! the live nodes it knows ([`crate::live::listing`]) and asks every one
//! of them in name order (or those `--nodes` names). A configuration with
//! none of the three is a usage error that says what to add.

use std::time::Duration;

use tokio::task::JoinSet;
use tokio_rustls::TlsConnector;

use crate::config::{Config, NodeEntry, config_path};
use crate::exit::Error;
use crate::plan::{PlanError, place};
use crate::say;
use clients::node::{Session, SessionError};

/// The configuration at `path` (or the default place); a failure is a
/// usage error.
pub fn load(path: Option<&std::path::Path>) -> Result<Config, Error> {
    config_path(path)
        .and_then(|p| Config::load(&p))
        .map_err(|e| Error::Usage(e.to_string()))
}

/// The connector every connection of this client uses (certificates that
/// cannot be used are a failure, 255, as they always were).
pub fn connector(config: &Config) -> Result<TlsConnector, Error> {
    config.connector().map_err(|e| Error::Failed(e.to_string()))
}

/// The nodes to ask of a configuration that does not select: `names`
/// (from `--nodes`) looked up in `[nodes]`, else all of `[nodes]` in file
/// order; a configuration with no way to find nodes is an error that says
/// what to add.
///
/// ```
/// let text = "ca = \"c\"\ncert = \"u\"\nkey = \"k\"\n";
/// let c = rexec::config::Config::parse("/etc/rexec.toml".as_ref(), text).unwrap();
/// let e = rexec::reach::configured_nodes(&c, None).unwrap_err().to_string();
/// assert!(e.contains("[nodes]") && e.contains("[selectors]") && e.contains("[discovery]"), "{e}");
/// ```
pub fn configured_nodes(
    config: &Config,
    names: Option<&[String]>,
) -> Result<Vec<NodeEntry>, PlanError> {
    match names {
        Some(_) => Ok(place(config, names, None)?
            .into_iter()
            .map(|t| t.node)
            .collect()),
        None if config.nodes.is_empty() => Err(PlanError::NoNodes {
            config: config.path.display().to_string(),
        }),
        None => Ok(config.nodes.clone()),
    }
}

/// The nodes to ask from a selector's listing, by the rule in the module
/// docs.
pub(crate) async fn listed_nodes(
    config: &Config,
    names: Option<&[String]>,
    connector: &TlsConnector,
) -> Result<Vec<NodeEntry>, Error> {
    let listed = crate::live::listing(config, connector, None, &|_| {})
        .await
        .map_err(crate::live::ListError::into_error)?;
    let via = &listed.selectors.list()[listed.by].name;
    let (live, bad) = crate::live::entries(&listed.list.nodes);
    for name in bad {
        say(&format!(
            "selector {via} lists a node called {name:?}, which cannot be a node's name; skipped"
        ));
    }
    if listed.list.total > listed.list.nodes.len() as u64 {
        say(&format!(
            "selector {via} knows {} live nodes but lists {}; the others are not asked (name them with --nodes)",
            listed.list.total,
            listed.list.nodes.len()
        ));
    }
    let nodes = match names {
        None => live,
        Some(names) => pick(&live, names, via).map_err(Error::Usage)?,
    };
    if nodes.is_empty() {
        return Err(Error::Incomplete(format!(
            "selector {via} knows no live node to ask"
        )));
    }
    Ok(nodes)
}

/// The nodes `names` (from `--nodes`) among those a selector (`via`)
/// listed, in the order given, each once.
///
/// ```
/// use rexec::config::NodeEntry;
/// let n = |name: &str| NodeEntry { name: name.into(), addr: "h:1".into() };
/// let live = [n("n1"), n("n2")];
/// let got = rexec::reach::pick(&live, &["n2".into(), "n1".into(), "n2".into()], "v1").unwrap();
/// assert_eq!(got, [n("n2"), n("n1")]);
/// let e = rexec::reach::pick(&live, &["n7".into()], "v1").unwrap_err();
/// assert!(e.contains("n7") && e.contains("n1, n2"), "{e}");
/// ```
pub fn pick(live: &[NodeEntry], names: &[String], via: &str) -> Result<Vec<NodeEntry>, String> {
    let mut out: Vec<NodeEntry> = Vec::with_capacity(names.len());
    for name in names {
        let name = name.trim();
        if name.is_empty() {
            return Err(PlanError::EmptyNodeName.to_string());
        }
        let Some(node) = live.iter().find(|n| n.name == name) else {
            let known: Vec<&str> = live.iter().map(|n| n.name.as_str()).collect();
            return Err(format!(
                "node {name:?} is not among the live nodes selector {via} knows: {}",
                if known.is_empty() {
                    "(none)".to_string()
                } else {
                    known.join(", ")
                }
            ));
        };
        if !out.contains(node) {
            out.push(node.clone());
        }
    }
    Ok(out)
}

/// Ask every node of `nodes` at once, each in its own short session that
/// `ask` is given once it is open (one of the typed requests of
/// [`clients::node::admin`]); the answers come in the order of `nodes`.
pub(crate) async fn ask_all<T, F, Fut>(
    connector: &TlsConnector,
    nodes: &[NodeEntry],
    timeout: Duration,
    ask: F,
) -> Vec<Result<T, SessionError>>
where
    T: Send + 'static,
    F: Fn(Session) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<T, SessionError>> + Send,
{
    let mut set = JoinSet::new();
    for (i, node) in nodes.iter().enumerate() {
        let (connector, node, ask) = (connector.clone(), node.clone(), ask.clone());
        set.spawn(async move {
            let answer = async move {
                let s = Session::open(
                    &crate::agent::AGENT,
                    &connector,
                    &node.name,
                    &node.addr,
                    timeout,
                )
                .await?;
                ask(s).await
            }
            .await;
            (i, answer)
        });
    }
    let mut answers: Vec<Option<Result<T, SessionError>>> = nodes.iter().map(|_| None).collect();
    while let Some(Ok((i, a))) = set.join_next().await {
        answers[i] = Some(a);
    }
    answers
        .into_iter()
        .map(|a| a.unwrap_or(Err(SessionError::Closed)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const BASE: &str = "ca = \"c\"\ncert = \"u\"\nkey = \"k\"\n";

    fn n(name: &str) -> NodeEntry {
        NodeEntry {
            name: name.into(),
            addr: format!("{name}.example:7000"),
        }
    }

    fn names(nodes: &[NodeEntry]) -> Vec<&str> {
        nodes.iter().map(|n| n.name.as_str()).collect()
    }

    #[test]
    fn without_nodes_every_node_of_the_file_is_asked_in_file_order() {
        let text = format!("{BASE}[nodes]\nn3 = \"h:3\"\nn1 = \"h:1\"\nn2 = \"h:2\"\n");
        let c = Config::parse(Path::new("/x/c.toml"), &text).unwrap();
        assert!(!c.selects());
        assert_eq!(
            names(&configured_nodes(&c, None).unwrap()),
            ["n3", "n1", "n2"]
        );
        let some = ["n2".to_string()];
        assert_eq!(names(&configured_nodes(&c, Some(&some)).unwrap()), ["n2"]);
        let e = configured_nodes(&c, Some(&["n9".to_string()])).unwrap_err();
        assert!(matches!(e, PlanError::UnknownNode { .. }), "{e}");
    }

    #[test]
    fn a_file_with_no_node_source_is_refused_with_what_to_add() {
        let c = Config::parse(Path::new("/x/c.toml"), BASE).unwrap();
        let e = configured_nodes(&c, None).unwrap_err();
        assert!(matches!(e, PlanError::NoNodes { .. }), "{e}");
        let text = e.to_string();
        for what in ["/x/c.toml", "[nodes]", "[selectors]", "[discovery]", "add "] {
            assert!(text.contains(what), "{what} in {text}");
        }
    }

    #[test]
    fn nodes_named_among_the_listed_keep_the_order_given_once_each() {
        let live = [n("n1"), n("n2"), n("n3")];
        let want = ["n3".to_string(), " n1".to_string(), "n3".to_string()];
        let got = pick(&live, &want, "v1").unwrap();
        assert_eq!(names(&got), ["n3", "n1"]);
        assert_eq!(got[0].addr, "n3.example:7000");
        let e = pick(&live, &["n1".to_string(), "nx".to_string()], "v2").unwrap_err();
        assert!(
            e.contains("\"nx\" is not among the live nodes selector v2 knows: n1, n2, n3"),
            "{e}"
        );
        let e = pick(&[], &["n1".to_string()], "v1").unwrap_err();
        assert!(e.ends_with("(none)"), "{e}");
        let e = pick(&live, &[String::new()], "v1").unwrap_err();
        assert!(e.contains("empty entry"), "{e}");
    }
}
