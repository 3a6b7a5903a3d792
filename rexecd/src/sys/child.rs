//! What a job's child process does to itself before `exec`, prepared entirely before
//! the child exists, so that the child only makes async-signal-safe system calls.
//!
//! A [`ChildSetup`] owns the already opened `cgroup.procs` files of the job cgroup, the
//! resolved group list and ids, and the candidate working directories as C strings.
//! [`super::vfork`] starts the child; it first sets every signal back to its default
//! action (`reset_signal_dispositions`), so a signal rexecd inherited as ignored
//! (under `nohup`, say) is not ignored by the job too (a shell cannot even trap a signal
//! that was ignored when it started), and puts the standard descriptors in place. Then
//! `ChildSetup::run_after_signals` (1) writes `0` to every `cgroup.procs` file, so the
//! child is in the job cgroup before any user code runs, (1b) clears close-on-exec on
//! the one descriptor it is asked to pass on (an MPI rank's PMI channel), (2) optionally
//! starts a new session (and takes its standard input as controlling terminal), (3)
//! applies the node's resource limits (`setrlimit`, while still privileged, so hard
//! limits may also be raised) and its umask, (4) drops privileges with `setgroups`,
//! `setgid`, `setuid` in that order, (5) sets `PR_SET_NO_NEW_PRIVS` unless the node
//! allows new privileges, so no set-user-id program or file capability can give the job
//! more than its user has, and (6) changes to the first working directory it can enter
//! and, when asked to, reports which one as a single byte (its index) on a pipe, then
//! (7) opens the job's output files, if it has any (`rexec submit -o/-e`), as the user
//! and from that directory, so the user's own permissions decide, and puts them on
//! descriptors 1 and 2 (one file named for both is opened once and shared). No step
//! allocates, takes a lock or touches a Rust-level global.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{OwnedFd, RawFd};

use nix::errno::Errno;
use nix::unistd::{self, Gid, Uid};

use super::{GroupId, UserId};

/// How the child relates to the caller's session and terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionMode {
    /// Stay in the caller's session and process group.
    #[default]
    Inherit,
    /// `setsid()`: a new session and process group led by the child, with no terminal.
    NewSession,
    /// `setsid()` and then make the terminal on the child's standard input (put in place
    /// before the set-up runs) its controlling terminal (`TIOCSCTTY`).
    NewSessionWithTty,
}

/// Everything the child needs before `exec`, prepared before the child exists.
#[derive(Debug)]
pub struct ChildSetup {
    cgroup_procs: Vec<File>,
    groups: Vec<Gid>,
    gid: Gid,
    uid: Uid,
    dirs: Vec<CString>,
    session: SessionMode,
    report: Option<OwnedFd>,
    limits: ChildLimits,
    keep_open: Option<RawFd>,
    outputs: [Option<CString>; 2],
}

/// The hardening a child applies to itself before `exec` (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildLimits {
    /// Set `PR_SET_NO_NEW_PRIVS`.
    pub no_new_privs: bool,
    /// The file mode creation mask, e.g. `0o022`.
    pub umask: u32,
    /// Resource limits: (resource, soft, hard).
    pub rlimits: Vec<(nix::sys::resource::Resource, u64, u64)>,
}

impl Default for ChildLimits {
    fn default() -> Self {
        ChildLimits {
            no_new_privs: true,
            umask: 0o022,
            rlimits: Vec::new(),
        }
    }
}

impl ChildSetup {
    /// Prepares a setup: `cgroup_procs` are open, writable `cgroup.procs` files (opened
    /// with close-on-exec, as `std::fs` does); `dirs` are tried in order with `chdir`
    /// after the privileges are dropped, so the first one the user may enter wins.
    pub fn new(
        cgroup_procs: Vec<File>,
        uid: UserId,
        gid: GroupId,
        groups: &[GroupId],
        dirs: Vec<CString>,
        session: SessionMode,
    ) -> ChildSetup {
        ChildSetup {
            cgroup_procs,
            groups: groups.iter().map(|g| Gid::from_raw(g.0)).collect(),
            gid: Gid::from_raw(gid.0),
            uid: Uid::from_raw(uid.0),
            dirs,
            session,
            report: None,
            limits: ChildLimits::default(),
            keep_open: None,
            outputs: [None, None],
        }
    }

