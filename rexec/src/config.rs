//! The client configuration file: where it is looked for, what it holds (TLS
//! material, the largest bid allowed, the known nodes in file order) and the
//! errors that name the file and the key at fault.
//!
//! ```toml
//! ca = "/etc/rexec/ca.pem"
//! cert = "user-ann.pem"          # relative paths are relative to this file
//! key = "user-ann.key"
//! crl = "/etc/rexec/crl.pem"     # optional
//! max_rate = "1000"              # credits per minute, optional (default 1000)
//! [nodes]
//! n1 = "127.0.0.1:7001"
//! n2 = "node2.example.org:7000"
//! ```
//!
//! `REXEC_CA`, `REXEC_CERT`, `REXEC_KEY` and `REXEC_CRL` in the environment
//! override the file's keys of the same name.
//!
//! The file is found by, in order: `--config PATH`, the `REXEC_CONFIG`
//! environment variable, `$XDG_CONFIG_HOME/rexec/config.toml`,
//! `$HOME/.config/rexec/config.toml` (the same lookup as `accountctl`).
//!
//! How the client finds nodes, in order of precedence: `--nodes` or a
//! `[nodes]` table (name = "host:port", used as they are); else a
//! `[selectors]` table (name = "host:port", each name the service name in
//! that selector's certificate, asked in file order); else a `[discovery]`
//! table (the one every daemon shares, see `discovery::config`): the client
//! listens on the announcement group for selectors. A configured list
//! always wins over announcements.
//!
//! The batch commands (`rexec submit` and the rest) reach the queue at the
//! `[batch]` table's `address` (`addr` is taken too; one `"host:port"` or a list
//! of the queue's instances, tried in turn), checking that its
//! certificate is the service certificate named `server_name` (default
//! `batchd`); without an address, at the queue a selector knows of.
//!
//! An `[mpi]` table (`default = true`) makes every run an MPI job, as `--mpi` does
//! (see [`crate::mpi::config`]).
//!
//! The file is shared by every client tool: the certificate keys at the top
//! serve them all, and sections of other tools (such as `[accountd]`) are
//! left alone here. A top-level key no tool knows is refused, since it is
//! most likely a misspelt one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use certs::{Role, TlsPaths};
use clients::instances::AddressList;
use money::Bid;
use serde::Deserialize;

/// Largest bid allowed when the file sets no `max_rate`, in credits per minute.
pub const DEFAULT_MAX_RATE: u32 = 1000;

/// The configuration file name under `$HOME`.
pub const HOME_CONFIG: &str = ".config/rexec/config.toml";

/// What to add to a configuration that gives the client no way to find
/// nodes; every message about such a file ends with it.
pub const ADD_NODES: &str = "add a [nodes] table (name = \"host:port\" of each node), a \
     [selectors] table (name = \"host:port\" of each vexecd selector) or a [discovery] table \
     (the cluster's announcement group, to hear the selectors by multicast)";

/// A node the client knows: its certificate name and where it listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEntry {
    /// The node's name, as in its certificate.
    pub name: String,
    /// `host:port` to connect to.
    pub addr: String,
}

/// A selector (vexecd) the client may ask for nodes: its certificate name
/// (role service) and where it listens.
pub use clients::selector::SelectorEntry;

/// A loaded client configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it came from.
    pub path: PathBuf,
    /// CA, certificate, key and CRL, with relative paths resolved.
    pub tls: TlsPaths,
    /// The largest bid `-r` may ask for.
    pub max_rate: Bid,
    /// Whether the file set `max_rate` (else it is [`DEFAULT_MAX_RATE`]).
    pub max_rate_set: bool,
    /// The known nodes, in the order the file lists them.
    pub nodes: Vec<NodeEntry>,
    /// The configured selectors, in the order the file lists them.
    pub selectors: Vec<SelectorEntry>,
    /// The `[discovery]` table, checked, when the file has one.
    pub discovery: Option<discovery::config::DiscoveryConfig>,
    /// The `[batch]` table: where the batch queue is.
    pub batch: BatchEntry,
    /// The `[mpi]` table: whether runs are MPI jobs by default.
    pub mpi: crate::mpi::config::MpiEntry,
}

/// The batch queue as the `[batch]` table names it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchEntry {
    /// `host:port` of the queue, or of each of its instances (else found through
    /// a selector).
    #[serde(alias = "addr")]
    pub address: Option<AddressList>,
    /// The service name in the queue's certificate (default `batchd`).
    pub server_name: Option<String>,
}

