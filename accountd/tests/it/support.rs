//! Test support: starts the real `accountd` binary on a real SQLite file with
//! real certificates from a temporary CA, runs the real `accountctl`, and
//! opens library clients as any role. Starting and stopping accountd are async
//! and wait with [`testhost::wait`]'s async form: the tests run on
//! current-thread runtimes, whose only thread a sleep would stall.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::Duration;

use certs::testing::TestPki;
use certs::{Role, TlsPaths};
use clients::account::AccountClient;
use money::MICROS_PER_CREDIT;
use proto::account::*;
use testhost::wait::{until_async, until_async_every};
use tokio_rustls::TlsConnector;

pub const ACCOUNTD: &str = env!("CARGO_BIN_EXE_accountd");
pub const ACCOUNTCTL: &str = env!("CARGO_BIN_EXE_accountctl");
pub const C: i64 = MICROS_PER_CREDIT;

/// A running accountd with its own CA, directory and ledger.
pub struct Accountd {
    pub pki: TestPki,
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    pub addr: String,
    listen: String,
    extra: Vec<String>,
    child: Option<Child>,
    /// The PostgreSQL conninfo of the ledger, `None` for the SQLite file.
    pub postgres: Option<String>,
    /// Extra environment of the process (e.g. the test clock shift).
    pub env: Vec<(String, String)>,
}

impl Accountd {
    /// Starts on a fresh ledger (`--init`).
    pub async fn start() -> Accountd {
        Accountd::start_with(&[]).await
    }

    /// Starts on a fresh ledger with extra flags.
    pub async fn start_with(extra: &[&str]) -> Accountd {
        let pki = TestPki::new();
        pki.tls_paths(Role::Service, "accountd");
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("ledger.db");
        let mut d = Accountd {
            pki,
            db,
            dir,
            addr: String::new(),
            listen: "127.0.0.1:0".into(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
            postgres: None,
            env: Vec::new(),
        };
        d.spawn(true)
            .await
            .unwrap_or_else(|e| panic!("accountd did not start: {e}"));
        d
    }

    /// Starts on a fresh ledger in the PostgreSQL database `conninfo` (or
    /// on the ledger already there).
    pub async fn start_pg(conninfo: &str) -> Accountd {
        let pki = TestPki::new();
        let dir = tempfile::tempdir().unwrap();
        let mut d = Accountd {
            pki,
            db: dir.path().join("unused.db"),
            dir,
            addr: String::new(),
            listen: "127.0.0.1:0".into(),
            extra: Vec::new(),
            child: None,
            postgres: Some(conninfo.to_string()),
            env: Vec::new(),
        };
        d.spawn(true)
            .await
            .unwrap_or_else(|e| panic!("accountd did not start: {e}"));
        d
    }

    /// The server's flags (TLS, database, listen, ready file, extras).
    pub fn args(&self, init: bool) -> Vec<String> {
        let tls = self.pki.tls_paths(Role::Service, "accountd");
        let ledger = match &self.postgres {
            None => vec!["--database".to_string(), self.db.display().to_string()],
            Some(pg) => {
                let conf = self.dir.path().join("pg.toml");
                std::fs::write(&conf, format!("[store]\npostgres = {pg:?}\n")).unwrap();
                vec!["--config".to_string(), conf.display().to_string()]
            }
        };
        let mut a = vec!["--listen".to_string(), self.listen.clone()];
        a.extend(ledger);
        a.extend([
            "--ready-file".into(),
            self.ready_file().display().to_string(),
            "--ca".into(),
            tls.ca.display().to_string(),
            "--cert".into(),
            tls.cert.display().to_string(),
            "--key".into(),
            tls.key.display().to_string(),
        ]);
        if let Some(crl) = tls.crl {
            a.push("--crl".into());
            a.push(crl.display().to_string());
        }
        if init {
            a.push("--init".into());
        }
        a.extend(self.extra.iter().cloned());
        a
    }

    fn ready_file(&self) -> PathBuf {
        self.dir.path().join("ready")
    }

    /// Starts the process and waits for its ready file; on failure returns its stderr.
    ///
    /// A restart listens on the address the previous process had, so that
    /// clients configured with it find the new one. While nothing listened
    /// there, another process may have taken the port for a moment (an
    /// outgoing connection's local port, or a client's retry connecting to
    /// itself); a bind refused that way is tried again for a few seconds.
    pub async fn spawn(&mut self, init: bool) -> Result<(), String> {
        let this = &*self;
        let taken = std::cell::RefCell::new(None);
        let retry = !this.listen.ends_with(":0");
        let started = until_async_every(
            Duration::from_secs(10),
            Duration::from_millis(100),
            || async {
                match this.spawn_once(init).await {
                    Err(e) if retry && e.contains("Address already in use") => {
                        *taken.borrow_mut() = Some(e);
                        None
                    }
                    other => Some(other),
                }
            },
        )
        .await;
        let (child, addr) = match started {
            Some(started) => started?,
            None => return Err(taken.take().unwrap_or_default()),
        };
        self.listen = addr.clone();
        self.addr = addr;
        self.child = Some(child);
        Ok(())
    }

    /// One start: the process and the address it wrote to its ready file.
    async fn spawn_once(&self, init: bool) -> Result<(Child, String), String> {
        let _ = std::fs::remove_file(self.ready_file());
        let log = self.dir.path().join("accountd.log");
        let err = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        // Only what this process writes explains its failure.
        let earlier = err.metadata().unwrap().len() as usize;
        let mut child = Command::new(ACCOUNTD)
            .args(self.args(init))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap();
        let ready = self.ready_file();
        let outcome = until_async(Duration::from_secs(20), || {
            std::future::ready(
                if let Ok(text) = std::fs::read_to_string(&ready)
                    && text.ends_with('\n')
                {
                    Some(Ok(text.trim().to_string()))
                } else {
                    child.try_wait().unwrap().map(Err)
                },
            )
        })
        .await;
        match outcome {
            Some(Ok(addr)) => Ok((child, addr)),
            Some(Err(status)) => {
                let text = std::fs::read(&log).unwrap_or_default();
                Err(format!(
                    "{status}: {}",
                    String::from_utf8_lossy(text.get(earlier..).unwrap_or_default())
                ))
            }
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err("no ready file after 20 s".into())
            }
        }
    }

