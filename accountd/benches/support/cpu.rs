//! CPU time of what a debits run keeps busy, read from `/proc` before and
//! after the load (Linux only): this process's threads by name (the tokio
//! workers run both the TLS clients and accountd's connections; the
//! `ledger-writer` threads run the group commits) and, with PostgreSQL, the
//! server's postmaster and every process it started (one backend per
//! connection, the WAL writer, the checkpointer, ...). Divided by the debits
//! of the run, it says which part bounds the rate on a machine whose cores
//! they share.

use std::collections::BTreeMap;
use std::path::Path;

/// CPU seconds by group.
pub type Cpu = BTreeMap<String, f64>;

/// utime + stime in seconds, the name, and the parent pid of one
/// `/proc/.../stat` file.
fn stat(path: &Path) -> Option<(f64, String, u32)> {
    let s = std::fs::read_to_string(path).ok()?;
    let open = s.find('(')?;
    let close = s.rfind(')')?;
    let name = s.get(open + 1..close)?.to_string();
    let f: Vec<&str> = s.get(close + 2..)?.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    let ppid = f.get(1)?.parse().ok()?;
    // USER_HZ is 100 on every Linux this runs on.
    Some((ticks as f64 / 100.0, name, ppid))
}

/// The CPU time used so far by this process's threads (by thread name) and
/// by the PostgreSQL server whose data directory is `pg_data`.
pub fn snapshot(pg_data: Option<&Path>) -> Cpu {
    let mut cpu = Cpu::new();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            if let Some((secs, name, _)) = stat(&t.path().join("stat")) {
                *cpu.entry(format!("bench thread {name}")).or_default() += secs;
            }
        }
    }
    let postmaster: Option<u32> = pg_data
        .and_then(|d| std::fs::read_to_string(d.join("postmaster.pid")).ok())
        .and_then(|s| s.lines().next().and_then(|l| l.trim().parse().ok()));
    let Some(postmaster) = postmaster else {
        return cpu;
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return cpu;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Some((secs, _, ppid)) = stat(&p.path().join("stat")) else {
            continue;
        };
        if pid != postmaster && ppid != postmaster {
            continue;
        }
        // A backend's command line names its database ("postgres: postgres ledger ...").
        let cmd = std::fs::read_to_string(p.path().join("cmdline")).unwrap_or_default();
        let group = if pid == postmaster {
            "postgres postmaster".to_string()
        } else if cmd.contains(" ledger ") {
            "postgres backends".to_string()
        } else {
            let what = cmd.trim_end_matches('\0').trim_start_matches("postgres: ");
            format!("postgres {}", what.replace('\0', " "))
        };
        *cpu.entry(group).or_default() += secs;
    }
    cpu
}

/// What was used between two snapshots (threads and processes that ended in
/// between are left out: take `after` while the load's workers still run).
pub fn used(before: &Cpu, after: &Cpu) -> Cpu {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}
