//! The market on a [`Cluster`]: a real `accountd` (real TLS from the
//! cluster's CA, a real SQLite ledger in its own temp dir) and every `rexecd`
//! started with a `[market]` table pointing at it (a debit journal per node
//! in the cluster's scratch dir, the policy, intervals and `max_rate` the
//! scenario asks for), and the test user's account opened with a grant.
//!
//! What an admin or a user would look at is read the way they would read
//! it: balances, history and the audit through the real `accountctl`, job
//! rows through `rexec jobs`, a rank's refusal through a hand-made client
//! speaking the node protocol ([`RawSession`]).

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::time::Duration;

use certs::Role;
use proto::Framed;
use proto::node::{FromNode, JobId, RankOptions, ToNode, WindowSize};
use serde::Serialize;

pub use crate::accountd::{Accountd, Ctl, Entry, parse_credits};
use crate::cluster::{Cluster, ClusterOptions, TEST_USER};
use crate::procs::MARK_VAR;

/// How the nodes' market is set up.
#[derive(Debug, Clone)]
pub struct MarketOptions {
    /// The cluster.
    pub cluster: ClusterOptions,
    /// `contention` or `paper`.
    pub policy: &'static str,
    /// `closed` or `open`.
    pub share_control: &'static str,
    /// Metering tick.
    pub meter_interval: &'static str,
    /// How often a rank's charges are sent.
    pub debit_interval: &'static str,
    /// Largest bid a node accepts, credits per minute.
    pub max_rate: &'static str,
    /// How long a node trusts a positive balance.
    pub balance_cache: &'static str,
    /// CPUs each node sells.
    pub cpus: u32,
    /// The test user's opening grant in credits; `None` opens no account.
    pub initial: Option<&'static str>,
    /// A `[discovery]` table (full text) for accountd and every node: accountd
    /// announces itself and the nodes, given no accountd address, find it from
    /// its announcements. `None`: the nodes are told accountd's address.
    pub discovery: Option<String>,
    /// More of accountd's config file (full tables, such as `[metrics]`).
    pub extra_accountd_config: String,
    /// accountd instances started beside the first, with the same config (so on
    /// one PostgreSQL store given in `extra_accountd_config`), listed after it
    /// in every node's `[market] accountd`.
    pub more_accountd: usize,
    /// More of a node's config file, by node name (full tables, such as `[metrics]`).
    pub extra_node_config: std::collections::BTreeMap<String, String>,
}

impl MarketOptions {
    /// One node under the `paper` policy (every rank pays while another is there),
    /// metering and debiting every second: the debit tests' market.
    pub fn paper_with_one_second_ticks() -> MarketOptions {
        MarketOptions {
            cluster: ClusterOptions {
                nodes: 1,
                ..ClusterOptions::default()
            },
            policy: "paper",
            meter_interval: "1s",
            debit_interval: "1s",
            ..MarketOptions::default()
        }
    }
}

impl Default for MarketOptions {
    fn default() -> Self {
        MarketOptions {
            cluster: ClusterOptions::default(),
            policy: "contention",
            share_control: "closed",
            meter_interval: "250ms",
            debit_interval: "1s",
            max_rate: "100",
            balance_cache: "1s",
            cpus: 2,
            initial: Some("1000"),
            discovery: None,
            extra_accountd_config: String::new(),
            more_accountd: 0,
            extra_node_config: Default::default(),
        }
    }
}

/// A cluster whose nodes charge through a real accountd; dereferences to
/// the [`Cluster`]. The nodes stop (and settle what they can) before
/// accountd is killed.
pub struct MarketCluster {
    /// The nodes and the client configuration.
    pub cluster: Cluster,
    /// The ledger.
    pub accountd: Accountd,
    /// The other instances ([`MarketOptions::more_accountd`]).
    pub more_accountd: Vec<Accountd>,
}

