//! A real `accountd` on loopback (or in a network namespace) with certificates
//! from the cluster's CA and a SQLite ledger in its own temp dir (or the
//! PostgreSQL of its config), killed and restarted as a test says; and what an
//! admin reads of it through the real `accountctl`: balances, and history as
//! [`Entry`] rows.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use certs::testing::TestPki;
use certs::{Role, TlsPaths};

use crate::cluster::bin;

/// A node's debit of `1_000 + seq` micro-credits from `user`, keyed `(node, job,
/// seq)`, one microsecond of CPU: the stream the ledger's crash and failover tests
/// send.
pub fn stream_debit(node: &str, job: &str, user: &str, seq: u64) -> ledger_client::journal::Charge {
    use proto::account::{Debit, DebitKey, MeterInterval};
    ledger_client::journal::Charge::Debit(Debit {
        key: DebitKey {
            node: node.into(),
            job: job.into(),
            seq,
        },
        user: user.into(),
        amount: 1_000 + seq as i64,
        rank: 0,
        interval: MeterInterval {
            start_us: seq,
            end_us: seq + 1,
        },
        cpu_us: 1,
    })
}

/// A real accountd on loopback with certificates from the cluster's CA.
pub struct Accountd {
    /// Where it listens (the same address after a restart).
    pub addr: String,
    dir: tempfile::TempDir,
    service: TlsPaths,
    admin: TlsPaths,
    child: Option<Child>,
    netns: Option<String>,
    config: String,
}

impl Accountd {
    /// Start on a fresh ledger.
    pub fn start(pki: &TestPki) -> Accountd {
        Accountd::start_on(pki, None, String::new())
    }

    /// Start on a fresh ledger with a config file holding `config` (nothing when
    /// empty; the flags set everything else).
    pub fn start_with_config(pki: &TestPki, config: String) -> Accountd {
        Accountd::start_on(pki, None, config)
    }

    /// Start on a fresh ledger, in a host's network namespace (name and
    /// address) when given, with a config file holding `config` (nothing
    /// when empty).
    pub fn start_on(
        pki: &TestPki,
        host: Option<(String, std::net::Ipv4Addr)>,
        config: String,
    ) -> Accountd {
        let mut d = Accountd {
            addr: host
                .as_ref()
                .map_or("127.0.0.1:0".into(), |(_, a)| format!("{a}:0")),
            netns: host.map(|(ns, _)| ns),
            dir: tempfile::Builder::new()
                .prefix("rexec-e2e-accountd-")
                .tempdir()
                .expect("cannot create a temp dir"),
            service: pki.tls_paths(Role::Service, "accountd"),
            admin: pki.tls_paths(Role::Admin, "ops"),
            child: None,
            config,
        };
        d.spawn(true);
        d
    }

    /// The SQLite ledger file (when no PostgreSQL is configured), for reading
    /// what accountd recorded behind its back.
    pub fn ledger(&self) -> PathBuf {
        self.dir.path().join("ledger.db")
    }

