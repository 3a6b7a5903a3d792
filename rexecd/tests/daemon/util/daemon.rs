//! [`Daemon`]: the real `rexecd` binary under test.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use testhost::wait::until;

use certs::Role;
use proto::node::{FromNode, Hello, ToNode};
use rexecd::cgroup::{JobCgroups, ParentName};

use super::{Client, NODE, PATIENCE, USER, cpu_dir, eventually, job_dirs, pki};

/// A running `rexecd` under test.
pub struct Daemon {
    child: Option<Child>,
    pub addr: String,
    pub parent: String,
    dir: tempfile::TempDir,
    config_dir: Option<tempfile::TempDir>,
    args: Vec<String>,
}

impl Daemon {
    /// Starts rexecd with a parent cgroup unique to `tag`, its settings as flags, and
    /// the extra `args`.
    pub fn start(tag: &str, args: &[&str]) -> Daemon {
        let parent = format!("rexecd-test-{}-{tag}", std::process::id());
        let tls = pki().tls_paths(Role::Node, NODE);
        let mut all: Vec<String> = ["--name", NODE, "--cgroup-parent", &parent]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for (flag, path) in [
            ("--cert", &tls.cert),
            ("--key", &tls.key),
            ("--ca", &tls.ca),
        ] {
            all.push(flag.to_string());
            all.push(path.display().to_string());
        }
        all.extend(args.iter().map(|s| s.to_string()));
        Daemon::launch(parent, all)
    }

    /// Starts rexecd from a config file holding `toml` (and `--listen`/`--ready-file`
    /// flags only); `parent` must match the file's `cgroup_parent`.
    pub fn start_with_config(parent: String, toml: &str) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rexecd.toml");
        std::fs::write(&path, toml).unwrap();
        let args = vec!["--config".to_string(), path.display().to_string()];
        let mut d = Daemon::launch(parent, args);
        d.config_dir = Some(dir);
        d
    }

    fn launch(parent: String, args: Vec<String>) -> Daemon {
        let mut d = Daemon {
            child: None,
            addr: String::new(),
            parent,
            dir: tempfile::tempdir().unwrap(),
            config_dir: None,
            args,
        };
        d.spawn();
        d
    }

    fn spawn(&mut self) {
        let ready = self.dir.path().join("ready");
        let _ = std::fs::remove_file(&ready);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_rexecd"))
            .args(["--listen", "127.0.0.1:0"])
            .arg("--ready-file")
            .arg(&ready)
            .args(&self.args)
            .env(
                "RUST_LOG",
                std::env::var("REXECD_TEST_LOG").unwrap_or_else(|_| "rexecd=debug".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let child = self.child.as_mut().unwrap();
        let ready = until(PATIENCE, || match std::fs::read_to_string(&ready) {
            Ok(text) => Some(Ok(text.trim().to_string())),
            Err(_) => child.try_wait().unwrap().map(Err),
        });
        match ready {
            Some(Ok(addr)) => self.addr = addr,
            Some(Err(status)) => panic!("rexecd exited early with {status}; log:\n{}", self.log()),
            None => panic!("rexecd not ready; log:\n{}", self.log()),
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("rexecd.log")
    }

    /// Everything rexecd logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The first complete line rexecd has logged that satisfies `wanted`, waiting for
    /// it up to `limit` (rexecd may write a line after the effect a test saw); panics
    /// with the log when none came. A line still being written (no newline yet) is not
    /// looked at.
    pub fn wait_for_log_line(
        &self,
        limit: Duration,
        mut wanted: impl FnMut(&str) -> bool,
    ) -> String {
        let mut found = None;
        let seen = eventually(limit, || {
            found = self
                .log()
                .split_inclusive('\n')
                .filter_map(|l| l.strip_suffix('\n'))
                .find(|l| wanted(l))
                .map(str::to_string);
            found.is_some()
        });
        assert!(
            seen,
            "no such line logged within {limit:?}; log:\n{}",
            self.log()
        );
        found.unwrap_or_default()
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
        match until(limit, || child.try_wait().unwrap()) {
            Some(status) => status,
            None => panic!("rexecd did not exit; log:\n{}", self.log()),
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

    /// A client session of the test user, or `None` when the daemon closed the
    /// connection before the TLS handshake or the `Welcome` (e.g. at its connection
    /// limit).
    pub async fn try_user(&self) -> Option<Client> {
        let mut c = Client::try_connect(&self.addr, Role::User, USER).await?;
        c.framed
            .send(&ToNode::Hello(Hello::new("daemon-tests")))
            .await
            .ok()?;
        match c.recv().await? {
            FromNode::Welcome(w) => assert_eq!(w.node, NODE),
            other => panic!("expected Welcome, got {other:?}"),
        }
        Some(c)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut()
            && matches!(child.try_wait(), Ok(None))
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            until(PATIENCE, || {
                (!matches!(child.try_wait(), Ok(None))).then_some(())
            });
            let _ = child.kill();
            // Bounded too: a daemon stuck in the kernel (uninterruptible sleep) cannot
            // be killed, and waiting for it would hang the test with its panic unsaid.
            if until(PATIENCE, || child.try_wait().ok().flatten()).is_none() {
                eprintln!(
                    "rexecd (pid {}) survived SIGKILL for {PATIENCE:?}; its log:\n{}",
                    child.id(),
                    std::fs::read_to_string(self.dir.path().join("rexecd.log")).unwrap_or_default()
                );
                return;
            }
        }
        // A diagnosis may want the daemon's log after the test: REXECD_TEST_KEEP_LOG=DIR
        // appends it to DIR/<parent>.log (with REXECD_TEST_LOG choosing what it holds).
        if let Some(dir) = std::env::var_os("REXECD_TEST_KEEP_LOG") {
            let kept = std::path::Path::new(&dir).join(format!("{}.log", self.parent));
            if let (Ok(text), Ok(mut out)) = (
                std::fs::read(self.log_path()),
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&kept),
            ) {
                use std::io::Write;
                let _ = out.write_all(&text);
            }
        }
        // Whatever happened in the test, leave no cgroup behind.
        if let Ok(parent) = ParentName::new(&self.parent)
            && cpu_dir(&self.parent).is_some_and(|d| d.exists())
            && let Ok(jobs) = JobCgroups::detect(&parent)
        {
            let _ = jobs.sweep_stale();
            let _ = jobs.remove_parent();
        }
    }
}
