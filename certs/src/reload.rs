//! A server's TLS acceptor that can be rebuilt from its files while the server runs, so
//! an admin who revokes a certificate (or renews the server's own) only has to send the
//! daemon SIGHUP (the `daemon` crate's `reload_on_sighup` calls
//! [`ReloadableAcceptor::reload`]): restarting rexecd would kill every job on the node.
//!
//! [`ReloadableAcceptor::reload`] reads the CA, certificate, key and CRL again and swaps
//! the new configuration in only if all of it loads; a half-copied or broken file keeps
//! the old configuration and reports why. Handshakes already under way finish with the
//! configuration they started with; established connections are not re-checked (TLS
//! authenticates a connection once, at its start).

use std::sync::RwLock;

use tokio_rustls::TlsAcceptor;

use crate::config::{TlsPaths, server_config};
use crate::error::CertError;

/// A [`TlsAcceptor`] for fixed [`TlsPaths`], rebuilt on demand.
pub struct ReloadableAcceptor {
    paths: TlsPaths,
    current: RwLock<TlsAcceptor>,
}

impl std::fmt::Debug for ReloadableAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadableAcceptor")
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

impl ReloadableAcceptor {
    /// Loads the server configuration from `paths`.
    pub fn load(paths: TlsPaths) -> Result<ReloadableAcceptor, CertError> {
        let acceptor = TlsAcceptor::from(server_config(&paths)?);
        Ok(ReloadableAcceptor {
            paths,
            current: RwLock::new(acceptor),
        })
    }

    /// The acceptor to use for the next handshake (a cheap clone of an `Arc`).
    pub fn current(&self) -> TlsAcceptor {
        // A poisoned lock still holds a complete acceptor: the writer only assigns.
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reads every file again and, if all of it loads, uses the result for new
    /// handshakes. On error the previous configuration stays in use.
    pub fn reload(&self) -> Result<(), CertError> {
        let fresh = TlsAcceptor::from(server_config(&self.paths)?);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        Ok(())
    }

    /// The files it loads from.
    pub fn paths(&self) -> &TlsPaths {
        &self.paths
    }
}