    /// accountd's log.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("accountd.log")
    }

    /// SIGKILL, no chance to clean up.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Start again on the same ledger and address.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn(false);
    }

    /// Start the process and wait for its ready file. A restart listens on
    /// the old address; a bind refused because something held the port for
    /// a moment is tried again for a while.
    fn spawn(&mut self, init: bool) {
        let ready = self.dir.path().join("ready");
        let started = crate::ready::start_until_ready(&ready, Duration::from_secs(20), || {
            let log = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.log())
                .expect("cannot open the accountd log");
            let mut cmd = crate::netns::command_in(self.netns.as_deref(), bin("accountd"));
            cmd.args(["--listen", &self.addr]);
            // A ledger in PostgreSQL (`[store]` in the config) has no file.
            if !self.config.contains("[store]") {
                cmd.arg("--database").arg(self.dir.path().join("ledger.db"));
            }
            cmd.arg("--ready-file")
                .arg(&ready)
                .arg("--ca")
                .arg(&self.service.ca)
                .arg("--cert")
                .arg(&self.service.cert)
                .arg("--key")
                .arg(&self.service.key);
            if let Some(crl) = &self.service.crl {
                cmd.arg("--crl").arg(crl);
            }
            if init {
                cmd.arg("--init");
            }
            if !self.config.is_empty() {
                let path = self.dir.path().join("accountd.toml");
                fs::write(&path, &self.config).expect("cannot write accountd's config");
                cmd.arg("--config").arg(path);
            }
            cmd.env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("cannot start accountd")
        });
        let Some((child, addr)) = started else {
            panic!(
                "accountd did not start:\n{}",
                fs::read_to_string(self.log()).unwrap_or_default()
            );
        };
        self.addr = addr;
        self.child = Some(child);
    }

    /// Run `accountctl` with the certificate of (`role`, `name`).
    pub fn ctl(&self, tls: &TlsPaths, args: &[&str]) -> Ctl {
        let mut cmd = crate::netns::command_in(self.netns.as_deref(), bin("accountctl"));
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
        cmd.env("HOME", self.dir.path())
            .args(["--server", &self.addr, "--ca"])
            .arg(&tls.ca)
            .arg("--cert")
            .arg(&tls.cert)
            .arg("--key")
            .arg(&tls.key);
        if let Some(crl) = &tls.crl {
            cmd.arg("--crl").arg(crl);
        }
        let out = cmd.args(args).output().expect("cannot run accountctl");
        Ctl {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Run `accountctl` as the admin `ops`.
    pub fn admin(&self, args: &[&str]) -> Ctl {
        self.ctl(&self.admin, args)
    }

    /// `user`'s balance in micro-credits, as `accountctl balance` prints it.
    pub fn balance(&self, user: &str) -> i64 {
        let out = self.admin(&["balance", user]);
        let text = out.ok();
        let amount = text
            .split_whitespace()
            .nth(1)
            .unwrap_or_else(|| panic!("accountctl balance printed {text:?}"));
        parse_credits(amount).unwrap_or_else(|| panic!("not an amount: {text:?}"))
    }

    /// `user`'s history, as `accountctl history --csv` prints it.
    pub fn history(&self, user: &str) -> Vec<Entry> {
        parse_history(self.admin(&["history", user, "--csv"]).ok())
    }
}

impl Drop for Accountd {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// What `accountctl` did.
#[derive(Debug)]
pub struct Ctl {
    /// Exit status.
    pub code: i32,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Ctl {
    /// Asserts success and returns stdout.
    #[track_caller]
    pub fn ok(&self) -> &str {
        assert_eq!(self.code, 0, "accountctl failed: {self:?}");
        &self.stdout
    }
}

/// Credits as `accountctl` and `rexec` print them (`-1.25`, `3`) in micro-credits.
///
/// ```
/// use rexec_tests::market::parse_credits;
/// assert_eq!(parse_credits("-1.250000"), Some(-1_250_000));
/// assert_eq!(parse_credits("3"), Some(3_000_000));
/// assert_eq!(parse_credits("0.5x"), None);
/// ```
pub fn parse_credits(text: &str) -> Option<i64> {
    let (neg, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, frac) = body.split_once('.').unwrap_or((body, ""));
    if whole.is_empty()
        || frac.len() > 6
        || !(whole.chars().chain(frac.chars())).all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let micros =
        whole.parse::<i64>().ok()? * 1_000_000 + format!("{frac:0<6}").parse::<i64>().ok()?;
    Some(if neg { -micros } else { micros })
}

/// One ledger entry from `accountctl history --csv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// grant, debit, refund, adjust ...
    pub kind: String,
    /// Signed micro-credits (a debit is negative).
    pub amount: i64,
    /// The node of its key (debits).
    pub node: String,
    /// The job of its key (debits).
    pub job: String,
    /// The sequence number of its key (debits).
    pub seq: Option<u64>,
    /// The rank charged (debits).
    pub rank: Option<u32>,
    /// CPU microseconds (debits).
    pub cpu_us: Option<u64>,
    /// The span a debit covers, microseconds since the Unix epoch (start, end).
    pub interval_us: Option<(u64, u64)>,
}

impl Entry {
    /// Seconds of the span a debit covers (0 when it names none).
    pub fn interval_secs(&self) -> f64 {
        self.interval_us
            .map_or(0.0, |(start, end)| end.saturating_sub(start) as f64 / 1e6)
    }

    /// The idempotency key.
    pub fn key(&self) -> (String, String, Option<u64>) {
        (self.node.clone(), self.job.clone(), self.seq)
    }
}

fn parse_history(csv: &str) -> Vec<Entry> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("history has no column {name}: {csv}"))
    };
    let (kind, amount, node, job, seq, rank, cpu, from, to) = (
        col("kind"),
        col("amount"),
        col("node"),
        col("job"),
        col("seq"),
        col("rank"),
        col("cpu_us"),
        col("interval_start_us"),
        col("interval_end_us"),
    );
    lines
        .map(|line| {
            // Only the reason column (last) may be quoted; none of these are.
            let f: Vec<&str> = line.split(',').collect();
            Entry {
                kind: f[kind].to_string(),
                amount: parse_credits(f[amount]).expect("amount"),
                node: f[node].to_string(),
                job: f[job].to_string(),
                seq: f[seq].parse().ok(),
                rank: f[rank].parse().ok(),
                cpu_us: f[cpu].parse().ok(),
                interval_us: f[from].parse().ok().zip(f[to].parse().ok()),
            }
        })
        .collect()
}