impl Deref for MarketCluster {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

impl DerefMut for MarketCluster {
    fn deref_mut(&mut self) -> &mut Cluster {
        &mut self.cluster
    }
}

impl MarketCluster {
    /// Waits (up to `limit`) until two readings of `user`'s balance `gap` apart
    /// agree; returns that balance (charges have stopped), or `None`.
    pub fn settled_balance(&self, user: &str, gap: Duration, limit: Duration) -> Option<i64> {
        let mut last = self.accountd.balance(user);
        let mut found = None;
        crate::wait_until(limit, || {
            std::thread::sleep(gap);
            let now = self.accountd.balance(user);
            let same = now == last;
            last = now;
            if same {
                found = Some(now);
            }
            same
        });
        found
    }

    /// Start accountd, then the nodes with a `[market]` table, then open the
    /// test user's account.
    pub fn start(options: MarketOptions) -> MarketCluster {
        let mut accountd: Option<Accountd> = None;
        let mut more_accountd = Vec::new();
        let cluster = Cluster::start_with_node_config(options.cluster.clone(), |pki, dir, name| {
            let mut config = options.discovery.clone().unwrap_or_default();
            config.push_str(&options.extra_accountd_config);
            let start = || Accountd::start_on(pki, options.cluster.services_host(), config.clone());
            if accountd.is_none() {
                more_accountd = (0..options.more_accountd).map(|_| start()).collect();
            }
            let d = accountd.get_or_insert_with(start);
            let mut text = node_config(&options, &d.addr, &journal_path(dir, name));
            if !more_accountd.is_empty() {
                let all: Vec<&str> = std::iter::once(d.addr.as_str())
                    .chain(more_accountd.iter().map(|m| m.addr.as_str()))
                    .collect();
                text = text.replacen(
                    &format!("accountd = {:?}\n", d.addr),
                    &format!("accountd = {all:?}\n"),
                    1,
                );
            }
            if let Some(table) = &options.discovery {
                // No address: the node learns it from accountd's announcements.
                text = text.replacen(&format!("accountd = {:?}\n", d.addr), "", 1);
                let history = dir.join(format!("{name}.availability"));
                text.push_str(&format!(
                    "{table}\n[announce]\nhistory_file = {history:?}\n"
                ));
            }
            if let Some(extra) = options.extra_node_config.get(name) {
                text.push_str(extra);
            }
            Some(text)
        });
        let accountd = accountd.expect("the cluster has no nodes");
        if let Some(initial) = options.initial {
            accountd
                .admin(&["create", TEST_USER, "--initial", initial])
                .ok();
        }
        MarketCluster {
            cluster,
            accountd,
            more_accountd,
        }
    }

    /// Node `name`'s debit journal.
    pub fn journal(&self, name: &str) -> PathBuf {
        journal_path(self.cluster.dir.path(), name)
    }

    /// `rexec jobs` as the test user: the rank rows and the node rows.
    pub fn jobs(&self) -> (Vec<JobRow>, Vec<NodeRow>) {
        let out = self.cluster.rexec().args(["jobs"]).run();
        assert_eq!(out.code, Some(0), "rexec jobs: {out:?}");
        parse_jobs(&out.out())
    }

    /// The debits of `job` in the test user's ledger history.
    pub fn debits_of(&self, job: &str) -> Vec<Entry> {
        self.accountd
            .history(TEST_USER)
            .into_iter()
            .filter(|e| e.kind == "debit" && e.job == job)
            .collect()
    }
}

pub(crate) fn journal_path(dir: &Path, node: &str) -> PathBuf {
    dir.join(format!("{node}.journal"))
}

pub(crate) fn node_config(o: &MarketOptions, accountd: &str, journal: &Path) -> String {
    format!(
        "[market]\naccountd = {accountd:?}\naccountd_name = \"accountd\"\njournal = {journal:?}\n\
         policy = {:?}\nshare_control = {:?}\nmeter_interval = {:?}\ndebit_interval = {:?}\n\
         max_rate = {:?}\nbalance_cache = {:?}\ncpus = {}\n",
        o.policy,
        o.share_control,
        o.meter_interval,
        o.debit_interval,
        o.max_rate,
        o.balance_cache,
        o.cpus
    )
}

/// One rank as `rexec jobs` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    /// The node.
    pub node: String,
    /// The job id.
    pub job: String,
    /// `RANK/NRANKS`.
    pub rank: String,
    /// The owner.
    pub user: String,
    /// The bid column as printed (`2`, or `2->0` when another bid is in force).
    pub bid: String,
    /// The model's share, CPUs.
    pub model_cpu: String,
    /// The measured share, CPUs.
    pub used_cpu: String,
    /// CPU seconds so far.
    pub cpu_s: String,
    /// Credits charged so far.
    pub charged: i64,
    /// The program.
    pub program: String,
}

