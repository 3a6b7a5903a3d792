//! batchd's configuration: a TOML file whose keys the command-line flags can
//! override, loaded by `daemon::config` (flags over the file over the defaults,
//! unknown keys refused by name). Example (every key shown):
//!
//! ```toml
//! listen = "0.0.0.0:7482"
//! ready_file = "/run/rexec/batchd.addr"
//! ca = "/etc/rexec/ca.pem"
//! cert = "/etc/rexec/service-batchd.pem"
//! key = "/etc/rexec/service-batchd.key"
//! crl = "/etc/rexec/crl.pem"
//! advertise = "10.0.0.4:7482"   # announced instead of `listen`
//! accountd = "10.0.0.6:7071"    # the ledger, or a list of its instances (else learnt from [discovery])
//!
//! [store]
//! path = "/var/lib/rexec/batchd.db"
//! max_batch = 1024              # submissions per group commit
//! # postgres = "host=db1 port=5432 dbname=queue user=batchd sslmode=require"
//! # password_file = "/etc/rexec/batchd-db.password"   # or peer authentication
//! # ca = "/etc/rexec/db-ca.pem"   # the database server's CA: TLS to it, verified
//! lease = "3s"                  # PostgreSQL: how long the leader's lease lasts unrenewed
//!
//! [queue]
//! policy = "easy"               # any of marketsim's policies
//! tick = "1s"                   # decision period
//! processors = 0                # CPUs of each node set aside for the queue (0 = all)
//! max_output = 1048576          # bytes of stdout + stderr kept per job
//! seed = 1                      # the GA's seed
//! kill_wait = "30s"             # grace between SIGTERM and SIGKILL at a job's length
//!
//! [selectors]                   # vexecd selectors, name = "host:port"
//! vexecd = "10.0.0.5:7478"
//!
//! [limits]
//! max_connections = 1024
//! max_connections_per_address = 256
//! max_connections_per_identity = 64
//! idle_timeout_secs = 300
//!
//! [discovery]                   # announce the queue (kind Batch) to the cluster
//! cluster = "rexec"
//! group = "239.255.77.1"
//! port = 7477
//! period = "2s"
//!
//! [metrics]                     # Prometheus metrics, off without it (see `crate::metrics`)
//! listen = "127.0.0.1:9482"
//! ```
//!
//! With `[store] postgres` the queue lives in that PostgreSQL database instead
//! of the SQLite file `path` (the same settings as accountd's `[store]`: no
//! password in the string, `password_file` for it, `ca` for TLS);
//! `batchd migrate` moves a queue between the two.
//!
//! The policy is checked at start: an unknown name is refused, naming the valid
//! ones. Changing it takes effect at the next start and keeps the queue.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

pub use daemon::config::ConfigError;
use daemon::config::{CapSettings, NoOtherKeys, TlsFlags, TlsSettings};
use daemon::flags::{CommonFlags, DaemonFlags};
use daemon::serve::AcceptLimits;
use serde::{Deserialize, Serialize};

/// Default listening address.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:7482";
/// Default decision period.
pub const DEFAULT_TICK: Duration = Duration::from_secs(1);
/// Default bytes of output kept per job (stdout and stderr together): 1 MiB.
pub const DEFAULT_MAX_OUTPUT: u64 = 1 << 20;
/// Default grace between SIGTERM and SIGKILL at a job's length (Slurm's `KillWait`).
pub const DEFAULT_KILL_WAIT: Duration = Duration::from_secs(30);
/// Default submissions per group commit.
pub const DEFAULT_MAX_BATCH: usize = 1024;
/// Default seconds a silent connection is kept.
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 300;

/// The settings as the file has them, every key optional.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Settings {
    /// Address to listen on.
    pub listen: Option<String>,
    /// Where to write the bound address once listening.
    pub ready_file: Option<PathBuf>,
    /// `ca`, `cert` (role service, name `batchd`), `key`, `crl`.
    #[serde(flatten)]
    pub tls: TlsSettings,
    /// Address announced instead of the listening one.
    pub advertise: Option<String>,
    /// accountd's address, or its instances' addresses.
    pub accountd: Option<clients::instances::AddressList>,
    /// accountd's certificate name.
    pub accountd_name: Option<String>,
    /// `[store]`.
    #[serde(default)]
    pub store: StoreSettings,
    /// `[queue]`.
    #[serde(default)]
    pub queue: QueueSettings,
    /// `[selectors]`: name = "host:port".
    #[serde(default)]
    pub selectors: BTreeMap<String, String>,
    /// `[limits]`.
    #[serde(default)]
    pub limits: Limits,
    /// `[discovery]`.
    pub discovery: Option<discovery::config::DiscoveryFile>,
    /// `[metrics] listen`: where to serve Prometheus metrics (off without it).
    pub metrics: Option<exposition::MetricsFile>,
    #[serde(flatten)]
    _unknown: NoOtherKeys,
}

