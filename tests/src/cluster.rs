//! [`Cluster`]: a real PKI, N real `rexecd` processes on loopback (each with
//! its own port, ready file and cgroup parent), and a client configuration
//! for the real `rexec` binary. Dropping it stops the daemons with SIGTERM
//! (SIGKILL if they hang), then removes whatever cgroups are left and kills
//! whatever they held.
//!
//! Clusters are serialised by a process-wide lock: the scenarios check
//! deadlines of a second or two, which two clusters sharing two cores
//! would make unreliable.

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use certs::Role;
use certs::testing::TestPki;

use crate::node::{Node, spawn_node};
use crate::procs;
use crate::rexec::Rexec;

/// The Unix user the scenarios' jobs run as (one definition for every suite).
pub const TEST_USER: &str = testhost::user::TEST_USER;

static SERIAL: Mutex<()> = Mutex::new(());
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Where the workspace's binaries are: `$REXEC_E2E_BIN_DIR` when set (for
/// example `target/release`, to measure optimised builds), else next to the
/// test executable's `deps/`.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("REXEC_E2E_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("cannot find the test executable");
    let dir = exe.parent().expect("test executable has no directory");
    if dir.ends_with("deps") {
        dir.parent().unwrap_or(dir).to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

/// The path of workspace binary `name`, which must have been built.
pub fn bin(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

/// A copy of workspace binary `name` that every user may run, for programs
/// the scenarios run as the test user on the nodes.
///
/// The build tree may sit below a directory only root can enter (a clone in
/// a `mktemp -d` folder, say), where a job running as the test user could not
/// execute it. The copy lives in `$TMPDIR/rexec-e2e-tools-<uid>/`, mode 0755,
/// replaced atomically each time, so concurrent test processes never see a
/// half-written file.
pub fn shared_bin(name: &str) -> PathBuf {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let src = bin(name);
    let uid = fs::metadata("/proc/self").map_or(0, |m| m.uid());
    let dir = std::env::temp_dir().join(format!("rexec-e2e-tools-{uid}"));
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("cannot make {} searchable: {e}", dir.display()));
    let dest = dir.join(name);
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    fs::copy(&src, &tmp).unwrap_or_else(|e| panic!("cannot copy {}: {e}", src.display()));
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", tmp.display()));
    fs::rename(&tmp, &dest).unwrap_or_else(|e| panic!("cannot install {}: {e}", dest.display()));
    dest
}

/// True when the scenarios can run here (root and a cpu controller); else fails the
/// test, or skips it under `REXEC_TESTS_ALLOW_SKIP=1`: the rule every suite shares
/// ([`testhost::can_run`]). Every scenario starts with
/// `if !can_run("name") { return; }`.
pub fn can_run(test: &str) -> bool {
    let cpu = || {
        rexecd::cgroup::detect::detect()
            .map(drop)
            .map_err(|e| e.to_string())
    };
    testhost::can_run(test, cpu)
}

/// Make sure the test user exists as every suite defines it ([`testhost::user`]).
pub fn ensure_test_user() {
    testhost::user::test_user();
}

/// Options for [`Cluster::start_with`].
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// How many nodes.
    pub nodes: usize,
    /// rexecd's `--heartbeat-timeout`.
    pub node_heartbeat_timeout: &'static str,
    /// The client's `REXEC_HEARTBEAT_TIMEOUT`.
    pub client_heartbeat_timeout: &'static str,
    /// Signals rexecd starts with ignored, as under `nohup` (a list for
    /// `env --ignore-signal`, e.g. `"HUP,USR1"`); empty for none.
    pub node_ignored_signals: &'static str,
    /// Hosts in network namespaces: node `n<i>` runs on host `i - 1`, and
    /// the client (and accountd, in a market) on the host after the last
    /// node. `None`: everything on loopback.
    pub net: Option<std::sync::Arc<crate::netns::Net>>,
}

impl ClusterOptions {
    /// The host the client and the services run on, when on a [`crate::netns::Net`].
    pub fn services_host(&self) -> Option<(String, std::net::Ipv4Addr)> {
        let net = self.net.as_ref()?;
        let h = net
            .hosts
            .get(self.nodes)
            .expect("a net needs one host more than the cluster has nodes");
        Some((h.ns.clone(), h.addr))
    }
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            nodes: 2,
            node_heartbeat_timeout: "2s",
            client_heartbeat_timeout: "2s",
            node_ignored_signals: "",
            net: None,
        }
    }
}