    /// Files for the program's standard output and error, opened by the child as the
    /// user after it changed directory (step 7 of the module docs); `None` keeps the
    /// descriptor it was given.
    pub fn output_files(mut self, stdout: Option<CString>, stderr: Option<CString>) -> ChildSetup {
        self.outputs = [stdout, stderr];
        self
    }

    /// Lets descriptor `fd` (opened close-on-exec, as std does) survive the `exec`, so
    /// the program inherits it under the same number (the PMI channel of an MPI rank).
    /// The caller keeps `fd` open until `spawn` has returned.
    pub fn keep_open(mut self, fd: RawFd) -> ChildSetup {
        self.keep_open = Some(fd);
        self
    }

    /// The hardening to apply (default: [`ChildLimits::default`]).
    pub fn limits(mut self, limits: ChildLimits) -> ChildSetup {
        self.limits = limits;
        self
    }

    /// After changing directory, the child writes the index (one byte) of the directory
    /// it entered to `pipe`, the write end of a close-on-exec pipe. Once `spawn` has
    /// returned successfully the byte is in the pipe (it returns after the `exec`).
    pub fn report_dir_to(mut self, pipe: OwnedFd) -> ChildSetup {
        self.report = Some(pipe);
        self
    }

    /// Steps (1) to (6) of the module docs, for a child whose signal dispositions are
    /// already reset. Besides being async-signal-safe, every step is a plain system call
    /// that acts on the calling process only, as it must in a child that shares rexecd's
    /// memory ([`super::vfork`]): the ids change through raw system calls, not the C
    /// library's `setuid` family, which in a process it believes multi-threaded would
    /// signal every thread of rexecd to change its ids too.
    pub(super) fn run_after_signals(&self) -> Result<(), Errno> {
        for file in &self.cgroup_procs {
            // "0" names the writing task itself, so no pid formatting is needed here.
            loop {
                match unistd::write(file, b"0") {
                    Ok(1) => break,
                    Ok(_) => return Err(Errno::EIO),
                    Err(Errno::EINTR) => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        if let Some(fd) = self.keep_open {
            clear_close_on_exec(fd)?;
        }
        match self.session {
            SessionMode::Inherit => {}
            SessionMode::NewSession => {
                unistd::setsid()?;
            }
            SessionMode::NewSessionWithTty => {
                unistd::setsid()?;
                set_controlling_tty(nix::libc::STDIN_FILENO)?;
            }
        }
        for &(resource, soft, hard) in &self.limits.rlimits {
            nix::sys::resource::setrlimit(resource, soft, hard)?;
        }
        nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(self.limits.umask));
        set_ids(&self.groups, self.gid, self.uid)?;
        if self.limits.no_new_privs {
            nix::sys::prctl::set_no_new_privs()?;
        }
        let mut last = Errno::ENOENT;
        for (index, dir) in self.dirs.iter().enumerate() {
            match unistd::chdir(dir.as_c_str()) {
                Ok(()) => {
                    if let Some(pipe) = &self.report {
                        // At most a few candidates, so the index fits a byte. A lost
                        // report only costs the caller its notice, so errors are ignored.
                        let byte = [u8::try_from(index).unwrap_or(u8::MAX)];
                        while let Err(Errno::EINTR) = unistd::write(pipe, &byte) {}
                    }
                    return self.open_outputs();
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Step (7): the output files on descriptors 1 and 2, opened as the user.
    fn open_outputs(&self) -> Result<(), Errno> {
        let [stdout, stderr] = &self.outputs;
        if let Some(path) = stdout {
            open_onto(path, nix::libc::STDOUT_FILENO)?;
        }
        match (stdout, stderr) {
            (Some(out), Some(err)) if out == err => {
                dup_onto(nix::libc::STDOUT_FILENO, nix::libc::STDERR_FILENO)
            }
            (_, Some(path)) => open_onto(path, nix::libc::STDERR_FILENO),
            (_, None) => Ok(()),
        }
    }
}

/// Opens `path` for writing (created with mode 0666 less the umask, truncated) and
/// puts it on descriptor `target`.
fn open_onto(path: &CString, target: RawFd) -> Result<(), Errno> {
    let flags =
        nix::libc::O_WRONLY | nix::libc::O_CREAT | nix::libc::O_TRUNC | nix::libc::O_CLOEXEC;
    // SAFETY: open reads the NUL-terminated path from a CString that outlives the
    // call; the mode is an integer. open is async-signal-safe.
    let fd = Errno::result(unsafe {
        nix::libc::open(path.as_ptr(), flags, 0o666 as nix::libc::c_uint)
    })?;
    let placed = dup_onto(fd, target);
    // SAFETY: `fd` was just opened here and is closed once; close is async-signal-safe.
    unsafe { nix::libc::close(fd) };
    placed
}

/// `dup2(from, to)`; the new descriptor stays open across `exec`.
fn dup_onto(from: RawFd, to: RawFd) -> Result<(), Errno> {
    // SAFETY: dup2 takes two integers and touches no memory; async-signal-safe.
    Errno::result(unsafe { nix::libc::dup2(from, to) }).map(drop)
}

/// Drops privileges for the calling process alone: `setgroups`, `setgid`, `setuid`, in
/// that order, as raw system calls (see [`ChildSetup::run_after_signals`]). On the
/// 64-bit Linux targets rexecd builds for, these are the 32-bit-id calls.
fn set_ids(groups: &[Gid], gid: Gid, uid: Uid) -> Result<(), Errno> {
    // SAFETY: setgroups reads `groups.len()` gid_t values from the slice's pointer (Gid
    // is a transparent gid_t), which stays alive and unmoved during the call; setgid and
    // setuid take integers. Raw system calls touch no C library state and are
    // async-signal-safe.
    unsafe {
        let n = groups.len();
        Errno::result(nix::libc::syscall(
            nix::libc::SYS_setgroups,
            n,
            groups.as_ptr(),
        ))?;
        Errno::result(nix::libc::syscall(nix::libc::SYS_setgid, gid.as_raw()))?;
        Errno::result(nix::libc::syscall(nix::libc::SYS_setuid, uid.as_raw()))?;
    }
    Ok(())
}

#[cfg(any(
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "mips32r6",
    target_arch = "mips64r6"
))]
compile_error!("reset_signal_dispositions assumes 64 signals and an 8-byte sigset");

/// Sets the action of every signal to the default. Handlers are reset by `exec` anyway,
/// but an ignored signal stays ignored across it. The raw system call is used because
/// the C library refuses to touch the two signals it reserves for itself (32 and 33),
/// which can be inherited as ignored too. `SIGKILL` and `SIGSTOP` fail with `EINVAL`,
/// which is ignored.
pub(super) fn reset_signal_dispositions() {
    // The kernel's `struct sigaction` all zero: handler SIG_DFL (0), no flags, no
    // restorer, empty mask. Zero means the same whatever the field order of the
    // architecture, and 64 bytes is more than the struct on any of them.
    let default_action = [0u64; 8];
    // Linux signals run 1..=64 with an 8-byte sigset on every architecture but MIPS
    // (128 signals), which the compile_error above keeps out.
    const SIGSET_BYTES: usize = 8;
    for signal in 1..=64 as nix::libc::c_long {
        // SAFETY: rt_sigaction reads a kernel sigaction from the first pointer, which
        // points to a live, large enough, all-zero buffer, and writes nothing since the
        // old-action pointer is null. A raw system call is async-signal-safe.
        unsafe {
            nix::libc::syscall(
                nix::libc::SYS_rt_sigaction,
                signal,
                default_action.as_ptr(),
                std::ptr::null_mut::<u64>(),
                SIGSET_BYTES,
            );
        }
    }
}

/// Clears `FD_CLOEXEC` on `fd`, so it stays open across `exec`.
pub(super) fn clear_close_on_exec(fd: RawFd) -> Result<(), Errno> {
    // SAFETY: F_SETFD takes an integer argument and touches no memory; on a descriptor
    // that is not open it fails with EBADF. fcntl is async-signal-safe.
    let rc = unsafe { nix::libc::fcntl(fd, nix::libc::F_SETFD, 0) };
    Errno::result(rc).map(drop)
}

/// Makes `fd`, a terminal, the controlling terminal of the calling session leader.
fn set_controlling_tty(fd: i32) -> Result<(), Errno> {
    // SAFETY: TIOCSCTTY takes an integer argument (0: do not steal a terminal that is
    // already another session's); no memory is passed to the kernel. ioctl is
    // async-signal-safe.
    let rc = unsafe { nix::libc::ioctl(fd, nix::libc::TIOCSCTTY, 0) };
    Errno::result(rc).map(drop)
}
