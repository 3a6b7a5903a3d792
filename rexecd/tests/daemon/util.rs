//! The harness of the daemon tests: a shared test PKI, the real `rexecd` binary started
//! with a unique cgroup parent and a ready file (and stopped, and its cgroups swept, on
//! drop), a raw protocol client over real mutual TLS, and checks on processes and job
//! cgroups.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use certs::Role;
use certs::testing::TestPki;
use proto::Framed;
use proto::node::{Chunk, ExitStatus, FromNode, Hello, JobId, Launch, Notice, Started, ToNode};
use rexecd::cgroup::{Hierarchy, JobCgroups, ParentName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// The unprivileged Unix user jobs run as (created by the kernel tests' helper too).
pub const USER: &str = "rexectest";
/// The node name of every test daemon.
pub const NODE: &str = "n1";

/// How long a test waits for anything that should happen promptly.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// True when these tests can run here (root and a cpu controller); else says why.
pub fn can_run(test: &str) -> bool {
    if !rexecd::sys::effective_user().is_root() {
        eprintln!("skipping {test}: needs root");
        return false;
    }
    if let Err(e) = rexecd::cgroup::detect::detect() {
        eprintln!("skipping {test}: {e}");
        return false;
    }
    ensure_user();
    true
}

/// Creates the test user if it is missing.
fn ensure_user() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        if rexecd::sys::lookup_user(USER).unwrap().is_none() {
            let out = Command::new("useradd")
                .args(["--system", "--user-group", "--no-create-home"])
                .args([
                    "--home-dir",
                    "/var/lib/rexectest",
                    "--shell",
                    "/bin/sh",
                    USER,
                ])
                .output()
                .unwrap();
            assert!(
                out.status.success() || rexecd::sys::lookup_user(USER).unwrap().is_some(),
                "useradd: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    });
}

/// The PKI every test shares.
pub fn pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(TestPki::new)
}

/// A fresh job id.
pub fn job_id() -> JobId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    JobId(
        (u64::from(std::process::id()) << 40)
            ^ (u64::from(nanos) << 8)
            ^ NEXT.fetch_add(1, Ordering::Relaxed),
    )
}

/// A launch of `argv` as rank 0 of 1, with a plain PATH.
pub fn launch(argv: &[&str]) -> Launch {
    Launch {
        job: job_id(),
        rank: 0,
        nranks: 1,
        bid: 0,
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: None,
        terminal: None,
    }
}

/// A running `rexecd` under test.
pub struct Daemon {
    child: Option<Child>,
    pub addr: String,
    pub parent: String,
    dir: tempfile::TempDir,
    args: Vec<String>,
}

impl Daemon {
    /// Starts rexecd with a parent cgroup unique to `tag` and the extra `args`.
    pub fn start(tag: &str, args: &[&str]) -> Daemon {
        let parent = format!("rexecd-test-{}-{tag}", std::process::id());
        Daemon::start_with_parent(parent, args)
    }

