//! `rexec jobs`, `rexec kill JOBID` and `rexec bid JOBID RATE`: one short
//! session per node, asked concurrently, answers printed in the order the
//! nodes were given. A node that cannot be reached is reported on its own
//! line and the others are still shown; the exit status is then 1.
//!
//! `rexec jobs` prints one row per rank (node, job, rank, user, bid, the
//! market model's CPU share and the share measured over the last metering
//! window, CPU seconds, credits charged, age, program) and then one row per
//! node (CPUs sold, price, whether it is contended). A bid not in force, as
//! while the owner is out of credit, shows as `ASKED->IN-FORCE` (`2->0`).
//!
//! `rexec bid` prints one line per node asked: the ranks that took the new
//! bid, that the job does not run there, or (on stderr) why the node refused.
//! It exits 1 unless at least one node took the bid and none refused or
//! failed.

use std::time::Duration;

use proto::node::{ErrorCode, FromNode, JobId, JobInfo, JobList, Kill, Rebid, Signal, ToNode};
use stride::Bid;
use tokio::task::JoinSet;
use tokio_rustls::TlsConnector;

use crate::cli::{AdminArgs, AdminCommand};
use crate::config::{Config, NodeEntry, config_path};
use crate::plan::place;
use crate::say;
use crate::session::{Session, SessionError};

/// Run an admin command; returns the exit status.
pub async fn run(args: AdminArgs) -> i32 {
    if let AdminCommand::Nodes(n) = &args.command {
        return crate::nodes::run(n, args.config.as_deref()).await;
    }
    let config = match config_path(args.config.as_deref()).and_then(|p| Config::load(&p)) {
        Ok(c) => c,
        Err(e) => {
            say(&e.to_string());
            return crate::run::USAGE;
        }
    };
    let nodes: Vec<NodeEntry> = match &args.nodes {
        Some(list) => match place(&config, Some(list), None) {
            Ok(r) => r.into_iter().map(|t| t.node).collect(),
            Err(e) => {
                say(&e.to_string());
                return crate::run::USAGE;
            }
        },
        None => config.nodes.clone(),
    };
    if nodes.is_empty() {
        say(&format!(
            "{} lists no [nodes] to ask",
            config.path.display()
        ));
        return crate::run::USAGE;
    }
    let request = match &args.command {
        AdminCommand::Nodes(_) => unreachable!("`rexec nodes` returned above"),
        AdminCommand::Jobs => ToNode::ListJobs,
        AdminCommand::Kill(k) => {
            let job: JobId = match k.job.parse() {
                Ok(j) => j,
                Err(e) => {
                    say(&e.to_string());
                    return crate::run::USAGE;
                }
            };
            let signal: Signal = match k.signal.parse() {
                Ok(s) => s,
                Err(e) => {
                    say(&e.to_string());
                    return crate::run::USAGE;
                }
            };
            ToNode::Kill(Kill { job, signal })
        }
        AdminCommand::Bid(b) => {
            let job: JobId = match b.job.parse() {
                Ok(j) => j,
                Err(e) => {
                    say(&e.to_string());
                    return crate::run::USAGE;
                }
            };
            let bid: Bid = match b.rate.parse() {
                Ok(r) => r,
                Err(e) => {
                    say(&format!("RATE {}: {e}", b.rate));
                    return crate::run::USAGE;
                }
            };
            if bid > config.max_rate {
                say(&format!(
                    "RATE {}: a bid of {bid} credits per minute is over the maximum of {} set by \
                     max_rate in {}",
                    b.rate,
                    config.max_rate,
                    config.path.display()
                ));
                return crate::run::USAGE;
            }
            ToNode::Rebid(Rebid {
                job,
                bid: bid.micros_per_minute(),
            })
        }
    };
    let connector = match certs::connector(&config.tls) {
        Ok(c) => c,
        Err(e) => {
            say(&format!(
                "client configuration {}: {e}",
                config.path.display()
            ));
            return 255;
        }
    };
    let timeout = crate::clock::timeout_from_env().unwrap_or(crate::clock::DEFAULT_TIMEOUT);
    let answers = ask_all(&connector, &nodes, &request, timeout).await;
    match request {
        ToNode::Kill(k) => print_kills(&nodes, answers, k.job),
        ToNode::Rebid(r) => print_rebids(&nodes, answers, r.job),
        _ => print_jobs(&nodes, answers),
    }
}

async fn ask_all(
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
                let mut s = Session::open(&connector, &node.name, &node.addr, timeout).await?;
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
            Ok(other) => {
                say(&format!("node {}: unexpected answer {other:?}", node.name));
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
            stride::format_credits(j.charged),
            j.age_millis / 1000,
            j.program
        );
    }
    if !lists.is_empty() {
        println!();
        println!("{:<12} {:>5} {:>12}  STATE", "NODE", "CPUS", "PRICE");
        for (node, list) in lists {
            let state = if list.contended {
                "contended"
            } else {
                "idle-cpu"
            };
            println!(
                "{:<12} {:>5} {:>12}  {state}",
                node,
                list.cpus,
                stride::format_credits(list.price)
            );
        }
    }
    code
}

/// The bid asked for, and the bid in force after an arrow when it differs.
///
/// ```
/// assert_eq!(rexec::admin::bid_column(2_000_000, 2_000_000), "2");
/// assert_eq!(rexec::admin::bid_column(2_500_000, 0), "2.5->0");
/// ```
pub fn bid_column(bid: i64, effective: i64) -> String {
    if bid == effective {
        stride::format_credits(bid)
    } else {
        format!(
            "{}->{}",
            stride::format_credits(bid),
            stride::format_credits(effective)
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
            Ok(other) => {
                say(&format!("node {}: unexpected answer {other:?}", node.name));
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
) -> i32 {
    let mut took = 0u64;
    let mut failed = false;
    for (node, answer) in nodes.iter().zip(answers) {
        match answer {
            Ok(FromNode::Rebidded(r)) if r.ranks > 0 => {
                took += u64::from(r.ranks);
                println!(
                    "node {}: {} rank(s) of job {job} now bid {} credits per minute",
                    node.name,
                    r.ranks,
                    stride::format_credits(r.bid)
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
                failed = true;
            }
            Ok(other) => {
                say(&format!("node {}: unexpected answer {other:?}", node.name));
                failed = true;
            }
            Err(e) => {
                say(&format!("node {}: {e}", node.name));
                failed = true;
            }
        }
    }
    if took == 0 && !failed {
        say(&format!("job {job} is not running on the nodes asked"));
    }
    if took > 0 && !failed { 0 } else { 1 }
}
