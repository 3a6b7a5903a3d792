//! A real PostgreSQL server for tests: Debian's `postgresql` package (installed
//! by `deploy/setup-host`), `initdb` into a temporary directory, `pg_ctl start`
//! listening only on a Unix socket in that directory, named by a port from
//! [`crate::net::port`]; stopped, and the directory removed, on drop.
//!
//! PostgreSQL refuses to run as root, so a root test runs `initdb` and
//! `pg_ctl` as the `postgres` user the package creates (with `runuser`) and
//! hands it the directory; an unprivileged test runs them as itself. The
//! server trusts local connections (it listens on nothing else), so clients
//! connect as the superuser `postgres` with no password.
//!
//! [`Postgres::with_database`] is the usual start: a server with one empty
//! database, or the test fails saying how to install PostgreSQL.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where Debian's package puts the server binaries.
pub const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// A running PostgreSQL server of one test.
pub struct Postgres {
    dir: tempfile::TempDir,
    port: u16,
    as_postgres: bool,
    tls: bool,
}

/// Whether a server can be started here: the binaries are installed.
pub fn available() -> bool {
    Path::new(PG_BIN).join("pg_ctl").exists()
}

fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

/// A new temporary directory for a server, handed to user `postgres` when root
/// (then true: the server's programs run as `postgres`).
fn server_dir(prefix: &str) -> (tempfile::TempDir, bool) {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("temporary directory");
    let as_postgres = is_root();
    if as_postgres {
        let ok = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cannot hand {} to user postgres", dir.path().display());
    }
    (dir, as_postgres)
}

impl Postgres {
    /// Initialises a cluster in a new temporary directory and starts it.
    pub fn start() -> Postgres {
        Postgres::start_with(None)
    }

    /// A started server holding one empty database `name`. Without PostgreSQL
    /// installed here the test fails, saying how to install it.
    pub fn with_database(name: &str) -> Postgres {
        assert!(
            available(),
            "PostgreSQL is not installed: run deploy/setup-host"
        );
        let s = Postgres::start();
        s.create_db(name);
        s
    }

    /// Like [`Postgres::start`], also listening on `127.0.0.1` with TLS only
    /// there, with the certificate and key (PEM) given.
    pub fn start_tls(cert: &Path, key: &Path) -> Postgres {
        Postgres::start_with(Some((cert, key)))
    }

    fn start_with(tls: Option<(&Path, &Path)>) -> Postgres {
        let (dir, as_postgres) = server_dir("rexec-pg");
        if let Some((cert, key)) = tls {
            for (from, to) in [(cert, "server.crt"), (key, "server.key")] {
                let to = dir.path().join(to);
                std::fs::copy(from, &to).expect("copy the TLS files");
                let ok = Command::new("chmod")
                    .arg("0600")
                    .arg(&to)
                    .status()
                    .is_ok_and(|s| s.success());
                assert!(ok, "chmod {}", to.display());
                if as_postgres {
                    let ok = Command::new("chown")
                        .arg("postgres:postgres")
                        .arg(&to)
                        .status()
                        .is_ok_and(|s| s.success());
                    assert!(ok, "chown {}", to.display());
                }
            }
        }
        let pg = Postgres {
            dir,
            port: crate::net::port(),
            as_postgres,
            tls: tls.is_some(),
        };
        let data = pg.data();
        pg.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth=trust",
                "--no-instructions",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        );
        pg.pg_ctl_start();
        pg
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    /// The directory of the server's socket.
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// The port naming the socket.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A connection string for database `db` as the superuser.
    pub fn conninfo(&self, db: &str) -> String {
        format!(
            "host={} port={} dbname={db} user=postgres",
            self.socket_dir().display(),
            self.port
        )
    }

