//! vexecd's configuration: the TOML file (`--config`, example in
//! `deploy/etc/vexecd.toml`) whose keys the command line may override
//! ([`Flags`]), resolved and checked into one [`Config`].
//!
//! ```toml
//! name = "vexecd"                       # as in its service certificate
//! listen = "0.0.0.0:7478"               # TLS address of the selector protocol
//! advertise = "10.0.0.5:7478"           # announced address (required with 0.0.0.0)
//! udp_listen = "0.0.0.0:7478"           # unicast announcements (optional)
//! ca = "/etc/rexec/ca.pem"
//! cert = "/etc/rexec/service-vexecd.pem"
//! key = "/etc/rexec/service-vexecd.key"
//! crl = "/etc/rexec/crl.pem"
//! window_periods = 3                    # forget a sender after this many of its periods
//! max_nodes = 100000                    # senders kept at most
//! name_suffix = ".lab.example"          # only senders named so (optional)
//! networks = ["10.0.0.0/8"]             # only senders in these networks (optional)
//! max_connections = 1024
//! max_connections_per_address = 256
//! max_connections_per_identity = 64
//! idle_timeout = "5m"
//!
//! [discovery]                           # required: see discovery::config
//! cluster = "rexec"
//!
//! [metrics]                             # the metrics and the market page
//! listen = "127.0.0.1:9478"
//!
//! [ledger]                              # the page's ledger panel: a page for admins only
//! accountd = "10.0.0.2:7475"
//! cert = "/etc/rexec/service-ledger-reader.pem"
//! key = "/etc/rexec/service-ledger-reader.key"
//! hours = 24                            # 1 to 168
//! every = "10s"                         # how often accountd is asked
//! ```
//!
//! Paths in the file are taken as written (absolute in a deployment). The file is
//! loaded by `daemon::config`: flags over the file over the defaults below, unknown
//! keys refused by name.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ::daemon::config::{CapSettings, NoOtherKeys, TlsFlags, TlsSettings};
use ::daemon::flags::{CommonFlags, DaemonFlags};
use ::daemon::serve::AcceptLimits;
use certs::TlsPaths;
use discovery::config::{DiscoveryConfig, DiscoveryFile};
use serde::{Deserialize, Serialize};
use timespan::parse_duration;

use super::page::ledger::{LedgerConfig, LedgerFile};
use crate::table::{ClusterFilter, Network, TableConfig};

/// Default name: the service name `rexec-certs issue service` gives
/// selectors (several may share it, each with its own certificate).
pub const DEFAULT_NAME: &str = "vexecd";
/// Default TLS address.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:7478";
/// Default most simultaneous connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default most connections from one remote address (handshakes included).
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 256;
/// Default most connections of one certificate.
pub const DEFAULT_MAX_CONNECTIONS_PER_IDENTITY: usize = 64;
/// Default time a silent connection is kept.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Default window, in the sender's periods.
pub const DEFAULT_WINDOW_PERIODS: u32 = 3;
/// Default most senders kept.
pub const DEFAULT_MAX_NODES: usize = 100_000;

/// The settings as the file has them, and as the flags are laid over them: every
/// key optional, unknown keys refused by name.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Settings {
    /// The selector's name (its service certificate's).
    pub name: Option<String>,
    /// TLS address to listen on.
    pub listen: Option<String>,
    /// Address to announce.
    pub advertise: Option<String>,
    /// UDP address for unicast announcements.
    pub udp_listen: Option<String>,
    /// Where to write the bound TLS address once listening.
    pub ready_file: Option<PathBuf>,
    /// `ca`, `cert` (role service), `key`, `crl`.
    #[serde(flatten)]
    pub tls: TlsSettings,
    /// `max_connections`, `max_connections_per_address`, `max_connections_per_identity`.
    #[serde(flatten)]
    pub caps: CapSettings,
    /// Window in the sender's periods.
    pub window_periods: Option<u32>,
    /// Most senders kept.
    pub max_nodes: Option<usize>,
    /// Accept only senders whose name ends with this.
    pub name_suffix: Option<String>,
    /// Accept only senders in these networks (`10.0.0.0/8`).
    pub networks: Option<Vec<String>>,
    /// How long a silent connection is kept (`300s`, `5m`).
    pub idle_timeout: Option<String>,
    /// The shared `[discovery]` table.
    pub discovery: Option<DiscoveryFile>,
    /// `[metrics] listen`: where to serve Prometheus metrics (off without it).
    pub metrics: Option<exposition::MetricsFile>,
    /// `[ledger]`: the market page's ledger panel (off without it).
    pub ledger: Option<LedgerFile>,
    /// Any other key: refused by name.
    #[serde(flatten)]
    _unknown: NoOtherKeys,
}

