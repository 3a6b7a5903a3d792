//! accountd's configuration: a TOML file whose every field a command-line
//! flag can override. The TLS keys sit at the top, as in rexecd's file and in the
//! users' client file. Example (all keys shown; `crl` and `[limits]` optional):
//!
//! ```toml
//! listen = "0.0.0.0:7071"
//! database = "/var/lib/rexec/ledger.db"
//! ready_file = "/run/rexec/accountd.addr"
//! ca = "/etc/rexec/ca.pem"
//! cert = "/etc/rexec/service-accountd.pem"
//! key = "/etc/rexec/service-accountd.key"
//! crl = "/etc/rexec/crl.pem"
//!
//! [limits]
//! max_entry = "100000"      # credits, the most one entry may move
//! max_batch = 1024          # writes per group commit (1 = no batching)
//! max_connections = 1024
//! idle_timeout_secs = 300
//! max_connections_per_address = 256   # TLS handshakes included
//! max_connections_per_identity = 64   # one certificate
//! refusals_recorded = 16    # refused requests of one peer recorded one by one per window
//! max_refusals = 64         # refused requests of one peer per window before it is cut off
//! refusal_window_secs = 60  # the window, and how long a cut-off lasts
//!
//! [discovery]               # announce accountd to the cluster (see the `discovery` crate)
//! cluster = "rexec"
//! group = "239.255.77.1"
//! port = 7477
//! period = "2s"
//!
//! [metrics]                 # Prometheus metrics, off without it (see `crate::metrics`)
//! listen = "127.0.0.1:9471"
//!
//! [store]                   # the ledger in PostgreSQL instead of `database` (optional)
//! postgres = "host=db1 port=5432 dbname=ledger user=accountd sslmode=require"
//! password_file = "/etc/rexec/accountd-db.password"   # or peer authentication
//! ca = "/etc/rexec/db-ca.pem"   # the database server's CA: TLS to it, verified
//! anchors = "/var/lib/rexec/anchors"   # signed chain heads appended here (optional)
//! anchor_entries = 1000     # a head every this many entries
//! anchor_secs = 600         #   or this often while the ledger grows
//! ```
//!
//! With `[store] postgres` the ledger lives in that database, which any number
//! of accountd may serve at once, and `database` is not used. The connection
//! string must not hold a password (it would show in `ps` and logs): the
//! password goes in `password_file`, or the server authenticates the Unix user
//! (`peer`, over its socket: `host=/var/run/postgresql`).
//!
//! With a `[discovery]` table accountd announces itself (kind `Account`, the name
//! in its certificate, and its address) every period, so nodes and clients with
//! no accountd address configured find it. The address announced is `advertise`
//! (top-level key, `host:port`) or else the bound listening address; listening on
//! an unspecified address (`0.0.0.0`) without `advertise` is refused at start.
//!
//! The file is loaded by `daemon::config`: the flags ([`Flags`], the binary's command
//! line) over the file over the defaults, unknown keys refused by name.

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use daemon::config::ConfigError;
use daemon::config::{CapSettings, NoOtherKeys, TlsFlags, TlsSettings};
use daemon::flags::{CommonFlags, DaemonFlags};
use daemon::serve::AcceptLimits;
use serde::{Deserialize, Serialize};

/// Default listening address.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:7071";
/// Default per-entry limit, in credits.
pub const DEFAULT_MAX_ENTRY: &str = "100000";
/// Default most simultaneous connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default writes per group commit.
pub const DEFAULT_MAX_BATCH: usize = 1024;
/// Default seconds a silent connection is kept.
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 300;

/// The settings as the file has them, and as the flags are laid over them: every
/// key optional, unknown keys refused by name.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Settings {
    /// Address to listen on.
    pub listen: Option<String>,
    /// The SQLite ledger.
    pub database: Option<PathBuf>,
    /// Where to write the bound address once listening.
    pub ready_file: Option<PathBuf>,
    /// `ca`, `cert` (role service, name `accountd`), `key`, `crl`.
    #[serde(flatten)]
    pub tls: TlsSettings,
    /// Address announced instead of the listening one (`host:port`).
    pub advertise: Option<String>,
    /// The `[discovery]` table: announce accountd to the cluster.
    pub discovery: Option<discovery::config::DiscoveryFile>,
    /// Limits.
    #[serde(default)]
    pub limits: Limits,
    /// `[metrics] listen`: where to serve Prometheus metrics (off without it).
    pub metrics: Option<exposition::MetricsFile>,
    /// `[store]`: the ledger in PostgreSQL.
    pub store: Option<StoreFile>,
    /// Any other key: refused by name.
    #[serde(flatten)]
    _unknown: NoOtherKeys,
}

