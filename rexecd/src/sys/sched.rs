//! The scheduling policy of rexecd's own threads: the placer moves jobs between CPUs
//! at set moments, and a move made late (behind the very jobs it moves) is a share
//! given to the wrong job.

use nix::errno::Errno;
use nix::libc;

/// Puts the calling thread under `SCHED_FIFO` at `priority` (1 to 99), so that it
/// runs as soon as it wakes, ahead of every ordinary thread, with
/// `SCHED_RESET_ON_FORK`, so that nothing it might start inherits the policy. Fails
/// with `EPERM`
/// without `CAP_SYS_NICE` or where the thread's cgroup has no real-time budget
/// (cgroup v1 with `CONFIG_RT_GROUP_SCHED`), and with `EINVAL` for a priority out of
/// range. The kernel's real-time throttling (`sched_rt_runtime_us`) still bounds what
/// such a thread can take from the others.
pub fn make_current_thread_realtime(priority: i32) -> Result<(), Errno> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    let policy = libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK;
    // SAFETY: `sched_setscheduler` reads the `sched_param` it is given, which lives on
    // this stack frame for the whole call; pid 0 names the calling thread, so no
    // other task is affected.
    Errno::result(unsafe { libc::sched_setscheduler(0, policy, &param) }).map(drop)
}

/// Puts the calling thread back under `SCHED_OTHER` (after
/// [`make_current_thread_realtime`]).
pub fn make_current_thread_normal() -> Result<(), Errno> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as in `make_current_thread_realtime`: the `sched_param` lives on this
    // stack frame for the whole call, and pid 0 names the calling thread only.
    Errno::result(unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) }).map(drop)
}

/// The calling thread's scheduling policy (`SCHED_OTHER`, `SCHED_FIFO`, …), and
/// whether its children start under `SCHED_OTHER` whatever it is
/// (`SCHED_RESET_ON_FORK`).
pub fn current_policy() -> Result<(i32, bool), Errno> {
    // SAFETY: no pointer is passed; pid 0 names the calling thread.
    let p = Errno::result(unsafe { libc::sched_getscheduler(0) })?;
    Ok((
        p & !libc::SCHED_RESET_ON_FORK,
        p & libc::SCHED_RESET_ON_FORK != 0,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_is_made_real_time_alone_or_refused_cleanly() {
        // A thread of its own, so that the test harness's threads are not touched.
        std::thread::spawn(|| {
            assert_eq!(make_current_thread_realtime(0), Err(Errno::EINVAL));
            assert_eq!(current_policy(), Ok((libc::SCHED_OTHER, false)));
            match make_current_thread_realtime(1) {
                Ok(()) => {
                    assert_eq!(current_policy(), Ok((libc::SCHED_FIFO, true)));
                    // What it starts runs as an ordinary thread.
                    let child = std::thread::spawn(current_policy).join().unwrap();
                    assert_eq!(child, Ok((libc::SCHED_OTHER, false)));
                }
                // Not root, or no real-time budget in this cgroup: refused, unchanged.
                Err(e) => {
                    assert!(matches!(e, Errno::EPERM), "{e}");
                    assert_eq!(current_policy(), Ok((libc::SCHED_OTHER, false)));
                }
            }
        })
        .join()
        .unwrap();
        // The test's own thread is untouched.
        assert_eq!(current_policy(), Ok((libc::SCHED_OTHER, false)));
    }
}