impl BatchEntry {
    /// The configured addresses of the queue's instances, in the order to try them
    /// (none: found through a selector).
    pub fn addresses(&self) -> &[String] {
        self.address.as_ref().map_or(&[], AddressList::as_slice)
    }

    /// The name the queue's certificate must carry.
    pub fn server_name(&self) -> &str {
        self.server_name
            .as_deref()
            .unwrap_or(clients::batch::DEFAULT_SERVER_NAME)
    }
}

/// Why the configuration could not be loaded; every message names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No file where one was expected.
    #[error(
        "client configuration {path} does not exist; create it (see `rexec --help`) or point --config or REXEC_CONFIG at one"
    )]
    Missing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// No `--config`, no `REXEC_CONFIG` and no `HOME`.
    #[error(
        "cannot find the client configuration: HOME is not set; pass --config PATH or set REXEC_CONFIG"
    )]
    NoHome,
    /// The file exists but could not be read.
    #[error("cannot read client configuration {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has a key of the wrong type or name.
    #[error("client configuration {path}, line {line}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// What is wrong, as one line.
        message: String,
    },
    /// A key has a value that cannot be used.
    #[error("client configuration {path}: `{key}`: {message}")]
    Value {
        /// The file.
        path: PathBuf,
        /// The key, such as `max_rate` or `nodes.n1`.
        key: String,
        /// What is wrong and what to write instead.
        message: String,
    },
}

/// The top-level keys this client reads.
const KEYS: [&str; 6] = ["ca", "cert", "key", "crl", "max_rate", "nodes"];

#[derive(Deserialize)]
struct RawConfig {
    ca: Option<String>,
    cert: Option<String>,
    key: Option<String>,
    crl: Option<String>,
    max_rate: Option<toml::Spanned<toml::Value>>,
    #[serde(default)]
    nodes: BTreeMap<String, toml::Spanned<String>>,
    #[serde(default)]
    selectors: BTreeMap<String, toml::Spanned<String>>,
    discovery: Option<discovery::config::DiscoveryFile>,
    #[serde(default)]
    batch: BatchEntry,
    #[serde(default)]
    mpi: crate::mpi::config::MpiEntry,
}

/// Which file to load: `explicit` (from `--config` or `REXEC_CONFIG`, which
/// clap merges) or `$HOME/.config/rexec/config.toml`.
pub fn config_path(explicit: Option<&Path>) -> Result<PathBuf, ConfigError> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
        return Ok(PathBuf::from(x).join("rexec/config.toml"));
    }
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => Ok(PathBuf::from(home).join(HOME_CONFIG)),
        _ => Err(ConfigError::NoHome),
    }
}

