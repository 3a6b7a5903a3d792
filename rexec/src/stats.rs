//! `rexec stats [-v]`: what an admin without Prometheus asks the market for. Two
//! tables, as the other admin commands print them:
//!
//! - every selector the configuration finds (`[selectors]`, or those heard on
//!   the group with `[discovery]`), asked concurrently for its counters: live
//!   nodes and services, selects answered, announcements accepted, datagrams
//!   dropped by reason, senders forgotten;
//! - every node asked (`--nodes`, `[nodes]`, or a selector's listing, as for
//!   `rexec jobs`) for its market state: CPUs sold, price (the sum of the bids
//!   competing there, paid or not, as everywhere else), contended or not, and,
//!   over the ranks it shows you (every rank with an admin certificate), how many,
//!   their bids in force, the CPUs the model gives them and the CPUs they used,
//!   the largest gap between the two for one rank, and the credits charged.
//!
//! A selector or node that does not answer is reported on its own line and the
//! rest still printed; the exit status is then 1.

use proto::node::JobList;
use proto::select::SelectorStats;
use tokio::task::JoinSet;

use crate::cli::StatsArgs;
use crate::exit::Error;
use crate::reach::{ask_all, configured_nodes, connector, listed_nodes, load};
use crate::say;
use crate::select::ASK_TIMEOUT;
use crate::show::{milli_cpus, state_column};

/// The selectors' table, one row per selector that answered.
///
/// ```
/// use proto::select::SelectorStats;
/// let s = SelectorStats { accepted: 120, malformed: 5, nodes: 2, services: 1, selects: 3,
///                         ..SelectorStats::default() };
/// let t = rexec::stats::selector_table(&[("v1".into(), "127.0.0.1:7478".into(), s)]);
/// let rows: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
/// assert_eq!(rows[0], ["SELECTOR", "ADDRESS", "NODES", "SERVICES", "SELECTS", "ACCEPTED",
///     "MALFORMED", "OVERSIZED", "FOREIGN", "STALE", "FULL", "FORGOTTEN"]);
/// assert_eq!(rows[1], ["v1", "127.0.0.1:7478", "2", "1", "3", "120", "5", "0", "0", "0", "0", "0"]);
/// ```
pub fn selector_table(rows: &[(String, String, SelectorStats)]) -> String {
    let header = [
        "SELECTOR",
        "ADDRESS",
        "NODES",
        "SERVICES",
        "SELECTS",
        "ACCEPTED",
        "MALFORMED",
        "OVERSIZED",
        "FOREIGN",
        "STALE",
        "FULL",
        "FORGOTTEN",
    ];
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|(name, addr, s)| {
            let mut row = vec![name.clone(), addr.clone()];
            let counts = [s.nodes, s.services, s.selects, s.accepted]
                .into_iter()
                .chain(s.dropped().map(|(_, n)| n))
                .chain([s.forgotten]);
            row.extend(counts.map(|n| n.to_string()));
            row
        })
        .collect();
    crate::columns::aligned(&header, &rows, 2)
}

