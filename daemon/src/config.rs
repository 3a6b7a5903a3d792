//! The daemons' one configuration loader: a TOML file, the command line's flags laid
//! over it, the defaults under both, and the settings every daemon has.
//!
//! A daemon describes its file once, as a settings struct of `Option`s (serde
//! `Deserialize`), and its command line once, as a clap struct that also derives
//! `Serialize` under the file's key names (a flag for a key of a table is renamed
//! `"table.key"`; a flag that is no key is `#[serde(skip)]`). [`load`] then reads the
//! file, checks it against the settings struct (so a mistake in the file is reported
//! with its line), lays the flags that were given over it ([`layer`]) and hands back
//! one settings value: flags over the file, and the daemon fills the rest with its
//! defaults (`s.listen.unwrap_or(DEFAULT_LISTEN)`), with no merge written per key.
//!
//! The shared tables are flattened into a daemon's settings with `#[serde(flatten)]`:
//! [`TlsSettings`] (`ca`, `cert`, `key`, `crl`) and [`CapSettings`]
//! (`max_connections` and the per-address and per-identity caps). serde's
//! `deny_unknown_fields` does not work beside `flatten`, so a struct that flattens
//! ends with `#[serde(flatten)] _unknown: NoOtherKeys`, which takes whatever no field
//! took and refuses the first such key by name ([`NoOtherKeys`]).
//!
//! ```
//! use daemon::config::{CapSettings, NoOtherKeys, TlsSettings};
//! #[derive(serde::Deserialize)]
//! struct Settings {
//!     listen: Option<String>,
//!     #[serde(flatten)]
//!     tls: TlsSettings,
//!     #[serde(flatten)]
//!     caps: CapSettings,
//!     #[serde(flatten)]
//!     _unknown: NoOtherKeys,
//! }
//! #[derive(serde::Serialize, Default)]
//! struct Flags {
//!     listen: Option<String>,
//!     max_connections: Option<usize>,
//! }
//! let path = std::path::Path::new("d.toml");
//! let file = daemon::config::parse::<Settings>(path, "listen = \"0.0.0.0:1\"\nca = \"/ca.pem\"\n").unwrap();
//! let flags = Flags { max_connections: Some(8), ..Flags::default() };
//! let s: Settings = daemon::config::layer(file, &flags).unwrap();
//! assert_eq!(s.listen.as_deref(), Some("0.0.0.0:1"));
//! assert_eq!(s.caps.max_connections, Some(8));
//! assert_eq!(s.tls.ca.as_deref(), Some(std::path::Path::new("/ca.pem")));
//! let e = daemon::config::parse::<Settings>(path, "listen = \"x\"\nlisten_addr = 1\n");
//! assert_eq!(e.unwrap_err().to_string(),
//!     "config file d.toml is invalid: unknown key `listen_addr`");
//! ```

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::{DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::serve::AcceptLimits;

/// The config file could not be read, or does not fit the daemon's settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The file could not be read.
    #[error("cannot read config file {}: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said (in the message, so not chained as a source too).
        cause: std::io::Error,
    },
    /// The file is not valid TOML, or not for these settings.
    #[error("config file {} is invalid: {detail}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, on one line (with the line of the file when known).
        detail: String,
    },
    /// The flags given do not fit the settings (a daemon's flags and settings
    /// disagree on a key's type: a bug, not a user's mistake).
    #[error("the command line does not fit the configuration: {0}")]
    Flags(String),
}

/// Why a daemon's configuration is unusable, each message one line naming the file
/// or the setting: accountd's, batchd's and (with its own `[discovery]` case)
/// vexecd's. rexecd's also names the flag and the value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read, or is not valid TOML for these settings.
    #[error(transparent)]
    File(#[from] FileError),
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

impl ConfigError {
    /// The setting `what` is invalid: `message` says why.
    pub fn invalid(what: &'static str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            what,
            message: message.into(),
        }
    }
}

impl From<Invalid> for ConfigError {
    fn from(e: Invalid) -> ConfigError {
        ConfigError::invalid(e.key, e.reason)
    }
}

