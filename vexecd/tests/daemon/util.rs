//! The harness: a shared test PKI, the real `vexecd` binary ([`Vexecd`])
//! started from a config file of the test's own (loopback multicast on a
//! group and port of its own, TTL 0), fake nodes' announcements sent by
//! multicast or plain unicast, and clients over real mutual TLS.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use certs::Role;
use certs::testing::TestPki;
use clients::selector::SelectorClient;
use discovery::config::DiscoveryConfig;
use discovery::net::Sender;
use discovery::profile::summary::Summary;
use proto::announce::{Announcement, DEFAULT_CLUSTER, Kind, NodeStatus};
use proto::select::{NodeList, NodesQuery, SelectorStats};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};
use testhost::wait::until;
use tokio_rustls::TlsConnector;

/// The name in every test selector's certificate.
pub const SELECTOR: &str = "vexecd";
/// The user every client authenticates as.
pub const USER: &str = "alice";
/// How long a test waits for anything that should happen promptly.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// The PKI every test shares.
pub fn pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(TestPki::new)
}

/// A connector presenting a certificate of `role` `name` from the test PKI.
pub fn connector(role: Role, name: &str) -> TlsConnector {
    pki().connector(role, name).unwrap()
}

/// The loopback group settings of a test: a group and port no other test
/// on this machine uses ([`testhost::net::channel`]), interface 127.0.0.1,
/// TTL 0; vexecd announces (and expires) every 500 ms.
pub fn loopback() -> DiscoveryConfig {
    let channel = testhost::net::channel();
    DiscoveryConfig {
        group: channel.group,
        port: channel.port,
        interface: Ipv4Addr::LOCALHOST,
        ttl: 0,
        period: Duration::from_millis(500),
        ..DiscoveryConfig::default()
    }
}

/// How to start one vexecd.
pub struct Spec {
    /// The `[discovery]` table's settings (cluster, group, port, ...).
    pub discovery: DiscoveryConfig,
    /// Listen for unicast announcements on a free loopback port.
    pub udp: bool,
    /// The `window_periods` key.
    pub window_periods: u32,
    /// Extra top-level keys.
    pub extra: String,
}

impl Spec {
    /// Multicast on the test's group, a unicast port too, window 3.
    pub fn new(discovery: DiscoveryConfig) -> Spec {
        Spec {
            discovery,
            udp: true,
            window_periods: 3,
            extra: String::new(),
        }
    }

    /// The config file's text.
    pub fn toml(&self) -> String {
        let tls = pki().tls_paths(Role::Service, SELECTOR);
        let d = &self.discovery;
        let unicast: Vec<String> = d.unicast.iter().map(|a| format!("\"{a}\"")).collect();
        let mut text = format!(
            "name = \"{SELECTOR}\"\nlisten = \"127.0.0.1:0\"\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\ncrl = \"{}\"\nwindow_periods = {}\n",
            tls.ca.display(),
            tls.cert.display(),
            tls.key.display(),
            tls.crl.unwrap().display(),
            self.window_periods,
        );
        if self.udp {
            text.push_str("udp_listen = \"127.0.0.1:0\"\n");
        }
        text.push_str(&self.extra);
        text.push_str(&format!(
            "\n[discovery]\ncluster = \"{}\"\nmulticast = {}\ngroup = \"{}\"\nport = {}\ninterface = \"{}\"\nttl = {}\nperiod = \"{}ms\"\nunicast = [{}]\n",
            d.cluster,
            d.multicast,
            d.group,
            d.port,
            d.interface,
            d.ttl,
            d.period.as_millis(),
            unicast.join(", "),
        ));
        text
    }
}

/// A running vexecd, stopped (SIGTERM, then SIGKILL) on drop.
pub struct Vexecd {
    child: Option<Child>,
    /// Its TLS address.
    pub addr: String,
    /// Its unicast announcement address, when it has one.
    pub udp: Option<SocketAddr>,
    dir: tempfile::TempDir,
}

impl Vexecd {
    /// Start vexecd from `spec` and wait until it listens.
    pub fn start(spec: &Spec) -> Vexecd {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("vexecd.toml");
        std::fs::write(&config, spec.toml()).unwrap();
        let ready = dir.path().join("ready");
        let mut child = spawn(&config, &ready, &dir.path().join("vexecd.log"));
        let ready = until(PATIENCE, || match std::fs::read_to_string(&ready) {
            Ok(text) => Some(Ok(text.trim().to_string())),
            Err(_) => child.try_wait().unwrap().map(Err),
        });
        let mut d = match ready {
            Some(Ok(addr)) => Vexecd {
                child: None,
                addr,
                udp: None,
                dir,
            },
            Some(Err(status)) => panic!(
                "vexecd exited early with {status}; log:\n{}",
                std::fs::read_to_string(dir.path().join("vexecd.log")).unwrap_or_default()
            ),
            None => panic!("vexecd not ready"),
        };
        d.child = Some(child);
        if spec.udp {
            // The startup line names the unicast port the kernel gave.
            let log = d.log();
            let port = log
                .split("unicast on ")
                .nth(1)
                .and_then(|rest| rest.split([' ', ';', ')']).next())
                .and_then(|a| a.parse::<SocketAddr>().ok())
                .unwrap_or_else(|| panic!("no unicast address in the startup line:\n{log}"));
            d.udp = Some(port);
        }
        d
    }

