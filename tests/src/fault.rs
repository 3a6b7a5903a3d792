//! The whole cluster under faults (issue 42): hosts in network namespaces
//! ([`crate::netns`]): three nodes (hosts 1-3), the users' client (host 4), two
//! control hosts A and B (hosts 5 and 6, each running accountd, vexecd and
//! batchd) and two database hosts (hosts 7 and 8): a PostgreSQL primary holding
//! the ledger and the queue, and its synchronous streaming standby
//! ([`Database`]). Both accountd and both batchd name both database hosts in one
//! connection string and use whichever server takes writes.
//!
//! Nodes and clients name both control hosts (`[market] accountd`, `[selectors]`,
//! `[batch] address`). [`Workload`] keeps users busy from the client host while a
//! scenario injects faults: interactive `rexec -r` jobs, batch submissions and an
//! array; it records what was acknowledged and when each job's program started,
//! which is how recovery times are measured ([`Recovery`]). [`FaultCluster::check`]
//! is the list of checks run after each fault.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use certs::Role;

use crate::accountd::{Accountd, Entry};
use crate::batch::Batchd;
use crate::cluster::{Cluster, ClusterOptions, TEST_USER};
use crate::market::{MarketOptions, journal_path, node_config};
use crate::netns::Net;
use crate::selectors::{Channel, Vexecd, client_config, history, selectors_table};

/// The nodes.
pub const NODES: usize = 3;
/// The client's host (index in the [`Net`]).
pub const CLIENT_HOST: usize = NODES;
/// Control hosts A and B.
pub const CONTROL_HOSTS: [usize; 2] = [NODES + 1, NODES + 2];
/// The database hosts: the primary's and the standby's at the start.
pub const DB_HOSTS: [usize; 2] = [NODES + 3, NODES + 4];

/// Nanoseconds since the Unix epoch, now.
pub fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The cluster; see the module docs. Fields drop in order: the queues first,
/// the database and the hosts last.
pub struct FaultCluster {
    /// batchd on A and on B.
    pub batchd: Vec<Batchd>,
    /// vexecd on A and on B.
    pub vexecd: Vec<Vexecd>,
    /// The nodes (and the client's command builder).
    pub cluster: Cluster,
    /// accountd on A and on B.
    pub accountd: Vec<Accountd>,
    /// accountd's config file as the offline audit reads it, per instance.
    ledger_configs: Vec<PathBuf>,
    /// Each accountd's signed chain heads.
    anchors: Vec<PathBuf>,
    /// The test user's client configuration (both selectors, both queues).
    pub client: PathBuf,
    /// A directory every user may write: batch jobs append their starts to `ran`.
    pub shared: tempfile::TempDir,
    /// PostgreSQL, primary and standby (databases `ledger` and `queue`).
    pub db: Database,
    /// The hosts.
    pub net: Arc<Net>,
    /// The queues' directories and the ledger's anchors.
    _work: tempfile::TempDir,
}