/// The rexec market's selector: hears node announcements and answers
/// "select N nodes by POLICY" over mutual TLS.
// vexecd's command line (its doc comment above is `--help`'s): each flag beats the
// config file's key of the same name (serialized, laid over the file by
// `daemon::config::layer`).
#[derive(clap::Parser, Serialize, Debug, Clone, Default)]
#[command(name = "vexecd", version)]
pub struct Flags {
    /// `--config` (or `VEXECD_CONFIG`), `--listen` (the TLS address), `--ready-file`.
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonFlags<Vexecd>,
    /// Selector name, as in its service certificate [default: vexecd].
    #[arg(long)]
    pub name: Option<String>,
    /// Address to announce (required when listening on every interface).
    #[arg(long)]
    pub advertise: Option<String>,
    /// UDP address to hear unicast announcements on (e.g. 0.0.0.0:7478).
    #[arg(long)]
    pub udp_listen: Option<String>,
    /// `--ca`, `--cert` (role service), `--key`, `--crl`.
    #[command(flatten)]
    #[serde(flatten)]
    pub tls: TlsFlags,
    /// Forget a sender after this many of its periods without an announcement [default: 3].
    #[arg(long)]
    pub window_periods: Option<u32>,
    /// Most senders kept [default: 100000].
    #[arg(long)]
    pub max_nodes: Option<usize>,
    /// Most simultaneous connections [default: 1024].
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// How long a silent connection is kept, e.g. 300 (seconds), 5m [default: 5m].
    #[arg(long, value_parser = timespan::parse_duration)]
    #[serde(serialize_with = "::daemon::config::millis")]
    pub idle_timeout: Option<Duration>,
}

/// What vexecd's common flags say of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vexecd;

impl DaemonFlags for Vexecd {
    const DEFAULT_LISTEN: &'static str = DEFAULT_LISTEN;
    const CONFIG_ENV: Option<&'static str> = Some("VEXECD_CONFIG");
    const CONFIG_MUST_HOLD: Option<&'static str> = Some("a [discovery] table");
    const LISTENS_ON: &'static str = "TLS address";
}

/// Everything the daemon needs, checked.
#[derive(Debug, Clone)]
pub struct Config {
    /// The selector's name (checked against its certificate at start).
    pub name: String,
    /// TLS address to bind.
    pub listen: SocketAddr,
    /// Address to announce (`None`: the bound address).
    pub advertise: Option<SocketAddr>,
    /// UDP address for unicast announcements.
    pub udp_listen: Option<SocketAddr>,
    /// Where to write the bound TLS address.
    pub ready_file: Option<PathBuf>,
    /// TLS material.
    pub tls: TlsPaths,
    /// The node table's settings (cluster filter included).
    pub table: TableConfig,
    /// Announcing and listening.
    pub discovery: DiscoveryConfig,
    /// Most simultaneous connections.
    pub max_connections: usize,
    /// Most connections from one remote address.
    pub max_connections_per_address: usize,
    /// Most connections of one certificate.
    pub max_connections_per_identity: usize,
    /// How long a silent connection is kept.
    pub idle_timeout: Duration,
    /// Where to serve Prometheus metrics, if anywhere.
    pub metrics: Option<SocketAddr>,
    /// The market page's ledger panel, if on.
    pub ledger: Option<LedgerConfig>,
}

/// Why the configuration is unusable: what every daemon's may be
/// ([`::daemon::config::ConfigError`]), or no `[discovery]` table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file, a missing setting or an invalid one.
    #[error(transparent)]
    Settings(#[from] ::daemon::config::ConfigError),
    /// No `[discovery]` table.
    #[error(
        "the config file has no [discovery] table: vexecd learns nodes only from announcements, so without one it would hear nothing (see deploy/etc/vexecd.toml)"
    )]
    NoDiscovery,
}

fn invalid(what: &'static str, message: impl Into<String>) -> ConfigError {
    ::daemon::config::ConfigError::invalid(what, message).into()
}

impl From<::daemon::config::FileError> for ConfigError {
    fn from(e: ::daemon::config::FileError) -> ConfigError {
        ConfigError::Settings(e.into())
    }
}

impl From<::daemon::config::Invalid> for ConfigError {
    fn from(e: ::daemon::config::Invalid) -> ConfigError {
        ConfigError::Settings(e.into())
    }
}

impl Settings {
    /// Reads a config file and checks it against the settings: its table, for
    /// [`Config::resolve`].
    pub fn read(path: &Path) -> Result<toml::Table, ConfigError> {
        Ok(::daemon::config::read::<Settings>(path)?)
    }

    /// Parses config text and checks it (`path` only names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<toml::Table, ConfigError> {
        Ok(::daemon::config::parse::<Settings>(path, text)?)
    }
}