impl From<MissingTls> for ConfigError {
    fn from(m: MissingTls) -> ConfigError {
        ConfigError::Missing(m.described())
    }
}

/// A setting's value is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {key} {value:?}: {reason}")]
pub struct Invalid {
    /// The config key.
    pub key: &'static str,
    /// The value given.
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Reads the file at `path` and checks it against the settings `T`: the file's
/// table, for [`layer`].
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<toml::Table, FileError> {
    let text = std::fs::read_to_string(path).map_err(|cause| FileError::Read {
        path: path.to_path_buf(),
        cause,
    })?;
    parse::<T>(path, &text)
}

/// Parses config text and checks it against the settings `T` (`path` only names
/// it in errors): the file's table, for [`layer`].
pub fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<toml::Table, FileError> {
    let invalid = |e: toml::de::Error| FileError::Parse {
        path: path.to_path_buf(),
        detail: one_line(text, &e),
    };
    toml::from_str::<T>(text).map_err(invalid)?;
    text.parse::<toml::Table>().map_err(invalid)
}

/// `path`'s table (an empty one without a file) under `flags`: see [`layer`].
pub fn load<T: DeserializeOwned>(
    path: Option<&Path>,
    flags: &impl Serialize,
) -> Result<T, FileError> {
    let file = match path {
        Some(path) => read::<T>(path)?,
        None => toml::Table::new(),
    };
    layer(file, flags)
}

/// The settings `T` from the file's table with `flags` laid over it: every flag
/// that was given (serialized; `None` is left out) replaces the key of its name, a
/// name `"table.key"` the key of that table.
pub fn layer<T: DeserializeOwned>(
    mut file: toml::Table,
    flags: &impl Serialize,
) -> Result<T, FileError> {
    let flags = toml::Table::try_from(flags).map_err(|e| FileError::Flags(e.to_string()))?;
    for (name, value) in flags {
        let keys: Vec<&str> = name.split('.').collect();
        set(&mut file, &keys, value);
    }
    T::deserialize(toml::Value::Table(file)).map_err(|e| FileError::Flags(e.message().into()))
}

/// Sets `keys` (a path of tables, then the key) to `value`, making the tables.
fn set(table: &mut toml::Table, keys: &[&str], value: toml::Value) {
    match keys {
        [] => {}
        [key] => {
            table.insert(key.to_string(), value);
        }
        [key, rest @ ..] => {
            let entry = table
                .entry(key.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if !entry.is_table() {
                *entry = toml::Value::Table(toml::Table::new());
            }
            if let toml::Value::Table(inner) = entry {
                set(inner, rest, value);
            }
        }
    }
}

/// A TOML error on one line, after the line of the file it is on when that is known.
fn one_line(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim().replace('\n', " ");
    // An empty span (a flattened struct's error) or one over several lines (a whole
    // table) would point at a misleading line.
    let key_or_value = |s: &std::ops::Range<usize>| {
        text.get(s.clone())
            .is_some_and(|t| !t.is_empty() && !t.contains('\n'))
    };
    match e.span().filter(key_or_value) {
        Some(span) => {
            let line = text[..span.start].matches('\n').count() + 1;
            format!("line {line}: {message}")
        }
        None => message,
    }
}

/// Writes a duration flag (`Option<Duration>`, parsed by clap with
/// `timespan`) as the file would hold it, whole milliseconds: put
/// `#[serde(serialize_with = "daemon::config::millis")]` on the flag.
pub fn millis<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&format!("{}ms", d.as_millis())),
        None => s.serialize_none(),
    }
}

/// The keys of a settings struct that no field took: refused by name. Flatten it
/// last into a struct that flattens others (`#[serde(flatten)] _unknown:
/// NoOtherKeys`), where `deny_unknown_fields` does not work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoOtherKeys;

impl<'de> Deserialize<'de> for NoOtherKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Refuse;
        impl<'de> Visitor<'de> for Refuse {
            type Value = NoOtherKeys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("no other keys")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NoOtherKeys, A::Error> {
                match map.next_key::<String>()? {
                    Some(key) => Err(serde::de::Error::custom(format!("unknown key `{key}`"))),
                    None => Ok(NoOtherKeys),
                }
            }
        }
        deserializer.deserialize_map(Refuse)
    }
}

