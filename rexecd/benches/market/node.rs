//! The node the benchmark drives: a real `rexecd` process started with a test PKI
//! ([`Rexecd`]), node-protocol sessions to it over mutual TLS ([`Session`], over
//! `clients::node`),
//! and the unprivileged user its jobs run as.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use certs::Role;
use certs::testing::TestPki;
use proto::node::{FromNode, Launch, Signal, ToNode};
use rexecd::cgroup::{JobCgroups, ParentName};

use crate::{NODE, USER};

/// A running rexecd.
pub(crate) struct Rexecd {
    child: Child,
    /// Where it listens.
    pub(crate) addr: String,
    /// Its parent cgroup's name.
    pub(crate) parent: String,
    dir: tempfile::TempDir,
}

impl Rexecd {
    pub(crate) fn binary() -> PathBuf {
        PathBuf::from(env!("CARGO_BIN_EXE_rexecd"))
    }

    pub(crate) fn start(pki: &TestPki, tag: &str, share_control: &str, policy: &str) -> Rexecd {
        let parent = format!("rexec-bench-{}-{tag}", std::process::id());
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("rexecd.toml");
        std::fs::write(
            &config,
            format!("[market]\nshare_control = \"{share_control}\"\npolicy = \"{policy}\"\n"),
        )
        .unwrap();
        let tls = pki.tls_paths(Role::Node, NODE);
        let ready = dir.path().join("ready");
        let log = std::fs::File::create(dir.path().join("rexecd.log")).unwrap();
        let mut child = Command::new(Rexecd::binary())
            .arg("--config")
            .arg(&config)
            .args(["--name", NODE, "--cgroup-parent", &parent])
            .arg("--cert")
            .arg(&tls.cert)
            .arg("--key")
            .arg(&tls.key)
            .arg("--ca")
            .arg(&tls.ca)
            .args(["--listen", "127.0.0.1:0", "--allowed-users", USER])
            .args(["--heartbeat-timeout", "60m", "--heartbeat-interval", "10m"])
            .arg("--ready-file")
            .arg(&ready)
            .env("RUST_LOG", "rexecd=info,rexecd::market=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", Rexecd::binary().display()));
        let end = Instant::now() + Duration::from_secs(20);
        let addr = loop {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                break text.trim().to_string();
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "rexecd exited with {status}: {}",
                    std::fs::read_to_string(dir.path().join("rexecd.log")).unwrap_or_default()
                );
            }
            assert!(Instant::now() < end, "rexecd not ready");
            std::thread::sleep(Duration::from_millis(10));
        };
        Rexecd {
            child,
            addr,
            parent,
            dir,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Debits rexecd has recorded (without accountd it logs each one it would send).
    pub(crate) fn debits_logged(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("rexecd.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("charge not sent"))
            .count()
    }
}

impl Drop for Rexecd {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let end = Instant::now() + Duration::from_secs(10);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Ok(parent) = ParentName::new(&self.parent)
            && let Ok(jobs) = JobCgroups::detect(&parent)
        {
            let _ = jobs.sweep_stale();
            let _ = jobs.remove_parent();
        }
    }
}

/// The benchmark as a node sees it.
static AGENT: clients::node::Agent = clients::node::Agent {
    name: "market-bench",
    on_notice: |_, _| {},
};

/// A node-protocol session over mutual TLS, as user [`USER`] (`clients::node`).
pub(crate) struct Session {
    session: clients::node::Session,
}

impl Session {
    pub(crate) async fn open(addr: &str, pki: &TestPki) -> Session {
        let connector = certs::connector(&pki.tls_paths(Role::User, USER)).unwrap();
        let session =
            clients::node::Session::open(&AGENT, &connector, NODE, addr, Duration::from_secs(30))
                .await
                .unwrap_or_else(|e| panic!("no session with rexecd: {e}"));
        Session { session }
    }

    /// Launches `argv` bidding `bid`; returns the first pid.
    pub(crate) async fn launch(&mut self, argv: &[&str], bid: money::Bid) -> i32 {
        let request = Launch {
            job: job_id(),
            rank: 0,
            nranks: 1,
            bid,
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: None,
            terminal: None,
            options: Default::default(),
        };
        match self.session.launch(&request, false).await {
            Ok(started) => started.pid as i32,
            Err(e) => panic!("expected Started: {e}"),
        }
    }

    /// Kills the rank and waits for its end.
    pub(crate) async fn kill(&mut self) {
        let kill = ToNode::Signal(Signal::Kill);
        if self.session.framed.send(&kill).await.is_err() {
            return;
        }
        while let Ok(m) = self.session.next().await {
            if matches!(m, FromNode::Exit(_)) {
                return;
            }
        }
    }
}

/// A fresh job id.
pub(crate) fn job_id() -> proto::node::JobId {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    proto::node::JobId((u64::from(std::process::id()) << 32) ^ NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Creates the unprivileged job user if it is missing.
pub(crate) fn ensure_user() {
    if rexecd::sys::lookup_user(USER).ok().flatten().is_some() {
        return;
    }
    let _ = Command::new("useradd")
        .args(["--system", "--user-group", "--no-create-home"])
        .args([
            "--home-dir",
            "/var/lib/rexectest",
            "--shell",
            "/bin/sh",
            USER,
        ])
        .status();
}