    /// Starts rexecd on a given parent cgroup.
    pub fn start_with_parent(parent: String, args: &[&str]) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let mut d = Daemon {
            child: None,
            addr: String::new(),
            parent,
            dir,
            args: args.iter().map(|s| s.to_string()).collect(),
        };
        d.spawn();
        d
    }

    fn spawn(&mut self) {
        let tls = pki().tls_paths(Role::Node, NODE);
        let ready = self.dir.path().join("ready");
        let _ = std::fs::remove_file(&ready);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_rexecd"))
            .args(["--name", NODE, "--listen", "127.0.0.1:0"])
            .arg("--ready-file")
            .arg(&ready)
            .arg("--cert")
            .arg(&tls.cert)
            .arg("--key")
            .arg(&tls.key)
            .arg("--ca")
            .arg(&tls.ca)
            .args(["--cgroup-parent", &self.parent])
            .args(&self.args)
            .env("RUST_LOG", "rexecd=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let end = Instant::now() + PATIENCE;
        loop {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                self.addr = text.trim().to_string();
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("rexecd exited early with {status}; log:\n{}", self.log());
            }
            assert!(
                Instant::now() < end,
                "rexecd not ready; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("rexecd.log")
    }

    /// Everything rexecd logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The daemon's pid.
    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// Sends `signal` to the daemon.
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), signal).unwrap();
    }

    /// Waits for the daemon to exit and returns its status.
    pub fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let child = self.child.as_mut().unwrap();
        let end = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < end,
                "rexecd did not exit; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts the binary again on the same parent cgroup (after a crash).
    pub fn restart(&mut self) {
        self.spawn();
    }

    /// Job cgroup directories currently under this daemon's parent.
    pub fn job_cgroups(&self) -> Vec<String> {
        job_dirs(&self.parent)
    }

    /// Opens a client session as `role` `name` and completes Hello/Welcome.
    pub async fn client(&self, role: Role, name: &str) -> Client {
        let mut c = Client::connect(&self.addr, role, name).await;
        match c
            .recv_after(ToNode::Hello(Hello::new("daemon-tests")))
            .await
        {
            Some(FromNode::Welcome(w)) => assert_eq!(w.node, NODE),
            other => panic!("expected Welcome, got {other:?}"),
        }
        c
    }

    /// A client session of the test user.
    pub async fn user(&self) -> Client {
        self.client(Role::User, USER).await
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGTERM,
                );
                let end = Instant::now() + PATIENCE;
                while matches!(child.try_wait(), Ok(None)) && Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        // Whatever happened in the test, leave no cgroup behind.
        if let Ok(parent) = ParentName::new(&self.parent) {
            if cpu_dir(&self.parent).is_some_and(|d| d.exists()) {
                if let Ok(jobs) = JobCgroups::detect(&parent) {
                    let _ = jobs.sweep_stale();
                    let _ = jobs.remove_parent();
                }
            }
        }
    }
}

/// The parent's directory in the hierarchy holding `cpu`.
pub fn cpu_dir(parent: &str) -> Option<PathBuf> {
    match rexecd::cgroup::detect::detect().ok()? {
        Hierarchy::V1(mounts) => Some(mounts.cpu.join(parent)),
        Hierarchy::V2 { root } => Some(root.join(parent)),
    }
}

/// Names of the `job-*` directories under a parent (none when it does not exist).
pub fn job_dirs(parent: &str) -> Vec<String> {
    let Some(dir) = cpu_dir(parent) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("job-"))
        .collect();
    out.sort();
    out
}

/// Polls `check` until it holds or `limit` passes; returns whether it held.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True once `pid` is gone or a zombie.
pub fn is_dead(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let state = rexecd::cgroup::procstat::stat_state(&stat);
    matches!(state, None | Some('Z') | Some('X'))
}

/// The scheduler state letter of `pid`, if it exists.
pub fn state_of(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    rexecd::cgroup::procstat::stat_state(&stat)
}