/// The TLS keys every daemon's file has at its top: `ca`, `cert`, `key` and `crl`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct TlsSettings {
    /// The cluster CA certificate.
    pub ca: Option<PathBuf>,
    /// The daemon's certificate.
    pub cert: Option<PathBuf>,
    /// Its private key.
    pub key: Option<PathBuf>,
    /// The revocation list (optional).
    pub crl: Option<PathBuf>,
}

/// The TLS flags every daemon has, one for each key of [`TlsSettings`]: put
/// `#[command(flatten)] #[serde(flatten)] pub tls: TlsFlags` in its command line.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args, Serialize)]
pub struct TlsFlags {
    /// Cluster CA certificate (PEM).
    #[arg(long, value_name = "PATH")]
    pub ca: Option<PathBuf>,
    /// This daemon's certificate (PEM).
    #[arg(long, value_name = "PATH")]
    pub cert: Option<PathBuf>,
    /// Its private key (PEM, mode 0600).
    #[arg(long, value_name = "PATH")]
    pub key: Option<PathBuf>,
    /// Certificate revocation list (PEM).
    #[arg(long, value_name = "PATH")]
    pub crl: Option<PathBuf>,
}

/// The first ```` ```toml ```` block of a module's `//!` comment (`doc`, the file's
/// text), so a test can check that the example a daemon documents still loads.
pub fn toml_example(doc: &str) -> String {
    doc.lines()
        .skip_while(|l| !l.starts_with("//! ```toml"))
        .skip(1)
        .take_while(|l| !l.starts_with("//! ```"))
        .map(|l| l.trim_start_matches("//!").trim_start())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A TLS setting that is needed and absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.described())]
pub struct MissingTls {
    /// The key (and flag): `cert`, `key` or `ca`.
    pub key: &'static str,
}

impl MissingTls {
    /// What the key names, with its flag: `certificate (--cert)`.
    pub fn described(&self) -> &'static str {
        match self.key {
            "cert" => "certificate (--cert)",
            "key" => "private key (--key)",
            _ => "CA certificate (--ca)",
        }
    }
}

impl TlsSettings {
    /// The paths, or the first of `cert`, `key` and `ca` that is missing.
    pub fn paths(&self) -> Result<certs::TlsPaths, MissingTls> {
        let need = |p: &Option<PathBuf>, key| p.clone().ok_or(MissingTls { key });
        Ok(certs::TlsPaths {
            cert: need(&self.cert, "cert")?,
            key: need(&self.key, "key")?,
            ca: need(&self.ca, "ca")?,
            crl: self.crl.clone(),
        })
    }
}

/// The connection caps every daemon has ([`AcceptLimits`]): `max_connections`,
/// `max_connections_per_address` and `max_connections_per_identity`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct CapSettings {
    /// Most connections open at once.
    pub max_connections: Option<usize>,
    /// Most from one remote address, TLS handshakes included.
    pub max_connections_per_address: Option<usize>,
    /// Most of one certificate.
    pub max_connections_per_identity: Option<usize>,
}

impl CapSettings {
    /// The limits, each given one or else the default's; 0 is refused, naming its key.
    pub fn limits(&self, defaults: AcceptLimits) -> Result<AcceptLimits, Invalid> {
        let positive = |key, given: Option<usize>, default| {
            let value = given.unwrap_or(default);
            if value == 0 {
                return Err(Invalid {
                    key,
                    value: value.to_string(),
                    reason: "must be at least 1".to_string(),
                });
            }
            Ok(value)
        };
        Ok(AcceptLimits {
            max_connections: positive(
                "max_connections",
                self.max_connections,
                defaults.max_connections,
            )?,
            per_address: positive(
                "max_connections_per_address",
                self.max_connections_per_address,
                defaults.per_address,
            )?,
            per_identity: positive(
                "max_connections_per_identity",
                self.max_connections_per_identity,
                defaults.per_identity,
            )?,
        })
    }
}

#[cfg(test)]
mod tests;