impl FaultCluster {
    /// Starts the hosts, PostgreSQL, both accountd, the nodes, both vexecd and
    /// both batchd; returns once a queue leads and knows every node.
    pub fn start() -> FaultCluster {
        let net = Arc::new(Net::create(NODES + 5));
        let db = Database::start(&net);
        let conninfo = |name: &str| db.conninfo(name);
        let control = |i: usize| {
            let h = net.host(CONTROL_HOSTS[i]);
            (h.ns.clone(), h.addr)
        };
        let work = tempfile::Builder::new()
            .prefix("rexec-fault-")
            .tempdir()
            .expect("temp dir");
        let anchors: Vec<PathBuf> = (0..2)
            .map(|i| work.path().join(format!("anchors-{i}")))
            .collect();
        let accountd_config = |i: usize| {
            format!(
                "[store]\npostgres = \"{}\"\nanchors = {:?}\nanchor_entries = 20\nanchor_secs = 1\n",
                conninfo("ledger"),
                anchors[i]
            )
        };
        let channel = Channel::loopback();
        let options = MarketOptions {
            // Sleeping ranks pay under the paper's rule whenever they share a node.
            policy: "paper",
            ..MarketOptions::default()
        };
        let mut accountd: Vec<Accountd> = Vec::new();
        let hosts = net.clone();
        let cluster = Cluster::start_with_node_config(
            ClusterOptions {
                nodes: NODES,
                node_heartbeat_timeout: "10s",
                net: Some(net.clone()),
                ..ClusterOptions::default()
            },
            |pki, dir, name| {
                if accountd.is_empty() {
                    accountd = (0..2)
                        .map(|i| Accountd::start_on(pki, Some(control(i)), accountd_config(i)))
                        .collect();
                }
                let (a, b) = (&accountd[0].addr, &accountd[1].addr);
                let text = node_config(&options, a, &journal_path(dir, name)).replacen(
                    &format!("accountd = {a:?}\n"),
                    &format!("accountd = [{a:?}, {b:?}]\n"),
                    1,
                );
                let i: usize = name[1..].parse().expect("nodes are n1, n2, ...");
                Some(format!(
                    "{text}{}[announce]\nhistory_file = {:?}\nfind_accountd = false\n",
                    channel.on(hosts.host(i - 1).addr).table(),
                    history(dir, name)
                ))
            },
        );
        accountd[0]
            .admin(&["create", TEST_USER, "--initial", "100000"])
            .ok();
        // What `accountctl audit --anchors --ledger` reads: the store and the CA.
        let ca = cluster.pki.tls_paths(Role::Service, "accountd").ca;
        let ledger_configs: Vec<PathBuf> = (0..2)
            .map(|i| {
                let p = work.path().join(format!("accountd-{i}.toml"));
                let text = format!("ca = {ca:?}\n{}", accountd_config(i));
                fs::write(&p, text).expect("write a ledger config");
                p
            })
            .collect();
        let vexecd: Vec<Vexecd> = (0..2)
            .map(|i| {
                let (ns, addr) = control(i);
                Vexecd::start_on(
                    &cluster.pki,
                    cluster.dir.path(),
                    ["va", "vb"][i],
                    &channel.on(addr),
                    None,
                    Some((ns, addr)),
                )
            })
            .collect();
        let batchd: Vec<Batchd> = (0..2)
            .map(|i| {
                let dir = work.path().join(format!("batchd-{i}"));
                fs::create_dir_all(&dir).expect("batchd's directory");
                let config = format!(
                    "accountd = [{:?}, {:?}]\n[store]\npostgres = \"{}\"\n[queue]\npolicy = \"fifo\"\n\
                     tick = \"500ms\"\nkill_wait = \"10s\"\n{}",
                    accountd[0].addr,
                    accountd[1].addr,
                    conninfo("queue"),
                    selectors_table(&[&vexecd[0], &vexecd[1]]),
                );
                fs::write(dir.join("batchd.toml"), config).expect("batchd's config");
                Batchd::start_in(
                    dir,
                    cluster.pki.tls_paths(Role::Service, "batchd"),
                    Some(control(i)),
                )
            })
            .collect();
        let queues = format!(
            "[batch]\naddress = [{:?}, {:?}]\n",
            batchd[0].addr, batchd[1].addr
        );
        let client = client_config(
            &cluster,
            "fault-client.toml",
            &format!("{}{queues}", selectors_table(&[&vexecd[0], &vexecd[1]])),
        );
        let shared = tempfile::tempdir().expect("temp dir");
        fs::set_permissions(shared.path(), fs::Permissions::from_mode(0o777)).expect("chmod");
        let f = FaultCluster {
            batchd,
            vexecd,
            cluster,
            accountd,
            ledger_configs,
            anchors,
            client,
            shared,
            db,
            net,
            _work: work,
        };
        let ready = crate::wait_until(Duration::from_secs(30), || {
            f.leader().is_some() && f.batchd.iter().any(|b| b.log().contains("procs=6"))
        });
        assert!(
            ready.is_some(),
            "no queue led and knew the nodes:\n{}\n{}",
            f.batchd[0].log(),
            f.batchd[1].log()
        );
        f
    }

    /// The batchd instance that leads now, as the logs last said (the higher
    /// epoch when two think they do).
    pub fn leader(&self) -> Option<usize> {
        let mut best: Option<(u64, usize)> = None;
        for (i, b) in self.batchd.iter().enumerate() {
            if b.pid().is_none() {
                continue;
            }
            let log = b.log();
            let last = log.lines().rev().find(|l| {
                ["lease taken", "lease lost", "lease:"]
                    .iter()
                    .any(|m| l.contains(m))
            });
            if let Some(l) = last.filter(|l| l.contains("lease taken: leading")) {
                let epoch = crate::batch::log_field(l, "epoch").unwrap_or(0) as u64;
                if best.is_none_or(|(e, _)| epoch > e) {
                    best = Some((epoch, i));
                }
            }
        }
        best.map(|(_, i)| i)
    }