impl Config {
    /// Read and check the configuration at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                ConfigError::Missing {
                    path: path.to_path_buf(),
                }
            } else {
                ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
        Config::parse_with(path, &text, |var| {
            std::env::var(var).ok().filter(|v| !v.is_empty())
        })
    }

    /// Check the configuration text `text`, said to come from `path`
    /// (relative TLS paths are resolved against its directory).
    ///
    /// ```
    /// let text = "ca = \"/pki/ca.pem\"\ncert = \"u.pem\"\nkey = \"u.key\"\n\
    ///             [nodes]\nzed = \"127.0.0.1:7001\"\nalpha = \"127.0.0.1:7002\"\n";
    /// let c = rexec::config::Config::parse("/home/ann/rexec.toml".as_ref(), text).unwrap();
    /// assert_eq!(c.tls.cert, std::path::Path::new("/home/ann/u.pem"));
    /// assert_eq!(c.nodes[0].name, "zed"); // file order, not name order
    /// assert_eq!(c.max_rate.to_string(), "1000");
    /// ```
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        Config::parse_with(path, text, |_| None)
    }

    /// [`Config::parse`], with `env` looked up for `REXEC_CA`, `REXEC_CERT`,
    /// `REXEC_KEY` and `REXEC_CRL`, which override the file's keys (as they
    /// do for `accountctl`); [`Config::load`] passes the process environment.
    pub fn parse_with(
        path: &Path,
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| syntax_error(path, text, &e))?;
        for (key, value) in &table {
            // Tables are other tools' sections; a stray plain key is a typo.
            if !KEYS.contains(&key.as_str()) && !value.is_table() {
                return Err(ConfigError::Value {
                    path: path.to_path_buf(),
                    key: key.clone(),
                    message: format!("unknown key; the keys here are {}", KEYS.join(", ")),
                });
            }
        }
        let raw: RawConfig = toml::from_str(text).map_err(|e| syntax_error(path, text, &e))?;
        let value_err = |key: &str, message: String| ConfigError::Value {
            path: path.to_path_buf(),
            key: key.to_string(),
            message,
        };
        let base = path.parent().unwrap_or(Path::new("."));
        let required = |key: &str, v: Option<String>, what: &str| match v {
            Some(s) if !s.is_empty() => Ok(base.join(s)),
            _ => Err(value_err(
                key,
                format!("missing; set it to the path of {what} (PEM)"),
            )),
        };
        let tls = TlsPaths {
            ca: required(
                "ca",
                env("REXEC_CA").or(raw.ca),
                "the cluster CA certificate",
            )?,
            cert: required(
                "cert",
                env("REXEC_CERT").or(raw.cert),
                "your user certificate",
            )?,
            key: required("key", env("REXEC_KEY").or(raw.key), "your private key")?,
            crl: env("REXEC_CRL")
                .or(raw.crl)
                .filter(|s| !s.is_empty())
                .map(|s| base.join(s)),
        };
        let max_rate_set = raw.max_rate.is_some();
        let max_rate = match raw.max_rate {
            None => Bid::from_credits(DEFAULT_MAX_RATE),
            Some(v) => {
                let span = v.span();
                let text = match v.into_inner() {
                    toml::Value::String(s) => s,
                    toml::Value::Integer(i) => i.to_string(),
                    // Money never goes through a float: read the decimal
                    // exactly as written (`2.5`), without TOML's digit
                    // separators; an exponent is refused like anywhere else.
                    toml::Value::Float(_) => text
                        .get(span)
                        .map(|literal| literal.replace('_', ""))
                        .unwrap_or_default(),
                    other => {
                        let m = format!(
                            "{other} is not a rate; write credits per minute like \"1000\" or 2.5"
                        );
                        return Err(value_err("max_rate", m));
                    }
                };
                text.parse::<Bid>()
                    .map_err(|e| value_err("max_rate", e.to_string()))?
            }
        };
        let mut nodes: Vec<(usize, NodeEntry)> = Vec::new();
        for (name, addr) in raw.nodes {
            let key = format!("nodes.{name}");
            certs::check_name(Role::Node, &name)
                .map_err(|e| value_err(&key, format!("not a usable node name: {e}")))?;
            let start = addr.span().start;
            let addr = addr.into_inner();
            check_addr(&addr).map_err(|m| value_err(&key, m))?;
            nodes.push((start, NodeEntry { name, addr }));
        }
        nodes.sort_by_key(|(start, _)| *start);
        let mut selectors: Vec<(usize, SelectorEntry)> = Vec::new();
        for (name, addr) in raw.selectors {
            let key = format!("selectors.{name}");
            certs::check_name(Role::Service, &name).map_err(|e| {
                value_err(
                    &key,
                    format!(
                        "not a usable selector name (the service name in its certificate): {e}"
                    ),
                )
            })?;
            let start = addr.span().start;
            let addr = addr.into_inner();
            check_addr(&addr).map_err(|m| value_err(&key, m))?;
            selectors.push((start, SelectorEntry { name, addr }));
        }
        selectors.sort_by_key(|(start, _)| *start);
        let discovery = match raw.discovery {
            None => None,
            Some(file) => Some(
                file.resolve()
                    .map_err(|e| value_err(&format!("discovery.{}", e.key), e.reason.clone()))?,
            ),
        };
        if raw
            .batch
            .address
            .as_ref()
            .is_some_and(|a| a.as_slice().is_empty())
        {
            return Err(value_err(
                "batch.address",
                "an empty list; give the queue's \"host:port\", or a list of its instances'".into(),
            ));
        }
        for addr in raw.batch.addresses() {
            check_addr(addr).map_err(|m| value_err("batch.address", m))?;
        }
        if let Some(name) = &raw.batch.server_name {
            certs::check_name(Role::Service, name).map_err(|e| {
                value_err(
                    "batch.server_name",
                    format!("not a usable service name (the name in the queue's certificate): {e}"),
                )
            })?;
        }
        Ok(Config {
            path: path.to_path_buf(),
            tls,
            max_rate,
            max_rate_set,
            nodes: nodes.into_iter().map(|(_, n)| n).collect(),
            selectors: selectors.into_iter().map(|(_, n)| n).collect(),
            discovery,
            batch: raw.batch,
            mpi: raw.mpi,
        })
    }

    /// Where the client's largest bid comes from, for a refusal: the file
    /// that sets `max_rate`, or the default.
    ///
    /// ```
    /// let base = "ca = \"c\"\ncert = \"u\"\nkey = \"k\"\n";
    /// let c = rexec::config::Config::parse("/x/a.toml".as_ref(), base).unwrap();
    /// assert!(c.max_rate_source().starts_with("the default of 1000 credits per minute"));
    /// let c = rexec::config::Config::parse("/x/a.toml".as_ref(), &format!("{base}max_rate = 5\n")).unwrap();
    /// assert_eq!(c.max_rate_source(), "max_rate = 5 credits per minute in /x/a.toml");
    /// ```
    pub fn max_rate_source(&self) -> String {
        if self.max_rate_set {
            format!(
                "max_rate = {} credits per minute in {}",
                self.max_rate,
                self.path.display()
            )
        } else {
            format!(
                "the default of {} credits per minute (set max_rate in {} to change it)",
                self.max_rate,
                self.path.display()
            )
        }
    }

    /// Whether nodes come from selectors: no `[nodes]`, but `[selectors]`
    /// or `[discovery]` (see the module docs for the precedence).
    pub fn selects(&self) -> bool {
        self.nodes.is_empty() && (!self.selectors.is_empty() || self.discovery.is_some())
    }

    /// The node called `name`, if the file lists it.
    pub fn node(&self, name: &str) -> Option<&NodeEntry> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