    /// SIGKILL, no chance to clean up.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// SIGTERM and wait for the exit status.
    pub async fn terminate(&mut self) -> ExitStatus {
        let mut c = self.child.take().expect("accountd is not running");
        let ok = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
        until_async(Duration::from_secs(15), || {
            std::future::ready(c.try_wait().unwrap())
        })
        .await
        .expect("accountd did not stop within 15 s of SIGTERM")
    }

    /// The running accountd's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("accountd is not running").id()
    }

    /// TLS paths for a (role, name) certificate from this CA.
    pub fn tls(&self, role: Role, name: &str) -> TlsPaths {
        self.pki.tls_paths(role, name)
    }

    /// A TLS connector for a (role, name) certificate.
    pub fn connector(&self, role: Role, name: &str) -> TlsConnector {
        certs::connector(&self.tls(role, name)).unwrap()
    }

    /// A library client connected as (role, name).
    pub async fn client(&self, role: Role, name: &str) -> AccountClient {
        AccountClient::connect(
            &self.addr,
            &self.connector(role, name),
            "accountd",
            Duration::from_secs(10),
        )
        .await
        .unwrap()
    }

    /// Runs accountctl as (role, name).
    pub fn ctl(&self, role: Role, name: &str, args: &[&str]) -> Ctl {
        ctl_with(&self.addr, &self.tls(role, name), self.dir.path(), args)
    }

    /// Runs accountctl as the admin `ops`.
    pub fn admin(&self, args: &[&str]) -> Ctl {
        self.ctl(Role::Admin, "ops", args)
    }

    /// A read-only connection to the ledger file (WAL lets it read while accountd runs).
    pub fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(&self.db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap()
    }

    /// Number of ledger entries.
    pub fn entry_count(&self) -> i64 {
        self.db()
            .query_row("SELECT COUNT(*) FROM entries", [], |r| r.get(0))
            .unwrap()
    }

    /// A balance straight from the file.
    pub fn balance(&self, user: &str) -> i64 {
        self.db()
            .query_row(
                "SELECT balance FROM accounts WHERE user = ?1",
                [user],
                |r| r.get(0),
            )
            .unwrap()
    }
}

impl Drop for Accountd {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// What accountctl did.
#[derive(Debug)]
pub struct Ctl {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ctl {
    /// Asserts success and returns stdout.
    #[track_caller]
    pub fn ok(&self) -> &str {
        assert_eq!(self.code, 0, "accountctl failed: {self:?}");
        &self.stdout
    }

