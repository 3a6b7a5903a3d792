//! The batch market on loopback: nodes charging through a real accountd and
//! announcing on a loopback channel, a real vexecd hearing them, and a real
//! `batchd` process asking that vexecd for the market ([`BatchMarket`]). Jobs
//! are signed with the test user's own key ([`BatchMarket::sign`]) and sent
//! with `clients::batch::BatchClient` from this process ([`BatchMarket::call`]).
//! [`log_field`] reads a number (`key=INTEGER`) from a daemon's log line.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use certs::{Role, TlsPaths};
use clients::batch::{BatchClient, ClientError};
use proto::batch::{BatchOp, BatchReply, JobSpec, QueueEntry, SignedJob, Worth};
use proto::node::JobId;

use crate::cluster::{TEST_USER, bin};
use crate::market::{MarketCluster, MarketOptions};
use crate::procs::MARK_VAR;
use crate::selectors::{Channel, Vexecd};

/// `key=INTEGER` in a daemon's log line (` key=` preceded by a space), as the
/// batch scenarios and the drain benchmark read batchd's times from its log.
///
/// ```
/// let line = "INFO batchd::sched::apply: started job=00000000000000ff at_ms=1700 x=2";
/// assert_eq!(rexec_tests::batch::log_field(line, "at_ms"), Some(1700));
/// assert_eq!(rexec_tests::batch::log_field(line, "decided_ms"), None);
/// ```
pub fn log_field(line: &str, key: &str) -> Option<i64> {
    let rest = line.split(&format!(" {key}=")).nth(1)?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// How the batch market is set up.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// Nodes.
    pub nodes: usize,
    /// CPUs each node sells.
    pub cpus: u32,
    /// The queue's policy.
    pub policy: &'static str,
    /// Its decision period.
    pub tick: &'static str,
    /// Output bytes kept per job.
    pub max_output: u64,
    /// The test user's opening grant in credits.
    pub initial: &'static str,
    /// More of batchd's config file (full tables, such as `[metrics]`).
    pub extra_config: String,
    /// The queue's `kill_wait` (grace between SIGTERM and SIGKILL at a job's length).
    pub kill_wait: &'static str,
    /// The queue in this PostgreSQL database (`[store] postgres`) instead of a
    /// SQLite file.
    pub postgres: Option<String>,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            nodes: 2,
            cpus: 2,
            policy: "fifo",
            tick: "500ms",
            max_output: 1 << 20,
            initial: "1000",
            extra_config: String::new(),
            kill_wait: "30s",
            postgres: None,
        }
    }
}

/// The cluster, the selector and the queue; see the module docs.
pub struct BatchMarket {
    /// Queue process (dropped first: it stops before the nodes).
    pub batchd: Batchd,
    /// The selector.
    pub vexecd: Vexecd,
    /// The nodes and accountd.
    pub market: MarketCluster,
}

impl BatchMarket {
    /// Starts the nodes, accountd, vexecd and batchd; returns once the queue
    /// knows every node's processors.
    pub fn start(o: BatchOptions) -> BatchMarket {
        let channel = Channel::loopback();
        let market = MarketCluster::start(MarketOptions {
            cluster: crate::cluster::ClusterOptions {
                nodes: o.nodes,
                // Many ranks on two shared cores: a queue's heartbeat may be late.
                node_heartbeat_timeout: "10s",
                ..Default::default()
            },
            cpus: o.cpus,
            initial: Some(o.initial),
            discovery: Some(channel.table()),
            ..MarketOptions::default()
        });
        let vexecd = Vexecd::start(&market.pki, market.dir.path(), "vexecd", &channel, None);
        let dir = market.dir.path().join("batchd");
        fs::create_dir_all(&dir).expect("cannot create batchd's directory");
        let store = match &o.postgres {
            Some(conninfo) => format!("postgres = {conninfo:?}"),
            None => format!("path = {:?}", dir.join("queue.db")),
        };
        let config = format!(
            "accountd = {:?}\n[store]\n{}\n[queue]\npolicy = {:?}\ntick = {:?}\nmax_output = {}\n\
             kill_wait = {:?}\n[selectors]\nvexecd = \"{}\"\n{}{}",
            market.accountd.addr,
            store,
            o.policy,
            o.tick,
            o.max_output,
            o.kill_wait,
            vexecd.addr,
            channel.table(),
            o.extra_config,
        );
        fs::write(dir.join("batchd.toml"), config).expect("cannot write batchd's config");
        let mut batchd = Batchd {
            addr: "127.0.0.1:0".into(),
            tls: market.pki.tls_paths(Role::Service, "batchd"),
            dir,
            child: None,
            netns: None,
        };
        batchd.spawn();
        let m = BatchMarket {
            batchd,
            vexecd,
            market,
        };
        let want = o.nodes as u32 * o.cpus;
        let known = crate::wait_until(Duration::from_secs(20), || m.market_width() == want);
        assert!(
            known.is_some(),
            "the queue never learnt the {want} processors:\n{}",
            m.batchd.log()
        );
        m
    }

