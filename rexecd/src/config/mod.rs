//! rexecd's configuration: a TOML file (path given with `--config`) whose keys can each
//! be overridden by a command-line flag ([`Flags`]), resolved into one checked
//! [`Config`] that the server uses.
//!
//! Keys of the file (all optional in the file, but `name`, `cert`, `key` and `ca` must
//! come from the file or a flag):
//!
//! ```toml
//! name = "n1"                      # node name, as in the node certificate
//! listen = "0.0.0.0:7070"          # address to listen on
//! cert = "/etc/rexec/node-n1.pem"  # node certificate (PEM)
//! key = "/etc/rexec/node-n1.key"   # its private key (mode 0600)
//! ca = "/etc/rexec/ca.pem"         # cluster CA certificate
//! crl = "/etc/rexec/crl.pem"       # revocation list (optional)
//! cgroup_parent = "rexec"          # rexecd's parent cgroup name
//! cpus = "0-3"                     # confine jobs to these CPUs (cpuset; default: no pinning)
//! cgroup_weight = 100              # the parent cgroup's CPU weight against other work (v2 units)
//! favor_dynmods = true             # set the host's cgroup2 `favordynmods` (fast migrations)
//! allowed_users = ["ann", "bob"]   # default: every existing non-root user
//! allow_root = false               # run jobs as uid 0 when a certificate names root
//! heartbeat_timeout = "5s"         # silence after which a client counts as dead
//! heartbeat_interval = "1s"        # how often rexecd sends heartbeats
//! env_deny = ["LD_*"]              # replaces the default deny list (see `env`)
//! max_frame = 1048576              # largest frame accepted, in bytes
//! max_connections = 1024           # open connections (handshakes included); more are closed at once
//! max_ranks_per_user = 256         # ranks one user may run here at a time
//! max_connections_per_address = 512   # open connections from one address (handshakes included)
//! max_connections_per_identity = 256  # open connections of one certificate
//! stopped_client_limit = "60m"     # how long a client stopped by Ctrl-Z keeps its job
//! tcp_user_timeout = "5m"          # TCP_USER_TIMEOUT (and keepalive bound) of client connections
//! no_new_privs = true              # PR_SET_NO_NEW_PRIVS for job processes
//! umask = "022"                    # umask of job processes
//!
//! [market]                         # metering, charging and bid checks: see `market_table`
//! accountd = "10.0.0.9:7071"       # (its `cpus`, the CPUs sold, defaults to the set above)
//! [batch]                          # who may start signed batch ranks: see `batch`
//! queues = ["batchd"]
//! [discovery]                      # announce this node; find accountd: see `discovery`
//! cluster = "rexec"
//! [announce]                       # rexecd's own discovery keys: see `discovery`
//! advertise = "10.0.0.7:7070"
//! [metrics]                        # Prometheus metrics (off without it): see `crate::metrics`
//! listen = "127.0.0.1:9474"
//! [rlimits]                        # resource limits of job processes (default: rexecd's own)
//! nofile = 4096                    # soft and hard; or [soft, hard]; or "unlimited"
//! core = 0
//! ```
//!
//! The file is loaded by `daemon::config`: flags over the file over the defaults
//! below, unknown keys refused by name. A `ready_file` key may name the file the bound
//! address is written to (as `--ready-file`).
//!
//! ```
//! use std::path::Path;
//! let file = rexecd::config::Settings::parse(Path::new("n1.toml"), r#"
//!     name = "n1"
//!     cert = "/c.pem"
//!     key = "/c.key"
//!     ca = "/ca.pem"
//!     heartbeat_timeout = "750ms"
//! "#).unwrap();
//! let config = rexecd::config::Config::resolve(file, &Default::default()).unwrap();
//! assert_eq!(config.heartbeat_timeout, std::time::Duration::from_millis(750));
//! assert_eq!(config.cgroup_parent.as_path(), std::path::Path::new("rexec"));
//! ```
//!
//! `cpus` (or `--cpus`) pins the node: rexecd confines its parent cgroup, and so every
//! job, to those CPUs through the cpuset controller (v1 or v2), and the market sells
//! that many CPUs unless `[market] cpus` names fewer (more is refused). The list is in
//! the kernel's syntax (`0-3`, `0,2,5-7`); a CPU the machine lacks, or that the parent
//! cgroup's own parent may not use, stops rexecd at start with an error naming it.

