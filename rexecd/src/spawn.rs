//! Starting a job's program as a Unix user, inside the job cgroup, from a cleared
//! environment.
//!
//! [`JobUser::resolve`] looks the account up and computes its group list before the
//! child exists, refusing unknown users and (unless allowed) uid 0. [`JobCommand`]
//! collects the program, arguments, the exact environment, the wished working directory
//! and the session mode; [`JobCommand::spawn`] (in `job_child`) starts it without a
//! `fork` of rexecd ([`crate::sys::vfork`]) and returns a [`JobChild`] with asynchronous
//! pipes. Before `exec` the child ([`crate::sys::child`]) joins the cgroup, applies the
//! node's [`JobLimits`] (resource limits and umask, then `PR_SET_NO_NEW_PRIVS` after the
//! privileges are dropped), drops privileges (setgroups, setgid, setuid) and changes
//! directory (falling back to the user's home, then `/`). The [`DirReport`] returned
//! with the child says which directory it actually entered (judged by the child itself,
//! as the user, so ACLs, mounts and permissions count exactly as they will for the
//! program).

use std::ffi::{CString, OsString};
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use crate::cgroup::CgroupJoin;
pub use crate::sys::child::ChildLimits as JobLimits;
use crate::sys::child::ChildSetup;
pub use crate::sys::child::SessionMode;
use crate::sys::{self, GroupId, UnixUser, UserId};

mod job_child;
pub use job_child::{JobChild, JobStdio};

/// Why a job could not be prepared. Each message is one line saying what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// No such account on this node.
    #[error(
        "no Unix user named {name:?} on this node; create the account or connect as an existing user"
    )]
    UnknownUser {
        /// The name asked for.
        name: String,
    },
    /// The account is uid 0 and root is not allowed.
    #[error(
        "refusing to run a job as {name:?} (uid 0); allow root in the rexecd configuration if intended"
    )]
    RootRefused {
        /// The name asked for.
        name: String,
    },
    /// The password database could not be read.
    #[error("cannot look up user {name:?}: {source}; check /etc/passwd and NSS")]
    Lookup {
        /// The name asked for.
        name: String,
        /// What the lookup said.
        source: Errno,
    },
    /// The group list could not be computed.
    #[error("cannot list the groups of user {name:?}: {source}; check /etc/group and NSS")]
    Groups {
        /// The name asked for.
        name: String,
        /// What getgrouplist said.
        source: Errno,
    },
    /// The pipe for the directory report could not be made.
    #[error("cannot create a pipe for the child: {0}; check rexecd's open file limit")]
    Pipe(Errno),
    /// The process could not be started (the errno of the step that failed: the
    /// cgroup, the ids, the directory or `execve`).
    #[error("{0}")]
    Start(#[source] std::io::Error),
    /// A path handed to the child contains a NUL byte.
    #[error("{what} {value:?} contains a NUL byte")]
    Nul {
        /// Which path.
        what: &'static str,
        /// The path, lossily printed.
        value: String,
    },
}

/// Who may run jobs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpawnPolicy {
    /// Allow accounts with uid 0. Off by default.
    pub allow_root: bool,
}

/// A resolved account: ids, home and the full group list, computed before the child
/// is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobUser {
    user: UnixUser,
    groups: Vec<GroupId>,
}

impl JobUser {
    /// Looks `name` up and computes its groups; refuses unknown users and uid 0 unless
    /// `policy.allow_root`.
    ///
    /// ```
    /// use rexecd::spawn::{JobUser, SpawnError, SpawnPolicy};
    /// let refused = JobUser::resolve("root", SpawnPolicy::default());
    /// assert!(matches!(refused, Err(SpawnError::RootRefused { .. })));
    /// let root = JobUser::resolve("root", SpawnPolicy { allow_root: true }).unwrap();
    /// assert!(root.groups().contains(&root.gid()));
    /// ```
    pub fn resolve(name: &str, policy: SpawnPolicy) -> Result<JobUser, SpawnError> {
        let user = sys::lookup_user(name)
            .map_err(|source| SpawnError::Lookup {
                name: name.to_string(),
                source,
            })?
            .ok_or_else(|| SpawnError::UnknownUser {
                name: name.to_string(),
            })?;
        if user.uid.is_root() && !policy.allow_root {
            return Err(SpawnError::RootRefused {
                name: name.to_string(),
            });
        }
        let groups =
            sys::group_list(&user.name, user.gid).map_err(|source| SpawnError::Groups {
                name: name.to_string(),
                source,
            })?;
        Ok(JobUser { user, groups })
    }

    /// Login name.
    pub fn name(&self) -> &str {
        &self.user.name
    }

    /// User id.
    pub fn uid(&self) -> UserId {
        self.user.uid
    }

    /// Primary group id.
    pub fn gid(&self) -> GroupId {
        self.user.gid
    }

    /// All groups (primary included), sorted.
    pub fn groups(&self) -> &[GroupId] {
        &self.groups
    }