    /// Asserts failure with exit status 1 and a one-line error containing `needle`.
    #[track_caller]
    pub fn fails_with(&self, needle: &str) {
        assert_eq!(self.code, 1, "expected failure: {self:?}");
        assert_eq!(
            self.stderr.lines().count(),
            1,
            "error must be one line: {:?}",
            self.stderr
        );
        assert!(self.stderr.starts_with("accountctl: "), "{:?}", self.stderr);
        assert!(
            self.stderr.contains(needle),
            "{:?} does not mention {needle:?}",
            self.stderr
        );
    }
}

/// An accountctl command isolated from the caller's environment: none of the
/// variables it reads settings from, and `home` as its home directory.
pub fn isolated_ctl(home: &Path) -> Command {
    let mut cmd = Command::new(ACCOUNTCTL);
    for v in [
        "ACCOUNTD_ADDR",
        "REXEC_CA",
        "REXEC_CERT",
        "REXEC_KEY",
        "REXEC_CRL",
        "REXEC_CONFIG",
        "XDG_CONFIG_HOME",
    ] {
        cmd.env_remove(v);
    }
    cmd.env("HOME", home);
    cmd
}

/// Runs accountctl against `addr` with `tls`, isolated from the caller's environment.
pub fn ctl_with(addr: &str, tls: &TlsPaths, home: &Path, args: &[&str]) -> Ctl {
    let mut cmd = isolated_ctl(home);
    cmd.args(["--server", addr, "--ca"])
        .arg(&tls.ca)
        .arg("--cert")
        .arg(&tls.cert)
        .arg("--key")
        .arg(&tls.key);
    if let Some(crl) = &tls.crl {
        cmd.arg("--crl").arg(crl);
    }
    let out: Output = cmd.args(args).output().unwrap();
    Ctl {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A debit from node `node`.
pub fn debit(node: &str, job: &str, seq: u64, user: &str, amount: i64) -> Debit {
    Debit {
        key: DebitKey {
            node: node.into(),
            job: job.into(),
            seq,
        },
        user: user.into(),
        amount,
        rank: (seq % 4) as u32,
        interval: MeterInterval {
            start_us: seq.saturating_mul(1_000_000),
            end_us: seq.saturating_add(1).saturating_mul(1_000_000),
        },
        cpu_us: 500_000,
    }
}

/// The error code of a failed call.
pub fn code_of(r: Result<AccountReply, clients::account::ClientError>) -> ErrorCode {
    match r {
        Err(clients::account::ClientError::Server(e)) => e.code,
        other => panic!("expected a server error, got {other:?}"),
    }
}

/// A TCP socket bound to a free loopback port and never listening: while it
/// is held, nothing else can take the port, and connections to it are refused.
pub fn unused_port() -> tokio::net::TcpSocket {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    socket
}

/// Resident memory of process `pid`, in KiB (`VmRSS` of `/proc/PID/status`).
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS")
}

/// A memory figure of process `pid` in KiB: `field` (`VmRSS`, `VmHWM`) of
/// `/proc/PID/status`.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Starts accountd from the config file `conf` alone (with `--init`) and
/// waits for the ready file `ready` the config names: the process and the
/// address it wrote.
pub fn start_from_config(conf: &Path, ready: &Path) -> (Child, String) {
    let mut child = Command::new(ACCOUNTD)
        .arg("--config")
        .arg(conf)
        .arg("--init")
        .env("RUST_LOG", "warn")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = testhost::wait::until(Duration::from_secs(20), || {
        if let Ok(t) = std::fs::read_to_string(ready)
            && t.ends_with('\n')
        {
            return Some(t.trim().to_string());
        }
        assert!(child.try_wait().unwrap().is_none(), "accountd exited");
        None
    })
    .expect("no ready file");
    (child, addr)
}

impl Accountd {
    /// A raw TLS stream to accountd as (role, name), from the loopback address
    /// `source` (any 127.x.y.z works on Linux, so tests can be several clients).
    pub async fn tls_from(
        &self,
        role: Role,
        name: &str,
        source: std::net::Ipv4Addr,
    ) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        self.try_tls_from(role, name, source)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to accountd from {source}: {e}"))
    }

    /// [`Accountd::tls_from`], or why the connection or handshake failed.
    pub async fn try_tls_from(
        &self,
        role: Role,
        name: &str,
        source: std::net::Ipv4Addr,
    ) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(std::net::SocketAddr::from((source, 0)))
            .unwrap();
        let tcp = socket
            .connect(self.addr.parse().unwrap())
            .await
            .map_err(|e| e.to_string())?;
        let (tls, _) = certs::connect(&self.connector(role, name), tcp, Role::Service, "accountd")
            .await
            .map_err(|e| e.to_string())?;
        Ok(tls)
    }
}

/// One request frame whose body is exactly `body_len` bytes: a `WhoAmI`
/// request with id `id`, then padding (bytes after the value are ignored).
pub fn padded_whoami(id: u64, body_len: usize) -> Vec<u8> {
    let mut frame =
        proto::encode_frame(&AccountRequest::new(id, AccountOp::WhoAmI), usize::MAX).unwrap();
    assert!(frame.len() - 4 <= body_len);
    frame.resize(4 + body_len, 0);
    frame[..4].copy_from_slice(&u32::try_from(body_len).unwrap().to_be_bytes());
    frame
}

/// Sends `WhoAmI` on a fresh connection and returns the answer.
pub async fn whoami(
    tls: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
) -> (
    Result<AccountReply, AccountError>,
    proto::Framed<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>,
) {
    let mut f = proto::Framed::new(tls, proto::DEFAULT_MAX_FRAME);
    f.send(&AccountRequest::new(1, AccountOp::WhoAmI))
        .await
        .unwrap();
    let r: AccountResponse = f.recv().await.unwrap().expect("closed without an answer");
    (r.result, f)
}