pub mod batch;
pub mod discovery;
mod flags;
pub mod job;
pub mod market_table;
pub mod memory;

use std::path::{Path, PathBuf};
use std::time::Duration;

use daemon::config::{CapSettings, NoOtherKeys, TlsSettings};
use daemon::serve::AcceptLimits;
use serde::Deserialize;
use timespan::parse_duration;

pub use flags::Flags;
pub use market_table::{MarketConfig, ShareControl};

use crate::cgroup::{CpuSet, ParentName};
use crate::env::EnvPolicy;

/// Default listen address.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:7070";
/// Default parent cgroup name.
pub const DEFAULT_CGROUP_PARENT: &str = "rexec";
/// Default heartbeat timeout.
pub const DEFAULT_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default heartbeat interval.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// Default `TCP_USER_TIMEOUT` of client connections.
pub const DEFAULT_TCP_USER_TIMEOUT: Duration = Duration::from_secs(300);

/// Default limit on open connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default limit on the ranks one user may run at a time.
pub const DEFAULT_MAX_RANKS_PER_USER: usize = 256;
/// Default limit on open connections from one remote address.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 512;
/// Default limit on open connections of one certificate identity.
pub const DEFAULT_MAX_CONNECTIONS_PER_IDENTITY: usize = 256;

