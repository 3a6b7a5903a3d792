//! CPU affinity of a job's threads (`sched_setaffinity(2)`), for the market's placement
//! of single-threaded jobs (`market::control::placement`).

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

use super::ProcessId;

/// The CPUs rexecd itself may run on: what its jobs inherit at launch, and what a
/// placed job's threads are given back when the placement ends.
pub fn own_cpus() -> Vec<u32> {
    // Thread id 0 is the calling thread.
    thread_cpus(ProcessId(0)).unwrap_or_default()
}

/// Lets thread `tid` run on `cpus` only. Fails with `ESRCH` for a thread that has
/// exited and `EINVAL` when none of `cpus` is in its cpuset.
pub fn set_thread_cpus(tid: ProcessId, cpus: &[u32]) -> Result<(), nix::Error> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c as usize)?;
    }
    sched_setaffinity(Pid::from_raw(tid.0), &set)
}

/// The CPUs thread `tid` may run on.
pub fn thread_cpus(tid: ProcessId) -> Result<Vec<u32>, nix::Error> {
    let set = sched_getaffinity(Pid::from_raw(tid.0))?;
    Ok((0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .filter_map(|c| u32::try_from(c).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_is_confined_and_given_back() {
        let all = own_cpus();
        assert!(!all.is_empty());
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw()).unwrap();
            let _ = done_rx.recv();
        });
        let tid = ProcessId(rx.recv().unwrap());
        set_thread_cpus(tid, &all[..1]).unwrap();
        assert_eq!(thread_cpus(tid).unwrap(), all[..1].to_vec());
        set_thread_cpus(tid, &all).unwrap();
        assert_eq!(thread_cpus(tid).unwrap(), all);
        done_tx.send(()).unwrap();
        t.join().unwrap();
        // No thread has this id (pid_max is at most 2^22): an error, not a panic.
        assert_eq!(
            set_thread_cpus(ProcessId(i32::MAX), &all),
            Err(nix::Error::ESRCH)
        );
    }
}