    /// The processors the queue knows, as its log last said.
    fn market_width(&self) -> u32 {
        self.batchd
            .log()
            .lines()
            .rev()
            .filter(|l| l.contains("market changed"))
            .filter_map(|l| l.split("procs=").nth(1))
            .filter_map(|p| p.split_whitespace().next()?.parse().ok())
            .next()
            .unwrap_or(0)
    }

    /// A job of the test user: `argv` on `width` ranks for `length_s` seconds,
    /// worth `worth`, its id `id`, marked so its processes can be found.
    pub fn spec(&self, id: u64, argv: &[&str], width: u32, length_s: u64, worth: Worth) -> JobSpec {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        JobSpec {
            id: JobId(id),
            user: TEST_USER.into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                (MARK_VAR.into(), self.market.mark.clone()),
            ],
            cwd: Some("/tmp".into()),
            width,
            length_s,
            worth,
            priority: 0,
            max_attempts: 2,
            signed_at: now,
            expires_at: now + 3600,
            array: None,
            after: Vec::new(),
            options: Default::default(),
        }
    }

    /// `spec` signed with the test user's key.
    pub fn sign(&self, spec: &JobSpec) -> SignedJob {
        let signer =
            certs::jobsign::JobSigner::load(&self.market.pki.tls_paths(Role::User, TEST_USER))
                .expect("cannot load the test user's key");
        signer.sign(spec).expect("cannot sign the job")
    }

    /// Runs `f` with a TLS connector of (`role`, `name`) on a runtime of its own.
    fn with_connector<T>(
        &self,
        role: Role,
        name: &str,
        f: impl AsyncFnOnce(&tokio_rustls::TlsConnector) -> T,
    ) -> T {
        let tls = self.market.pki.tls_paths(role, name);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let connector = certs::connector(&tls).expect("connector");
        rt.block_on(f(&connector))
    }

    /// Sends `op` to the queue as (`role`, `name`).
    pub fn call_as(&self, role: Role, name: &str, op: BatchOp) -> Result<BatchReply, ClientError> {
        self.call_at(&self.batchd, role, name, op)
    }

    /// Sends `op` to instance `batchd` of the queue as (`role`, `name`).
    pub fn call_at(
        &self,
        batchd: &Batchd,
        role: Role,
        name: &str,
        op: BatchOp,
    ) -> Result<BatchReply, ClientError> {
        let addr = batchd.addr.clone();
        self.with_connector(role, name, async |connector| {
            let mut c =
                BatchClient::connect(&addr, connector, "batchd", Duration::from_secs(10)).await?;
            c.call(op).await
        })
    }

    /// The services the selector lists (as the test user asks).
    pub fn services(&self) -> Vec<proto::select::ServiceView> {
        let (addr, name) = (self.vexecd.addr.to_string(), self.vexecd.name.clone());
        self.with_connector(Role::User, TEST_USER, async |connector| {
            let mut c = clients::selector::SelectorClient::connect(
                &addr,
                connector,
                &name,
                Duration::from_secs(5),
            )
            .await
            .expect("cannot reach vexecd");
            c.services().await.expect("services")
        })
    }

    /// Sends `op` as the test user.
    pub fn call(&self, op: BatchOp) -> Result<BatchReply, ClientError> {
        self.call_as(Role::User, TEST_USER, op)
    }

    /// Submits `spec` (signed) as the test user.
    pub fn submit(&self, spec: &JobSpec) -> Result<BatchReply, ClientError> {
        self.call(BatchOp::Submit(self.sign(spec)))
    }

    /// Job `id` as the queue shows it to its owner.
    pub fn status(&self, id: u64) -> QueueEntry {
        match self.call(BatchOp::Status(JobId(id))) {
            Ok(BatchReply::Status(e)) => e,
            other => panic!("status of job {id}: {other:?}"),
        }
    }

    /// Waits up to `limit` for job `id` to satisfy `cond`; its last entry.
    pub fn wait_for(
        &self,
        id: u64,
        limit: Duration,
        cond: impl Fn(&QueueEntry) -> bool,
    ) -> QueueEntry {
        let mut last = None;
        let done = crate::wait_until(limit, || {
            let e = self.status(id);
            let ok = cond(&e);
            last = Some(e);
            ok
        });
        let last = last.expect("asked at least once");
        assert!(
            done.is_some(),
            "job {id} never got there: {last:?}\n{}",
            self.batchd.log()
        );
        last
    }

    /// The kept output of job `id`: stdout and stderr.
    pub fn output(&self, id: u64) -> (Vec<u8>, Vec<u8>) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        loop {
            let q = proto::batch::OutputQuery {
                job: JobId(id),
                stdout_from: out.len() as u64,
                stderr_from: err.len() as u64,
            };
            match self.call(BatchOp::Output(q)) {
                Ok(BatchReply::Output(c)) => {
                    let empty = c.stdout.is_empty() && c.stderr.is_empty();
                    out.extend_from_slice(c.stdout.as_bytes());
                    err.extend_from_slice(c.stderr.as_bytes());
                    if c.complete || empty {
                        return (out, err);
                    }
                }
                other => panic!("output of job {id}: {other:?}"),
            }
        }
    }
}