/// `host:port` with a non-empty host and a port number.
fn check_addr(addr: &str) -> Result<(), String> {
    let bad =
        || format!("{addr:?} is not an address; write it as \"host:port\", e.g. \"10.0.0.5:7000\"");
    let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    Ok(())
}

/// The client's certificate, key, CA or CRL named by the configuration cannot be
/// used for TLS.
#[derive(Debug, thiserror::Error)]
#[error("client configuration {}: {cause}", .path.display())]
pub struct TlsSetupError {
    /// The configuration file.
    pub path: PathBuf,
    /// Why.
    pub cause: certs::CertError,
}

impl Config {
    /// The TLS connector every connection of this client uses (the user's
    /// certificate, the cluster CA).
    pub fn connector(&self) -> Result<tokio_rustls::TlsConnector, TlsSetupError> {
        certs::connector(&self.tls).map_err(|cause| TlsSetupError {
            path: self.path.clone(),
            cause,
        })
    }
}

fn syntax_error(path: &Path, text: &str, e: &toml::de::Error) -> ConfigError {
    let line = e
        .span()
        .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
        .unwrap_or(1);
    let message = e.message().lines().collect::<Vec<_>>().join(" ");
    ConfigError::Syntax {
        path: path.to_path_buf(),
        line,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(Path::new("/etc/rexec/c.toml"), text)
    }

    const BASE: &str = "ca = \"ca.pem\"\ncert = \"/abs/u.pem\"\nkey = \"u.key\"\n";

    #[test]
    fn the_example_client_config_in_deploy_loads() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/etc/client.toml"
        ));
        let c = Config::load(path).unwrap();
        assert_eq!(c.nodes.len(), 2);
        assert_eq!(c.max_rate, Bid::from_credits(1000));
        assert!(c.tls.crl.is_some());
    }

    #[test]
    fn the_commented_selector_examples_in_deploy_load() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/etc/client.toml"
        ));
        let text = std::fs::read_to_string(path).unwrap();
        let uncommented: String = text
            .lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(rest)
                    if rest.starts_with('[')
                        || rest.split_once(" = ").is_some_and(|(k, _)| {
                            k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                        }) =>
                {
                    rest
                }
                _ => l,
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let c = Config::parse(path, &uncommented).unwrap();
        let names: Vec<_> = c.selectors.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["vexecd1", "vexecd2"]);
        assert_eq!(c.discovery.unwrap().port, 7477);
        assert_eq!(c.batch.addresses(), ["10.0.0.9:7482"]);
        assert_eq!(c.batch.server_name(), "batchd");
    }

    #[test]
    fn relative_paths_follow_the_file_and_crl_is_optional() {
        let c = parse(BASE).unwrap();
        assert_eq!(c.tls.ca, Path::new("/etc/rexec/ca.pem"));
        assert_eq!(c.tls.cert, Path::new("/abs/u.pem"));
        assert_eq!(c.tls.crl, None);
        assert!(c.nodes.is_empty());
    }

    #[test]
    fn nodes_keep_file_order() {
        let c = parse(&format!(
            "{BASE}[nodes]\nn3 = \"h:1\"\nn1 = \"h:2\"\nn2 = \"h:3\"\n"
        ))
        .unwrap();
        let names: Vec<_> = c.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["n3", "n1", "n2"]);
        assert_eq!(c.node("n1").unwrap().addr, "h:2");
    }

    #[test]
    fn max_rate_accepts_text_and_numbers_and_refuses_garbage() {
        let c = parse(&format!("{BASE}max_rate = \"2.5\"\n")).unwrap();
        assert_eq!(c.max_rate.micros_per_minute(), 2_500_000);
        let c = parse(&format!("{BASE}max_rate = 7\n")).unwrap();
        assert_eq!(c.max_rate.micros_per_minute(), 7_000_000);
        let e = parse(&format!("{BASE}max_rate = \"-1\"\n")).unwrap_err();
        assert!(e.to_string().contains("`max_rate`"), "{e}");
        assert!(e.to_string().contains("/etc/rexec/c.toml"), "{e}");
    }

    #[test]
    fn a_float_max_rate_is_read_as_written_not_rounded_through_f64() {
        let c = parse(&format!("{BASE}max_rate = 9000000000.000001\n")).unwrap();
        assert_eq!(c.max_rate.micros_per_minute(), 9_000_000_000_000_001);
        let c = parse(&format!("{BASE}max_rate = 1_000.25\n")).unwrap();
        assert_eq!(c.max_rate.micros_per_minute(), 1_000_250_000);
        let e = parse(&format!("{BASE}max_rate = 0.0000001\n")).unwrap_err();
        assert!(e.to_string().contains("6 decimal places"), "{e}");
        let e = parse(&format!("{BASE}max_rate = 1e3\n")).unwrap_err();
        assert!(e.to_string().contains("`max_rate`"), "{e}");
    }

    #[test]
    fn errors_name_the_file_and_the_key() {
        let e = parse("cert = \"a\"\nkey = \"b\"\n").unwrap_err();
        assert!(e.to_string().contains("`ca`: missing"), "{e}");
        let e = parse(&format!("{BASE}[nodes]\nn1 = \"nocolon\"\n")).unwrap_err();
        assert!(e.to_string().contains("`nodes.n1`"), "{e}");
        let e = parse(&format!("{BASE}[nodes]\n\"bad name!\" = \"h:1\"\n")).unwrap_err();
        assert!(e.to_string().contains("nodes.bad name!"), "{e}");
        let e = parse(&format!("{BASE}colour = \"blue\"\n")).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("`colour`: unknown key"), "{text}");
        let e = parse(&format!("{BASE}max_rate = [1]\n")).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("`max_rate`: [1] is not a rate"), "{text}");
        let e = parse("ca = \"a\"\ncert = 5\nkey = \"k\"\n").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("line 2: invalid type"), "{text}");
        assert!(!text.contains('\n'), "one line: {text}");
        let e = parse("ca = \"a\"\ncert = \n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
    }

    #[test]
    fn environment_overrides_the_certificate_keys() {
        let env = |v: &str| (v == "REXEC_CERT").then(|| "/other/u.pem".to_string());
        let c = Config::parse_with(Path::new("/etc/rexec/c.toml"), BASE, env).unwrap();
        assert_eq!(c.tls.cert, Path::new("/other/u.pem"));
        assert_eq!(c.tls.key, Path::new("/etc/rexec/u.key"));
    }

    #[test]
    fn other_tools_sections_are_left_alone() {
        let text = format!("{BASE}[accountd]\naddress = \"h:9\"\n[nodes]\nn1 = \"h:1\"\n");
        let c = parse(&text).unwrap();
        assert_eq!(c.nodes.len(), 1);
    }

    #[test]
    fn selectors_keep_file_order_and_names_are_checked() {
        let c = parse(&format!(
            "{BASE}[selectors]\nv2 = \"127.0.0.1:7481\"\nv1 = \"127.0.0.1:7480\"\n"
        ))
        .unwrap();
        let names: Vec<_> = c.selectors.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["v2", "v1"]);
        assert_eq!(c.selectors[1].addr, "127.0.0.1:7480");
        assert!(c.nodes.is_empty() && c.discovery.is_none());
        let e = parse(&format!("{BASE}[selectors]\nv1 = \"nocolon\"\n")).unwrap_err();
        assert!(e.to_string().contains("`selectors.v1`"), "{e}");
        let e = parse(&format!("{BASE}[selectors]\n\"bad name!\" = \"h:1\"\n")).unwrap_err();
        assert!(e.to_string().contains("selectors.bad name!"), "{e}");
        assert!(e.to_string().contains("selector name"), "{e}");
    }

    #[test]
    fn nodes_come_from_selectors_only_without_a_nodes_table() {
        let sel = "[selectors]\nv1 = \"h:1\"\n";
        let disc = "[discovery]\ngroup = \"239.255.77.9\"\n";
        let nodes = "[nodes]\nn1 = \"h:2\"\n";
        assert!(!parse(BASE).unwrap().selects());
        assert!(parse(&format!("{BASE}{sel}")).unwrap().selects());
        assert!(parse(&format!("{BASE}{disc}")).unwrap().selects());
        assert!(
            !parse(&format!("{BASE}{nodes}{sel}{disc}"))
                .unwrap()
                .selects()
        );
    }

    #[test]
    fn the_discovery_table_is_read_and_checked() {
        let c = parse(&format!(
            "{BASE}[discovery]\ngroup = \"239.255.77.9\"\nport = 7600\ninterface = \"127.0.0.1\"\nperiod = \"500ms\"\n"
        ))
        .unwrap();
        let d = c.discovery.unwrap();
        assert_eq!(
            (d.group.to_string().as_str(), d.port),
            ("239.255.77.9", 7600)
        );
        assert_eq!(d.period, std::time::Duration::from_millis(500));
        let e = parse(&format!("{BASE}[discovery]\ngroup = \"10.0.0.1\"\n")).unwrap_err();
        assert!(e.to_string().contains("`discovery.group`"), "{e}");
        let e = parse(&format!("{BASE}[discovery]\ncolour = 1\n")).unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
    }

    #[test]
    fn the_batch_table_names_the_queue() {
        let c = parse(BASE).unwrap();
        assert_eq!(c.batch, BatchEntry::default());
        assert_eq!(c.batch.server_name(), "batchd");
        let c = parse(&format!(
            "{BASE}[batch]\naddress = \"10.0.0.7:7490\"\nserver_name = \"queue1\"\n"
        ))
        .unwrap();
        assert_eq!(c.batch.addresses(), ["10.0.0.7:7490"]);
        assert_eq!(c.batch.server_name(), "queue1");
        let c = parse(&format!("{BASE}[batch]\naddr = \"h:1\"\n")).unwrap();
        assert_eq!(c.batch.addresses(), ["h:1"]);
        let c = parse(&format!("{BASE}[batch]\naddress = [\"h:1\", \"h:2\"]\n")).unwrap();
        assert_eq!(c.batch.addresses(), ["h:1", "h:2"]);
        for bad in ["[]", "[\"h:1\", \"nocolon\"]"] {
            let e = parse(&format!("{BASE}[batch]\naddress = {bad}\n")).unwrap_err();
            assert!(e.to_string().contains("`batch.address`"), "{e}");
        }
        let e = parse(&format!("{BASE}[batch]\naddress = \"nocolon\"\n")).unwrap_err();
        assert!(e.to_string().contains("`batch.address`"), "{e}");
        let e = parse(&format!("{BASE}[batch]\nserver_name = \"Bad Name\"\n")).unwrap_err();
        assert!(e.to_string().contains("`batch.server_name`"), "{e}");
        let e = parse(&format!("{BASE}[batch]\ncolour = 1\n")).unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
    }

    #[test]
    fn missing_file_says_how_to_fix_it() {
        let e = Config::load(Path::new("/nonexistent/rexec.toml")).unwrap_err();
        assert!(matches!(e, ConfigError::Missing { .. }));
        assert!(e.to_string().contains("--config"), "{e}");
    }
}