/// `[store]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSettings {
    /// The SQLite file.
    pub path: Option<PathBuf>,
    /// Writes per group commit.
    pub max_batch: Option<usize>,
    /// PostgreSQL connection string (`host=… dbname=… user=…`), without a password.
    pub postgres: Option<String>,
    /// File holding the database password.
    pub password_file: Option<PathBuf>,
    /// CA certificate of the database server (TLS, verified).
    pub ca: Option<PathBuf>,
    /// How long the leader's lease lasts unrenewed (PostgreSQL; renewed every third of it).
    pub lease: Option<String>,
}

impl StoreSettings {
    /// Where the queue is: the PostgreSQL database when `postgres` is set,
    /// else the SQLite file `path`.
    pub fn location(&self) -> Result<crate::store::Location, ConfigError> {
        use crate::store::{Location, PgConfig};
        match &self.postgres {
            Some(conninfo) => Ok(Location::Postgres(PgConfig {
                conninfo: conninfo.clone(),
                password_file: self.password_file.clone(),
                ca: self.ca.clone(),
            })),
            None if self.password_file.is_some() || self.ca.is_some() => Err(ConfigError::invalid(
                "[store]",
                "password_file and ca need postgres = \"host=… dbname=… user=…\"",
            )),
            None => self
                .path
                .clone()
                .map(Location::Sqlite)
                .ok_or(ConfigError::Missing("store path (--store)")),
        }
    }
}

/// `[queue]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSettings {
    /// Policy name (`batch::policy::NAMES`).
    pub policy: Option<String>,
    /// Decision period (`1s`, `500ms`).
    pub tick: Option<String>,
    /// CPUs of each node set aside for the queue; 0 = all.
    pub processors: Option<u32>,
    /// Bytes of output kept per job.
    pub max_output: Option<u64>,
    /// The GA's seed.
    pub seed: Option<u64>,
    /// Grace between SIGTERM and SIGKILL when a job reaches its length (`30s`).
    pub kill_wait: Option<String>,
}

/// `[limits]`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Limits {
    /// Seconds a connection may stay silent.
    pub idle_timeout_secs: Option<u64>,
    /// The connection caps.
    #[serde(flatten)]
    pub caps: CapSettings,
    #[serde(flatten)]
    _unknown: NoOtherKeys,
}

/// The live batch queue of the rexec market.
// The flags, each over the file key it is serialized as.
#[derive(clap::Parser, Serialize, Debug, Clone, Default)]
#[command(name = "batchd", version)]
pub struct Flags {
    /// `--config` (or `BATCHD_CONFIG`), `--listen`, `--ready-file`.
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonFlags<Batchd>,
    /// `--ca`, `--cert` (role service, name batchd), `--key`, `--crl`.
    #[command(flatten)]
    #[serde(flatten)]
    pub tls: TlsFlags,
    /// accountd's address, host:port.
    #[arg(long)]
    pub accountd: Option<String>,
    /// The queue's SQLite file.
    #[arg(long)]
    #[serde(rename = "store.path")]
    pub store: Option<PathBuf>,
    /// The queue policy (fifo, easy, conservative, sjf, priofifo, firstprice,
    /// firstprice-preempt, vickrey, vickrey-strict, ga).
    #[arg(long)]
    #[serde(rename = "queue.policy")]
    pub policy: Option<String>,
    /// Decision period, e.g. 1s or 500ms [default: 1s].
    #[arg(long)]
    #[serde(rename = "queue.tick")]
    pub tick: Option<String>,
    /// CPUs of each node set aside for the queue [default: all].
    #[arg(long)]
    #[serde(rename = "queue.processors")]
    pub processors: Option<u32>,
    /// Bytes of stdout and stderr kept per job [default: 1048576].
    #[arg(long)]
    #[serde(rename = "queue.max_output")]
    pub max_output: Option<u64>,
}

/// What batchd's common flags say of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Batchd;

impl DaemonFlags for Batchd {
    const DEFAULT_LISTEN: &'static str = DEFAULT_LISTEN;
    const CONFIG_ENV: Option<&'static str> = Some("BATCHD_CONFIG");
}