/// Why the configuration could not be loaded. Each message is one line naming the file
/// or key and saying what to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read, or is not valid TOML for these settings.
    #[error(transparent)]
    File(#[from] daemon::config::FileError),
    /// A required key is neither in the file nor given as a flag.
    #[error("no {key} configured; set `{key}` in the config file or pass --{flag}")]
    Missing {
        /// The config key.
        key: &'static str,
        /// The flag.
        flag: &'static str,
    },
    /// A value of the `[discovery]` table is out of range or malformed.
    #[error(transparent)]
    Discovery(#[from] ::discovery::config::DiscoveryConfigError),
    /// A value is out of range or malformed.
    #[error("invalid {key} {value:?}: {reason}")]
    Invalid {
        /// The config key.
        key: &'static str,
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl From<daemon::config::Invalid> for ConfigError {
    fn from(e: daemon::config::Invalid) -> ConfigError {
        ConfigError::Invalid {
            key: e.key,
            value: e.value,
            reason: e.reason,
        }
    }
}

/// The settings as the file has them, and as the flags are laid over them: every
/// key optional, unknown keys refused by name.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Settings {
    /// Node name.
    pub name: Option<String>,
    /// Listen address.
    pub listen: Option<String>,
    /// Where to write the bound address once listening.
    pub ready_file: Option<PathBuf>,
    /// `ca`, `cert`, `key`, `crl`.
    #[serde(flatten)]
    pub tls: TlsSettings,
    /// `max_connections`, `max_connections_per_address`, `max_connections_per_identity`.
    #[serde(flatten)]
    pub caps: CapSettings,
    /// Parent cgroup name.
    pub cgroup_parent: Option<String>,
    /// CPUs the node is confined to, a cpu list such as "0-3".
    pub cpus: Option<String>,
    /// The parent cgroup's CPU weight against the rest of the machine, cgroup v2
    /// units (1 to 10000; v1 `cpu.shares` = weight x 1024 / 100).
    pub cgroup_weight: Option<u64>,
    /// Set `favordynmods` on the host's cgroup2 mounts at start (default true).
    pub favor_dynmods: Option<bool>,
    /// Users who may run jobs (default: all non-root users that exist).
    pub allowed_users: Option<Vec<String>>,
    /// Whether uid 0 may run jobs.
    pub allow_root: Option<bool>,
    /// Heartbeat timeout, e.g. "5s".
    pub heartbeat_timeout: Option<String>,
    /// Heartbeat interval, e.g. "1s".
    pub heartbeat_interval: Option<String>,
    /// Environment deny list (replaces the default).
    pub env_deny: Option<Vec<String>>,
    /// Largest frame accepted.
    pub max_frame: Option<usize>,
    /// Most ranks one user may run at once.
    pub max_ranks_per_user: Option<usize>,
    /// The `[market]` table.
    pub market: Option<market_table::MarketFile>,
    /// The `[batch]` table.
    pub batch: Option<batch::BatchFile>,
    /// How long a client stopped by Ctrl-Z keeps its job, e.g. "60m".
    pub stopped_client_limit: Option<String>,
    /// TCP_USER_TIMEOUT of client connections, e.g. "5m".
    pub tcp_user_timeout: Option<String>,
    /// Set PR_SET_NO_NEW_PRIVS for job processes (default true).
    pub no_new_privs: Option<bool>,
    /// Umask of job processes, octal (default "022").
    pub umask: Option<String>,
    /// Resource limits of job processes, by name (`nofile`, `core`, ...).
    pub rlimits: Option<std::collections::BTreeMap<String, job::RlimitValue>>,
    /// The shared `[discovery]` table and rexecd's `[announce]` table.
    pub discovery: Option<::discovery::config::DiscoveryFile>,
    /// rexecd's `[announce]` table (needs `[discovery]`).
    pub announce: Option<discovery::AnnounceFile>,
    /// `[metrics] listen`: where to serve Prometheus metrics (off without it).
    pub metrics: Option<exposition::MetricsFile>,
    /// The most memory one rank may ask for, e.g. "4G" (unset: no ceiling).
    pub max_mem_per_rank: Option<String>,
    /// Memory of a rank that asks for none, e.g. "1G" (unset: max_mem_per_rank, else no limit).
    pub default_mem_per_rank: Option<String>,
    /// Any other key: refused by name.
    #[serde(flatten)]
    _unknown: NoOtherKeys,
}

impl Settings {
    /// Reads a config file and checks it against the settings: its table, for
    /// [`Config::resolve`].
    pub fn read(path: &Path) -> Result<toml::Table, ConfigError> {
        Ok(daemon::config::read::<Settings>(path)?)
    }

    /// Parses config text and checks it (`path` only names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<toml::Table, ConfigError> {
        Ok(daemon::config::parse::<Settings>(path, text)?)
    }
}

/// The resolved configuration the server runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// Node name (reported in `Welcome` and error messages).
    pub name: String,
    /// Address to listen on (used by the binary; tests bind their own listener).
    pub listen: String,
    /// Where the binary writes the bound address once listening.
    pub ready_file: Option<PathBuf>,
    /// TLS material.
    pub tls: certs::TlsPaths,
    /// rexecd's parent cgroup.
    pub cgroup_parent: ParentName,
    /// The CPUs the parent cgroup (and so every job) is confined to; `None`: no pinning.
    pub cpus: Option<CpuSet>,
    /// The parent cgroup's CPU weight against its siblings (other work on the
    /// machine), cgroup v2 units; `None` leaves the kernel's (100, v1 1024).
    pub cgroup_weight: Option<u64>,
    /// Whether to set `favordynmods` on the host's cgroup2 mounts at start, so that
    /// moving a job's first process into its cgroup does not wait for an RCU grace
    /// period (see [`crate::cgroup::dynmods`]).
    pub favor_dynmods: bool,
    /// Who may run jobs, and with which environment.
    pub env: EnvPolicy,
    /// Users allowed to run jobs; `None` means every existing user (root only with
    /// `allow_root`).
    pub allowed_users: Option<Vec<String>>,
    /// Whether jobs may run as uid 0.
    pub allow_root: bool,
    /// A client silent for this long is dead.
    pub heartbeat_timeout: Duration,
    /// rexecd sends a heartbeat this often.
    pub heartbeat_interval: Duration,
    /// Largest frame accepted from a client.
    pub max_frame: usize,
    /// Most connections open at once (TLS handshakes included); further connections
    /// are accepted and closed at once.
    pub max_connections: usize,
    /// Most ranks one user may run on this node at once; further launches are refused
    /// with `Busy`.
    pub max_ranks_per_user: usize,
    /// Metering, charging and bid checks.
    pub market: MarketConfig,
    /// Who may start signed batch ranks, and where started ones are remembered.
    pub batch: batch::BatchConfig,
    /// Most connections open at once from one remote address (TLS handshakes
    /// included); more are closed at once.
    pub max_connections_per_address: usize,
    /// Most connections open at once of one certificate identity; more are answered
    /// with `Busy` after the handshake and closed.
    pub max_connections_per_identity: usize,
    /// How long a client stopped by Ctrl-Z keeps its job.
    pub stopped_client_limit: Duration,
    /// `TCP_USER_TIMEOUT` of client connections (and the bound of their keepalive).
    pub tcp_user_timeout: Duration,
    /// No new privileges, umask and resource limits of job processes.
    pub job_limits: crate::spawn::JobLimits,
    /// Announcements, availability history and finding accountd; `None` without a
    /// `[discovery]` table.
    pub announce: Option<discovery::AnnounceConfig>,
    /// Where to serve Prometheus metrics (`[metrics] listen`); `None`: off.
    pub metrics: Option<std::net::SocketAddr>,
    /// Memory per rank: the ceiling and the default.
    pub memory: memory::MemoryConfig,
}

