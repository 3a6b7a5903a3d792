//! The start-up shim every rexec daemon's `main` shares (rexecd, accountd, vexecd):
//! logging to standard error, the async runtime and the exit status ([`run`]), the
//! signals a daemon serves by ([`Signals`]: SIGHUP reloads its TLS files through
//! [`crate::reload_on_sighup`], SIGTERM and SIGINT stop it), and the ready file that
//! tells a supervisor or a test the bound address ([`write_ready_file`]).
//!
//! [`run`] prints a failed start as one line, `NAME: error: cause: cause`, each
//! cause once: the error types keep to one rule (a variant either writes its source
//! into its message or chains it, never both), and a cause whose text the line
//! already holds is not repeated.

use std::error::Error;
use std::future::Future;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tokio::net::TcpListener;
use tokio::signal::unix::{Signal, SignalKind, signal};

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
/// standard error ([`error_line`]), and the status is failure. Any error type that
/// converts into a boxed [`Error`] will do: a library's typed error, or a binary's
/// `anyhow::Error`.
pub fn run<F, E>(name: &str, body: F) -> ExitCode
where
    F: Future<Output = Result<(), E>>,
    E: Into<Box<dyn Error + Send + Sync + 'static>>,
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
            let e: Box<dyn Error + Send + Sync> = e.into();
            eprintln!("{name}: {}", error_line(&*e));
            ExitCode::FAILURE
        }
    }
}

/// An error and its chain of causes on one line, `error: cause: cause`, each cause
/// once: a cause whose text is already in the line is left out.
pub fn error_line(error: &(dyn Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = e.source();
    }
    line.replace('\n', " ")
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

/// The listening socket could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// Binding failed.
    #[error("cannot listen on {listen}")]
    Listen {
        /// The address asked for.
        listen: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The bound address could not be read.
    #[error("cannot read the bound address")]
    Address(#[source] std::io::Error),
}

/// Binds the daemon's TCP listener on `listen` (`host:port`; port 0: any free
/// port) and reads the address it got, for the log and the ready file.
pub async fn bind(listen: &str) -> Result<(TcpListener, SocketAddr), BindError> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| BindError::Listen {
            listen: listen.to_string(),
            source,
        })?;
    let addr = listener.local_addr().map_err(BindError::Address)?;
    Ok((listener, addr))
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
/// mode 0644, then renamed over it), so a reader never sees a partial address.
pub fn write_ready_file(path: &Path, addr: impl std::fmt::Display) -> Result<(), ReadyFileError> {
    let failed = |source| ReadyFileError {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".ready")
        .tempfile_in(dir)
        .map_err(failed)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))
        .map_err(failed)?;
    writeln!(tmp, "{addr}").map_err(failed)?;
    tmp.persist(path).map_err(|e| failed(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bind_names_the_address_it_could_not_listen_on() {
        let (_listener, addr) = bind("127.0.0.1:0").await.unwrap();
        assert_ne!(addr.port(), 0);
        let e = bind(&addr.to_string()).await.unwrap_err();
        assert!(
            error_line(&e).starts_with(&format!("cannot listen on {addr}: ")),
            "{}",
            error_line(&e)
        );
    }

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

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("cannot start: {0}")]
        Said(std::io::Error),
        #[error("cannot start")]
        Chained(#[source] std::io::Error),
        #[error("cannot start: {0}")]
        Both(#[source] std::io::Error),
    }

    #[test]
    fn the_error_line_holds_each_cause_once() {
        let cause = || std::io::Error::other("disk on fire");
        for e in [
            Outer::Said(cause()),
            Outer::Chained(cause()),
            Outer::Both(cause()),
        ] {
            assert_eq!(error_line(&e), "cannot start: disk on fire");
        }
    }
}
