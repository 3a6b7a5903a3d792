//! `rexec jobs` and `rexec kill JOBID`: one short session per node, asked
//! concurrently, answers printed in the order the nodes were given. A node
//! that cannot be reached is reported on its own line and the others are
//! still shown; the exit status is then 1.

use std::time::Duration;

use proto::node::{FromNode, JobId, JobInfo, Kill, Signal, ToNode};
use tokio::task::JoinSet;
use tokio_rustls::TlsConnector;

use crate::cli::{AdminArgs, AdminCommand};
use crate::config::{Config, NodeEntry, config_path};
use crate::plan::place;
use crate::say;
use crate::session::{Session, SessionError};

/// Run an admin command; returns the exit status.
pub async fn run(args: AdminArgs) -> i32 {
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
    let mut code = 0;
    for (node, answer) in nodes.iter().zip(answers) {
        match answer {
            Ok(FromNode::Jobs(list)) => {
                if list.truncated {
                    say(&format!("node {}: list truncated", node.name));
                }
                rows.extend(list.jobs.into_iter().map(|j| (node.name.clone(), j)));
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
        "{:<12} {:<16} {:>9} {:<12} {:>10} {:>10} {:>8}  PROGRAM",
        "NODE", "JOB", "RANK", "USER", "BID", "CPU-S", "AGE-S"
    );
    for (node, j) in rows {
        println!(
            "{:<12} {:<16} {:>9} {:<12} {:>10} {:>10} {:>8}  {}",
            node,
            j.job,
            format!("{}/{}", j.rank, j.nranks),
            j.user,
            stride::format_credits(j.bid),
            format!(
                "{}.{:02}",
                j.cpu_nanos / 1_000_000_000,
                j.cpu_nanos / 10_000_000 % 100
            ),
            j.age_millis / 1000,
            j.program
        );
    }
    code
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
