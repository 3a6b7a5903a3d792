//! `rexec jobs`, `rexec kill JOBID` and `rexec bid JOBID RATE`: one short
//! session per node, asked concurrently, answers printed in the order the
//! nodes were given. A node that cannot be reached is reported on its own
//! line and the others are still shown; the exit status is then 1.
//!
//! The nodes asked: those of `--nodes`, else every node of the
//! configuration's `[nodes]` table in file order. A configuration without
//! `[nodes]` but with `[selectors]` or `[discovery]` asks a selector for
//! the live nodes it knows (found and failed over as for a run, see
//! [`crate::live::listing`]) and asks every one of them in name order
//! (or those `--nodes` names). Each node's certificate must name it, as
//! for a run. A configuration with none of the three is a usage error
//! that says what to add.
//!
//! `rexec jobs` prints one row per rank (node, job, rank, user, bid, the
//! market model's CPU share and the share measured over the last metering
//! window, CPU seconds, credits charged, age, program) and then one row per
//! node (CPUs sold, price: the sum of the bids competing there, whether they
//! pay or not, as every other view of the node shows it; and whether it is
//! contended, [`crate::show::state_column`]). A bid not in force, as
//! while the owner is out of credit, shows as `ASKED->IN-FORCE` (`2->0`).
//!
//! `rexec bid` prints one line per node asked: the ranks that took the new
//! bid, that the job does not run there, or (on stderr) why the node refused.
//! It exits 0 when at least one node took the bid and none refused or
//! failed; 254 when every failure was the market refusing the bid
//! (negative, over `max_rate`, no credit); 1 otherwise.

use proto::node::{ErrorCode, JobId, JobInfo, JobList, Killed, Rebidded, Signal};

use crate::cli::{AdminArgs, AdminCommand};
use crate::config::NodeEntry;
use crate::exit::{Class, Error};
use crate::reach::{ask_all, configured_nodes, connector, listed_nodes, load};
use crate::say;
use crate::show::{bid_column, milli_cpus, state_column};
use clients::node::SessionError;

/// Run an admin command; `Ok` when every node answered as hoped.
pub async fn run(args: AdminArgs) -> Result<(), Error> {
    if let AdminCommand::Nodes(n) = &args.command {
        return crate::nodes::run(n, args.config.as_deref()).await;
    }
    if let AdminCommand::Estimate(e) = &args.command {
        return crate::estimate::run(e, args.nodes.as_deref(), args.config.as_deref()).await;
    }
    if let AdminCommand::Stats(s) = &args.command {
        return crate::stats::run(s, args.nodes.as_deref(), args.config.as_deref()).await;
    }
    let config = load(args.config.as_deref())?;
    let usage = |e: String| Error::Usage(e);
    // The request, checked before any connection.
    let job = |text: &str| text.parse::<JobId>().map_err(|e| usage(e.to_string()));
    let request = match &args.command {
        AdminCommand::Nodes(_) | AdminCommand::Stats(_) | AdminCommand::Estimate(_) => {
            unreachable!("`rexec nodes`, `rexec stats` and `rexec estimate` returned above")
        }
        AdminCommand::Jobs => Request::Jobs,
        AdminCommand::Kill(k) => Request::Kill(
            job(&k.job)?,
            k.signal
                .parse::<Signal>()
                .map_err(|e| usage(e.to_string()))?,
        ),
        AdminCommand::Bid(b) => {
            Request::Bid(job(&b.job)?, crate::request::bid(&b.rate, "RATE", &config)?)
        }
    };
    // Nodes of the file (or the file's fault) are known before any connection.
    let configured = if config.selects() {
        None
    } else {
        Some(configured_nodes(&config, args.nodes.as_deref()).map_err(|e| usage(e.to_string()))?)
    };
    let connector = connector(&config)?;
    let nodes = match configured {
        Some(nodes) => nodes,
        None => listed_nodes(&config, args.nodes.as_deref(), &connector).await?,
    };
    let timeout = crate::clock::timeout_from_env().unwrap_or(crate::clock::DEFAULT_TIMEOUT);
    match request {
        Request::Jobs => {
            let answers = ask_all(&connector, &nodes, timeout, |mut s| async move {
                s.list_jobs().await
            })
            .await;
            complete(print_jobs(&nodes, answers))
        }
        Request::Kill(job, signal) => {
            let answers = ask_all(&connector, &nodes, timeout, move |mut s| async move {
                s.kill(job, signal).await
            })
            .await;
            complete(print_kills(&nodes, answers, job))
        }
        Request::Bid(job, bid) => {
            let answers = ask_all(&connector, &nodes, timeout, move |mut s| async move {
                s.rebid(job, bid).await
            })
            .await;
            print_rebids(&nodes, answers, job)
        }
    }
}

/// What an admin command asks each node.
enum Request {
    Jobs,
    Kill(JobId, Signal),
    Bid(JobId, money::Bid),
}

/// `Ok` for status 0; otherwise the lines were printed already.
fn complete(code: i32) -> Result<(), Error> {
    match code {
        0 => Ok(()),
        _ => Err(Error::Incomplete(String::new())),
    }
}

fn print_jobs(nodes: &[NodeEntry], answers: Vec<Result<JobList, SessionError>>) -> i32 {
    let mut rows: Vec<(String, JobInfo)> = Vec::new();
    let mut lists: Vec<(String, JobList)> = Vec::new();
    let mut code = 0;
    for (node, answer) in nodes.iter().zip(answers) {
        match answer {
            Ok(mut list) => {
                if list.truncated {
                    say(&format!("node {}: list truncated", node.name));
                }
                let jobs = std::mem::take(&mut list.jobs);
                rows.extend(jobs.into_iter().map(|j| (node.name.clone(), j)));
                lists.push((node.name.clone(), list));
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

fn print_kills(nodes: &[NodeEntry], answers: Vec<Result<Killed, SessionError>>, job: JobId) -> i32 {
    let mut total = 0u64;
    let mut code = 0;
    for (node, answer) in nodes.iter().zip(answers) {
        match answer {
            Ok(k) => {
                total += u64::from(k.ranks);
                if k.ranks > 0 {
                    println!(
                        "node {}: signalled {} rank(s) of job {job}",
                        node.name, k.ranks
                    );
                }
            }
            Err(SessionError::Refused(e)) if e.code == ErrorCode::NoSuchJob => {}
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
    answers: Vec<Result<Rebidded, SessionError>>,
    job: JobId,
) -> Result<(), Error> {
    let mut took = 0u64;
    let mut failed = false;
    // Whether every failure was the market refusing the bid.
    let mut refused = true;
    for (node, answer) in nodes.iter().zip(answers) {
        match answer {
            Ok(r) if r.ranks > 0 => {
                took += u64::from(r.ranks);
                println!(
                    "node {}: {} rank(s) of job {job} now bid {} credits per minute",
                    node.name, r.ranks, r.bid
                );
            }
            Ok(_) => {
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
