//! Running the real `rexec` binary against a [`Cluster`]: a small command
//! builder ([`Rexec`]), the finished result ([`Outcome`]) and a handle on a
//! running client ([`Running`]) whose output is collected by threads while
//! the test sends it signals.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cluster::{Cluster, bin};
use crate::procs::MARK_VAR;

/// How long any single `rexec` run may take before the test gives up.
pub const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Where a client's stdout goes, piece by piece.
type Sink = Box<dyn FnMut(&[u8]) + Send>;

/// A `rexec` command line being built.
pub struct Rexec {
    cmd: Command,
    stdin: Option<Vec<u8>>,
    stdin_file: Option<std::fs::File>,
}

/// How a `rexec` run ended and what it printed.
pub struct Outcome {
    /// Exit code, when it exited.
    pub code: Option<i32>,
    /// Signal, when one killed it.
    pub signal: Option<i32>,
    /// Everything on stdout (empty when streamed elsewhere).
    pub stdout: Vec<u8>,
    /// Everything on stderr, as text.
    pub stderr: String,
    /// Everything on stderr, as bytes.
    pub stderr_bytes: Vec<u8>,
    /// From spawn to exit.
    pub elapsed: Duration,
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let out = self.out();
        f.debug_struct("Outcome")
            .field("code", &self.code)
            .field("signal", &self.signal)
            .field("stdout", &out.chars().take(2000).collect::<String>())
            .field("stderr", &self.stderr)
            .field("elapsed", &self.elapsed)
            .finish()
    }
}

impl Outcome {
    /// Stdout as text.
    pub fn out(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

impl Rexec {
    pub(crate) fn new(cluster: &Cluster) -> Rexec {
        let host = cluster.options.services_host();
        let mut cmd =
            crate::netns::command_in(host.as_ref().map(|(ns, _)| ns.as_str()), bin("rexec"));
        cmd.env("REXEC_CONFIG", &cluster.config)
            .env(MARK_VAR, &cluster.mark)
            .env(
                "REXEC_HEARTBEAT_TIMEOUT",
                cluster.options.client_heartbeat_timeout,
            )
            .current_dir("/tmp")
            // The test's own cache of heard selectors (never the caller's).
            .env("REXEC_CACHE_DIR", cluster.dir.path().join("client-cache"));
        // Nothing from the caller's environment may point elsewhere.
        for var in [
            "REXEC_CA",
            "REXEC_CERT",
            "REXEC_KEY",
            "REXEC_CRL",
            "XDG_CONFIG_HOME",
        ] {
            cmd.env_remove(var);
        }
        Rexec {
            cmd,
            stdin: None,
            stdin_file: None,
        }
    }

    /// Add arguments (options, then the program and its arguments).
    pub fn args<I, S>(mut self, args: I) -> Rexec
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.cmd.args(args);
        self
    }

    /// Set a variable in the client's environment.
    pub fn env(mut self, key: &str, value: &str) -> Rexec {
        self.cmd.env(key, value);
        self
    }

    /// Use another client configuration.
    pub fn config(mut self, path: &Path) -> Rexec {
        self.cmd.env("REXEC_CONFIG", path);
        self
    }

    /// Run the client in `dir`.
    pub fn cwd(mut self, dir: &Path) -> Rexec {
        self.cmd.current_dir(dir);
        self
    }

    /// Feed these bytes to the client's stdin, then end-of-file (default: /dev/null).
    pub fn stdin(mut self, bytes: Vec<u8>) -> Rexec {
        self.stdin = Some(bytes);
        self
    }

    /// Give the client this file as stdin, for example `/dev/zero` for input
    /// that never ends.
    pub fn stdin_file(mut self, path: &Path) -> Rexec {
        let file = std::fs::File::open(path)
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
        self.stdin_file = Some(file);
        self
    }

    /// The command as built so far.
    pub(crate) fn command(&self) -> &Command {
        &self.cmd
    }

    /// Run to the end (at most [`RUN_LIMIT`]).
    pub fn run(self) -> Outcome {
        self.spawn().wait(RUN_LIMIT)
    }

    /// Start the client; stdout is collected.
    pub fn spawn(self) -> Running {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = buf.clone();
        self.spawn_inner(
            Box::new(move |chunk: &[u8]| {
                if let Ok(mut b) = sink.lock() {
                    b.extend_from_slice(chunk);
                }
            }),
            buf,
        )
    }

    /// Start the client, handing every piece of stdout to `sink` instead of keeping it.
    pub fn spawn_streaming(self, sink: impl FnMut(&[u8]) + Send + 'static) -> Running {
        self.spawn_inner(Box::new(sink), Arc::new(Mutex::new(Vec::new())))
    }

    fn spawn_inner(mut self, mut sink: Sink, out: Arc<Mutex<Vec<u8>>>) -> Running {
        let stdin = if let Some(file) = self.stdin_file.take() {
            Stdio::from(file)
        } else if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        let mut child = self
            .cmd
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start rexec");
        let started = Instant::now();
        let mut threads = Vec::new();
        if let (Some(bytes), Some(mut pipe)) = (self.stdin.take(), child.stdin.take()) {
            threads.push(std::thread::spawn(move || {
                let _ = pipe.write_all(&bytes);
            }));
        }
        let mut stdout = child.stdout.take().expect("stdout");
        threads.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 20];
            loop {
                match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink(&buf[..n]),
                }
            }
        }));
        let err = Arc::new(Mutex::new(Vec::new()));
        let err_sink = err.clone();
        let mut stderr = child.stderr.take().expect("stderr");
        threads.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match stderr.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if let Ok(mut e) = err_sink.lock() {
                            e.extend_from_slice(&buf[..n]);
                        }
                    }
                }
            }
        }));
        Running {
            pid: child.id(),
            child,
            out,
            err,
            threads,
            started,
        }
    }
}

