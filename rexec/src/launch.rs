//! The launch phase: open a session per rank and launch it, all ranks at
//! once, and either hand every running rank to the run phase or leave
//! nothing running.
//!
//! A rank is handed to its reader and writer tasks ([`crate::rank`]) as soon
//! as its `Started` arrives, so it gets heartbeats while slower ranks are
//! still being launched, and its first output shows at once.
//!
//! On the first failure the other launches get one more second to report
//! (so that one line per failing node can be shown), then the rest are
//! abandoned. Ranks that did start are told `Signal(Kill)` and their
//! connections closed; abandoned connections close too, and a node cleans
//! up a job whose client went away. A signal that would end a local program
//! (SIGINT, SIGTERM, SIGHUP, ...) during the launch does the same. Ctrl-Z,
//! SIGCONT and window size changes are kept, in order, for the run phase.
//!
//! The phase ends the moment the last rank has reported, so a signal that
//! arrives after every rank started is the run phase's, even when a rank's
//! output is already on the screen.

use std::sync::Arc;
use std::time::Duration;

use proto::node::Signal;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until};
use tokio_rustls::TlsConnector;

use crate::clock::Pause;
use crate::exit::{Class, Error};
use crate::output::Out;
use crate::plan::{JobSpec, RankTarget};
use crate::rank::{self, RankLink};
use crate::rank_msg::RankEvent;
use crate::signals::Caught;
use clients::node::{Dial, Session, SessionError, session::launch_request};

/// What a started rank is connected to.
#[derive(Debug)]
pub struct Spawner {
    /// The output thread's queue.
    pub output: mpsc::Sender<Out>,
    /// The coordinator's event queue.
    pub events: mpsc::UnboundedSender<RankEvent>,
    /// The client's stop marks.
    pub pause: Arc<Pause>,
    /// Which credit notices the user has seen.
    pub notices: Arc<crate::bill::CreditNotices>,
    /// The job's PMI server, under `--mpi`.
    pub pmi: Option<crate::mpi::Pmi>,
    /// `--max-cost`: the job's spending ceiling, micro-credits, sent for the nodes to
    /// enforce.
    pub max_cost: Option<i64>,
    /// `-A`: the project the nodes charge, `None` for the user's default.
    pub account: Option<String>,
}

/// How long other launches may still report after the first failure.
const AFTER_FAILURE: Duration = Duration::from_secs(1);

/// How the launch phase ended without a running job.
#[derive(Debug)]
pub struct LaunchFailed {
    /// One line per failed rank (and one if interrupted), with the class
    /// of the first failure (or of the interruption).
    pub error: Error,
}

/// A job whose every rank started.
#[derive(Debug)]
pub struct Launched {
    /// The running ranks, in rank order.
    pub links: Vec<RankLink>,
    /// Signals caught during the launch that the run phase must still act on
    /// (Ctrl-Z, SIGCONT, SIGWINCH), oldest first.
    pub deferred: Vec<Caught>,
}

/// Launch every rank of `spec` on `ranks`. `opened` holds, by rank, the
/// sessions already open (node selection opens them to check each node
/// before the job is fixed); ranks without one (all of them when `opened`
/// is empty) open theirs here.
pub async fn launch_all(
    connector: &TlsConnector,
    spec: &JobSpec,
    ranks: &[RankTarget],
    mut opened: Vec<Option<Session>>,
    timeout: Duration,
    signals: &mut mpsc::UnboundedReceiver<Caught>,
    spawner: Spawner,
) -> Result<Launched, LaunchFailed> {
    let mut set = JoinSet::new();
    opened.resize_with(ranks.len(), || None);
    let pmi = spawner.pmi.is_some();
    let max_cost = spawner.max_cost;
    for (target, session) in ranks.iter().zip(opened) {
        let connector = connector.clone();
        let launch = spec.launch(target.rank);
        let target = target.clone();
        let account = spawner.account.clone();
        set.spawn(async move {
            let account = account.as_deref();
            let (name, addr) = (&target.node.name, &target.node.addr);
            let result = match session {
                Some(mut s) => s
                    .launch_request(launch_request(&launch, pmi, max_cost, account))
                    .await
                    .map(|_| s),
                None => Dial {
                    agent: &crate::agent::AGENT,
                    connector: &connector,
                    node: name,
                    addr,
                    timeout,
                }
                .open_and_launch(launch_request(&launch, pmi, max_cost, account))
                .await
                .map(|(s, _)| s),
            };
            (target.rank, result)
        });
    }
    let mut started: Vec<Option<RankLink>> = ranks.iter().map(|_| None).collect();
    let mut failures: Vec<(u32, SessionError)> = Vec::new();
    let mut give_up: Option<Instant> = None;
    let mut interrupted: Option<i32> = None;
    let mut deferred = Vec::new();
    while !set.is_empty() {
        tokio::select! {
            joined = set.join_next() => match joined {
                None => break,
                Some(Ok((rank, Ok(session)))) => {
                    let link = rank::spawn(
                        session,
                        rank,
                        spawner.output.clone(),
                        spawner.events.clone(),
                        spawner.pause.clone(),
                        spawner.notices.clone(),
                        spawner.pmi.clone(),
                    );
                    started[rank as usize] = Some(link);
                }
                Some(Ok((rank, Err(e)))) => {
                    failures.push((rank, e));
                    give_up.get_or_insert(Instant::now() + AFTER_FAILURE);
                }
                Some(Err(_)) => {} // only aborted tasks end this way
            },
            _ = sleep_until(give_up.unwrap_or_else(Instant::now)), if give_up.is_some() => break,
            sig = signals.recv() => match sig {
                Some(Caught::Int) => { interrupted = Some(crate::exit::INTERRUPTED); break; }
                Some(Caught::Forward(s)) => { interrupted = Some(128 + i32::from(s.code())); break; }
                Some(other) => deferred.push(other),
                None => {}
            },
        }
    }
    set.abort_all();
    if failures.is_empty() && interrupted.is_none() {
        let links = started.into_iter().flatten().collect();
        return Ok(Launched { links, deferred });
    }
    failures.sort_by_key(|f| f.0);
    let mut lines: Vec<String> = failures
        .iter()
        .map(|(rank, e)| {
            let node = &ranks[*rank as usize].node.name;
            let text = e.to_string();
            // Nodes may name themselves in their messages; say it only once.
            let text = text
                .strip_prefix(&format!("node {node}: "))
                .unwrap_or(&text);
            format!("node {node} (rank {rank}): {text}")
        })
        .collect();
    let mut class = failures
        .first()
        .map_or(Class::Failed, |f| crate::agent::class(&f.1));
    if let Some(c) = interrupted {
        lines.push("interrupted while starting; nothing was left running".into());
        class = Class::Interrupted(c);
    }
    kill_started(started.into_iter().flatten().collect()).await;
    set.shutdown().await;
    Err(LaunchFailed {
        error: Error::Lines { lines, class },
    })
}

/// Tell each started rank to abort, and wait (briefly) until that is sent.
async fn kill_started(links: Vec<RankLink>) {
    for link in &links {
        link.signal(Signal::Kill);
    }
    let flushed: Vec<_> = links.iter().map(|l| l.flush()).collect();
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        for f in flushed {
            let _ = f.await;
        }
    })
    .await;
}
