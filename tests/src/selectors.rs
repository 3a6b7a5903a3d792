//! Discovery on a [`Cluster`]: nodes that announce themselves on a loopback
//! multicast group (joined on 127.0.0.1, TTL 0, a group and port per test),
//! real `vexecd` selectors hearing them ([`Vexecd`]), client configurations
//! that name selectors or only the group, and a look inside a selector
//! through its own protocol ([`Vexecd::nodes`], [`Vexecd::stats`]).

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use certs::Role;
use certs::testing::TestPki;
use proto::select::{NodeView, NodesQuery, SelectorStats};

use crate::cluster::{Cluster, ClusterOptions, TEST_USER, bin};

/// Where a test's announcements travel.
#[derive(Debug, Clone)]
pub struct Channel {
    /// Cluster name.
    pub cluster: String,
    /// Multicast group.
    pub group: String,
    /// Its UDP port (one per test, so parallel tests do not hear each other).
    pub port: u16,
    /// Announcement period.
    pub period: Duration,
    /// `false`: unicast only, to these addresses.
    pub multicast: bool,
    /// Unicast peers (the selectors' `udp_listen`).
    pub unicast: Vec<SocketAddr>,
    /// The interface to send and join on (a host's own address in a
    /// [`crate::netns::Net`]).
    pub interface: std::net::Ipv4Addr,
    /// Multicast TTL.
    pub ttl: u32,
}

impl Channel {
    /// Loopback multicast on a group and port no other test uses
    /// ([`testhost::net::channel`]), announcing every 500 ms.
    pub fn loopback() -> Channel {
        let own = testhost::net::channel();
        Channel {
            cluster: "e2e".into(),
            group: own.group.to_string(),
            port: own.port,
            period: Duration::from_millis(500),
            multicast: true,
            unicast: Vec::new(),
            interface: std::net::Ipv4Addr::LOCALHOST,
            ttl: 0,
        }
    }

    /// The same channel seen from a host with address `interface`: across
    /// the bridge of a [`crate::netns::Net`], TTL 1.
    pub fn on(&self, interface: std::net::Ipv4Addr) -> Channel {
        Channel {
            interface,
            ttl: 1,
            ..self.clone()
        }
    }

    /// The `[discovery]` table.
    pub fn table(&self) -> String {
        let unicast: Vec<String> = self
            .unicast
            .iter()
            .map(|a| format!("{:?}", a.to_string()))
            .collect();
        format!(
            "[discovery]\ncluster = {:?}\nmulticast = {}\ngroup = {:?}\nport = {}\n\
             interface = \"{}\"\nttl = {}\nperiod = \"{}ms\"\nunicast = [{}]\n",
            self.cluster,
            self.multicast,
            self.group,
            self.port,
            self.interface,
            self.ttl,
            self.period.as_millis(),
            unicast.join(", ")
        )
    }
}

/// `n` nodes announcing on `channel`, each keeping its availability
/// history in the cluster's scratch directory (`history(dir, name)`: a file
/// a test may prepare before the node starts) and not looking for accountd.
pub fn announcing_cluster(n: usize, channel: &Channel) -> Cluster {
    let options = ClusterOptions {
        nodes: n,
        ..ClusterOptions::default()
    };
    Cluster::start_with_node_config(options, |_, dir, name| {
        Some(format!(
            "{}[announce]\nhistory_file = {:?}\nfind_accountd = false\n",
            channel.table(),
            history(dir, name).display().to_string()
        ))
    })
}

/// Where node `name` of a cluster in `dir` keeps its availability history.
pub fn history(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.availability"))
}

/// One real vexecd.
pub struct Vexecd {
    /// Its name (service certificate).
    pub name: String,
    /// Its TLS address.
    pub addr: SocketAddr,
    tls: certs::TlsPaths,
    netns: Option<String>,
    log: PathBuf,
    child: Option<Child>,
    args: Vec<std::ffi::OsString>,
    ready: PathBuf,
}

