//! Thin, safe wrappers over the operating system, and the only place in this crate with
//! `unsafe` code (each block carries a `// SAFETY:` comment).
//!
//! The newtypes [`UserId`], [`GroupId`] and [`ProcessId`] keep numeric ids from being
//! mixed up. [`lookup_user`] and [`group_list`] resolve an account before a job's
//! child exists; [`send_signal`] delivers a signal to a process and [`signal_group`] to
//! a process group; [`set_window_size`] resizes a terminal; [`vfork`] starts a job's
//! process without copying rexecd (`clone(CLONE_VM | CLONE_VFORK)`) and [`child`] holds
//! the async-signal-safe set-up that child applies to itself before `exec`; [`net`]
//! sets TCP keepalive and `TCP_USER_TIMEOUT` on client connections; [`affinity`] confines
//! a job's threads to CPUs for the market's placement, and [`sched`] runs the thread
//! that moves them under a real-time policy.

pub mod affinity;
pub mod child;
pub mod net;
pub mod sched;
pub mod vfork;

use std::ffi::CString;
use std::fmt;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

use nix::errno::Errno;
use nix::sys::signal::{self, Signal};
use nix::unistd::{Gid, Pid, Uid, User};

/// A Unix user id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UserId(pub u32);

/// A Unix group id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupId(pub u32);

/// A process (or thread) id as the kernel reports it; always positive when it names a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcessId(pub i32);

impl UserId {
    /// The superuser.
    pub const ROOT: UserId = UserId(0);

    /// True for uid 0, whatever the account is called.
    pub fn is_root(self) -> bool {
        self == Self::ROOT
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for ProcessId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl ProcessId {
    /// The id of the calling process.
    pub fn current() -> ProcessId {
        ProcessId(std::process::id() as i32)
    }
}

/// A Unix account as the password database describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnixUser {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: UserId,
    /// Primary group id.
    pub gid: GroupId,
    /// Home directory (may not exist).
    pub home: PathBuf,
    /// Login shell.
    pub shell: PathBuf,
}

/// Looks a user up by login name (`getpwnam_r`). `Ok(None)` when there is no such user
/// (a name with a NUL byte is no user either).
///
/// ```
/// let root = rexecd::sys::lookup_user("root").unwrap().expect("every system has root");
/// assert!(root.uid.is_root());
/// assert!(rexecd::sys::lookup_user("no-such-user-\u{1}").unwrap().is_none());
/// ```
pub fn lookup_user(name: &str) -> Result<Option<UnixUser>, Errno> {
    let found = User::from_name(name)?;
    Ok(found.map(|u| UnixUser {
        name: u.name,
        uid: UserId(u.uid.as_raw()),
        gid: GroupId(u.gid.as_raw()),
        home: u.dir,
        shell: u.shell,
    }))
}

/// The supplementary group list of `user` including `primary` (`getgrouplist`), sorted
/// and without duplicates. Call it before starting a child: it reads NSS and allocates.
pub fn group_list(user: &str, primary: GroupId) -> Result<Vec<GroupId>, Errno> {
    let name = CString::new(user).map_err(|_| Errno::EINVAL)?;
    let mut groups: Vec<GroupId> = nix::unistd::getgrouplist(&name, Gid::from_raw(primary.0))?
        .into_iter()
        .map(|g| GroupId(g.as_raw()))
        .collect();
    groups.sort_unstable();
    groups.dedup();
    Ok(groups)
}

/// Sends `signal` to one process. `ESRCH` (already gone) is reported as an error so the
/// caller can decide whether that matters.
pub fn send_signal(pid: ProcessId, signal: Signal) -> Result<(), Errno> {
    if pid.0 <= 0 {
        // kill(0) and kill(-n) address process groups; never let a bad id reach them.
        return Err(Errno::EINVAL);
    }
    signal::kill(Pid::from_raw(pid.0), signal)
}

/// The effective user id of the calling process.
pub fn effective_user() -> UserId {
    UserId(Uid::effective().as_raw())
}

/// Sends signal number `signo` to the process group `pgid` (`killpg`). Takes a raw
/// number so that realtime signals (which `nix::sys::signal::Signal` cannot name) work
/// too. Refuses group ids below 2, which would address the caller's own group or init.
pub fn signal_group(pgid: ProcessId, signo: i32) -> Result<(), Errno> {
    if pgid.0 <= 1 || signo <= 0 || signo > nix::libc::SIGRTMAX() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: killpg takes two integers and touches no memory of ours; the group id was
    // checked to be a real group (> 1), so it never signals rexecd's own group or init.
    let rc = unsafe { nix::libc::killpg(pgid.0, signo) };
    Errno::result(rc).map(drop)
}

/// Sets the window size of the terminal behind `fd` (`TIOCSWINSZ`); the kernel sends
/// SIGWINCH to the terminal's foreground process group.
pub fn set_window_size(fd: BorrowedFd<'_>, rows: u16, cols: u16) -> Result<(), Errno> {
    let size = nix::pty::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one `struct winsize` through the pointer, which points to
    // a live, initialised local of exactly that type; the descriptor is borrowed, so it
    // stays open for the duration of the call.
    let rc = unsafe {
        nix::libc::ioctl(
            fd.as_raw_fd(),
            nix::libc::TIOCSWINSZ,
            &size as *const nix::pty::Winsize,
        )
    };
    Errno::result(rc).map(drop)
}

/// Registers an owned descriptor with tokio's reactor (for readiness-based I/O on a
/// pseudo-terminal). Must run inside a tokio runtime.
pub fn async_fd(fd: OwnedFd) -> std::io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: an `OwnedFd` is an open descriptor that it alone closes, and its
    // `as_raw_fd` returns the same number for its whole life; the `AsyncFd` takes
    // ownership of it, so the descriptor stays open and unchanged while registered.
    let registered = unsafe { tokio::io::unix::AsyncFd::register(fd) };
    registered.map_err(std::io::Error::from)
}
