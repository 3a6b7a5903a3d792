//! `rexec jobs`, `rexec kill JOBID` and `rexec bid JOBID RATE`: one short
//! session per node, asked concurrently, answers printed in the order the
//! nodes were given. A node that cannot be reached is reported on its own
//! line and the others are still shown; the exit status is then 1.
//!
//! The nodes asked: those of `--nodes`, else every node of the
//! configuration's `[nodes]` table in file order. A configuration without
//! `[nodes]` but with `[selectors]` or `[discovery]` asks a selector for
//! the live nodes it knows (found and failed over as for a run, see
//! [`crate::nodes::listing`]) and asks every one of them in name order
//! (or those `--nodes` names). Each node's certificate must name it, as
//! for a run. A configuration with none of the three is a usage error
//! that says what to add.
//!
//! `rexec jobs` prints one row per rank (node, job, rank, user, bid, the
//! market model's CPU share and the share measured over the last metering
//! window, CPU seconds, credits charged, age, program) and then one row per
//! node (CPUs sold, price: the sum of the bids competing there, whether they
//! pay or not, as every other view of the node shows it; and whether it is
//! contended, [`state_column`]). A bid not in force, as
//! while the owner is out of credit, shows as `ASKED->IN-FORCE` (`2->0`).
//!
//! `rexec bid` prints one line per node asked: the ranks that took the new
//! bid, that the job does not run there, or (on stderr) why the node refused.
//! It exits 0 when at least one node took the bid and none refused or
//! failed; 254 when every failure was the market refusing the bid
//! (negative, over `max_rate`, no credit); 1 otherwise.

use std::time::Duration;

use proto::node::{ErrorCode, FromNode, JobId, JobInfo, JobList, Kill, Rebid, Signal, ToNode};
use tokio::task::JoinSet;
use tokio_rustls::TlsConnector;

use crate::cli::{AdminArgs, AdminCommand};
use crate::config::{Config, NodeEntry};
use crate::exit::{Class, Error};
use crate::plan::{PlanError, place};
use crate::say;
use clients::node::{Session, SessionError};

/// Run an admin command; `Ok` when every node answered as hoped.
pub async fn run(args: AdminArgs) -> Result<(), Error> {
    if let AdminCommand::Nodes(n) = &args.command {
        return crate::nodes::run(n, args.config.as_deref()).await;
    }
    if let AdminCommand::Stats(s) = &args.command {
        return crate::stats::run(s, args.nodes.as_deref(), args.config.as_deref()).await;
    }
    let config = crate::request::load(args.config.as_deref())?;
    let usage = |e: String| Error::Usage(e);
    let request = match &args.command {
        AdminCommand::Nodes(_) | AdminCommand::Stats(_) => {
            unreachable!("`rexec nodes` and `rexec stats` returned above")
        }
        AdminCommand::Jobs => ToNode::ListJobs,
        AdminCommand::Kill(k) => {
            let job: JobId = k.job.parse::<JobId>().map_err(|e| usage(e.to_string()))?;
            let signal: Signal = k
                .signal
                .parse::<Signal>()
                .map_err(|e| usage(e.to_string()))?;
            ToNode::Kill(Kill { job, signal })
        }
        AdminCommand::Bid(b) => {
            let job: JobId = b.job.parse::<JobId>().map_err(|e| usage(e.to_string()))?;
            let bid = crate::request::bid(&b.rate, "RATE", &config)?;
            ToNode::Rebid(Rebid {
                job,
                bid: bid.micros_per_minute(),
            })
        }
    };
    // Nodes of the file (or the file's fault) are known before any connection.
    let configured = if config.selects() {
        None
    } else {
        Some(configured_nodes(&config, args.nodes.as_deref()).map_err(|e| usage(e.to_string()))?)
    };
    let connector = crate::request::connector(&config)?;
    let nodes = match configured {
        Some(nodes) => nodes,
        None => listed_nodes(&config, args.nodes.as_deref(), &connector).await?,
    };
    let timeout = crate::clock::timeout_from_env().unwrap_or(crate::clock::DEFAULT_TIMEOUT);
    let answers = ask_all(&connector, &nodes, &request, timeout).await;
    match request {
        ToNode::Kill(k) => complete(print_kills(&nodes, answers, k.job)),
        ToNode::Rebid(r) => print_rebids(&nodes, answers, r.job),
        _ => complete(print_jobs(&nodes, answers)),
    }
}

/// An answer that does not fit the question, in words.
pub(crate) fn unexpected(node: &str) -> String {
    format!("node {node}: its answer does not fit the question (is its rexecd another version?)")
}