    /// A `rexec` command on the client host with the test user's configuration.
    pub fn rexec(&self) -> crate::rexec::Rexec {
        self.cluster.rexec().config(&self.client)
    }

    /// Debits in the ledger (read from the primary itself).
    pub fn debit_count(&self) -> u64 {
        self.db
            .primary()
            .try_psql(
                "ledger",
                "SELECT COUNT(*) FROM entries WHERE kind = 'debit'",
            )
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    /// An accountd that runs and is reachable.
    fn live_accountd(&self) -> &Accountd {
        self.accountd
            .iter()
            .find(|a| a.pid().is_some() && a.admin(&["whoami"]).code == 0)
            .expect("no accountd answers")
    }

    /// The checks after a fault, once `work` has stopped and every acknowledged
    /// job has ended: see [`Checked`].
    pub fn check(&self, work: &Workload) -> Checked {
        let ran = self.runs();
        let mut problems = Vec::new();
        let subs = work.submissions();
        // An acknowledged job started at least once and at most once per attempt
        // the queue counts (a start cut short by a fault may be retried; an
        // attempt a node refused starts nothing); any other at most once.
        let queue = match self.queue_history() {
            Ok(q) => q,
            Err(why) => {
                problems.push(format!("rexec history failed: {why}"));
                BTreeMap::new()
            }
        };
        for s in &subs {
            let tags: Vec<(String, Option<String>)> = if s.array {
                (0..4)
                    .map(|i| {
                        let job = s.job.as_ref().map(|j| format!("{j}_{i}"));
                        (format!("{}-{i}", s.tag), job)
                    })
                    .collect()
            } else {
                vec![(s.tag.clone(), s.job.clone())]
            };
            for (tag, job) in tags {
                let n = ran.get(&tag).map_or(0, Vec::len);
                let attempts = job.and_then(|j| queue.get(&j)).map_or(1, |q| q.0);
                if (s.acked && !(1..=attempts).contains(&n)) || (!s.acked && n > 1) {
                    problems.push(format!(
                        "{tag} (acknowledged: {}) started {n} times in {attempts} attempts",
                        s.acked
                    ));
                }
            }
        }
        problems.extend(self.stale_starts());
        // A daemon never panics, whatever the fault.
        for (i, b) in self.batchd.iter().enumerate() {
            let log = b.log();
            let lines: Vec<&str> = log.lines().collect();
            if let Some(at) = lines.iter().position(|l| l.contains("panicked at")) {
                let said = lines[at..(at + 3).min(lines.len())].join("\n");
                problems.push(format!("batchd {i} panicked:\n{said}"));
            }
        }
        // Every charge once, equal to the nodes' and the queue's records.
        let ledger = self.live_accountd();
        let debits: Vec<Entry> = ledger
            .history(TEST_USER)
            .into_iter()
            .filter(|e| e.kind == "debit")
            .collect();
        let keys: BTreeSet<_> = debits.iter().map(Entry::key).collect();
        if keys.len() != debits.len() {
            problems.push(format!("{} debits, {} keys", debits.len(), keys.len()));
        }
        let by_job = |job: &str, node: Option<&str>| -> i64 {
            debits
                .iter()
                .filter(|e| e.job == job && node.is_none_or(|n| e.node == n))
                .map(|e| -e.amount)
                .sum()
        };
        for s in subs.iter().filter(|s| s.acked && !s.array) {
            let Some(job) = &s.job else { continue };
            let Some(&(_, c)) = queue.get(job) else {
                problems.push(format!("job {job} is not in the queue's history"));
                continue;
            };
            if by_job(job, Some("batchd")) != c {
                problems.push(format!(
                    "job {job}: the queue charged {c}, the ledger holds {}",
                    by_job(job, Some("batchd"))
                ));
            }
        }
        for r in work.interactive().iter().filter(|r| r.ok) {
            if let Some(job) = &r.job
                && by_job(job, None) != r.billed
            {
                problems.push(format!(
                    "interactive job {job}: rexec billed {}, the ledger holds {}",
                    r.billed,
                    by_job(job, None)
                ));
            }
        }
        for (i, a) in self.accountd.iter().enumerate() {
            if a.pid().is_none() {
                continue;
            }
            let audit = a.admin(&["audit"]);
            if !audit.stdout.starts_with("audit passed") {
                problems.push(format!("audit through accountd {i}: {audit:?}"));
            }
            if self.anchors[i].exists() {
                let path = self.anchors[i].display().to_string();
                let cfg = self.ledger_configs[i].display().to_string();
                let audit = a.admin(&["audit", "--anchors", &path, "--ledger", &cfg]);
                if audit.code != 0 {
                    problems.push(format!("audit --anchors of accountd {i}: {audit:?}"));
                }
            }
        }
        Checked {
            submissions: subs.len(),
            debits: debits.len(),
            problems,
        }
    }

    /// Starts per tag (batch jobs append `TAG START_NS` to `ran`; array tasks
    /// `TAG-INDEX START_NS`).
    pub fn runs(&self) -> BTreeMap<String, Vec<u128>> {
        let mut n: BTreeMap<String, Vec<u128>> = BTreeMap::new();
        let text = fs::read_to_string(self.shared.path().join("ran")).unwrap_or_default();
        for l in text.lines() {
            let mut f = l.split_whitespace();
            let (Some(tag), Some(at)) = (f.next(), f.next()) else {
                continue;
            };
            n.entry(tag.to_string())
                .or_default()
                .push(at.parse().unwrap_or(0));
        }
        n
    }

    /// Launches logged by a replaced leader: a start at an epoch lower than one
    /// already started from (logs' ISO timestamps compare as text).
    fn stale_starts(&self) -> Vec<String> {
        let mut starts: Vec<(String, i64, String)> = Vec::new();
        for b in &self.batchd {
            for l in b
                .log()
                .lines()
                .filter(|l| l.contains("batchd::sched::apply: started job="))
            {
                let at = l.split_whitespace().next().unwrap_or("").to_string();
                let epoch = crate::batch::log_field(l, "epoch").unwrap_or(0);
                starts.push((at, epoch, l.to_string()));
            }
        }
        starts.sort();
        let mut highest = 0;
        let mut stale = Vec::new();
        for (_, epoch, line) in starts {
            if epoch < highest {
                stale.push(format!(
                    "a start at epoch {epoch} after epoch {highest}: {line}"
                ));
            }
            highest = highest.max(epoch);
        }
        stale
    }

    /// What the queue says of each ended job (`rexec history`, through
    /// whichever instance answers): its attempts and its charge; why not, when
    /// no instance answers. Array tasks are listed as `JOB_INDEX`.
    fn queue_history(&self) -> Result<BTreeMap<String, (usize, i64)>, String> {
        let out = self
            .rexec()
            .args(["history", "-S", "1d", "-o", "jobid,attempts,charged"])
            .run();
        if out.code != Some(0) {
            return Err(format!(
                "exit {:?} after {:?}: {}",
                out.code,
                out.elapsed,
                out.stderr.trim()
            ));
        }
        Ok(out
            .out()
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let charged = crate::accountd::parse_credits(f.get(2)?)?;
                Some((f.first()?.to_string(), (f.get(1)?.parse().ok()?, charged)))
            })
            .collect())
    }

    /// Waits until every acknowledged batch job has ended (`limit` at most).
    pub fn drain(&self, work: &Workload, limit: Duration) -> bool {
        let jobs: Vec<String> = work
            .submissions()
            .into_iter()
            .filter(|s| s.acked)
            .filter_map(|s| s.job)
            .collect();
        crate::wait_until(limit, || {
            let out = self.rexec().args(["queue"]).run();
            out.code == Some(0) && jobs.iter().all(|j| !out.out().contains(j.as_str()))
        })
        .is_some()
    }
}

/// What the checks after a fault found.
#[derive(Debug)]
pub struct Checked {
    /// Batch submissions made.
    pub submissions: usize,
    /// Debits in the ledger.
    pub debits: usize,
    /// Everything wrong: empty when the cluster came through.
    pub problems: Vec<String>,
}

mod database;
mod workload;
pub use database::*;
pub use workload::*;
