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
//! [market]                         # metering, charging and bid checks: see `market`
//! accountd = "10.0.0.9:7071"       # (its `cpus`, the CPUs sold, defaults to the set above)
//! [discovery]                      # announce this node; find accountd: see `discovery`
//! cluster = "rexec"
//! [announce]                       # rexecd's own discovery keys: see `discovery`
//! advertise = "10.0.0.7:7070"
//! [rlimits]                        # resource limits of job processes (default: rexecd's own)
//! nofile = 4096                    # soft and hard; or [soft, hard]; or "unlimited"
//! core = 0
//! ```
//!
//! ```
//! let file: rexecd::config::FileConfig = toml::from_str(r#"
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

pub mod discovery;
mod flags;
pub mod job;
pub mod market;

use std::path::{Path, PathBuf};
use std::time::Duration;

use proto::duration::parse_duration;
use serde::Deserialize;

pub use flags::Flags;
pub use market::{MarketConfig, ShareControl};

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
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema.
    #[error("config file {path} is invalid: {detail}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said (one line).
        detail: String,
    },
    /// A required key is neither in the file nor given as a flag.
    #[error("no {key} configured; set `{key}` in the config file or pass --{flag}")]
    Missing {
        /// The config key.
        key: &'static str,
        /// The flag.
        flag: &'static str,
    },
    /// A value of the `[discovery]` table is out of range or malformed.
    #[error("{0}")]
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

/// The config file as written: every key optional, unknown keys refused.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Node name.
    pub name: Option<String>,
    /// Listen address.
    pub listen: Option<String>,
    /// Node certificate.
    pub cert: Option<PathBuf>,
    /// Node key.
    pub key: Option<PathBuf>,
    /// CA certificate.
    pub ca: Option<PathBuf>,
    /// CRL.
    pub crl: Option<PathBuf>,
    /// Parent cgroup name.
    pub cgroup_parent: Option<String>,
    /// CPUs the node is confined to, a cpu list such as "0-3".
    pub cpus: Option<String>,
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
    /// Most connections open at once.
    pub max_connections: Option<usize>,
    /// Most ranks one user may run at once.
    pub max_ranks_per_user: Option<usize>,
    /// The `[market]` table.
    pub market: Option<market::MarketFile>,
    /// Most connections from one remote address.
    pub max_connections_per_address: Option<usize>,
    /// Most connections of one certificate identity.
    pub max_connections_per_identity: Option<usize>,
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
}

impl FileConfig {
    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            detail: e.message().replace('\n', " "),
        })
    }
}

/// The resolved configuration the server runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// Node name (reported in `Welcome` and error messages).
    pub name: String,
    /// Address to listen on (used by the binary; tests bind their own listener).
    pub listen: String,
    /// TLS material.
    pub tls: certs::TlsPaths,
    /// rexecd's parent cgroup.
    pub cgroup_parent: ParentName,
    /// The CPUs the parent cgroup (and so every job) is confined to; `None`: no pinning.
    pub cpus: Option<CpuSet>,
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
}

