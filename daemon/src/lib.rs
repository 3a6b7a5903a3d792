//! What every rexec daemon (rexecd, vexecd, accountd) shares that is not PKI or TLS
//! (those are `certs`'s).
//!
//! Modules:
//! - [`announce`]: the address a daemon announces ([`announce::advertised`]) and a
//!   service's announcement of itself ([`announce::announce_service`]).
//! - [`admit`]: a TLS connection's start, handshake, framing and per-identity cap,
//!   a peer over its cap answered in the daemon's own protocol; then each request
//!   read ([`admit::next_request`]); a refusal logged once for all of them
//!   ([`log_not_admitted!`], [`admit_or_return!`]).
//! - `caps`: [`ConnectionCaps`], per-address and per-identity connection caps.
//! - [`serve`]: [`serve::Gate`], a daemon's accept loop under its connection limits,
//!   and [`serve::drain`], the end of it at shutdown.
//! - `start`: the start-up shim of the daemons' `main`: the listener ([`bind`]),
//!   logging, runtime and exit status ([`run`], each cause of an error printed
//!   once), signals ([`Signals`]), the ready file ([`write_ready_file`]).
//! - `reload`: [`reload_on_sighup`], the TLS files read again on each SIGHUP.
//! - [`flags`]: [`flags::CommonFlags`], the `--config`, `--listen` and `--ready-file`
//!   flags every daemon's command line flattens in.
//! - [`config`]: the one configuration loader: a TOML file under the command line's
//!   flags under the defaults, unknown keys refused by name, and the settings every
//!   daemon has ([`config::TlsSettings`], [`config::CapSettings`]).
//!
//! ```
//! use daemon::ConnectionCaps;
//! let caps = ConnectionCaps::new(1, 1);
//! let ip = "192.0.2.1".parse().unwrap();
//! let slot = caps.admit_address(ip).unwrap();
//! assert!(caps.admit_address(ip).is_err());
//! drop(slot);
//! assert!(caps.admit_address(ip).is_ok());
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod admit;
pub mod announce;
mod caps;
pub mod config;
pub mod flags;
mod reload;
pub mod serve;
mod start;

#[doc(hidden)]
pub use tracing as __tracing;

pub use caps::{AddressSlot, CapExceeded, ConnectionCaps, IdentitySlot};
pub use reload::reload_on_sighup;
pub use start::{
    BindError, ReadyFileError, SignalError, Signals, StopSignals, bind, error_line, init_tracing,
    run, write_ready_file,
};
