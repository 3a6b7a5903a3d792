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
//! ```
//!
//! With a `[discovery]` table accountd announces itself (kind `Account`, the name
//! in its certificate, and its address) every period, so nodes and clients with
//! no accountd address configured find it. The address announced is `advertise`
//! (top-level key, `host:port`) or else the bound listening address; listening on
//! an unspecified address (`0.0.0.0`) without `advertise` is refused at start.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Default listening address.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:7071";
/// Default per-entry limit, in credits.
pub const DEFAULT_MAX_ENTRY: &str = "100000";

/// The file's contents.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Address to listen on.
    pub listen: Option<String>,
    /// The SQLite ledger.
    pub database: Option<PathBuf>,
    /// Where to write the bound address once listening.
    pub ready_file: Option<PathBuf>,
    /// CA certificate.
    pub ca: Option<PathBuf>,
    /// accountd's certificate (role service, name `accountd`).
    pub cert: Option<PathBuf>,
    /// Its key.
    pub key: Option<PathBuf>,
    /// Revocation list.
    pub crl: Option<PathBuf>,
    /// Address announced instead of the listening one (`host:port`).
    pub advertise: Option<String>,
    /// The `[discovery]` table: announce accountd to the cluster.
    pub discovery: Option<discovery::config::DiscoveryFile>,
    /// Limits.
    #[serde(default)]
    pub limits: Limits,
}

/// `[limits]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Largest amount of one entry, in credits (decimal text).
    pub max_entry: Option<String>,
    /// Writes per group commit.
    pub max_batch: Option<usize>,
    /// Concurrent connections.
    pub max_connections: Option<usize>,
    /// Seconds a connection may stay silent.
    pub idle_timeout_secs: Option<u64>,
    /// Concurrent connections from one remote address.
    pub max_connections_per_address: Option<usize>,
    /// Concurrent connections of one certificate identity.
    pub max_connections_per_identity: Option<usize>,
    /// Refused requests of one peer recorded one row each per window.
    pub refusals_recorded: Option<u32>,
    /// Refused requests of one peer per window before it is cut off.
    pub max_refusals: Option<u32>,
    /// Seconds of the refusal window (and of a cut-off).
    pub refusal_window_secs: Option<u64>,
}

/// Per-peer settings given as flags (each overrides the file's key).
#[derive(Debug, Clone, Copy, Default)]
pub struct PeerFlags {
    /// `--max-connections-per-address`.
    pub per_address: Option<usize>,
    /// `--max-connections-per-identity`.
    pub per_identity: Option<usize>,
    /// `--refusals-recorded`.
    pub refusals_recorded: Option<u32>,
    /// `--max-refusals`.
    pub max_refusals: Option<u32>,
    /// `--refusal-window` (seconds).
    pub refusal_window_secs: Option<u64>,
}

impl Limits {
    /// The per-peer limits: flags over the file over the defaults, each checked.
    pub fn peer_limits(&self, flags: PeerFlags) -> Result<crate::server::PeerLimits, ConfigError> {
        let d = crate::server::PeerLimits::default();
        let positive = |what: &'static str, v: u64| {
            if v == 0 {
                return Err(ConfigError::Invalid {
                    what,
                    message: "must be at least 1".into(),
                });
            }
            Ok(v)
        };
        let per_address = flags
            .per_address
            .or(self.max_connections_per_address)
            .unwrap_or(d.per_address);
        positive("max_connections_per_address", per_address as u64)?;
        let per_identity = flags
            .per_identity
            .or(self.max_connections_per_identity)
            .unwrap_or(d.per_identity);
        positive("max_connections_per_identity", per_identity as u64)?;
        let window = flags
            .refusal_window_secs
            .or(self.refusal_window_secs)
            .unwrap_or(d.refusals.window.as_secs());
        positive("refusal_window_secs", window)?;
        Ok(crate::server::PeerLimits {
            per_address,
            per_identity,
            refusals: crate::refusals::RefusalPolicy {
                recorded: flags
                    .refusals_recorded
                    .or(self.refusals_recorded)
                    .unwrap_or(d.refusals.recorded),
                max_refused: flags
                    .max_refusals
                    .or(self.max_refusals)
                    .unwrap_or(d.refusals.max_refused),
                window: std::time::Duration::from_secs(window),
            },
        })
    }
}

