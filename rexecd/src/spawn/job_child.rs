//! A job's process started without a `fork` of rexecd ([`crate::sys::vfork`]), and
//! waited for through a pidfd.
//!
//! [`JobCommand::spawn`] prepares the program (looked up along the job environment's
//! `PATH`, as `execvp` would with that environment), argv, the environment (sorted and
//! without duplicate names, the last value winning, as `std::process::Command` passes
//! it) and the child set-up ([`crate::sys::child`]), then starts the process with its
//! standard descriptors on new pipes or on a terminal. [`JobChild`] offers the part
//! of `tokio::process::Child` a session uses: the pid, the three pipes as tokio pipe ends,
//! and a cancel-safe `wait`. A child dropped before it was waited for is reaped in the
//! background, so it leaves no zombie.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use super::{DirReport, JobCommand, JobUser, SpawnError};
use crate::cgroup::CgroupJoin;
use crate::sys::ProcessId;
use crate::sys::vfork::{self, Exec};

/// `execvp`'s search path when the environment has no `PATH` (the C library's default).
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// Where the child's descriptors 0, 1 and 2 go.
#[derive(Debug)]
pub enum JobStdio {
    /// Three new pipes, whose rexecd ends become [`JobChild`]'s `stdin`, `stdout` and
    /// `stderr`.
    Pipes,
    /// All three on this terminal (a pseudo-terminal's slave side); the child's
    /// session mode should be `NewSessionWithTty`. Closed here once the child runs.
    Terminal(OwnedFd),
}

/// A started job process.
#[derive(Debug)]
pub struct JobChild {
    pid: ProcessId,
    pidfd: Option<AsyncFd<OwnedFd>>,
    status: Option<ExitStatus>,
    /// The write end of the job's standard input ([`JobStdio::Pipes`] only).
    pub stdin: Option<pipe::Sender>,
    /// The read end of the job's standard output ([`JobStdio::Pipes`] only).
    pub stdout: Option<pipe::Receiver>,
    /// The read end of the job's standard error ([`JobStdio::Pipes`] only).
    pub stderr: Option<pipe::Receiver>,
}

impl JobCommand {
    /// Starts the program as `user` inside the cgroup `join` opens, without a `fork` of
    /// rexecd, and returns it with the report of the directory it entered. Must be
    /// called within a tokio runtime (the pipes and the pidfd register there). The call
    /// blocks until the program is executing (or failed to start).
    pub fn spawn(
        &self,
        user: &JobUser,
        join: CgroupJoin,
        stdio: JobStdio,
    ) -> Result<(JobChild, DirReport), SpawnError> {
        let exec = self.exec().map_err(SpawnError::Start)?;
        let (setup, report) = self.setup(user, join)?;
        let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(SpawnError::Pipe);
        let (fds, ends) = match stdio {
            JobStdio::Terminal(tty) => {
                let fd = tty.as_raw_fd();
                ([fd; 3], Err(tty))
            }
            JobStdio::Pipes => {
                let (stdin, stdout, stderr) = (pipe()?, pipe()?, pipe()?);
                let fds = [
                    stdin.0.as_raw_fd(),
                    stdout.1.as_raw_fd(),
                    stderr.1.as_raw_fd(),
                ];
                (fds, Ok((stdin, stdout, stderr)))
            }
        };
        let (pid, pidfd) =
            vfork::spawn(&exec, fds, &setup).map_err(|e| SpawnError::Start(io::Error::from(e)))?;
        drop(setup);
        let start = |e: io::Error| SpawnError::Start(e);
        let mut child = JobChild {
            pid,
            pidfd: None,
            status: None,
            stdin: None,
            stdout: None,
            stderr: None,
        };
        // From here on a failure leaves the child to `Drop`, which reaps it.
        child.pidfd = Some(crate::sys::async_fd(pidfd).map_err(start)?);
        if let Ok((stdin, stdout, stderr)) = ends {
            child.stdin = Some(pipe::Sender::from_owned_fd(stdin.1).map_err(start)?);
            child.stdout = Some(pipe::Receiver::from_owned_fd(stdout.0).map_err(start)?);
            child.stderr = Some(pipe::Receiver::from_owned_fd(stderr.0).map_err(start)?);
        }
        Ok((child, report))
    }

    /// The program, argv and environment as C strings; a NUL byte in any of them is the
    /// error `std::process::Command` gives for it.
    fn exec(&self) -> io::Result<Exec> {
        let c = |s: &OsStr| {
            CString::new(s.as_bytes()).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "nul byte found in provided data",
                )
            })
        };
        let env: BTreeMap<&OsStr, &OsStr> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
            .collect();
        let path = env
            .get(OsStr::new("PATH"))
            .map_or(DEFAULT_PATH, |p| p.as_bytes());
        let mut envp = Vec::with_capacity(env.len());
        for (key, value) in &env {
            let mut pair = OsString::with_capacity(key.len() + 1 + value.len());
            pair.push(key);
            pair.push("=");
            pair.push(value);
            envp.push(c(&pair)?);
        }
        let args = self
            .args
            .iter()
            .map(|a| c(a))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Exec::new(c(&self.program)?, args, envp, path))
    }
}

impl JobChild {
    /// The process id, until the process has been waited for (as tokio's `Child::id`).
    pub fn id(&self) -> Option<u32> {
        match self.status {
            Some(_) => None,
            None => u32::try_from(self.pid.0).ok(),
        }
    }

    /// Waits for the process to exit and reaps it. Cancel-safe; once it has returned a
    /// status, it returns the same status again.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let Some(pidfd) = &self.pidfd else {
            return Err(io::Error::other("the job's pidfd is gone"));
        };
        loop {
            let mut ready = pidfd.readable().await?;
            if let Some(status) = try_reap(pidfd.get_ref())? {
                self.status = Some(status);
                return Ok(status);
            }
            ready.clear_ready();
        }
    }
}

impl Drop for JobChild {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        let Some(pidfd) = self.pidfd.take() else {
            // Not registered: reap on a thread of its own (a rare error path).
            let pid = nix::unistd::Pid::from_raw(self.pid.0);
            let _ = std::thread::Builder::new()
                .name("rexecd-reap".into())
                .spawn(move || nix::sys::wait::waitpid(pid, None));
            return;
        };
        if let Ok(Some(_)) = try_reap(pidfd.get_ref()) {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                while let Ok(mut ready) = pidfd.readable().await {
                    match try_reap(pidfd.get_ref()) {
                        Ok(None) => ready.clear_ready(),
                        _ => break,
                    }
                }
            });
        }
    }
}

/// Reaps the process behind `pidfd` if it has exited.
fn try_reap(pidfd: &OwnedFd) -> io::Result<Option<ExitStatus>> {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG;
    let status = loop {
        match waitid(Id::PIDFd(pidfd.as_fd()), flags) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other.map_err(io::Error::from)?,
        }
    };
    Ok(match status {
        WaitStatus::Exited(_, code) => Some(ExitStatus::from_raw((code & 0xff) << 8)),
        WaitStatus::Signaled(_, signal, core) => Some(ExitStatus::from_raw(
            signal as i32 | if core { 0x80 } else { 0 },
        )),
        _ => None,
    })
}