/// Everything batchd needs, checked.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on.
    pub listen: String,
    /// Ready file.
    pub ready_file: Option<PathBuf>,
    /// TLS material.
    pub tls: certs::TlsPaths,
    /// Announced address.
    pub advertise: Option<std::net::SocketAddr>,
    /// accountd's instances' addresses, tried in turn (none: learnt from
    /// announcements).
    pub accountd: Vec<String>,
    /// accountd's certificate name.
    pub accountd_name: String,
    /// The store file (empty when the queue is in PostgreSQL).
    pub store: PathBuf,
    /// Where the queue is: the SQLite file `store`, or a PostgreSQL database.
    pub location: crate::store::Location,
    /// Writes per group commit.
    pub max_batch: usize,
    /// How long the leader's lease lasts unrenewed ([`crate::lease`]).
    pub lease: Duration,
    /// Policy name (valid).
    pub policy: String,
    /// Decision period.
    pub tick: Duration,
    /// CPUs per node set aside (0 = all).
    pub processors: u32,
    /// Output bytes kept per job.
    pub max_output: u64,
    /// Grace between SIGTERM and SIGKILL when a job reaches its length; the node
    /// that runs a rank keeps the clock (`rexecd::signed::limits`).
    pub kill_wait: Duration,
    /// The GA's seed.
    pub seed: u64,
    /// Selectors, by name.
    pub selectors: Vec<clients::selector::SelectorEntry>,
    /// Connection limits.
    pub limits: AcceptLimits,
    /// Idle connection timeout.
    pub idle_timeout: Duration,
    /// Discovery (announce, hear selectors and accountd).
    pub discovery: Option<discovery::config::DiscoveryConfig>,
    /// Where to serve Prometheus metrics, if anywhere.
    pub metrics: Option<std::net::SocketAddr>,
}

impl Config {
    /// The file `flags` name (if any) with the flags over it, checked.
    pub fn load(flags: &Flags) -> Result<Config, ConfigError> {
        let s: Settings = flags.common.load(flags)?;
        Config::from_settings(s)
    }