/// Real daemons and a real PKI; see the module docs.
pub struct Cluster {
    /// The certificate authority.
    pub pki: TestPki,
    /// Scratch directory (configs, ready files, logs).
    pub dir: tempfile::TempDir,
    /// The nodes, `n1` first.
    pub nodes: Vec<Node>,
    /// The client configuration for the test user.
    pub config: PathBuf,
    /// Options it was started with.
    pub options: ClusterOptions,
    /// A string put in the environment of every job this cluster runs
    /// (through `rexec`), to find their processes.
    pub mark: String,
    _serial: MutexGuard<'static, ()>,
}

impl Cluster {
    /// `n` nodes with default options.
    pub fn start(n: usize) -> Cluster {
        Cluster::start_with(ClusterOptions {
            nodes: n,
            ..ClusterOptions::default()
        })
    }

    /// Start a cluster.
    pub fn start_with(options: ClusterOptions) -> Cluster {
        Cluster::start_with_node_config(options, |_, _, _| None)
    }

    /// Start a cluster whose nodes read a config file: `node_config` gets the
    /// PKI, the scratch directory and a node's name before that node starts,
    /// and returns the file's text (or `None` for flags only).
    pub fn start_with_node_config(
        options: ClusterOptions,
        mut node_config: impl FnMut(&TestPki, &std::path::Path, &str) -> Option<String>,
    ) -> Cluster {
        assert!(
            testhost::is_root(),
            "a cluster needs root: begin the test with `if !can_run(NAME) {{ return; }}`, \
             so that {}=1 can skip it",
            testhost::ALLOW_SKIP_VAR
        );
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        ensure_test_user();
        procs::sweep_dead_test_parents();
        let unique = format!(
            "{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let pki = TestPki::new();
        let dir = tempfile::Builder::new()
            .prefix("rexec-e2e-")
            .tempdir()
            .expect("cannot create a temp dir");
        let rexecd = bin("rexecd");
        let mut nodes = Vec::new();
        for i in 1..=options.nodes {
            let name = format!("n{i}");
            let tls = pki.tls_paths(Role::Node, &name);
            let cgroup_parent = format!("rexec-test-{unique}-{name}");
            let ready = dir.path().join(format!("{name}.ready"));
            let host = options.net.as_ref().map(|net| {
                let h = net.host(i - 1);
                (h.ns.clone(), h.addr)
            });
            let listen = host
                .as_ref()
                .map_or("127.0.0.1:0".to_string(), |(_, addr)| format!("{addr}:0"));
            let mut args: Vec<String> = vec![
                "--name".into(),
                name.clone(),
                "--listen".into(),
                listen,
                "--ready-file".into(),
                ready.display().to_string(),
                "--cgroup-parent".into(),
                cgroup_parent.clone(),
                "--cert".into(),
                tls.cert.display().to_string(),
                "--key".into(),
                tls.key.display().to_string(),
                "--ca".into(),
                tls.ca.display().to_string(),
                "--heartbeat-timeout".into(),
                options.node_heartbeat_timeout.into(),
            ];
            if let Some(crl) = &tls.crl {
                args.extend(["--crl".into(), crl.display().to_string()]);
            }
            if let Some(text) = node_config(&pki, dir.path(), &name) {
                let path = dir.path().join(format!("{name}.toml"));
                fs::write(&path, text).expect("cannot write the node config");
                args.extend(["--config".into(), path.display().to_string()]);
            }
            let log = dir.path().join(format!("{name}.log"));
            let mut node = Node {
                name,
                addr: "127.0.0.1:0".parse().expect("address"),
                cgroup_parent,
                log,
                child: None,
                netns: host.map(|(ns, _)| ns),
                args,
                ignored_signals: options.node_ignored_signals,
            };
            spawn_node(&rexecd, &mut node, &ready);
            nodes.push(node);
        }
        let mut cluster = Cluster {
            pki,
            dir,
            nodes,
            config: PathBuf::new(),
            options,
            mark: format!("rexec-e2e-{unique}"),
            _serial: serial,
        };
        cluster.config = cluster.client_config(Role::User, TEST_USER);
        cluster
    }

    /// Write a client configuration naming every node, with the certificate
    /// of `role` `name`, and return its path.
    pub fn client_config(&self, role: Role, name: &str) -> PathBuf {
        let tls = self.pki.tls_paths(role, name);
        let mut text = format!(
            "ca = {:?}\ncert = {:?}\nkey = {:?}\nmax_rate = \"100\"\n",
            tls.ca, tls.cert, tls.key
        );
        if let Some(crl) = &tls.crl {
            text.push_str(&format!("crl = {crl:?}\n"));
        }
        text.push_str("[nodes]\n");
        for n in &self.nodes {
            text.push_str(&format!("{} = \"{}\"\n", n.name, n.addr));
        }
        let path = self.dir.path().join(format!("client-{role}-{name}.toml"));
        fs::write(&path, text).expect("cannot write the client config");
        path
    }

    /// Write a copy of the test user's client configuration in which node
    /// `name` is reached at `addr` instead, and return its path.
    pub fn client_config_via(&self, name: &str, addr: std::net::SocketAddr) -> PathBuf {
        let text = fs::read_to_string(&self.config).expect("cannot read the client config");
        let real = format!("{name} = \"{}\"", self.node(name).addr);
        let text = text.replace(&real, &format!("{name} = \"{addr}\""));
        let path = self.dir.path().join(format!("client-via-{name}.toml"));
        fs::write(&path, text).expect("cannot write the client config");
        path
    }

    /// A `rexec` command set up for this cluster and the test user.
    pub fn rexec(&self) -> Rexec {
        Rexec::new(self)
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    /// SIGKILL node `name`'s rexecd (its jobs stay behind, as after a crash).
    pub fn crash(&mut self, name: &str) {
        let node = self.node_mut(name);
        if let Some(mut child) = node.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start node `name`'s rexecd again, same address family, same cgroup parent.
    pub fn restart(&mut self, name: &str) {
        let rexecd = bin("rexecd");
        let ready = self.dir.path().join(format!("{name}.ready2"));
        let node = self.node_mut(name);
        let old_ready = node
            .args
            .iter()
            .position(|a| a == "--ready-file")
            .map(|i| i + 1);
        if let Some(i) = old_ready {
            node.args[i] = ready.display().to_string();
        }
        spawn_node(&rexecd, node, &ready);
    }

    fn node_mut(&mut self, name: &str) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    /// Job cgroup directories that exist under any node's parent, in any hierarchy.
    pub fn job_cgroups(&self) -> Vec<PathBuf> {
        self.nodes
            .iter()
            .flat_map(|n| procs::job_cgroups(&n.cgroup_parent))
            .collect()
    }

    /// Processes whose environment carries this cluster's mark, except `except`
    /// (the client, which carries it too).
    pub fn marked(&self, except: &[u32]) -> Vec<procs::Proc> {
        procs::with_env_mark(&self.mark)
            .into_iter()
            .filter(|p| !except.contains(&p.pid))
            .collect()
    }

    /// The logs of every node, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            let text = fs::read_to_string(&n.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(30).collect();
            out.push_str(&format!("--- {} ({}):\n", n.name, n.log.display()));
            for l in tail.into_iter().rev() {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(child) = &node.child {
                let pid = nix::unistd::Pid::from_raw(child.id() as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let left = deadline.saturating_duration_since(Instant::now());
                testhost::wait::until(left, || child.try_wait().ok().flatten());
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let leftovers = self.job_cgroups();
        let stray = self.marked(&[]);
        for node in &self.nodes {
            procs::remove_parent(&node.cgroup_parent);
        }
        for p in &stray {
            procs::kill(p.pid);
        }
        if !std::thread::panicking() {
            assert!(
                leftovers.is_empty(),
                "job cgroups left after every rexecd stopped: {leftovers:?}"
            );
            assert!(
                stray.is_empty(),
                "job processes left after every rexecd stopped: {stray:?}"
            );
        }
    }
}