/// Starts vexecd `name` with `args` (in namespace `netns` when given), its log
/// in `log` (appended to when `append`); waits for its ready file.
fn spawn_vexecd(
    name: &str,
    netns: Option<&str>,
    args: &[std::ffi::OsString],
    ready: &Path,
    log: &Path,
    append: bool,
) -> (Child, SocketAddr) {
    let _ = fs::remove_file(ready);
    let file = fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(log)
        .expect("cannot create the vexecd log");
    let mut child = crate::netns::command_in(netns, bin("vexecd"))
        .args(args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("cannot start vexecd");
    let addr = testhost::wait::until(Duration::from_secs(20), || {
        if let Ok(text) = fs::read_to_string(ready)
            && let Ok(addr) = text.trim().parse::<SocketAddr>()
        {
            return Some(addr);
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "vexecd {name} exited with {status}:\n{}",
                fs::read_to_string(log).unwrap_or_default()
            );
        }
        None
    })
    .unwrap_or_else(|| panic!("vexecd {name} did not get ready"));
    (child, addr)
}

impl Vexecd {
    /// Start selector `name` hearing `channel` and, by unicast, `udp` (when
    /// given); wait until it listens.
    pub fn start(
        pki: &TestPki,
        dir: &Path,
        name: &str,
        channel: &Channel,
        udp: Option<SocketAddr>,
    ) -> Vexecd {
        Vexecd::start_on(pki, dir, name, channel, udp, None)
    }

    /// [`Vexecd::start`] with `extra` appended to its config file (for example a
    /// `[metrics]` table).
    pub fn start_with(
        pki: &TestPki,
        dir: &Path,
        name: &str,
        channel: &Channel,
        extra: &str,
    ) -> Vexecd {
        Vexecd::start_full(pki, dir, name, channel, None, None, extra)
    }

    /// [`Vexecd::start`] in a host's network namespace (name and address),
    /// listening on the host's address, when given.
    pub fn start_on(
        pki: &TestPki,
        dir: &Path,
        name: &str,
        channel: &Channel,
        udp: Option<SocketAddr>,
        host: Option<(String, std::net::Ipv4Addr)>,
    ) -> Vexecd {
        Vexecd::start_full(pki, dir, name, channel, udp, host, "")
    }