/// One node as `rexec jobs` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    /// The node.
    pub node: String,
    /// CPUs it sells.
    pub cpus: u32,
    /// Its price, micro-credits per minute.
    pub price: i64,
    /// `contended` or `idle-cpu`.
    pub state: String,
}

/// Parse `rexec jobs`: the rank table, a blank line, the node table.
pub fn parse_jobs(text: &str) -> (Vec<JobRow>, Vec<NodeRow>) {
    let mut parts = text.split("\n\n");
    let ranks = parts.next().unwrap_or_default();
    let nodes = parts.next().unwrap_or_default();
    let mut lines = ranks.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NODE",
            "JOB",
            "RANK",
            "USER",
            "BID",
            "MODEL-CPU",
            "USED-CPU",
            "CPU-S",
            "CHARGED",
            "AGE-S",
            "PROGRAM"
        ],
        "{text}"
    );
    let rows = lines
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert!(f.len() >= 11, "short row {l:?} in {text}");
            JobRow {
                node: f[0].into(),
                job: f[1].into(),
                rank: f[2].into(),
                user: f[3].into(),
                bid: f[4].into(),
                model_cpu: f[5].into(),
                used_cpu: f[6].into(),
                cpu_s: f[7].into(),
                charged: parse_credits(f[8]).unwrap_or_else(|| panic!("charged in {l:?}")),
                program: f[10].into(),
            }
        })
        .collect();
    let mut lines = nodes.lines();
    let node_header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(node_header, ["NODE", "CPUS", "PRICE", "STATE"], "{text}");
    let node_rows = lines
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            NodeRow {
                node: f[0].into(),
                cpus: f[1].parse().unwrap_or_else(|_| panic!("cpus in {l:?}")),
                price: parse_credits(f[2]).unwrap_or_else(|| panic!("price in {l:?}")),
                state: f[3].into(),
            }
        })
        .collect();
    (rows, node_rows)
}

/// One node's line of `rexec -v`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeBill {
    /// The node.
    pub node: String,
    /// Ranks that ended there.
    pub ranks: u32,
    /// CPU seconds, as printed.
    pub cpu_s: String,
    /// Charged, micro-credits.
    pub charged: i64,
}

/// The per-node lines `rexec -v` printed on stderr:
/// `rexec: node n1: 2 rank(s), 3.21 CPU seconds, charged 0.5 credits`.
pub fn parse_bills(stderr: &str) -> Vec<NodeBill> {
    stderr
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("rexec: node ")?;
            let (node, rest) = rest.split_once(": ")?;
            let (ranks, rest) = rest.split_once(" rank(s), ")?;
            let (cpu, rest) = rest.split_once(" CPU seconds, charged ")?;
            let charged = rest.strip_suffix(" credits")?;
            Some(NodeBill {
                node: node.into(),
                ranks: ranks.parse().ok()?,
                cpu_s: cpu.into(),
                charged: parse_credits(charged)?,
            })
        })
        .collect()
}

/// The tests' raw sessions as a node sees them.
static RAW_AGENT: clients::node::Agent = clients::node::Agent {
    name: "e2e-raw",
    on_notice: |_, _| {},
};

/// A client session with one node, opened by `clients::node`, then speaking the
/// node protocol frame by frame (to send what `rexec` would refuse to).
pub struct RawSession {
    runtime: tokio::runtime::Runtime,
    framed: Framed<clients::node::Tls>,
}