    /// Everything vexecd logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("vexecd.log")).unwrap_or_default()
    }

    /// True while the process runs.
    pub fn alive(&mut self) -> bool {
        self.child.as_mut().unwrap().try_wait().unwrap().is_none()
    }

    /// A client authenticated as user [`USER`].
    pub async fn client(&self) -> SelectorClient {
        self.client_as(&connector(Role::User, USER)).await
    }

    /// A client with `connector`.
    pub async fn client_as(&self, connector: &TlsConnector) -> SelectorClient {
        SelectorClient::connect(&self.addr, connector, SELECTOR, PATIENCE)
            .await
            .unwrap_or_else(|e| panic!("cannot connect: {e}; log:\n{}", self.log()))
    }

    /// Send SIGTERM and wait for the exit.
    pub fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        match until(PATIENCE, || child.try_wait().unwrap()) {
            Some(status) => status,
            None => {
                let _ = child.kill();
                child.wait().unwrap()
            }
        }
    }
}

impl Drop for Vexecd {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.stop();
        }
    }
}

fn spawn(config: &Path, ready: &Path, log: &PathBuf) -> Child {
    let log = std::fs::File::create(log).unwrap();
    Command::new(env!("CARGO_BIN_EXE_vexecd"))
        .arg("--config")
        .arg(config)
        .arg("--ready-file")
        .arg(ready)
        .env(
            "RUST_LOG",
            std::env::var("VEXECD_TEST_LOG").unwrap_or_else(|_| "vexecd=debug".into()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// Run the vexecd binary with a config file holding `toml` and no ready
/// file; return its exit status and what it printed on stderr.
pub fn run_to_exit(toml: &str) -> (ExitStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("vexecd.toml");
    std::fs::write(&config, toml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vexecd"))
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A node's announcement (incarnation 1, seq 0, period `period_ms`).
pub fn node(name: &str, port: u16, price: i64, period_ms: u32) -> Announcement {
    Announcement {
        cluster: DEFAULT_CLUSTER.into(),
        name: name.into(),
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        incarnation: 1,
        seq: 0,
        period_ms,
        kind: Kind::Node(NodeStatus {
            cpus: 4,
            price,
            charging: 0,
            contended: false,
            running_jobs: 1,
            runnable: 1,
            load_milli: 1000,
            idle_milli: 3000,
            free_mem_mib: 4096,
        }),
        summary: None,
    }
}

/// The wire form of an availability summary: busy `busy` all week.
pub fn summary(busy: f64) -> Vec<u8> {
    Summary::from_busy(&vec![busy; 1008], 1.0).encode()
}

/// Send `bytes` to `to` from a fresh socket.
pub fn send_to(to: SocketAddr, bytes: &[u8]) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.send_to(bytes, to).unwrap();
}

/// Send `bytes` on the test's group (loopback, TTL 0) and to its unicast
/// peers, as a node's announcer does.
pub async fn multicast(cfg: &DiscoveryConfig, bytes: &[u8]) {
    let report = Sender::new(cfg).unwrap().send(bytes).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
}

/// Poll `check` (async) until it holds or [`PATIENCE`] passes
/// ([`testhost::wait::eventually_async`]).
pub async fn eventually<F, Fut>(check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    testhost::wait::eventually_async(PATIENCE, check).await
}

/// Names in a listing.
pub fn names(list: &NodeList) -> Vec<String> {
    list.nodes.iter().map(|n| n.name.clone()).collect()
}

/// The listing through a fresh connection.
pub async fn nodes(d: &Vexecd, expected_cpu_ms: Option<u64>) -> NodeList {
    let mut c = d.client().await;
    c.nodes(NodesQuery { expected_cpu_ms }).await.unwrap()
}

/// The counters through a fresh connection.
pub async fn stats(d: &Vexecd) -> SelectorStats {
    d.client().await.stats().await.unwrap()
}

fn roots(ca: &Path) -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    Arc::new(roots)
}

/// A client config trusting `ca` and presenting `cert`/`key` (or nothing),
/// without the checks `certs::client_config` makes on its own certificate.
pub fn raw_connector(ca: &Path, ident: Option<(&Path, &Path)>) -> TlsConnector {
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots(ca));
    let config = match ident {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_file_iter(cert)
                    .unwrap()
                    .map(Result::unwrap)
                    .collect(),
                PrivateKeyDer::from_pem_file(key).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    TlsConnector::from(Arc::new(config))
}