/// The nodes' table, one row per node that answered.
///
/// ```
/// use proto::node::{JobInfo, JobList};
/// let rank = |credits: u32, model: u32, used: u32| JobInfo {
///     job: "00000000000000ff".parse().unwrap(), rank: 0, nranks: 1, user: "ann".into(),
///     program: "prog".into(), bid: money::Bid::from_credits(credits),
///     effective_bid: money::Bid::from_credits(credits), runnable: 1,
///     model_milli_cpus: model, measured_milli_cpus: used, cpu_nanos: 0,
///     charged: 1_500_000, age_millis: 0,
/// };
/// let list = JobList { jobs: vec![rank(20, 1333, 1200), rank(10, 667, 800)],
///                      truncated: false, cpus: 2, price: 30_000_000, contended: true };
/// let t = rexec::stats::node_table(&[("n1".into(), list)]);
/// let rows: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
/// assert_eq!(rows[0], ["NODE", "CPUS", "PRICE/MIN", "STATE", "RANKS", "BIDS/MIN",
///     "MODEL-CPU", "USED-CPU", "MAX-GAP", "CHARGED"]);
/// assert_eq!(rows[1], ["n1", "2", "30", "contended", "2", "30", "2.000", "2.000", "0.133", "3"]);
/// // A rank bidding 2 alone: the price is 2 (it pays nothing, the node is not contended).
/// let alone = JobList { jobs: vec![rank(2, 1000, 1000)], truncated: false, cpus: 2,
///                       price: 2_000_000, contended: false };
/// let t = rexec::stats::node_table(&[("n2".into(), alone)]);
/// let row: Vec<&str> = t.lines().nth(1).unwrap().split_whitespace().collect();
/// assert_eq!(&row[..4], ["n2", "2", "2", "idle-cpu"]);
/// ```
pub fn node_table(rows: &[(String, JobList)]) -> String {
    let header = [
        "NODE",
        "CPUS",
        "PRICE/MIN",
        "STATE",
        "RANKS",
        "BIDS/MIN",
        "MODEL-CPU",
        "USED-CPU",
        "MAX-GAP",
        "CHARGED",
    ];
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|(name, list)| {
            let sum = |f: fn(&proto::node::JobInfo) -> i64| list.jobs.iter().map(f).sum::<i64>();
            let cpus = |f: fn(&proto::node::JobInfo) -> u32| {
                milli_cpus(list.jobs.iter().map(f).fold(0u32, u32::saturating_add))
            };
            let gap = list
                .jobs
                .iter()
                .map(|j| j.model_milli_cpus.abs_diff(j.measured_milli_cpus))
                .max();
            vec![
                name.clone(),
                list.cpus.to_string(),
                money::format_credits(list.price),
                state_column(list.contended).to_string(),
                list.jobs.len().to_string(),
                money::format_credits(sum(|j| j.effective_bid.micros_per_minute())),
                cpus(|j| j.model_milli_cpus),
                cpus(|j| j.measured_milli_cpus),
                gap.map_or("-".into(), milli_cpus),
                money::format_credits(sum(|j| j.charged)),
            ]
        })
        .collect();
    crate::columns::aligned(&header, &rows, 1)
}

/// Run `rexec stats`.
pub async fn run(
    args: &StatsArgs,
    names: Option<&[String]>,
    config: Option<&std::path::Path>,
) -> Result<(), Error> {
    let config = load(config)?;
    let note = |m: &str| {
        if args.verbose {
            say(m);
        }
    };
    let configured = if config.selects() {
        None
    } else {
        Some(configured_nodes(&config, names).map_err(|e| Error::Usage(e.to_string()))?)
    };
    let connector = connector(&config)?;
    let mut complete = true;
    if !config.selectors.is_empty() || config.discovery.is_some() {
        let selectors = crate::find::selectors(&config, &connector, &note)
            .await
            .map_err(|e| Error::Incomplete(e.to_string()))?
            .into_list();
        let mut asked = JoinSet::new();
        for (i, sel) in selectors.iter().enumerate() {
            let (connector, sel) = (connector.clone(), sel.clone());
            asked.spawn(async move {
                let answer = clients::selector::ask_one(
                    &connector,
                    &sel,
                    &clients::selector::Stats,
                    ASK_TIMEOUT,
                )
                .await;
                (i, answer)
            });
        }
        let mut answers: Vec<_> = selectors.iter().map(|_| None).collect();
        while let Some(Ok((i, a))) = asked.join_next().await {
            answers[i] = Some(a);
        }
        let mut rows = Vec::new();
        for (sel, answer) in selectors.iter().zip(answers) {
            match answer {
                Some(Ok(s)) => rows.push((sel.name.clone(), sel.addr.clone(), s)),
                Some(Err(e)) => {
                    say(&format!("selector {} at {}: {e}", sel.name, sel.addr));
                    complete = false;
                }
                None => {
                    say(&format!("selector {} at {}: no answer", sel.name, sel.addr));
                    complete = false;
                }
            }
        }
        print!("{}", selector_table(&rows));
        println!();
    }
    let nodes = match configured {
        Some(nodes) => nodes,
        None => listed_nodes(&config, names, &connector).await?,
    };
    let timeout = crate::clock::timeout_from_env().unwrap_or(crate::clock::DEFAULT_TIMEOUT);
    let answers = ask_all(&connector, &nodes, timeout, |mut s| async move {
        s.list_jobs().await
    })
    .await;
    let mut rows = Vec::new();
    for (node, answer) in nodes.iter().zip(answers) {
        match answer {
            Ok(list) => {
                if list.truncated {
                    say(&format!(
                        "node {}: more ranks than one answer holds; the sums are of those listed",
                        node.name
                    ));
                }
                rows.push((node.name.clone(), list));
            }
            Err(e) => {
                say(&format!("node {}: {e}", node.name));
                complete = false;
            }
        }
    }
    print!("{}", node_table(&rows));
    if complete {
        Ok(())
    } else {
        Err(Error::Incomplete(String::new()))
    }
}