impl Config {
    /// Loads the file named by `--config` (if any) and lays the flags over it.
    pub fn load(flags: &Flags) -> Result<Config, ConfigError> {
        Config::from_settings(flags.common.load(flags)?)
    }

    /// The file's table with the flags laid over it (flags win), every value checked.
    pub fn resolve(file: toml::Table, flags: &Flags) -> Result<Config, ConfigError> {
        Config::from_settings(daemon::config::layer(file, flags)?)
    }

    /// Checks every setting and fills in the defaults.
    pub fn from_settings(s: Settings) -> Result<Config, ConfigError> {
        let name = s.name.ok_or(ConfigError::Missing {
            key: "name",
            flag: "name",
        })?;
        certs::check_name(certs::Role::Node, &name).map_err(|e| ConfigError::Invalid {
            key: "name",
            value: name.clone(),
            reason: e.to_string(),
        })?;
        let tls = s.tls.paths().map_err(|m| ConfigError::Missing {
            key: m.key,
            flag: m.key,
        })?;
        let parent_text = s
            .cgroup_parent
            .unwrap_or_else(|| DEFAULT_CGROUP_PARENT.to_string());
        let cgroup_parent = ParentName::new(&parent_text).map_err(|e| ConfigError::Invalid {
            key: "cgroup_parent",
            value: parent_text.clone(),
            reason: e.to_string(),
        })?;
        let cpus = s.cpus.as_deref().map(parse_cpus).transpose()?;
        if let Some(w) = s.cgroup_weight
            && !(1..=10_000).contains(&w)
        {
            return Err(ConfigError::Invalid {
                key: "cgroup_weight",
                value: w.to_string(),
                reason: "a CPU weight is 1 to 10000 (cgroup v2 units; the kernel's default is 100)"
                    .into(),
            });
        }
        let max_frame = s.max_frame.unwrap_or(proto::DEFAULT_MAX_FRAME);
        if max_frame < 2 * proto::node::CHUNK_SIZE {
            return Err(ConfigError::Invalid {
                key: "max_frame",
                value: max_frame.to_string(),
                reason: format!("must be at least {} bytes", 2 * proto::node::CHUNK_SIZE),
            });
        }
        let limits = s.caps.limits(AcceptLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            per_identity: DEFAULT_MAX_CONNECTIONS_PER_IDENTITY,
        })?;
        let max_ranks_per_user = s.max_ranks_per_user.unwrap_or(DEFAULT_MAX_RANKS_PER_USER);
        if max_ranks_per_user == 0 {
            return Err(ConfigError::Invalid {
                key: "max_ranks_per_user",
                value: "0".to_string(),
                reason: "must be at least 1".to_string(),
            });
        }
        let listen = s.listen.unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let announce = discovery::resolve(s.discovery, s.announce, &listen)?;
        let market_file = s.market.unwrap_or_default();
        let mut market = MarketConfig::resolve(market_file.clone(), cpus.as_ref())?;
        discovery::learn_accountd(&mut market, &market_file, announce.as_ref())?;
        let journal = market.ledger.as_ref().map_or_else(
            || PathBuf::from(market_table::DEFAULT_JOURNAL),
            |l| l.journal.clone(),
        );
        let batch = batch::BatchConfig::resolve(s.batch.unwrap_or_default(), &journal)?;
        let metrics = match &s.metrics {
            Some(m) => m.address().map_err(|e| ConfigError::Invalid {
                key: "[metrics] listen",
                value: e.value.clone(),
                reason: "not an address like 127.0.0.1:9474".to_string(),
            })?,
            None => None,
        };
        let env = match s.env_deny {
            Some(patterns) => EnvPolicy::new(patterns),
            None => EnvPolicy::default(),
        };
        Ok(Config {
            name,
            listen,
            ready_file: s.ready_file,
            tls,
            cgroup_parent,
            cpus,
            cgroup_weight: s.cgroup_weight,
            favor_dynmods: s.favor_dynmods.unwrap_or(true),
            env,
            allowed_users: s.allowed_users,
            allow_root: s.allow_root.unwrap_or(false),
            heartbeat_timeout: duration(
                "heartbeat_timeout",
                s.heartbeat_timeout,
                DEFAULT_HEARTBEAT_TIMEOUT,
            )?,
            heartbeat_interval: duration(
                "heartbeat_interval",
                s.heartbeat_interval,
                DEFAULT_HEARTBEAT_INTERVAL,
            )?,
            max_frame,
            max_connections: limits.max_connections,
            max_ranks_per_user,
            market,
            batch,
            max_connections_per_address: limits.per_address,
            max_connections_per_identity: limits.per_identity,
            stopped_client_limit: duration(
                "stopped_client_limit",
                s.stopped_client_limit,
                crate::heartbeat::DEFAULT_STOP_LIMIT,
            )?,
            tcp_user_timeout: duration(
                "tcp_user_timeout",
                s.tcp_user_timeout,
                DEFAULT_TCP_USER_TIMEOUT,
            )?,
            job_limits: job::job_limits(s.no_new_privs, s.umask, s.rlimits)?,
            announce,
            metrics,
            memory: memory::MemoryConfig::resolve(s.max_mem_per_rank, s.default_mem_per_rank)?,
        })
    }
}

/// A duration setting (`"5s"`, `"750ms"`), or `default` without one.
fn duration(
    key: &'static str,
    text: Option<String>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    match text {
        None => Ok(default),
        Some(text) => parse_duration(&text).map_err(|e| ConfigError::Invalid {
            key,
            value: text,
            reason: e.to_string(),
        }),
    }
}

/// Parses the node's cpu list (`cpus`): kernel syntax, at least one CPU.
fn parse_cpus(text: &str) -> Result<CpuSet, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid {
        key: "cpus",
        value: text.to_string(),
        reason,
    };
    let set = CpuSet::parse(text).map_err(|e| invalid(e.to_string()))?;
    if set.is_empty() {
        return Err(invalid(
            "name at least one CPU, as a list like \"0-3\" or \"0,2,5-7\"".to_string(),
        ));
    }
    Ok(set)
}

#[cfg(test)]
mod tests;
