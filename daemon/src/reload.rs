//! The daemons' SIGHUP: each one reloads the daemon's TLS files
//! ([`certs::ReloadableAcceptor::reload`]), so a revocation or a renewed
//! certificate takes effect without a restart.

use std::sync::Arc;

use certs::ReloadableAcceptor;
use tokio::signal::unix::Signal;

/// Reloads `acceptor` each time `hangups` (a SIGHUP stream) fires, for as long as the
/// current tokio runtime runs, logging each outcome. The caller creates the stream
/// first thing, before the slow parts of its start-up, so an early `systemctl reload`
/// is queued for the reload loop instead of killing the daemon (SIGHUP's default
/// action). Must be called inside a runtime.
pub fn reload_on_sighup(acceptor: Arc<ReloadableAcceptor>, mut hangups: Signal) {
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let task = Arc::clone(&acceptor);
            // Reading and parsing files is blocking work.
            match tokio::task::spawn_blocking(move || task.reload()).await {
                Ok(Ok(())) => {
                    let paths = acceptor.paths();
                    tracing::info!(cert = %paths.cert.display(), crl = ?paths.crl,
                        "SIGHUP: reloaded the TLS configuration");
                }
                Ok(Err(e)) => tracing::error!(error = %e,
                    "SIGHUP: cannot reload the TLS configuration; keeping the old one"),
                Err(e) => tracing::error!(error = %e, "SIGHUP: the reload task failed"),
            }
        }
    });
}