    fn start_full(
        pki: &TestPki,
        dir: &Path,
        name: &str,
        channel: &Channel,
        udp: Option<SocketAddr>,
        host: Option<(String, std::net::Ipv4Addr)>,
        extra: &str,
    ) -> Vexecd {
        let tls = pki.tls_paths(Role::Service, name);
        let config = dir.join(format!("{name}.toml"));
        fs::write(&config, format!("{}\n{extra}", channel.table()))
            .expect("cannot write the vexecd config");
        let ready = dir.join(format!("{name}.ready"));
        let _ = fs::remove_file(&ready);
        let log = dir.join(format!("{name}.log"));
        let listen = host
            .as_ref()
            .map_or("127.0.0.1:0".to_string(), |(_, a)| format!("{a}:0"));
        let mut args: Vec<std::ffi::OsString> = vec!["--config".into(), config.into()];
        args.extend(["--name", name, "--listen", &listen, "--ready-file"].map(Into::into));
        args.push(ready.clone().into());
        for (flag, path) in [
            ("--ca", &tls.ca),
            ("--cert", &tls.cert),
            ("--key", &tls.key),
        ] {
            args.extend([flag.into(), path.clone().into_os_string()]);
        }
        if let Some(crl) = &tls.crl {
            args.extend(["--crl".into(), crl.clone().into_os_string()]);
        }
        if let Some(udp) = udp {
            args.extend(["--udp-listen".into(), udp.to_string().into()]);
        }
        let netns = host.map(|(ns, _)| ns);
        let (child, addr) = spawn_vexecd(name, netns.as_deref(), &args, &ready, &log, false);
        Vexecd {
            name: name.into(),
            addr,
            tls: pki.tls_paths(Role::User, TEST_USER),
            netns,
            log,
            child: Some(child),
            args,
            ready,
        }
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Starts it again (after a kill) on the same address, with the same flags.
    pub fn restart(&mut self) {
        self.kill();
        let listen = self.addr.to_string();
        let mut args = self.args.clone();
        if let Some(i) = args.iter().position(|a| a == "--listen") {
            args[i + 1] = listen.into();
        }
        let (child, _) = spawn_vexecd(
            &self.name,
            self.netns.as_deref(),
            &args,
            &self.ready,
            &self.log,
            true,
        );
        self.child = Some(child);
    }

    /// SIGKILL it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Its log.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Ask over the selector protocol from this process (so only for a
    /// selector on loopback; in a namespace, run `rexec nodes` there).
    fn ask<T>(
        &self,
        f: impl AsyncFnOnce(
            &mut clients::selector::SelectorClient,
        ) -> Result<T, clients::selector::ClientError>,
    ) -> T {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        assert!(
            self.netns.is_none(),
            "vexecd {} runs in a network namespace this process cannot reach",
            self.name
        );
        rt.block_on(async {
            let connector = certs::connector(&self.tls).expect("connector");
            let mut c = clients::selector::SelectorClient::connect(
                &self.addr.to_string(),
                &connector,
                &self.name,
                Duration::from_secs(5),
            )
            .await
            .unwrap_or_else(|e| panic!("cannot reach vexecd {}: {e}", self.name));
            f(&mut c)
                .await
                .unwrap_or_else(|e| panic!("vexecd {}: {e}", self.name))
        })
    }

    /// The live nodes it knows, by name.
    pub fn nodes(&self) -> Vec<NodeView> {
        self.ask(async |c| c.nodes(NodesQuery::default()).await)
            .nodes
    }

    /// Its counters.
    pub fn stats(&self) -> SelectorStats {
        self.ask(async |c| c.stats().await)
    }

    /// The names of the live nodes it knows.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes().into_iter().map(|n| n.name).collect()
    }
}

impl Drop for Vexecd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A client configuration for the test user with `extra` (a `[selectors]`
/// or `[discovery]` table) instead of `[nodes]`.
pub fn client_config(cluster: &Cluster, file: &str, extra: &str) -> PathBuf {
    let tls = cluster.pki.tls_paths(Role::User, TEST_USER);
    let mut text = format!(
        "ca = {:?}\ncert = {:?}\nkey = {:?}\nmax_rate = \"100\"\n",
        tls.ca, tls.cert, tls.key
    );
    if let Some(crl) = &tls.crl {
        text.push_str(&format!("crl = {crl:?}\n"));
    }
    text.push_str(extra);
    let path = cluster.dir.path().join(file);
    fs::write(&path, text).expect("cannot write the client config");
    path
}

/// A `[selectors]` table naming `selectors` in that order.
pub fn selectors_table(selectors: &[&Vexecd]) -> String {
    let mut t = "[selectors]\n".to_string();
    for v in selectors {
        t.push_str(&format!("{} = \"{}\"\n", v.name, v.addr));
    }
    t
}

/// An announcement of a node nobody runs: `name` at `addr`, 64 idle CPUs,
/// price 0 (as attractive as a node can be), for forging and flooding.
pub fn fake_node(
    cluster: &str,
    name: &str,
    addr: SocketAddr,
    incarnation: u64,
    seq: u64,
) -> proto::announce::Announcement {
    use proto::announce::{Announcement, Kind, NodeStatus};
    Announcement {
        cluster: cluster.into(),
        name: name.into(),
        addr,
        incarnation,
        seq,
        period_ms: 500,
        kind: Kind::Node(NodeStatus {
            cpus: 64,
            price: 0,
            charging: 0,
            contended: false,
            running_jobs: 0,
            runnable: 0,
            load_milli: 0,
            idle_milli: 64_000,
            free_mem_mib: 1 << 20,
        }),
        summary: None,
    }
}
