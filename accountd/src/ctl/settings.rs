//! Where `accountctl`'s settings come from: the client config file it shares
//! with every rexec tool, and its default path.
//!
//! Settings, strongest first: command-line flags, environment variables
//! (`ACCOUNTD_ADDR`, `REXEC_CA`, `REXEC_CERT`, `REXEC_KEY`, `REXEC_CRL`), then
//! the config file (`--config`, `REXEC_CONFIG`, or
//! `$XDG_CONFIG_HOME/rexec/config.toml`, else `~/.config/rexec/config.toml`):
//!
//! ```toml
//! ca = "/etc/rexec/ca.pem"
//! cert = "/home/alice/.config/rexec/user-alice.pem"
//! key = "/home/alice/.config/rexec/user-alice.key"
//! crl = "/etc/rexec/crl.pem"
//!
//! [accountd]
//! address = "accounts.example.org:7071"   # or a list of instances, tried in turn
//! server_name = "accountd"      # name in accountd's certificate
//!
//! [discovery]                   # without an address: hear accountd announce itself
//! cluster = "mycluster"
//! ```
//!
//! Where accountd was heard is remembered for an hour (`discovery::cache`, the
//! same per-user cache `rexec` keeps of the selectors); the next run connects
//! there at once and listens again only if accountd no longer answers there.
//!
//! This is the one client file every rexec tool reads: the certificate keys at
//! the top are shared with `rexec` (relative paths name files beside the config
//! file, for both), and other keys and sections (such as
//! `[nodes]`) belong to other tools and are ignored here.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use daemon::config::FileError;

use crate::config::ConfigError;

/// The parts of the shared rexec config file accountctl reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CtlFile {
    /// `[accountd]`.
    #[serde(default)]
    pub accountd: CtlServer,
    /// Cluster CA certificate (top-level `ca`).
    pub ca: Option<PathBuf>,
    /// Your certificate (top-level `cert`).
    pub cert: Option<PathBuf>,
    /// Your private key (top-level `key`).
    pub key: Option<PathBuf>,
    /// Certificate revocation list (top-level `crl`).
    pub crl: Option<PathBuf>,
    /// `[discovery]`: with no accountd address anywhere, listen for
    /// accountd's announcements on this group.
    pub discovery: Option<discovery::config::DiscoveryFile>,
}

/// `[accountd]` in the client config.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CtlServer {
    /// `host:port`, or a list of accountd instances tried in turn.
    pub address: Option<clients::instances::AddressList>,
    /// Name in accountd's certificate.
    pub server_name: Option<String>,
}

/// The default config file path, if a home directory is known.
pub fn default_config_path() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(x).join("rexec/config.toml"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/rexec/config.toml"))
}

/// Reads the client config; a missing default file is not an error.
pub fn load_ctl_file(path: &Path, explicit: bool) -> Result<CtlFile, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let mut file: CtlFile = toml::from_str(&text).map_err(|e| FileError::Parse {
                path: path.to_path_buf(),
                detail: e.to_string().replace('\n', " ").trim().to_string(),
            })?;
            // Relative paths name files beside the config file, as rexec reads them.
            let base = path.parent().unwrap_or(Path::new("."));
            for p in [&mut file.ca, &mut file.cert, &mut file.key, &mut file.crl] {
                if let Some(rel) = p.as_mut().filter(|p| p.is_relative()) {
                    *rel = base.join(&*rel);
                }
            }
            Ok(file)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => Ok(CtlFile::default()),
        Err(cause) => Err(FileError::Read {
            path: path.to_path_buf(),
            cause,
        }
        .into()),
    }
}