impl Config {
    /// Merges the file with the flags (flags win) and checks every value.
    pub fn resolve(file: FileConfig, flags: &Flags) -> Result<Config, ConfigError> {
        let name = flags
            .name
            .clone()
            .or(file.name)
            .ok_or(ConfigError::Missing {
                key: "name",
                flag: "name",
            })?;
        certs::check_name(certs::Role::Node, &name).map_err(|e| ConfigError::Invalid {
            key: "name",
            value: name.clone(),
            reason: e.to_string(),
        })?;
        let path = |flag: &Option<PathBuf>, file: Option<PathBuf>, key, flag_name| {
            flag.clone().or(file).ok_or(ConfigError::Missing {
                key,
                flag: flag_name,
            })
        };
        let tls = certs::TlsPaths {
            cert: path(&flags.cert, file.cert, "cert", "cert")?,
            key: path(&flags.key, file.key, "key", "key")?,
            ca: path(&flags.ca, file.ca, "ca", "ca")?,
            crl: flags.crl.clone().or(file.crl),
        };
        let parent_text = flags
            .cgroup_parent
            .clone()
            .or(file.cgroup_parent)
            .unwrap_or_else(|| DEFAULT_CGROUP_PARENT.to_string());
        let cgroup_parent = ParentName::new(&parent_text).map_err(|e| ConfigError::Invalid {
            key: "cgroup_parent",
            value: parent_text.clone(),
            reason: e.to_string(),
        })?;
        let cpus = match flags.cpus.clone().or(file.cpus) {
            None => None,
            Some(text) => Some(parse_cpus(&text)?),
        };
        let duration =
            |key, flag: &Option<String>, file: Option<String>, default| match flag.clone().or(file)
            {
                None => Ok(default),
                Some(text) => parse_duration(&text).map_err(|e| ConfigError::Invalid {
                    key,
                    value: text,
                    reason: e.to_string(),
                }),
            };
        let heartbeat_timeout = duration(
            "heartbeat_timeout",
            &flags.heartbeat_timeout,
            file.heartbeat_timeout,
            DEFAULT_HEARTBEAT_TIMEOUT,
        )?;
        let heartbeat_interval = duration(
            "heartbeat_interval",
            &flags.heartbeat_interval,
            file.heartbeat_interval,
            DEFAULT_HEARTBEAT_INTERVAL,
        )?;
        let max_frame = file.max_frame.unwrap_or(proto::DEFAULT_MAX_FRAME);
        if max_frame < 2 * proto::node::CHUNK_SIZE {
            return Err(ConfigError::Invalid {
                key: "max_frame",
                value: max_frame.to_string(),
                reason: format!("must be at least {} bytes", 2 * proto::node::CHUNK_SIZE),
            });
        }
        let limit = |key, flag: Option<usize>, file: Option<usize>, default| {
            let value = flag.or(file).unwrap_or(default);
            if value == 0 {
                return Err(ConfigError::Invalid {
                    key,
                    value: value.to_string(),
                    reason: "must be at least 1".to_string(),
                });
            }
            Ok(value)
        };
        let max_connections = limit(
            "max_connections",
            flags.max_connections,
            file.max_connections,
            DEFAULT_MAX_CONNECTIONS,
        )?;
        let max_ranks_per_user = limit(
            "max_ranks_per_user",
            flags.max_ranks_per_user,
            file.max_ranks_per_user,
            DEFAULT_MAX_RANKS_PER_USER,
        )?;
        let mut market_file = file.market.unwrap_or_default();
        if let Some(journal) = &flags.journal {
            market_file.journal = Some(journal.clone());
        }
        let listen = flags
            .listen
            .clone()
            .or(file.listen)
            .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let announce = discovery::resolve(file.discovery, file.announce, &listen)?;
        let mut market =
            MarketConfig::resolve(market_file.clone(), flags.accountd.clone(), cpus.as_ref())?;
        discovery::learn_accountd(&mut market, &market_file, announce.as_ref())?;
        let max_connections_per_address = limit(
            "max_connections_per_address",
            flags.max_connections_per_address,
            file.max_connections_per_address,
            DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
        )?;
        let max_connections_per_identity = limit(
            "max_connections_per_identity",
            flags.max_connections_per_identity,
            file.max_connections_per_identity,
            DEFAULT_MAX_CONNECTIONS_PER_IDENTITY,
        )?;
        let allowed_users = flags.allowed_users.clone().or(file.allowed_users);
        let env = match file.env_deny {
            Some(patterns) => EnvPolicy::new(patterns),
            None => EnvPolicy::default(),
        };
        let stopped_client_limit = duration(
            "stopped_client_limit",
            &flags.stopped_client_limit,
            file.stopped_client_limit,
            crate::heartbeat::DEFAULT_STOP_LIMIT,
        )?;
        let tcp_user_timeout = duration(
            "tcp_user_timeout",
            &flags.tcp_user_timeout,
            file.tcp_user_timeout,
            DEFAULT_TCP_USER_TIMEOUT,
        )?;
        let job_limits = job::job_limits(file.no_new_privs, file.umask, file.rlimits)?;
        Ok(Config {
            name,
            listen,
            tls,
            cgroup_parent,
            cpus,
            env,
            allowed_users,
            allow_root: flags.allow_root || file.allow_root.unwrap_or(false),
            heartbeat_timeout,
            heartbeat_interval,
            max_frame,
            max_connections,
            max_ranks_per_user,
            market,
            max_connections_per_address,
            max_connections_per_identity,
            stopped_client_limit,
            tcp_user_timeout,
            job_limits,
            announce,
        })
    }

    /// Loads the file named by `flags.config` (if any) and merges the flags into it.
    pub fn load(flags: &Flags) -> Result<Config, ConfigError> {
        let file = match &flags.config {
            Some(path) => FileConfig::load(path)?,
            None => FileConfig::default(),
        };
        Config::resolve(file, flags)
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
