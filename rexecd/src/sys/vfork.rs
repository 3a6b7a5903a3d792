//! Starting a job's process without copying rexecd: `clone(CLONE_VM | CLONE_VFORK)`.
//!
//! A `fork` of rexecd copies its page tables, makes every page copy-on-write and
//! unmaps the copy again at the child's `exec`, about 1 ms of CPU per launch
//! (BENCHMARKS.md). Here the child borrows rexecd's memory on a stack of its own until
//! it calls `execve` (or exits), while the calling thread sleeps in `clone`; rexecd's
//! other threads keep running. [`spawn`] prepares everything the child reads before the
//! clone ([`Exec`]: program candidates along `PATH`, argv and envp as C arrays; the
//! [`ChildSetup`]); the child then (a) resets every signal's disposition while all
//! signals are still blocked, then clears its signal mask, (b) puts its standard
//! descriptors in place, (c) runs the job's set-up
//! (`ChildSetup::run_after_signals`) and (d) tries `execve` on each candidate like
//! `execvp` (a file the kernel cannot execute is run by `/bin/sh`, as the C library
//! does). A failing step stores its errno where the parent reads it once `clone`
//! returns, and the child exits with 127.

use std::ffi::{CStr, CString, c_int, c_void};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::errno::Errno;
use nix::libc;

use super::ProcessId;
use super::child::{self, ChildSetup};

/// The child's own stack; a guard page below it turns an overflow into a fault.
const STACK_BYTES: usize = 128 * 1024;
const GUARD_BYTES: usize = 4096;

/// The shell that runs a file `execve` refuses with `ENOEXEC`, as `execvp` does.
const SHELL: &CStr = c"/bin/sh";

/// A program, prepared for `execve` before the clone.
#[derive(Debug)]
pub struct Exec {
    /// The paths to try in order (one when the program names a path).
    candidates: Vec<CString>,
    argv: Vec<CString>,
    envp: Vec<CString>,
}

impl Exec {
    /// `program` is looked up along `path` (colon-separated, an empty entry meaning the
    /// working directory) unless it contains a `/`; `argv[0]` is the program as given.
    pub fn new(program: CString, args: Vec<CString>, env: Vec<CString>, path: &[u8]) -> Exec {
        let bytes = program.as_bytes();
        let candidates = if bytes.is_empty() {
            Vec::new()
        } else if bytes.contains(&b'/') {
            vec![program.clone()]
        } else {
            path.split(|&b| b == b':')
                .filter_map(|dir| {
                    let mut full = Vec::with_capacity(dir.len() + 1 + bytes.len());
                    if !dir.is_empty() {
                        full.extend_from_slice(dir);
                        full.push(b'/');
                    }
                    full.extend_from_slice(bytes);
                    CString::new(full).ok()
                })
                .collect()
        };
        let mut argv = Vec::with_capacity(args.len() + 1);
        argv.push(program);
        argv.extend(args);
        Exec {
            candidates,
            argv,
            envp: env,
        }
    }
}

/// What the child reads, all prepared by the parent; `error` is what it writes.
struct Context<'a> {
    exec: &'a Exec,
    argv: Vec<*const libc::c_char>,
    /// `/bin/sh CANDIDATE ARGS...`; slot 1 is filled by the child per candidate.
    shell_argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    stdio: [RawFd; 3],
    setup: &'a ChildSetup,
    error: AtomicI32,
}

/// Starts `exec` with `stdio` as its descriptors 0, 1 and 2 and `setup` applied, and
/// returns its pid and a pidfd for it (close-on-exec). When this returns, the child has
/// either called `execve` successfully or failed; a failure is returned as the errno of
/// the failed step, with the child already reaped.
pub fn spawn(
    exec: &Exec,
    stdio: [RawFd; 3],
    setup: &ChildSetup,
) -> Result<(ProcessId, OwnedFd), Errno> {
    let pointers = |strings: &[CString]| -> Vec<*const libc::c_char> {
        strings
            .iter()
            .map(|s| s.as_ptr())
            .chain([ptr::null()])
            .collect()
    };
    let mut shell_argv = pointers(&exec.argv);
    shell_argv.insert(0, SHELL.as_ptr());
    let mut context = Context {
        exec,
        argv: pointers(&exec.argv),
        shell_argv,
        envp: pointers(&exec.envp),
        stdio,
        setup,
        error: AtomicI32::new(0),
    };
    let stack = Stack::new()?;
    let mut pidfd: c_int = -1;
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
    let old_mask = block_all_signals();
    // SAFETY: the child runs `child_main` on `stack`, a fresh mapping of its own, with
    // `context` (alive in this frame: the calling thread sleeps in clone until the
    // child has exec'd or exited, so nothing here moves or frees it meanwhile). Sharing
    // rexecd's memory, the child only reads what was prepared above and writes
    // `context.error` and the shell argv's slot 1; it makes raw system calls and
    // async-signal-safe C library calls that keep no state beyond errno (of this
    // thread, which is asleep), never allocates and never takes a lock, which another
    // thread of rexecd may hold. All signals are blocked across the clone, so no handler
    // of rexecd runs in the child before `child_main` has reset every disposition.
    // CLONE_PIDFD stores the pidfd through the parent-tid pointer.
    let pid = unsafe {
        libc::clone(
            child_main,
            stack.top(),
            flags,
            (&raw mut context).cast::<c_void>(),
            &raw mut pidfd,
        )
    };
    let clone_errno = Errno::last();
    restore_signals(&old_mask);
    drop(stack);
    if pid < 0 {
        return Err(clone_errno);
    }
    // SAFETY: clone succeeded with CLONE_PIDFD, so `pidfd` is a new descriptor owned by
    // nothing else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    match context.error.load(Ordering::Acquire) {
        0 => Ok((ProcessId(pid), pidfd)),
        errno => {
            // The child has exited (127); reap it so it leaves no zombie.
            let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
            Err(Errno::from_raw(errno))
        }
    }
}