    /// Checks settings and fills in the defaults.
    pub fn from_settings(s: Settings) -> Result<Config, ConfigError> {
        let tls = s.tls.paths().map_err(ConfigError::from)?;
        let policy = s.queue.policy.clone().unwrap_or_else(|| "fifo".into());
        if !batch::policy::NAMES.contains(&policy.as_str()) {
            return Err(ConfigError::invalid(
                "policy",
                format!(
                    "{policy:?} is not a queue policy; use one of {}",
                    batch::policy::NAMES.join(", ")
                ),
            ));
        }
        let tick = match &s.queue.tick {
            None => DEFAULT_TICK,
            Some(t) => timespan::parse_duration(t)
                .map_err(|e| ConfigError::invalid("tick", e.to_string()))?,
        };
        if tick < Duration::from_millis(10) {
            return Err(ConfigError::invalid("tick", "must be at least 10ms"));
        }
        let max_output = s.queue.max_output.unwrap_or(DEFAULT_MAX_OUTPUT);
        let kill_wait = match &s.queue.kill_wait {
            None => DEFAULT_KILL_WAIT,
            Some(t) => timespan::parse_duration(t)
                .map_err(|e| ConfigError::invalid("kill_wait", e.to_string()))?,
        };
        let lease = match &s.store.lease {
            None => crate::lease::DEFAULT_LEASE,
            Some(t) => timespan::parse_duration(t)
                .map_err(|e| ConfigError::invalid("lease", e.to_string()))?,
        };
        if lease < Duration::from_millis(300) || lease > Duration::from_secs(600) {
            return Err(ConfigError::invalid("lease", "must be 300ms..=10m"));
        }
        let max_batch = s.store.max_batch.unwrap_or(DEFAULT_MAX_BATCH);
        if max_batch == 0 || max_batch > 65_536 {
            return Err(ConfigError::invalid("max_batch", "must be 1..=65536"));
        }
        let limits = s.limits.caps.limits(AcceptLimits {
            max_connections: 1024,
            per_address: 256,
            per_identity: 64,
        })?;
        let discovery = match &s.discovery {
            None => None,
            Some(d) => Some(
                d.resolve()
                    .map_err(|e| ConfigError::invalid("[discovery]", e.to_string()))?,
            ),
        };
        let advertise = s
            .advertise
            .as_deref()
            .map(daemon::announce::parse_advertise)
            .transpose()
            .map_err(|e| ConfigError::invalid("advertise", e.described()))?;
        let selectors = s
            .selectors
            .iter()
            .map(|(name, addr)| clients::selector::SelectorEntry {
                name: name.clone(),
                addr: addr.clone(),
            })
            .collect::<Vec<_>>();
        if selectors.is_empty() && discovery.is_none() {
            return Err(ConfigError::Missing(
                "selectors ([selectors] table, or [discovery] to hear them)",
            ));
        }
        Ok(Config {
            listen: s.listen.unwrap_or_else(|| DEFAULT_LISTEN.into()),
            ready_file: s.ready_file,
            tls,
            advertise,
            accountd: s.accountd.map(|a| a.into_vec()).unwrap_or_default(),
            accountd_name: s
                .accountd_name
                .unwrap_or_else(|| clients::account::DEFAULT_SERVER_NAME.into()),
            location: s.store.location()?,
            store: s.store.path.unwrap_or_default(),
            max_batch,
            lease,
            policy,
            tick,
            processors: s.queue.processors.unwrap_or(0),
            max_output,
            kill_wait,
            seed: s.queue.seed.unwrap_or(1),
            selectors,
            limits,
            idle_timeout: Duration::from_secs(
                s.limits
                    .idle_timeout_secs
                    .unwrap_or(DEFAULT_IDLE_TIMEOUT_SECS),
            ),
            discovery,
            metrics: match &s.metrics {
                Some(m) => m
                    .address()
                    .map_err(|e| ConfigError::invalid("metrics", e.to_string()))?,
                None => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let path = std::path::Path::new("b.toml");
        let table = daemon::config::parse::<Settings>(path, text)?;
        let s: Settings = daemon::config::layer(table, &Flags::default())?;
        Config::from_settings(s)
    }

    #[test]
    fn the_documented_example_loads() {
        let c = parse(&daemon::config::toml_example(include_str!("config.rs"))).unwrap();
        assert_eq!(c.policy, "easy");
        assert_eq!(c.tick, Duration::from_secs(1));
        assert_eq!(c.max_output, DEFAULT_MAX_OUTPUT);
        assert_eq!(c.selectors[0].name, "vexecd");
        assert_eq!(c.metrics, Some("127.0.0.1:9482".parse().unwrap()));
    }

    #[test]
    fn the_deployed_example_loads() {
        let c = parse(include_str!("../../deploy/etc/batchd.toml")).unwrap();
        assert_eq!(c.policy, "easy");
        assert_eq!(
            c.store,
            std::path::Path::new("/var/lib/rexec-batch/queue.db")
        );
        assert!(c.discovery.is_some() && c.advertise.is_some());
    }

    #[test]
    fn an_unknown_policy_is_refused_naming_the_valid_ones() {
        let base = "ca = \"/c\"\ncert = \"/c\"\nkey = \"/k\"\n[store]\npath = \"/q.db\"\n[selectors]\nv = \"a:1\"\n";
        let e = parse(&format!("{base}[queue]\npolicy = \"lottery\"\n")).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("\"lottery\" is not a queue policy"), "{text}");
        assert!(text.contains("firstprice-preempt"), "{text}");
        let e = parse(&format!("{base}[queue]\npolcy = \"fifo\"\n")).unwrap_err();
        assert!(e.to_string().contains("unknown field `polcy`"), "{e}");
        assert!(parse(&format!("{base}colour = 1\n")).is_err());
        assert_eq!(parse(base).unwrap().policy, "fifo");
    }

    #[test]
    fn the_store_is_a_sqlite_file_or_a_postgresql_database() {
        use crate::store::{Location, PgConfig};
        let base = "ca = \"/c\"\ncert = \"/c\"\nkey = \"/k\"\n[selectors]\nv = \"a:1\"\n";
        let lite = parse(&format!("{base}[store]\npath = \"/q.db\"\n")).unwrap();
        assert_eq!(lite.location, Location::Sqlite("/q.db".into()));
        let pg = parse(&format!(
            "{base}[store]\npostgres = \"host=db dbname=q\"\npassword_file = \"/p\"\nca = \"/ca\"\n"
        ))
        .unwrap();
        assert_eq!(
            pg.location,
            Location::Postgres(PgConfig {
                conninfo: "host=db dbname=q".into(),
                password_file: Some("/p".into()),
                ca: Some("/ca".into()),
            })
        );
        let e = parse(&format!("{base}[store]\npath = \"/q.db\"\nca = \"/ca\"\n")).unwrap_err();
        assert!(e.to_string().contains("need postgres"), "{e}");
        assert!(parse(base).is_err(), "a store is needed");
    }

    #[test]
    fn accountd_is_one_address_or_a_list_of_instances() {
        let base = "ca = \"/c\"\ncert = \"/c\"\nkey = \"/k\"\n[store]\npath = \"/q.db\"\n[selectors]\nv = \"a:1\"\n";
        assert!(parse(base).unwrap().accountd.is_empty());
        let one = parse(&format!("accountd = \"h:1\"\n{base}")).unwrap();
        assert_eq!(one.accountd, ["h:1"]);
        let two = parse(&format!("accountd = [\"h:1\", \"h:2\"]\n{base}")).unwrap();
        assert_eq!(two.accountd, ["h:1", "h:2"]);
    }
}
