//! The flags every daemon's command line has, declared once: `--config`, `--listen`
//! and `--ready-file` ([`CommonFlags`]), each with the same name, value and file key
//! (`listen`, `ready_file`; `--config` is no key) in every daemon. What differs
//! between daemons (the default address its help shows, the environment variable
//! that may name its config file) a daemon says once, as constants of a
//! [`DaemonFlags`] marker type.
//!
//! A daemon's command line flattens them in first, for clap and for the layering of
//! `crate::config` (the flags given are serialized over the file's keys):
//!
//! ```
//! use clap::Parser;
//! use daemon::flags::{CommonFlags, DaemonFlags};
//!
//! #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
//! struct Exampled;
//! impl DaemonFlags for Exampled {
//!     const DEFAULT_LISTEN: &'static str = "0.0.0.0:7999";
//!     const CONFIG_ENV: Option<&'static str> = Some("EXAMPLED_CONFIG");
//! }
//!
//! #[derive(Parser, serde::Serialize)]
//! struct Flags {
//!     #[command(flatten)]
//!     #[serde(flatten)]
//!     common: CommonFlags<Exampled>,
//! }
//!
//! let flags = Flags::try_parse_from(["exampled", "--listen", "127.0.0.1:0"]).unwrap();
//! assert_eq!(flags.common.listen.as_deref(), Some("127.0.0.1:0"));
//! let table = toml::Table::try_from(&flags).unwrap();
//! assert_eq!(table.get("listen").and_then(|v| v.as_str()), Some("127.0.0.1:0"));
//! assert!(table.get("config").is_none());
//! ```

use std::marker::PhantomData;
use std::path::PathBuf;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::config::FileError;

/// What a daemon's [`CommonFlags`] say of it.
pub trait DaemonFlags {
    /// The address it listens on when neither flag nor file names one (shown in
    /// `--listen`'s help; the daemon applies it).
    const DEFAULT_LISTEN: &'static str;
    /// The environment variable that may name its config file instead of `--config`.
    const CONFIG_ENV: Option<&'static str> = None;
    /// What its config file must hold, said in `--config`'s help ("a \[discovery\] table").
    const CONFIG_MUST_HOLD: Option<&'static str> = None;
    /// What it listens on, said in the help: "address", or "TLS address" for a
    /// daemon that also listens on UDP.
    const LISTENS_ON: &'static str = "address";
}

/// `--config`, `--listen` and `--ready-file`: put `#[command(flatten)]
/// #[serde(flatten)] pub common: CommonFlags<Marker>` first in a daemon's command line.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args, Serialize)]
pub struct CommonFlags<D: DaemonFlags> {
    /// The config file, read under the flags (no key of the file).
    #[arg(long, value_name = "PATH", env = D::CONFIG_ENV, help = config_help::<D>())]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// The address to listen on (key `listen`).
    #[arg(long, value_name = "ADDR", help = listen_help::<D>())]
    pub listen: Option<String>,
    /// Where to write the bound address once listening (key `ready_file`).
    #[arg(long, value_name = "PATH", help = ready_file_help::<D>())]
    pub ready_file: Option<PathBuf>,
    /// The daemon the help texts speak of (no value: public so that a command line
    /// can be written with `..Default::default()`).
    #[arg(skip)]
    #[serde(skip)]
    pub daemon: PhantomData<D>,
}

impl<D: DaemonFlags> CommonFlags<D> {
    /// The file `--config` names (an empty one without it) under `flags`, the whole
    /// command line: see [`crate::config::load`].
    pub fn load<T: DeserializeOwned>(&self, flags: &impl Serialize) -> Result<T, FileError> {
        crate::config::load(self.config.as_deref(), flags)
    }
}

fn config_help<D: DaemonFlags>() -> String {
    match D::CONFIG_MUST_HOLD {
        Some(what) => format!("TOML config file; it must hold {what} (flags override its values)"),
        None => "TOML config file (flags override its values)".to_string(),
    }
}

fn listen_help<D: DaemonFlags>() -> String {
    let mut what = D::LISTENS_ON.to_string();
    if let Some(first) = what.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    format!(
        "{what} to listen on [default: {}]; port 0 picks a free port (see --ready-file)",
        D::DEFAULT_LISTEN
    )
}

fn ready_file_help<D: DaemonFlags>() -> String {
    format!(
        "Write the bound {} to this file (atomically) once listening",
        D::LISTENS_ON
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    struct Selector;
    impl DaemonFlags for Selector {
        const DEFAULT_LISTEN: &'static str = "0.0.0.0:7478";
        const CONFIG_ENV: Option<&'static str> = Some("DAEMON_FLAGS_TEST_CONFIG");
        const CONFIG_MUST_HOLD: Option<&'static str> = Some("a [discovery] table");
        const LISTENS_ON: &'static str = "TLS address";
    }

    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    struct Plain;
    impl DaemonFlags for Plain {
        const DEFAULT_LISTEN: &'static str = "0.0.0.0:7070";
    }

    #[derive(Parser, Serialize)]
    #[serde(bound = "")]
    struct Cli<D: DaemonFlags + Send + Sync + 'static> {
        #[command(flatten)]
        #[serde(flatten)]
        common: CommonFlags<D>,
    }

    fn help<D: DaemonFlags + Send + Sync + 'static>() -> String {
        Cli::<D>::command().render_long_help().to_string()
    }

    #[test]
    fn the_help_says_what_each_daemon_differs_in() {
        let selector = help::<Selector>();
        for needle in [
            "--config <PATH>",
            "TOML config file; it must hold a [discovery] table (flags override its values)",
            "[env: DAEMON_FLAGS_TEST_CONFIG=]",
            "--listen <ADDR>",
            "TLS address to listen on [default: 0.0.0.0:7478]; port 0 picks a free port",
            "--ready-file <PATH>",
            "Write the bound TLS address to this file (atomically) once listening",
        ] {
            assert!(selector.contains(needle), "{needle:?} not in:\n{selector}");
        }
        let plain = help::<Plain>();
        assert!(plain.contains("Address to listen on [default: 0.0.0.0:7070]"));
        assert!(plain.contains("TOML config file (flags override its values)"));
        assert!(!plain.contains("[env:"), "{plain}");
    }

    #[test]
    fn the_keys_are_laid_over_the_file_and_config_is_none() {
        let cli = Cli::<Plain>::try_parse_from([
            "d",
            "--config",
            "/nonexistent/d.toml",
            "--listen",
            "127.0.0.1:0",
            "--ready-file",
            "/run/d.addr",
        ])
        .unwrap();
        let table = toml::Table::try_from(&cli).unwrap();
        assert_eq!(table.len(), 2, "{table}");
        assert_eq!(table["listen"].as_str(), Some("127.0.0.1:0"));
        assert_eq!(table["ready_file"].as_str(), Some("/run/d.addr"));
        let e = cli
            .common
            .load::<toml::Table>(&cli)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("cannot read config file /nonexistent/d.toml"),
            "{e}"
        );
    }
}