/// `Ok` for status 0; otherwise the lines were printed already.
fn complete(code: i32) -> Result<(), Error> {
    match code {
        0 => Ok(()),
        _ => Err(Error::Incomplete(String::new())),
    }
}

/// The nodes to ask of a configuration that does not select: `names`
/// (from `--nodes`) looked up in `[nodes]`, else all of `[nodes]` in file
/// order; a configuration with no way to find nodes is an error that says
/// what to add.
///
/// ```
/// let text = "ca = \"c\"\ncert = \"u\"\nkey = \"k\"\n";
/// let c = rexec::config::Config::parse("/etc/rexec.toml".as_ref(), text).unwrap();
/// let e = rexec::admin::configured_nodes(&c, None).unwrap_err().to_string();
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
    let listed = crate::nodes::listing(config, connector, None, &|_| {})
        .await
        .map_err(crate::nodes::ListError::into_error)?;
    let via = &listed.selectors.list()[listed.by].name;
    let (live, bad) = crate::nodes::entries(&listed.list.nodes);
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
/// let got = rexec::admin::pick(&live, &["n2".into(), "n1".into(), "n2".into()], "v1").unwrap();
/// assert_eq!(got, [n("n2"), n("n1")]);
/// let e = rexec::admin::pick(&live, &["n7".into()], "v1").unwrap_err();
/// assert!(e.contains("n7") && e.contains("n1, n2"), "{e}");
/// ```
pub fn pick(live: &[NodeEntry], names: &[String], via: &str) -> Result<Vec<NodeEntry>, String> {
    let mut out: Vec<NodeEntry> = Vec::with_capacity(names.len());
    for name in names {
        let name = name.trim();
        if name.is_empty() {
            return Err(crate::plan::PlanError::EmptyNodeName.to_string());
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

pub(crate) async fn ask_all(
    connector: &TlsConnector,
    nodes: &[NodeEntry],
    request: &ToNode,
    timeout: Duration,
) -> Vec<Result<FromNode, SessionError>> {
    let mut set = JoinSet::new();
    for (i, node) in nodes.iter().enumerate() {
        let (connector, node, request) = (connector.clone(), node.clone(), request.clone());
        set.spawn(async move {
            let answer = async {
                let mut s = Session::open(
                    &crate::agent::AGENT,
                    &connector,
                    &node.name,
                    &node.addr,
                    timeout,
                )
                .await?;
                s.request(&request).await
            }
            .await;
            (i, answer)
        });
    }
    let mut answers: Vec<Option<Result<FromNode, SessionError>>> =
        nodes.iter().map(|_| None).collect();
    while let Some(Ok((i, a))) = set.join_next().await {
        answers[i] = Some(a);
    }
    answers
        .into_iter()
        .map(|a| a.unwrap_or(Err(SessionError::Closed)))
        .collect()
}

fn print_jobs(nodes: &[NodeEntry], answers: Vec<Result<FromNode, SessionError>>) -> i32 {
    let mut rows: Vec<(String, JobInfo)> = Vec::new();
    let mut lists: Vec<(String, JobList)> = Vec::new();
    let mut code = 0;
    for (node, answer) in nodes.iter().zip(answers) {
        match answer {
            Ok(FromNode::Jobs(mut list)) => {
                if list.truncated {
                    say(&format!("node {}: list truncated", node.name));
                }
                let jobs = std::mem::take(&mut list.jobs);
                rows.extend(jobs.into_iter().map(|j| (node.name.clone(), j)));
                lists.push((node.name.clone(), list));
            }
            Ok(_) => {
                say(&unexpected(&node.name));
                code = 1;
            }
            Err(e) => {
                say(&format!("node {}: {e}", node.name));
                code = 1;
            }
        }
    }
    println!(
        "{:<12} {:<16} {:>9} {:<12} {:>10} {:>9} {:>9} {:>10} {:>12} {:>8}  PROGRAM",
        "NODE", "JOB", "RANK", "USER", "BID", "MODEL-CPU", "USED-CPU", "CPU-S", "CHARGED", "AGE-S"
    );
    for (node, j) in rows {
        println!(
            "{:<12} {:<16} {:>9} {:<12} {:>10} {:>9} {:>9} {:>10} {:>12} {:>8}  {}",
            node,
            j.job,
            format!("{}/{}", j.rank, j.nranks),
            j.user,
            bid_column(j.bid, j.effective_bid),
            milli_cpus(j.model_milli_cpus),
            milli_cpus(j.measured_milli_cpus),
            crate::bill::cpu_seconds(j.cpu_nanos),
            money::format_credits(j.charged),
            j.age_millis / 1000,
            j.program
        );
    }
    if !lists.is_empty() {
        println!();
        println!("{:<12} {:>5} {:>12}  STATE", "NODE", "CPUS", "PRICE");
        for (node, list) in lists {
            println!(
                "{:<12} {:>5} {:>12}  {}",
                node,
                list.cpus,
                money::format_credits(list.price),
                state_column(list.contended)
            );
        }
    }
    code
}

/// A node's state column, the same in `rexec jobs`, `rexec stats` and
/// `rexec nodes`: `contended` while its runnable demand exceeds its CPUs,
/// else `idle-cpu`. It is not part of the price: a node's price is the sum
/// of the bids competing there whatever its state (a lone job bidding 2
/// makes the price 2, and runs free).
///
/// ```
/// assert_eq!(rexec::admin::state_column(true), "contended");
/// assert_eq!(rexec::admin::state_column(false), "idle-cpu");
/// ```
pub fn state_column(contended: bool) -> &'static str {
    if contended { "contended" } else { "idle-cpu" }
}

/// The bid asked for, and the bid in force after an arrow when it differs.
///
/// ```
/// assert_eq!(rexec::admin::bid_column(2_000_000, 2_000_000), "2");
/// assert_eq!(rexec::admin::bid_column(2_500_000, 0), "2.5->0");
/// ```
pub fn bid_column(bid: i64, effective: i64) -> String {
    if bid == effective {
        money::format_credits(bid)
    } else {
        format!(
            "{}->{}",
            money::format_credits(bid),
            money::format_credits(effective)
        )
    }
}

/// Thousandths of a CPU as CPUs with three decimals: `0.889`.
///
/// ```
/// assert_eq!(rexec::admin::milli_cpus(889), "0.889");
/// assert_eq!(rexec::admin::milli_cpus(2000), "2.000");
/// ```
pub fn milli_cpus(milli: u32) -> String {
    format!("{}.{:03}", milli / 1000, milli % 1000)
}

fn print_kills(
    nodes: &[NodeEntry],
    answers: Vec<Result<FromNode, SessionError>>,
    job: JobId,
) -> i32 {
    let mut total = 0u64;
    let mut code = 0;
    for (node, answer) in nodes.iter().zip(answers) {
        match answer {
            Ok(FromNode::Killed(k)) => {
                total += u64::from(k.ranks);
                if k.ranks > 0 {
                    println!(
                        "node {}: signalled {} rank(s) of job {job}",
                        node.name, k.ranks
                    );
                }
            }
            Err(SessionError::Refused(e)) if e.code == proto::node::ErrorCode::NoSuchJob => {}
            Ok(_) => {
                say(&unexpected(&node.name));
                code = 1;
            }
            Err(e) => {
                say(&format!("node {}: {e}", node.name));
                code = 1;
            }
        }
    }
    if total == 0 && code == 0 {
        say(&format!("job {job} is not running on the nodes asked"));
        code = 1;
    }
    code
}

fn print_rebids(
    nodes: &[NodeEntry],
    answers: Vec<Result<FromNode, SessionError>>,
    job: JobId,
) -> Result<(), Error> {
    let mut took = 0u64;
    let mut failed = false;
    // Whether every failure was the market refusing the bid.
    let mut refused = true;
    for (node, answer) in nodes.iter().zip(answers) {
        match answer {
            Ok(FromNode::Rebidded(r)) if r.ranks > 0 => {
                took += u64::from(r.ranks);
                println!(
                    "node {}: {} rank(s) of job {job} now bid {} credits per minute",
                    node.name,
                    r.ranks,
                    money::format_credits(r.bid)
                );
            }
            Ok(FromNode::Rebidded(_)) => {
                println!("node {}: job {job} does not run here", node.name);
            }
            Err(SessionError::Refused(e)) if e.code == ErrorCode::NoSuchJob => {
                println!("node {}: job {job} does not run here", node.name);
            }
            Err(SessionError::Refused(e)) => {
                // The node's message names the node already.
                let prefix = format!("node {}:", node.name);
                if e.message.starts_with(&prefix) {
                    say(&e.message);
                } else {
                    say(&format!("{prefix} {}", e.message));
                }
                refused &= crate::agent::class(&SessionError::Refused(e)) == Class::Refused;
                failed = true;
            }
            Ok(_) => {
                say(&unexpected(&node.name));
                refused = false;
                failed = true;
            }
            Err(e) => {
                say(&format!("node {}: {e}", node.name));
                refused = false;
                failed = true;
            }
        }
    }
    match (took, failed) {
        (0, false) => Err(Error::Incomplete(format!(
            "job {job} is not running on the nodes asked"
        ))),
        (_, false) => Ok(()),
        (_, true) if refused => Err(Error::Lines {
            lines: Vec::new(),
            class: Class::Refused,
        }),
        (_, true) => Err(Error::Incomplete(String::new())),
    }
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