/// A running client.
pub struct Running {
    /// The client's process id.
    pub pid: u32,
    child: Child,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
    threads: Vec<JoinHandle<()>>,
    started: Instant,
}

impl Running {
    /// Stdout so far (as text).
    pub fn stdout_now(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().map(|b| b.clone()).unwrap_or_default())
            .into_owned()
    }

    /// Stderr so far.
    pub fn stderr_now(&self) -> String {
        String::from_utf8_lossy(&self.err.lock().map(|b| b.clone()).unwrap_or_default())
            .into_owned()
    }

    /// Wait until stdout contains `needle`; panics after `limit` with what arrived.
    pub fn wait_for_stdout(&self, needle: &str, limit: Duration) {
        assert!(
            crate::wait_until(limit, || self.stdout_now().contains(needle)).is_some(),
            "rexec did not print {needle:?} within {limit:?}; stdout {:?}, stderr {:?}",
            self.stdout_now(),
            self.stderr_now()
        );
    }

    /// Wait until stderr contains `needle`; panics after `limit` with what arrived.
    pub fn wait_for_stderr(&self, needle: &str, limit: Duration) {
        assert!(
            crate::wait_until(limit, || self.stderr_now().contains(needle)).is_some(),
            "rexec did not print {needle:?} on stderr within {limit:?}; stderr {:?}",
            self.stderr_now()
        );
    }

    /// Send `sig` to the client.
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid as i32), sig);
    }

    /// Sends a first SIGINT that every one of `ranks` ranks handles (each prints
    /// `first-int-RANK`, a trap the test's script sets) within half a second, so that
    /// a SIGINT sent right after is a second one inside the client's one-second
    /// window. On a loaded machine an echo may take most of that second, and two
    /// SIGINTs sent close together may reach the client as one; so when an echo is
    /// slow, that SIGINT's window is let close and another first one is sent. Panics
    /// when a SIGINT never reaches the ranks or never comes back in time in 5 tries.
    pub fn first_sigint(&self, ranks: u32) {
        let echoes = |rank: u32| {
            self.stdout_now()
                .matches(&format!("first-int-{rank}\n"))
                .count()
        };
        for attempt in 1.. {
            let before: Vec<usize> = (0..ranks).map(echoes).collect();
            self.signal(nix::sys::signal::Signal::SIGINT);
            let first = Instant::now();
            let echoed = crate::wait_until(Duration::from_secs(5), || {
                (0..ranks).all(|r| echoes(r) > before[r as usize])
            });
            assert!(
                echoed.is_some(),
                "every rank survives a first SIGINT and runs its handler: {:?}, {:?}",
                self.stdout_now(),
                self.stderr_now()
            );
            if first.elapsed() < Duration::from_millis(500) {
                return;
            }
            assert!(attempt < 5, "a SIGINT's echo never came back within 0.5s");
            std::thread::sleep(Duration::from_millis(1100));
        }
    }

    /// The client's state letter in `/proc` (`T` when stopped).
    pub fn state(&self) -> Option<char> {
        crate::procs::state(self.pid)
    }

    /// Whether the client has exited (without reaping it).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Wait for the end (at most `limit`; then kill it and panic).
    pub fn wait(mut self, limit: Duration) -> Outcome {
        use std::os::unix::process::ExitStatusExt;
        let Some(status) = testhost::wait::until(limit, || self.child.try_wait().ok().flatten())
        else {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!(
                "rexec did not end within {limit:?}; stdout {:?}, stderr {:?}",
                self.stdout_now().chars().take(2000).collect::<String>(),
                self.stderr_now()
            );
        };
        let elapsed = self.started.elapsed();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        Outcome {
            code: status.code(),
            signal: status.signal(),
            stdout: std::mem::take(&mut *self.out.lock().unwrap_or_else(|e| e.into_inner())),
            stderr: self.stderr_now(),
            stderr_bytes: self.err.lock().map(|b| b.clone()).unwrap_or_default(),
            elapsed,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