/// Why the configuration is unusable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Cannot read the file.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Not valid TOML for this schema.
    #[error("config {path} is invalid: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said, on one line.
        message: String,
    },
    /// A required setting is absent.
    #[error("no {0} configured: set it in the config file or pass the flag")]
    Missing(&'static str),
    /// A value is out of range.
    #[error("invalid {what}: {message}")]
    Invalid {
        /// Which setting.
        what: &'static str,
        /// Why.
        message: String,
    },
}

impl FileConfig {
    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        FileConfig::parse(path, &text)
    }

    /// Parses config text (`path` only names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<FileConfig, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().replace('\n', " ").trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses() {
        let doc = include_str!("config.rs");
        let example: String = doc
            .lines()
            .skip_while(|l| !l.starts_with("//! ```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| l.trim_start_matches("//!").trim_start())
            .collect::<Vec<_>>()
            .join("\n");
        let c = FileConfig::parse(Path::new("example"), &example).unwrap();
        assert_eq!(c.limits.max_batch, Some(1024));
        assert_eq!(c.crl.as_deref(), Some(Path::new("/etc/rexec/crl.pem")));
        let d = c.discovery.as_ref().unwrap().resolve().unwrap();
        assert_eq!((d.cluster.as_str(), d.port), ("rexec", 7477));
        let peers = c.limits.peer_limits(PeerFlags::default()).unwrap();
        assert_eq!(peers, crate::server::PeerLimits::default());
    }

    #[test]
    fn the_example_configs_in_deploy_parse() {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/etc"));
        let text = std::fs::read_to_string(dir.join("accountd.toml")).unwrap();
        let c = FileConfig::parse(&dir.join("accountd.toml"), &text).unwrap();
        assert_eq!(c.listen.as_deref(), Some(DEFAULT_LISTEN));
        assert!(c.crl.is_some());
        let client = crate::ctl::settings::load_ctl_file(&dir.join("client.toml"), true).unwrap();
        assert_eq!(client.accountd.address.as_deref(), Some("10.0.0.9:7071"));
        assert!(client.cert.is_some() && client.key.is_some() && client.ca.is_some());
    }

    #[test]
    fn client_file_paths_are_relative_to_the_file_as_for_rexec() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(
            &path,
            "ca = \"ca.pem\"\ncert = \"/abs/u.pem\"\nkey = \"keys/u.key\"\n",
        )
        .unwrap();
        let c = crate::ctl::settings::load_ctl_file(&path, true).unwrap();
        assert_eq!(c.ca, Some(dir.path().join("ca.pem")));
        assert_eq!(c.cert, Some(PathBuf::from("/abs/u.pem")));
        assert_eq!(c.key, Some(dir.path().join("keys/u.key")));
        assert_eq!(c.crl, None);
    }

    #[test]
    fn per_peer_caps_default_below_the_global_limit_and_zero_is_refused() {
        let d = crate::server::PeerLimits::default();
        assert!(d.per_identity < d.per_address && d.per_address < 1024);
        let l = Limits {
            max_connections_per_identity: Some(0),
            ..Limits::default()
        };
        let e = l.peer_limits(PeerFlags::default()).unwrap_err();
        assert!(
            e.to_string().contains("max_connections_per_identity"),
            "{e}"
        );
        let flags = PeerFlags {
            per_address: Some(9),
            ..PeerFlags::default()
        };
        assert_eq!(Limits::default().peer_limits(flags).unwrap().per_address, 9);
    }

    #[test]
    fn unknown_keys_are_errors_on_one_line() {
        let e = FileConfig::parse(Path::new("x.toml"), "listne = \"a\"\n").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("x.toml") && !text.contains('\n'), "{text}");
    }
}