/// `[store]`: where the ledger lives when not in the SQLite `database`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StoreFile {
    /// PostgreSQL connection string (`host=… dbname=… user=…`), without a password.
    pub postgres: Option<String>,
    /// File holding the database password.
    pub password_file: Option<PathBuf>,
    /// CA certificate of the database server (TLS, verified).
    pub ca: Option<PathBuf>,
    /// File the signed chain heads are appended to (off without it).
    pub anchors: Option<PathBuf>,
    /// Entries between two signed chain heads [default: 1000].
    pub anchor_entries: Option<i64>,
    /// Seconds between two signed chain heads while the ledger grows [default: 600].
    pub anchor_secs: Option<u64>,
    /// Any other key: refused by name.
    #[serde(flatten)]
    _unknown: NoOtherKeys,
}

impl StoreFile {
    /// Where and how often to sign chain heads, with the service key and
    /// certificate that sign; `None` without `anchors`.
    pub fn anchors(
        &self,
        key: &Path,
        cert: &Path,
    ) -> Result<Option<crate::store::anchors::AnchorSettings>, ConfigError> {
        let Some(path) = &self.anchors else {
            return Ok(None);
        };
        let entries = self.anchor_entries.unwrap_or(1000);
        let secs = self.anchor_secs.unwrap_or(600);
        if entries < 1 || secs < 1 {
            return Err(ConfigError::Invalid {
                what: "[store] anchor_entries/anchor_secs",
                message: "must be at least 1".into(),
            });
        }
        Ok(Some(crate::store::anchors::AnchorSettings {
            path: path.clone(),
            key: key.to_path_buf(),
            cert: cert.to_path_buf(),
            entries,
            interval: Duration::from_secs(secs),
        }))
    }

    /// The PostgreSQL settings, `None` when no `postgres` is configured.
    pub fn postgres(&self) -> Result<Option<crate::store::pg::PgConfig>, ConfigError> {
        let Some(conninfo) = &self.postgres else {
            if self.password_file.is_some() || self.ca.is_some() {
                return Err(ConfigError::Invalid {
                    what: "[store]",
                    message: "password_file and ca need postgres = \"host=… dbname=… user=…\""
                        .into(),
                });
            }
            return Ok(None);
        };
        Ok(Some(crate::store::pg::PgConfig {
            conninfo: conninfo.clone(),
            password_file: self.password_file.clone(),
            ca: self.ca.clone(),
        }))
    }
}

/// `[limits]`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Limits {
    /// Largest amount of one entry, in credits (decimal text).
    pub max_entry: Option<String>,
    /// Writes per group commit.
    pub max_batch: Option<usize>,
    /// Seconds a connection may stay silent.
    pub idle_timeout_secs: Option<u64>,
    /// `max_connections`, `max_connections_per_address` (TLS handshakes included),
    /// `max_connections_per_identity`.
    #[serde(flatten)]
    pub caps: CapSettings,
    /// Refused requests of one peer recorded one row each per window.
    pub refusals_recorded: Option<u32>,
    /// Refused requests of one peer per window before it is cut off.
    pub max_refusals: Option<u32>,
    /// Seconds of the refusal window (and of a cut-off).
    pub refusal_window_secs: Option<u64>,
    /// Any other key: refused by name.
    #[serde(flatten)]
    _unknown: NoOtherKeys,
}

/// The rexec market's credit ledger: accounts, grants, idempotent debits, audit.
// accountd's command line (its doc comment above is `--help`'s): each flag beats the
// config file's key it is serialized as (`limits.*` for the `[limits]` table), laid
// over the file by `daemon::config::layer`.
#[derive(clap::Parser, Serialize, Debug, Clone, Default)]
#[command(
    name = "accountd",
    version,
    after_help = "The ledger is a SQLite file (--database, or `database` in the config file) or a \
PostgreSQL database shared by any number of accountd: the config file's [store] table, \
`postgres = \"host=... dbname=... user=...\"` (no password in it), `password_file`, `ca` (the \
database server's CA, for TLS) and `anchors`, `anchor_entries`, `anchor_secs` (signed chain \
heads); see deploy/etc/accountd.toml. Give --init once to create the ledger in either."
)]
pub struct Flags {
    /// `--config` (or `ACCOUNTD_CONFIG`), `--listen`, `--ready-file`.
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonFlags<Accountd>,
    /// The SQLite ledger file (or the config file's `[store] postgres`: see below).
    #[arg(long)]
    pub database: Option<PathBuf>,
    /// Create the ledger if it does not exist, in SQLite or PostgreSQL (otherwise a
    /// missing ledger is an error).
    #[arg(long)]
    #[serde(skip)]
    pub init: bool,
    /// `--ca`, `--cert` (role service, name accountd), `--key`, `--crl`.
    #[command(flatten)]
    #[serde(flatten)]
    pub tls: TlsFlags,
    /// Writes per group commit; 1 commits every write on its own [default: 1024].
    #[arg(long)]
    #[serde(rename = "limits.max_batch")]
    pub max_batch: Option<usize>,
    /// Largest amount one entry may move, in credits [default: 100000].
    #[arg(long)]
    #[serde(rename = "limits.max_entry")]
    pub max_entry: Option<String>,
    /// Most simultaneous connections [default: 1024].
    #[arg(long)]
    #[serde(rename = "limits.max_connections")]
    pub max_connections: Option<usize>,
    /// How long a silent connection is kept, e.g. 300 (seconds), 5m or 1.5s [default: 300].
    // The file's key counts whole seconds (`idle_timeout_secs`), so this flag is
    // applied after the layering ([`Settings::idle_timeout`]).
    #[arg(long, value_parser = timespan::parse_duration)]
    #[serde(skip)]
    pub idle_timeout: Option<Duration>,
    /// Most simultaneous connections from one address, handshakes included [default: 256].
    #[arg(long)]
    #[serde(rename = "limits.max_connections_per_address")]
    pub max_connections_per_address: Option<usize>,
    /// Most simultaneous connections of one certificate [default: 64].
    #[arg(long)]
    #[serde(rename = "limits.max_connections_per_identity")]
    pub max_connections_per_identity: Option<usize>,
    /// Refused requests of one peer recorded one by one per window [default: 16].
    #[arg(long)]
    #[serde(rename = "limits.refusals_recorded")]
    pub refusals_recorded: Option<u32>,
    /// Refused requests of one peer per window before it is cut off [default: 64].
    #[arg(long)]
    #[serde(rename = "limits.max_refusals")]
    pub max_refusals: Option<u32>,
    /// Seconds of the refusal window, and of a cut-off [default: 60].
    #[arg(long)]
    #[serde(rename = "limits.refusal_window_secs")]
    pub refusal_window: Option<u64>,
}