    /// Home directory from the password database.
    pub fn home(&self) -> &Path {
        &self.user.home
    }

    /// Login shell from the password database.
    pub fn shell(&self) -> &Path {
        &self.user.shell
    }
}

/// What to run: program, arguments, the exact environment, working directory and
/// session mode.
#[derive(Debug, Clone)]
pub struct JobCommand {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: Option<PathBuf>,
    session: SessionMode,
    limits: JobLimits,
    keep_open: Option<RawFd>,
    outputs: [Option<PathBuf>; 2],
}

impl JobCommand {
    /// A command running `program` (looked up in the given environment's `PATH`, or
    /// relative to the working directory when it contains a `/`).
    pub fn new(program: impl Into<OsString>) -> JobCommand {
        JobCommand {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            session: SessionMode::Inherit,
            limits: JobLimits::default(),
            keep_open: None,
            outputs: [None, None],
        }
    }

    /// Files for standard output and error, opened by the child as the user, relative
    /// to the directory it entered (see [`ChildSetup::output_files`]).
    pub fn output_files(mut self, stdout: Option<PathBuf>, stderr: Option<PathBuf>) -> JobCommand {
        self.outputs = [stdout, stderr];
        self
    }

    /// The hardening the child applies (default: no new privileges, umask 022, the
    /// resource limits inherited from rexecd).
    pub fn limits(mut self, limits: JobLimits) -> JobCommand {
        self.limits = limits;
        self
    }

    /// Passes descriptor `fd` on to the program under the same number (see
    /// [`ChildSetup::keep_open`]); the caller keeps it open until the spawn returns.
    pub fn keep_open(mut self, fd: RawFd) -> JobCommand {
        self.keep_open = Some(fd);
        self
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> JobCommand {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> JobCommand
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Adds one environment variable; the program sees exactly the variables given.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> JobCommand {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Adds environment variables.
    pub fn envs<I, K, V>(mut self, vars: I) -> JobCommand
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        self.env
            .extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// The wished working directory; if the user cannot enter it (missing or no
    /// permission), the user's home is used, then `/`.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> JobCommand {
        self.cwd = Some(dir.into());
        self
    }

    /// Session mode: stay, new session, or new session with the tty on stdin.
    pub fn session(mut self, mode: SessionMode) -> JobCommand {
        self.session = mode;
        self
    }

    /// What the child does before `exec` (see [`crate::sys::child`]), and the report of
    /// the directory it enters: the wished one (if any), else the user's home, else `/`.
    fn setup(
        &self,
        user: &JobUser,
        join: CgroupJoin,
    ) -> Result<(ChildSetup, DirReport), SpawnError> {
        let mut candidates = Vec::with_capacity(3);
        candidates.extend(self.cwd.clone());
        candidates.push(user.user.home.clone());
        candidates.push(PathBuf::from("/"));
        let mut dirs = Vec::with_capacity(candidates.len());
        if let Some(cwd) = &self.cwd {
            dirs.push(c_path("working directory", cwd)?);
        }
        dirs.push(c_path("home directory", &user.user.home)?);
        dirs.push(c_path("root directory", Path::new("/"))?);
        // A close-on-exec, non-blocking pipe: the child writes one byte, read after the
        // spawn without waiting.
        let (read, write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
                .map_err(SpawnError::Pipe)?;
        let setup = ChildSetup::new(
            join.into_files(),
            user.uid(),
            user.gid(),
            user.groups(),
            dirs,
            self.session,
        )
        .limits(self.limits.clone())
        .report_dir_to(write);
        let [out, err] = &self.outputs;
        let c_file = |path: &Option<PathBuf>| {
            path.as_deref()
                .map(|p| c_path("output file", p))
                .transpose()
        };
        let setup = setup.output_files(c_file(out)?, c_file(err)?);
        let setup = match self.keep_open {
            Some(fd) => setup.keep_open(fd),
            None => setup,
        };
        let report = DirReport {
            pipe: read,
            candidates,
        };
        Ok((setup, report))
    }
}

fn c_path(what: &'static str, path: &Path) -> Result<CString, SpawnError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| SpawnError::Nul {
        what,
        value: path.display().to_string(),
    })
}

/// Which directory a spawned child entered, from [`JobCommand::spawn`].
#[derive(Debug)]
pub struct DirReport {
    pipe: OwnedFd,
    candidates: Vec<PathBuf>,
}

impl DirReport {
    /// The directory the child entered, read once `spawn` has returned successfully
    /// (`None` if the child reported nothing).
    pub fn entered(&self) -> Option<&Path> {
        let mut byte = [0u8; 1];
        match nix::unistd::read(&self.pipe, &mut byte) {
            Ok(1) => self
                .candidates
                .get(usize::from(byte[0]))
                .map(PathBuf::as_path),
            _ => None,
        }
    }

    /// The directories tried, in order: the wished one (if any), home, `/`.
    pub fn candidates(&self) -> &[PathBuf] {
        &self.candidates
    }
}
