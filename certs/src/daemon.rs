//! The start-up shim every rexec daemon's `main` shares (rexecd, accountd, vexecd):
//! logging to standard error, the async runtime and the exit status ([`run`]), the
//! signals a daemon serves by ([`Signals`]: SIGHUP reloads its TLS files through
//! [`crate::reload_on_sighup`], SIGTERM and SIGINT stop it), and the ready file that
//! tells a supervisor or a test the bound address ([`write_ready_file`]).
//!
//! It lives in `certs` because `certs` is the one library all three daemons link,
//! and it already owns their SIGHUP handling; nothing here is about certificates.

use std::future::Future;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::error::CertError;
use crate::files;

/// Sets up logging to standard error (`RUST_LOG` filters, `info` by default),
/// coloured only on a terminal: escape codes would litter journald and log files.
pub fn init_tracing() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// A daemon's `main`: sets up logging ([`init_tracing`]), starts a multi-threaded
/// runtime and runs `body` on it. An error is printed as `NAME: error: causes` on
/// standard error, and the status is failure.
pub fn run<F>(name: &str, body: F) -> ExitCode
where
    F: Future<Output = anyhow::Result<()>>,
{
    init_tracing();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{name}: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(body) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A signal handler could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("cannot handle {signal}")]
pub struct SignalError {
    /// The signal's name.
    pub signal: &'static str,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// The ready file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write ready file {}", path.display())]
pub struct ReadyFileError {
    /// The file (or its directory) that could not be written.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// The signals a daemon serves by. Install them first thing, so a signal during
/// start-up is queued (SIGHUP for the reload loop, SIGTERM and SIGINT for a clean
/// shutdown) rather than fatal.
#[derive(Debug)]
pub struct Signals {
    /// SIGHUP: pass it to [`crate::reload_on_sighup`].
    pub hangups: Signal,
    /// SIGTERM and SIGINT.
    pub stop: StopSignals,
}

/// SIGTERM and SIGINT, waited for by [`StopSignals::recv`].
#[derive(Debug)]
pub struct StopSignals {
    term: Signal,
    int: Signal,
}

fn install(kind: SignalKind, name: &'static str) -> Result<Signal, SignalError> {
    signal(kind).map_err(|source| SignalError {
        signal: name,
        source,
    })
}

impl Signals {
    /// Installs the handlers (inside a tokio runtime).
    pub fn install() -> Result<Signals, SignalError> {
        let hangups = install(SignalKind::hangup(), "SIGHUP")?;
        let term = install(SignalKind::terminate(), "SIGTERM")?;
        let int = install(SignalKind::interrupt(), "SIGINT")?;
        Ok(Signals {
            hangups,
            stop: StopSignals { term, int },
        })
    }
}

impl StopSignals {
    /// Completes at the first SIGTERM or SIGINT, logging which: the daemon's
    /// shutdown future.
    pub async fn recv(mut self) {
        tokio::select! {
            _ = self.term.recv() => tracing::info!("SIGTERM received"),
            _ = self.int.recv() => tracing::info!("SIGINT received"),
        }
    }
}

/// Writes `addr` and a newline to `path` atomically (a temporary file beside it,
/// then renamed over it, as every file `certs` writes), so a reader never sees a
/// partial address.
pub fn write_ready_file(path: &Path, addr: impl std::fmt::Display) -> Result<(), ReadyFileError> {
    let text = format!("{addr}\n");
    files::write_atomic(path, text.as_bytes(), files::PUBLIC_MODE).map_err(|e| match e {
        CertError::Write { path, source } => ReadyFileError { path, source },
        other => ReadyFileError {
            path: path.to_path_buf(),
            source: std::io::Error::other(other.to_string()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ready_file_holds_the_address_and_no_temporary_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.addr");
        write_ready_file(&path, "127.0.0.1:7071").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "127.0.0.1:7071\n");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
        let e = write_ready_file(&dir.path().join("no/such/dir/d.addr"), "x").unwrap_err();
        assert!(e.to_string().starts_with("cannot write ready file "), "{e}");
    }
}