/// The user id `pid` runs as.
pub fn uid_of(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A raw protocol client over real mutual TLS.
pub struct Client {
    pub framed: Framed<TlsStream<TcpStream>>,
}

/// What a job session delivered up to its end.
#[derive(Debug, Default)]
pub struct Outcome {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit: Option<proto::node::Exit>,
    pub error: Option<proto::node::ErrorReply>,
    pub notices: Vec<Notice>,
}

impl Outcome {
    /// The exit status; panics with everything received when there was none.
    pub fn status(&self) -> ExitStatus {
        self.exit
            .as_ref()
            .unwrap_or_else(|| panic!("no Exit received: {self:?}"))
            .status
    }
}

impl Client {
    /// TCP and TLS to the daemon, checking its certificate names node `n1`.
    pub async fn connect(addr: &str, role: Role, name: &str) -> Client {
        let tls = pki().tls_paths(role, name);
        let connector = certs::connector(&tls).unwrap();
        let tcp = TcpStream::connect(addr).await.unwrap();
        // Without it, the TLS Finished and the first frame meet Nagle and delayed ACKs (40 ms).
        tcp.set_nodelay(true).unwrap();
        let (stream, _) = certs::connect(&connector, tcp, Role::Node, NODE)
            .await
            .unwrap();
        Client {
            framed: Framed::new(stream, proto::DEFAULT_MAX_FRAME),
        }
    }

    /// Sends one message.
    pub async fn send(&mut self, msg: ToNode) {
        self.framed.send(&msg).await.unwrap();
    }

    /// The next message other than a heartbeat (`None` at end of stream or on a
    /// connection error).
    pub async fn recv(&mut self) -> Option<FromNode> {
        loop {
            let got = tokio::time::timeout(PATIENCE, self.framed.recv::<FromNode>())
                .await
                .expect("no message from rexecd in time");
            match got {
                Ok(Some(FromNode::Heartbeat(_))) => continue,
                Ok(other) => return other,
                Err(_) => return None,
            }
        }
    }

    /// Sends `msg` and returns the answer.
    pub async fn recv_after(&mut self, msg: ToNode) -> Option<FromNode> {
        self.send(msg).await;
        self.recv().await
    }

    /// Launches and expects `Started`.
    pub async fn start(&mut self, request: Launch) -> Started {
        match self.recv_after(ToNode::Launch(request)).await {
            Some(FromNode::Started(s)) => s,
            other => panic!("expected Started, got {other:?}"),
        }
    }

    /// Reads stdout chunks until `needle` has appeared; returns what was read.
    pub async fn read_until(&mut self, needle: &str) -> String {
        let mut seen = Vec::new();
        while !String::from_utf8_lossy(&seen).contains(needle) {
            match self.recv().await {
                Some(FromNode::Stdout(Chunk(bytes))) => seen.extend(bytes),
                Some(FromNode::Stderr(_) | FromNode::Notice(_)) => {}
                other => panic!(
                    "expected output {needle:?}, got {other:?} after {:?}",
                    String::from_utf8_lossy(&seen)
                ),
            }
        }
        String::from_utf8_lossy(&seen).into_owned()
    }

    /// Reads everything up to `Exit` (or an error, or the end of the stream).
    pub async fn outcome(&mut self) -> Outcome {
        let mut out = Outcome::default();
        loop {
            match self.recv().await {
                Some(FromNode::Stdout(c)) => out.stdout.extend(c.0),
                Some(FromNode::Stderr(c)) => out.stderr.extend(c.0),
                Some(FromNode::Notice(n)) => out.notices.push(n),
                Some(FromNode::Exit(e)) => {
                    out.exit = Some(e);
                    // Exit is the last message: the node closes the connection after it.
                    assert!(self.recv().await.is_none(), "message after Exit");
                    return out;
                }
                Some(FromNode::Error(e)) => {
                    out.error = Some(e);
                    return out;
                }
                None => return out,
                Some(other) => panic!("unexpected message {other:?}"),
            }
        }
    }

    /// Launches `request` and expects an `Error` answer.
    pub async fn refused(&mut self, request: Launch) -> proto::node::ErrorReply {
        match self.recv_after(ToNode::Launch(request)).await {
            Some(FromNode::Error(e)) => {
                assert!(
                    self.recv().await.is_none(),
                    "session stayed open after Error"
                );
                e
            }
            other => panic!("expected Error, got {other:?}"),
        }
    }
}

/// Runs `argv` as the test user to the end.
pub async fn run(daemon: &Daemon, request: Launch) -> Outcome {
    let mut c = daemon.user().await;
    c.start(request).await;
    c.outcome().await
}

/// Checks that nothing of a job is left: the pids are dead and no job cgroup remains.
pub fn assert_nothing_left(daemon: &Daemon, pids: &[i32]) {
    for &pid in pids {
        assert!(
            eventually(PATIENCE, || is_dead(pid)),
            "process {pid} survived; log:\n{}",
            daemon.log()
        );
    }
    assert!(
        eventually(PATIENCE, || daemon.job_cgroups().is_empty()),
        "job cgroups left: {:?}; log:\n{}",
        daemon.job_cgroups(),
        daemon.log()
    );
}
