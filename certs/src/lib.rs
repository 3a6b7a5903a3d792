//! The rexec cluster PKI and mutual TLS 1.3.
//!
//! One cluster CA signs every certificate; each carries a [`Role`] and a name as the URI
//! SAN `rexec:ROLE:NAME` (see `docs/SECURITY.md`). Every connection in the system is TLS
//! 1.3 with both sides authenticated against that CA.
//!
//! This crate is the PKI and TLS only; what the daemons share beyond that (accept
//! loop, connection caps, start-up, signals, ready file, configuration loading) is
//! the `daemon` crate's.
//!
//! Modules:
//! - `role`: [`Role`].
//! - `identity`: [`PeerIdentity`], the URI encoding, authorisation helpers and their
//!   refusal, [`AuthError`].
//! - `names`: the safe-name rules ([`check_name`]).
//! - `ca`: [`Ca`]: create, load, issue ([`Issued`]).
//! - `crl`: revocation state and CRL signing ([`Ca::revoke`], [`CrlState`]).
//! - `config`: [`TlsPaths`], [`server_config`], [`client_config`], [`peer_identity`].
//! - `stream`: [`accept`] and [`connect`] over tokio-rustls (any [`PeerAddr`] transport).
//! - `explain`: handshake and certificate errors in one line ([`explain`],
//!   [`explain_error`], [`handshake_error`]).
//! - `reload`: [`ReloadableAcceptor`], a server's TLS rebuilt from its files (on SIGHUP,
//!   by the `daemon` crate), so a revocation takes effect without a restart.
//! - [`jobsign`]: signing batch jobs with a user's key and verifying them against the
//!   CA and CRL ([`jobsign::sign`], [`jobsign::verify`], [`jobsign::JobTrust`]).
//! - `inspect`: [`CertInfo`] and [`CrlInfo`], what `rexec-certs show` prints.
//! - `files`: PEM loading, key permission checks, atomic writes.
//! - `error`: [`CertError`].
//! - [`testing`]: [`testing::TestPki`], a temporary CA for tests.
//!
//! ```
//! use certs::{Ca, Role, TlsPaths};
//! let dir = tempfile::tempdir().unwrap();
//! let ca = Ca::init(&dir.path().join("ca"), "demo", false).unwrap();
//! let issued = ca.issue(Role::Node, "n1", &["10.0.0.1".to_string()], 30, dir.path()).unwrap();
//! let paths = TlsPaths { ca: ca.ca_cert_path(), cert: issued.cert, key: issued.key, crl: Some(ca.crl_path()) };
//! let server = certs::server_config(&paths).unwrap();
//! assert!(server.alpn_protocols.is_empty());
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod ca;
mod config;
mod crl;
mod error;
mod explain;
mod files;
mod identity;
mod inspect;
pub mod jobsign;
mod names;
mod reload;
mod role;
mod stream;
pub mod testing;

pub use ca::{BACKDATE, CA_CERT_FILE, CA_DAYS, CA_KEY_FILE, CRL_FILE, Ca, Issued, MAX_DAYS};
pub use config::{TlsPaths, client_config, crypto_provider, peer_identity, server_config};
pub use crl::{CRL_DAYS, CRL_STATE_FILE, CrlState, RevokedEntry};
pub use error::CertError;
pub use explain::{
    explain, explain_certificate_error, explain_error, explain_io, explain_tls_error,
    handshake_error,
};
pub use files::check_key_mode;
pub use identity::{AuthError, PeerIdentity, URI_PREFIX};
pub use inspect::{CertInfo, CrlInfo, fingerprint};
pub use names::{MAX_NAME_LEN, check_name, check_plain_name};
pub use reload::ReloadableAcceptor;
pub use role::Role;
pub use stream::{
    HANDSHAKE_TIMEOUT, LazyBufReader, PeerAddr, accept, acceptor, connect, connector,
};