/// One batchd process.
pub struct Batchd {
    /// Where it listens (the same address after a restart).
    pub addr: String,
    /// Its service certificate.
    pub tls: TlsPaths,
    dir: PathBuf,
    child: Option<Child>,
    netns: Option<String>,
}

impl Batchd {
    /// Starts an instance with the config file already written at
    /// `dir/batchd.toml`, certificate `tls`, in a host's network namespace
    /// (name and address, listening on that address) when given.
    pub fn start_in(
        dir: PathBuf,
        tls: TlsPaths,
        host: Option<(String, std::net::Ipv4Addr)>,
    ) -> Batchd {
        let mut b = Batchd {
            addr: host
                .as_ref()
                .map_or("127.0.0.1:0".into(), |(_, a)| format!("{a}:0")),
            tls,
            dir,
            child: None,
            netns: host.map(|(ns, _)| ns),
        };
        b.spawn();
        b
    }

    /// Its log.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("batchd.log")).unwrap_or_default()
    }

    /// The store file.
    pub fn store(&self) -> PathBuf {
        self.dir.join("queue.db")
    }

    /// SIGKILL: no chance to clean up.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Another instance of the same queue: the same configuration (so the same
    /// store) and certificate, its own directory `name` beside this one's.
    pub fn beside(&self, name: &str) -> Batchd {
        let dir = self.dir.with_file_name(name);
        fs::create_dir_all(&dir).expect("cannot create batchd's directory");
        fs::copy(self.dir.join("batchd.toml"), dir.join("batchd.toml"))
            .expect("cannot copy batchd's config");
        let mut b = Batchd {
            addr: "127.0.0.1:0".into(),
            tls: self.tls.clone(),
            dir,
            child: None,
            netns: None,
        };
        b.spawn();
        b
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends it `signal` (SIGSTOP to pause it, SIGCONT to resume it).
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        if let Some(pid) = self.pid() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal);
        }
    }

    /// Starts again on the same store and address.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    fn spawn(&mut self) {
        let ready = self.dir.join("ready");
        let started = crate::ready::start_until_ready(&ready, Duration::from_secs(20), || {
            let log = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join("batchd.log"))
                .expect("cannot open batchd's log");
            crate::netns::command_in(self.netns.as_deref(), bin("batchd"))
                .arg("--config")
                .arg(self.dir.join("batchd.toml"))
                .args(["--listen", &self.addr, "--ready-file"])
                .arg(&ready)
                .arg("--ca")
                .arg(&self.tls.ca)
                .arg("--cert")
                .arg(&self.tls.cert)
                .arg("--key")
                .arg(&self.tls.key)
                .env("RUST_LOG", "info")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("cannot start batchd")
        });
        let Some((child, addr)) = started else {
            panic!("batchd did not start:\n{}", self.log());
        };
        self.addr = addr;
        self.child = Some(child);
    }
}

impl Drop for Batchd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = testhost::wait::until(Duration::from_secs(5), || c.try_wait().ok().flatten());
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