/// The child. Never returns: it execs or exits.
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Context` of `spawn`, alive and not touched by the parent
    // until this child has exec'd or exited (CLONE_VFORK).
    let context = unsafe { &mut *arg.cast::<Context<'_>>() };
    let errno = match child_steps(context) {
        Err(e) => e,
        Ok(()) => exec_candidates(context),
    };
    context.error.store(errno as i32, Ordering::Release);
    // SAFETY: _exit ends this process at once, running no atexit handler or destructor
    // of the memory it shares with rexecd.
    unsafe { libc::_exit(127) }
}

/// Signals, descriptors and the shared set-up; see the module docs.
fn child_steps(context: &Context<'_>) -> Result<(), Errno> {
    child::reset_signal_dispositions();
    let empty = [0u64; 1];
    // SAFETY: rt_sigprocmask reads an 8-byte sigset from a live buffer and writes no old
    // mask (null); a raw system call, async-signal-safe.
    Errno::result(unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            empty.as_ptr(),
            ptr::null_mut::<u64>(),
            8usize,
        )
    })?;
    for (target, &fd) in context.stdio.iter().enumerate() {
        let target = target as RawFd;
        if fd == target {
            child::clear_close_on_exec(fd)?;
        } else {
            // SAFETY: dup2 takes two integers; a raw-descriptor call touching no memory.
            Errno::result(unsafe { libc::dup2(fd, target) })?;
        }
    }
    context.setup.run_after_signals()
}

/// Tries each candidate as `execvp` does; returns only on failure, with the errno.
fn exec_candidates(context: &mut Context<'_>) -> Errno {
    let mut result = Errno::ENOENT;
    let mut denied = false;
    for candidate in &context.exec.candidates {
        // SAFETY: every pointer array is null-terminated and points to C strings owned by
        // `context.exec`, alive until the parent resumes. On success execve does not return.
        unsafe {
            libc::execve(
                candidate.as_ptr(),
                context.argv.as_ptr(),
                context.envp.as_ptr(),
            )
        };
        let mut errno = Errno::last();
        if errno == Errno::ENOEXEC {
            if let Some(slot) = context.shell_argv.get_mut(1) {
                *slot = candidate.as_ptr();
            }
            // SAFETY: as above; `shell_argv` is null-terminated too.
            unsafe {
                libc::execve(
                    SHELL.as_ptr(),
                    context.shell_argv.as_ptr(),
                    context.envp.as_ptr(),
                )
            };
            errno = Errno::last();
        }
        match errno {
            Errno::EACCES => denied = true,
            Errno::ENOENT | Errno::ENOTDIR | Errno::ESTALE | Errno::ENODEV | Errno::ETIMEDOUT => {}
            other => return other,
        }
        result = errno;
    }
    if denied { Errno::EACCES } else { result }
}

/// An anonymous mapping for the child's stack, with a guard page at its low end.
struct Stack {
    base: *mut c_void,
}

impl Stack {
    fn new() -> Result<Stack, Errno> {
        // SAFETY: a new private anonymous mapping at an address the kernel picks touches
        // no existing memory.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                STACK_BYTES + GUARD_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Errno::last());
        }
        let stack = Stack { base };
        // SAFETY: the first page of our own mapping becomes inaccessible.
        Errno::result(unsafe { libc::mprotect(base, GUARD_BYTES, libc::PROT_NONE) })?;
        Ok(stack)
    }

    /// The initial stack pointer: the end of the mapping (stacks grow down on every
    /// architecture rexecd builds for), 16-byte aligned since the mapping is page aligned.
    fn top(&self) -> *mut c_void {
        // SAFETY: one past the end of the mapping, within the same allocation's bounds.
        unsafe { self.base.cast::<u8>().add(STACK_BYTES + GUARD_BYTES).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; the child no longer uses it
        // (it has exec'd or exited when clone returns).
        unsafe { libc::munmap(self.base, STACK_BYTES + GUARD_BYTES) };
    }
}

/// Blocks every signal for the calling thread and returns the previous mask.
fn block_all_signals() -> [u64; 1] {
    let all = [u64::MAX; 1];
    let mut old = [0u64; 1];
    // SAFETY: rt_sigprocmask reads and writes 8-byte sigsets in live local buffers. The
    // raw call, unlike pthread_sigmask, also blocks the C library's internal signals.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            all.as_ptr(),
            old.as_mut_ptr(),
            8usize,
        )
    };
    old
}

/// Restores a mask saved by [`block_all_signals`].
fn restore_signals(old: &[u64; 1]) {
    // SAFETY: as in `block_all_signals`, with no old mask written.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            old.as_ptr(),
            ptr::null_mut::<u64>(),
            8usize,
        )
    };
}