/// What accountd's common flags say of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Accountd;

impl DaemonFlags for Accountd {
    const DEFAULT_LISTEN: &'static str = DEFAULT_LISTEN;
    const CONFIG_ENV: Option<&'static str> = Some("ACCOUNTD_CONFIG");
}

impl Settings {
    /// Reads a config file and checks it against the settings: its table, for
    /// [`Settings::layered`].
    pub fn read(path: &Path) -> Result<toml::Table, ConfigError> {
        Ok(daemon::config::read::<Settings>(path)?)
    }

    /// Parses config text and checks it (`path` only names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<toml::Table, ConfigError> {
        Ok(daemon::config::parse::<Settings>(path, text)?)
    }

    /// The file's table (see [`Settings::read`]) with `flags` laid over it.
    pub fn layered(file: toml::Table, flags: &Flags) -> Result<Settings, ConfigError> {
        Ok(daemon::config::layer(file, flags)?)
    }

    /// Where to serve Prometheus metrics (`[metrics] listen`); `None`: off.
    pub fn metrics_addr(&self) -> Result<Option<std::net::SocketAddr>, ConfigError> {
        let Some(m) = &self.metrics else {
            return Ok(None);
        };
        m.address().map_err(|e| ConfigError::Invalid {
            what: "[metrics] listen",
            message: format!("{:?} is not an address like 127.0.0.1:9471", e.value),
        })
    }

    /// The file `flags` name (if any) with the flags laid over it.
    pub fn load(flags: &Flags) -> Result<Settings, ConfigError> {
        Ok(flags.common.load(flags)?)
    }

    /// How long a silent connection is kept: `--idle-timeout`, else the file's
    /// `idle_timeout_secs`, else 300 s.
    pub fn idle_timeout(&self, flags: &Flags) -> Duration {
        flags.idle_timeout.unwrap_or(Duration::from_secs(
            self.limits
                .idle_timeout_secs
                .unwrap_or(DEFAULT_IDLE_TIMEOUT_SECS),
        ))
    }
}

impl Limits {
    /// The connection limits, each checked (0 is refused).
    pub fn accept_limits(&self) -> Result<AcceptLimits, ConfigError> {
        let d = crate::server::PeerLimits::default();
        Ok(self.caps.limits(AcceptLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            per_address: d.per_address,
            per_identity: d.per_identity,
        })?)
    }

    /// The per-peer limits over the defaults, each checked.
    pub fn peer_limits(&self) -> Result<crate::server::PeerLimits, ConfigError> {
        let d = crate::server::PeerLimits::default();
        let caps = self.accept_limits()?;
        let window = self
            .refusal_window_secs
            .unwrap_or(d.refusals.window.as_secs());
        if window == 0 {
            return Err(ConfigError::Invalid {
                what: "refusal_window_secs",
                message: "must be at least 1".into(),
            });
        }
        Ok(crate::server::PeerLimits {
            per_address: caps.per_address,
            per_identity: caps.per_identity,
            refusals: crate::refusals::RefusalPolicy {
                recorded: self.refusals_recorded.unwrap_or(d.refusals.recorded),
                max_refused: self.max_refusals.unwrap_or(d.refusals.max_refused),
                window: Duration::from_secs(window),
            },
        })
    }
}

#[cfg(test)]
mod tests;