fn socket_addr(what: &'static str, text: &str) -> Result<SocketAddr, ConfigError> {
    text.to_socket_addrs()
        .map_err(|e| invalid(what, format!("{text:?}: {e} (write host:port)")))?
        .next()
        .ok_or_else(|| invalid(what, format!("{text:?} has no address")))
}

/// Parses `10.0.0.0/8` (or a bare address, a network of one).
pub fn parse_network(text: &str) -> Result<Network, ConfigError> {
    let (addr, prefix) = match text.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (text, None),
    };
    let addr: IpAddr = addr
        .trim()
        .parse()
        .map_err(|_| invalid("networks", format!("{text:?} is not an address/prefix")))?;
    let bits = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => bits,
        Some(p) => p
            .trim()
            .parse::<u8>()
            .ok()
            .filter(|p| *p <= bits)
            .ok_or_else(|| invalid("networks", format!("{text:?}: prefix is not 0 to {bits}")))?,
    };
    Ok(Network { addr, prefix })
}

fn positive(what: &'static str, v: usize) -> Result<usize, ConfigError> {
    if v == 0 {
        return Err(invalid(what, "must be at least 1"));
    }
    Ok(v)
}

impl Config {
    /// Reads the config file `flags` name (if any) and resolves it with them.
    pub fn load(flags: Flags) -> Result<Config, ConfigError> {
        Config::from_settings(flags.common.load(&flags)?)
    }

    /// Flags over the file over the defaults, each value checked.
    pub fn resolve(file: toml::Table, flags: Flags) -> Result<Config, ConfigError> {
        Config::from_settings(::daemon::config::layer(file, &flags)?)
    }