    /// Runs one of the server's programs (as `postgres` when root); panics
    /// with its output when it fails.
    fn run(&self, program: &str, args: &[&str]) -> Output {
        let path = Path::new(PG_BIN).join(program);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        let out = cmd
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("PGDATA")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn pg_ctl_start(&self) {
        let mut opts = format!(
            "-k {} -p {} -c max_connections=200",
            self.socket_dir().display(),
            self.port
        );
        if self.tls {
            let d = self.dir.path().display();
            opts.push_str(&format!(
                " -c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file={d}/server.crt -c ssl_key_file={d}/server.key"
            ));
        } else {
            opts.push_str(" -c listen_addresses=''");
        }
        // Extra server settings for a measurement only (for example
        // `-c shared_preload_libraries=pg_stat_statements`), never in a test.
        if let Ok(extra) = std::env::var("REXEC_PG_OPTS") {
            opts.push(' ');
            opts.push_str(&extra);
        }
        let log = self.dir.path().join("server.log").display().to_string();
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-o",
                &opts,
                "-l",
                &log,
                "-w",
                "-t",
                "120",
                "start",
            ],
        );
    }

    /// Creates an empty database.
    pub fn create_db(&self, name: &str) {
        let dir = self.socket_dir().display().to_string();
        let port = self.port.to_string();
        self.run(
            "createdb",
            &["-h", &dir, "-p", &port, "-U", "postgres", name],
        );
    }

    /// Runs SQL in database `db` with `psql`; panics on an error.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        self.try_psql(db, sql)
            .unwrap_or_else(|e| panic!("psql failed: {e}\n{sql}"))
    }

    /// Runs SQL in database `db` with `psql` (stops at the first error):
    /// what it printed, or its error.
    pub fn try_psql(&self, db: &str, sql: &str) -> Result<String, String> {
        let mut cmd = Command::new(Path::new(PG_BIN).join("psql"));
        let out = cmd
            .arg("-h")
            .arg(self.socket_dir())
            .args(["-p", &self.port.to_string(), "-U", "postgres", "-d", db])
            .args(["-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql])
            .output()
            .map_err(|e| format!("cannot run psql: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }

    /// Stops the server at once (connections are cut, nothing is lost that was committed).
    pub fn stop(&self) {
        self.run("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"]);
    }

    /// Starts the stopped server again on the same socket.
    pub fn restart(&self) {
        self.pg_ctl_start();
    }

    /// Creates login role `user` with `password` and makes the server ask
    /// it for that password (SCRAM) on the socket; every other role stays
    /// trusted.
    pub fn require_password(&self, user: &str, password: &str) {
        self.psql(
            "postgres",
            &format!("CREATE ROLE \"{user}\" LOGIN PASSWORD '{password}'"),
        );
        let hba = self.dir.path().join("data/pg_hba.conf");
        let old = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
        std::fs::write(&hba, format!("local all {user} scram-sha-256\n{old}"))
            .expect("write pg_hba.conf");
        self.run("pg_ctl", &["-D", &self.data(), "reload"]);
        // The server rereads the file when it handles the signal: wait until
        // it asks `user` for a password.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let out = Command::new(Path::new(PG_BIN).join("psql"))
                .arg("-h")
                .arg(self.socket_dir())
                .args(["-p", &self.port.to_string(), "-U", user, "-d", "postgres"])
                .args(["-w", "-qAt", "-c", "SELECT 1"])
                .output()
                .expect("run psql");
            if String::from_utf8_lossy(&out.stderr).contains("password") {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server did not start asking {user} for a password"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// A streaming standby of `primary` (`pg_basebackup -R` from it, then
    /// started on a socket of its own): read-only until [`Postgres::promote`].
    pub fn standby_of(primary: &Postgres) -> Postgres {
        let (dir, as_postgres) = server_dir("rexec-pg-standby");
        let standby = Postgres {
            dir,
            port: crate::net::port(),
            as_postgres,
            tls: false,
        };
        let (host, port) = (primary.socket_dir(), primary.port.to_string());
        let data = standby.data();
        let host = host.display().to_string();
        standby.run(
            "pg_basebackup",
            &[
                "-D", &data, "-R", "-X", "stream", "-c", "fast", "-h", &host, "-p", &port, "-U",
                "postgres",
            ],
        );
        standby.pg_ctl_start();
        standby
    }

    /// Makes every commit wait for a standby (`synchronous_standby_names = '*'`)
    /// and waits until one streams synchronously.
    pub fn require_synchronous_standby(&self) {
        self.psql(
            "postgres",
            "ALTER SYSTEM SET synchronous_standby_names = '*'",
        );
        self.psql("postgres", "SELECT pg_reload_conf()");
        let sync = crate::wait::until(std::time::Duration::from_secs(60), || {
            let s = self.try_psql("postgres", "SELECT sync_state FROM pg_stat_replication");
            s.ok().filter(|s| s.lines().any(|l| l == "sync"))
        });
        assert!(sync.is_some(), "no synchronous standby:\n{}", self.log());
    }

    /// Kills the server as a crash would (`pg_ctl stop -m immediate`).
    pub fn crash(&self) {
        self.run(
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        );
    }

    /// Promotes a standby to primary (`pg_ctl promote`, waiting until it is).
    pub fn promote(&self) {
        self.run("pg_ctl", &["-D", &self.data(), "-w", "promote"]);
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let path = Path::new(PG_BIN).join("pg_ctl");
        let data = self.data();
        let args = ["-D", data.as_str(), "-m", "immediate", "-w", "stop"];
        let _ = if self.as_postgres {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&path)
                .args(args)
                .output()
        } else {
            Command::new(&path).args(args).output()
        };
    }
}