/// `ToNode::Launch`'s wire tag (see `proto::tagged`).
const LAUNCH_TAG: u16 = 2;

/// `proto::node::Launch` with the bid as the raw `i64` on the wire, the same bytes for
/// every valid bid: what a client that does not check its bid sends.
#[derive(Serialize)]
struct RawLaunch {
    job: JobId,
    rank: u32,
    nranks: u32,
    bid: i64,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    cwd: Option<String>,
    terminal: Option<WindowSize>,
    options: RankOptions,
}

impl RawSession {
    /// Connect to node `node` as user `user` and say hello.
    pub fn open(cluster: &Cluster, node: &str, user: &str) -> RawSession {
        RawSession::open_as(cluster, node, Role::User, user)
    }

    /// Connect to node `node` with the certificate of (`role`, `name`) (a queue's
    /// `service` certificate, say) and say hello.
    pub fn open_as(cluster: &Cluster, node: &str, role: Role, name: &str) -> RawSession {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let tls = cluster.pki.tls_paths(role, name);
        let addr = cluster.node(node).addr;
        let framed = runtime.block_on(async {
            let connector = certs::connector(&tls).expect("connector");
            let timeout = Duration::from_secs(20);
            let session = clients::node::Session::open(
                &RAW_AGENT,
                &connector,
                node,
                &addr.to_string(),
                timeout,
            )
            .await
            .unwrap_or_else(|e| panic!("no session with node {node}: {e}"));
            session.framed
        });
        RawSession { runtime, framed }
    }

    /// Launch `argv` as rank 0 of 1 of `job` with `bid` micro-credits a
    /// minute, marked as the cluster's; return the node's answer (`Started`
    /// or `Error`). The bid is sent as any client could put it on the wire, a
    /// negative one included (which `proto::node::Launch` cannot hold).
    pub fn launch(&mut self, cluster: &Cluster, job: u64, bid: i64, argv: &[&str]) -> FromNode {
        let launch = RawLaunch {
            job: JobId(job),
            rank: 0,
            nranks: 1,
            bid,
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                (MARK_VAR.into(), cluster.mark.clone()),
            ],
            cwd: None,
            terminal: None,
            options: Default::default(),
        };
        self.send((LAUNCH_TAG, launch))
    }

    /// Send `msg` (a `ToNode`, or raw bytes of one) and return the node's first
    /// answer that is not a heartbeat.
    pub fn send(&mut self, msg: impl Serialize) -> FromNode {
        let framed = &mut self.framed;
        self.runtime.block_on(async {
            framed.send(&msg).await.expect("send");
            loop {
                match tokio::time::timeout(Duration::from_secs(20), framed.recv::<FromNode>()).await
                {
                    Ok(Ok(Some(FromNode::Heartbeat(_)))) => {}
                    Ok(Ok(Some(frame))) => return frame,
                    other => panic!("no answer: {other:?}"),
                }
            }
        })
    }

    /// After `Started`: everything the node sends up to and including `Exit` (or
    /// an `Error`, or the end of the connection), answering its heartbeats.
    pub fn until_exit(&mut self) -> Vec<FromNode> {
        let framed = &mut self.framed;
        self.runtime.block_on(async {
            let mut got = Vec::new();
            loop {
                match tokio::time::timeout(Duration::from_secs(60), framed.recv::<FromNode>()).await
                {
                    Ok(Ok(Some(FromNode::Heartbeat(h)))) => {
                        let beat = ToNode::Heartbeat(proto::node::Heartbeat { seq: h.seq });
                        framed.send(&beat).await.expect("heartbeat");
                    }
                    Ok(Ok(Some(frame))) => {
                        let last = matches!(frame, FromNode::Exit(_) | FromNode::Error(_));
                        got.push(frame);
                        if last {
                            return got;
                        }
                    }
                    Ok(Ok(None)) => return got,
                    other => panic!("the session failed: {other:?}"),
                }
            }
        })
    }
}