    /// Checks every setting and fills in the defaults.
    pub fn from_settings(s: Settings) -> Result<Config, ConfigError> {
        let discovery = s
            .discovery
            .as_ref()
            .ok_or(ConfigError::NoDiscovery)?
            .resolve()
            .map_err(|e| invalid("[discovery]", e.to_string()))?;
        let name = s.name.unwrap_or_else(|| DEFAULT_NAME.into());
        certs::check_name(certs::Role::Service, &name)
            .map_err(|e| invalid("name", e.to_string()))?;
        let listen_text = s.listen.unwrap_or_else(|| DEFAULT_LISTEN.into());
        let listen = socket_addr("listen", &listen_text)?;
        let advertise = ::daemon::announce::advertised(
            s.advertise.as_deref(),
            &listen_text,
            "vexecd",
            "in the config file",
        )
        .map_err(|e| invalid("advertise", e.described()))?;
        let udp_listen = match s.udp_listen {
            Some(u) => Some(socket_addr("udp_listen", &u)?),
            None => None,
        };
        if !discovery.multicast && udp_listen.is_none() {
            return Err(invalid(
                "udp_listen",
                "multicast is off ([discovery] multicast = false): set udp_listen so nodes can send announcements to it",
            ));
        }
        let tls: TlsPaths = s.tls.paths().map_err(::daemon::config::ConfigError::from)?;
        let window_periods = s.window_periods.unwrap_or(DEFAULT_WINDOW_PERIODS);
        if !(1..=100).contains(&window_periods) {
            return Err(invalid("window_periods", "must be 1 to 100"));
        }
        let max_nodes = positive("max_nodes", s.max_nodes.unwrap_or(DEFAULT_MAX_NODES))?;
        let networks = s
            .networks
            .unwrap_or_default()
            .iter()
            .map(|n| parse_network(n))
            .collect::<Result<Vec<_>, _>>()?;
        if s.name_suffix.as_deref() == Some("") {
            return Err(invalid(
                "name_suffix",
                "empty; leave it out to accept every name",
            ));
        }
        let table = TableConfig {
            window_periods,
            max_entries: max_nodes,
            cluster: ClusterFilter {
                cluster: discovery.cluster.clone(),
                name_suffix: s.name_suffix,
                networks,
            },
            // A forged announcement must not move a node: the daemon proves moves.
            prove_moves: true,
            ..TableConfig::default()
        };
        let metrics = match &s.metrics {
            Some(m) => m.address().map_err(|e| invalid("metrics", e.to_string()))?,
            None => None,
        };
        let ledger = match &s.ledger {
            None => None,
            Some(_) if metrics.is_none() => {
                return Err(invalid(
                    "ledger",
                    "the ledger panel is on the market page: set [metrics] listen too",
                ));
            }
            Some(l) => Some(
                l.resolve(tls.ca.clone(), tls.crl.clone())
                    .map_err(|(what, message)| invalid(what, message))?,
            ),
        };
        let idle_timeout = match s.idle_timeout {
            Some(t) => parse_duration(&t).map_err(|e| invalid("idle_timeout", e.to_string()))?,
            None => DEFAULT_IDLE_TIMEOUT,
        };
        if idle_timeout.is_zero() {
            return Err(invalid("idle_timeout", "must be more than 0"));
        }
        let limits = s.caps.limits(AcceptLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            per_identity: DEFAULT_MAX_CONNECTIONS_PER_IDENTITY,
        })?;
        Ok(Config {
            name,
            listen,
            advertise,
            udp_listen,
            ready_file: s.ready_file,
            tls,
            table,
            discovery,
            max_connections: limits.max_connections,
            max_connections_per_address: limits.per_address,
            max_connections_per_identity: limits.per_identity,
            idle_timeout,
            metrics,
            ledger,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::resolve(
            Settings::parse(Path::new("t.toml"), text)?,
            Flags::default(),
        )
    }

    const BASE: &str = "ca = \"/ca.pem\"\ncert = \"/c.pem\"\nkey = \"/c.key\"\n";

    #[test]
    fn the_documented_example_parses() {
        let example = ::daemon::config::toml_example(include_str!("config.rs"));
        let c = parse(&example).unwrap();
        assert_eq!(c.name, DEFAULT_NAME);
        assert_eq!(c.advertise, Some("10.0.0.5:7478".parse().unwrap()));
        assert_eq!(c.table.cluster.networks.len(), 1);
        assert_eq!(c.idle_timeout, Duration::from_secs(300));
        let ledger = c.ledger.unwrap();
        assert_eq!(
            (ledger.accountd.as_str(), ledger.hours),
            ("10.0.0.2:7475", 24)
        );
        assert_eq!(ledger.tls.ca, c.tls.ca);
    }

    #[test]
    fn the_ledger_panel_needs_the_page() {
        let e = parse(&format!(
            "{BASE}listen = \"127.0.0.1:0\"\n[discovery]\n[ledger]\naccountd = \"h:1\"\ncert = \"/r.pem\"\nkey = \"/r.key\"\n"
        ))
        .unwrap_err();
        assert!(e.to_string().contains("[metrics] listen"), "{e}");
    }

    #[test]
    fn the_deployed_example_parses() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/etc/vexecd.toml"
        ));
        let c = Config::resolve(Settings::read(path).unwrap(), Flags::default()).unwrap();
        assert_eq!(c.listen, DEFAULT_LISTEN.parse().unwrap());
        assert!(c.advertise.is_some() && c.udp_listen.is_some() && c.tls.crl.is_some());
        assert_eq!(c.table.window_periods, DEFAULT_WINDOW_PERIODS);
    }

    #[test]
    fn discovery_is_required() {
        let e = parse(&format!("{BASE}listen = \"127.0.0.1:0\"\n")).unwrap_err();
        assert!(matches!(e, ConfigError::NoDiscovery), "{e}");
        assert!(e.to_string().contains("[discovery]"));
    }

    #[test]
    fn every_interface_needs_an_advertised_address() {
        let e = parse(&format!("{BASE}[discovery]\n")).unwrap_err();
        assert!(e.to_string().contains("advertise"), "{e}");
        let c = parse(&format!(
            "{BASE}advertise = \"10.1.2.3:7478\"\n[discovery]\n"
        ))
        .unwrap();
        assert_eq!(c.advertise.unwrap().port(), 7478);
    }

    #[test]
    fn bad_values_name_their_key() {
        for (extra, disc, key) in [
            ("window_periods = 0\n", "", "window_periods"),
            ("max_nodes = 0\n", "", "max_nodes"),
            ("networks = [\"10.0.0.0/33\"]\n", "", "networks"),
            ("networks = [\"lab\"]\n", "", "networks"),
            ("name_suffix = \"\"\n", "", "name_suffix"),
            ("idle_timeout = \"soon\"\n", "", "idle_timeout"),
            (
                "",
                "multicast = false\nunicast = [\"127.0.0.1:9\"]\n",
                "udp_listen",
            ),
            ("", "ttl = 300\n", "[discovery]"),
        ] {
            let text = format!("{BASE}listen = \"127.0.0.1:0\"\n{extra}[discovery]\n{disc}");
            let e = parse(&text).unwrap_err();
            assert!(e.to_string().contains(key), "{text}: {e}");
        }
        let e = parse(&format!("{BASE}colour = 1\n[discovery]\n")).unwrap_err();
        assert!(!e.to_string().contains('\n'), "{e}");
        assert!(e.to_string().contains("`colour`"), "{e}");
    }

    #[test]
    fn networks_parse() {
        let n = parse_network("10.0.0.0/8").unwrap();
        assert!(n.contains("10.9.8.7".parse().unwrap()));
        assert!(!n.contains("11.0.0.1".parse().unwrap()));
        assert_eq!(parse_network("::1").unwrap().prefix, 128);
    }
}
