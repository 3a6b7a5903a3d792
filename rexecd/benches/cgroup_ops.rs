//! How long the cgroup and spawn operations rexecd runs on every job start, exit,
//! re-bid and metering tick take on this machine. Needs root and a cpu controller;
//! prints the reason and exits otherwise. Run with `cargo bench -p rexecd`.

use std::time::{Duration, Instant};

use rexecd::cgroup::{JobCgroups, ParentName, weights_for_tickets};
use rexecd::spawn::{JobChild, JobCommand, JobStdio, JobUser, SpawnPolicy};
use tokio::runtime::Runtime;

const JOBS: u64 = 8;

fn per_op(label: &str, n: u32, mut op: impl FnMut(u32)) {
    let start = Instant::now();
    for i in 0..n {
        op(i);
    }
    let each = start.elapsed() / n;
    println!("{label:<48} {:>9.1} us/op  (n = {n})", micros(each));
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    if !rexecd::sys::effective_user().is_root() {
        println!("cgroup_ops: skipped (needs root)");
        return;
    }
    let name = format!("rexec-bench-{}", std::process::id());
    let jobs = match JobCgroups::detect(&ParentName::new(&name).unwrap()) {
        Ok(jobs) => jobs,
        Err(e) => {
            println!("cgroup_ops: skipped ({e})");
            return;
        }
    };
    println!(
        "cgroup_ops on cgroup {:?}, parent {}",
        jobs.version(),
        jobs.parent_path().display()
    );
    let root = JobUser::resolve("root", SpawnPolicy { allow_root: true }).unwrap();
    // rexecd's own spawn registers the child's pidfd and pipes with a tokio runtime.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _entered = rt.enter();
    let start_sleeper = |id: u64| start(&root, &jobs, id, JobCommand::new("/bin/sleep").arg("600"));

    let mut children = Vec::new();
    for id in 0..JOBS {
        jobs.create_job(id).unwrap();
        for _ in 0..4 {
            children.push(start_sleeper(id));
        }
    }
    let range = jobs.weight_range();
    per_op("set_weight (one job)", 5_000, |i| {
        let w = range.min + u64::from(i) % (range.max - range.min);
        jobs.set_weight(u64::from(i) % JOBS, w).unwrap();
    });
    per_op(
        "re-weight 8 jobs (weights_for_tickets + set_weight)",
        1_000,
        |i| {
            let tickets: Vec<u64> = (0..JOBS).map(|id| id * 7 + u64::from(i)).collect();
            for (id, w) in (0..JOBS).zip(weights_for_tickets(&tickets, range)) {
                jobs.set_weight(id, w).unwrap();
            }
        },
    );
    per_op("sample (usage + runnable, 4 threads)", 5_000, |i| {
        jobs.sample(u64::from(i) % JOBS).unwrap();
    });
    per_op("meter all 8 jobs (one metering tick)", 1_000, |_| {
        for id in 0..JOBS {
            jobs.sample(id).unwrap();
        }
    });
    per_op("spawn as user in cgroup + wait (/bin/true)", 200, |_| {
        let mut child = start(&root, &jobs, 0, JobCommand::new("/bin/true"));
        assert!(rt.block_on(child.wait()).unwrap().success());
    });
    per_op("create + destroy job with 4 sleepers", 50, |i| {
        let id = 1_000 + u64::from(i);
        jobs.create_job(id).unwrap();
        let mut mine: Vec<_> = (0..4).map(|_| start_sleeper(id)).collect();
        jobs.destroy(id).unwrap();
        for c in &mut mine {
            rt.block_on(c.wait()).unwrap();
        }
    });
    proportional_split(&rt, &jobs, &root);

    let start = Instant::now();
    for id in 0..JOBS {
        jobs.destroy(id).unwrap();
    }
    println!(
        "{:<48} {:>9.1} us/op  (n = {JOBS})",
        "destroy job with 4 sleepers (freeze, kill, rmdir)",
        micros(start.elapsed() / JOBS as u32)
    );
    for mut c in children {
        rt.block_on(c.wait()).unwrap();
    }
    jobs.remove_parent().unwrap();
}

/// Starts `command` as `user` in job `id` through rexecd's spawn (within a runtime),
/// its standard input at its end at once.
fn start(user: &JobUser, jobs: &JobCgroups, id: u64, command: JobCommand) -> JobChild {
    let (mut child, _report) = command
        .spawn(user, jobs.join(id).unwrap(), JobStdio::Pipes)
        .unwrap();
    drop(child.stdin.take());
    child
}

/// Two jobs, each with as many burners as the machine has CPUs, tickets 3:1: over two
/// seconds their CPU usage should split about 3:1 (the kernel enforcing the weights).
fn proportional_split(rt: &Runtime, jobs: &JobCgroups, root: &JobUser) {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (a, b) = (2_000, 2_001);
    let mut burners = Vec::new();
    for id in [a, b] {
        jobs.create_job(id).unwrap();
        for _ in 0..cpus {
            let burn = JobCommand::new("/bin/sh").args(["-c", "while :; do :; done"]);
            burners.push(start(root, jobs, id, burn));
        }
    }
    let weights: Vec<(u64, u64)> = [a, b]
        .into_iter()
        .zip(weights_for_tickets(&[3, 1], jobs.weight_range()))
        .collect();
    for &(id, w) in &weights {
        jobs.set_weight(id, w).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let (a0, b0) = (jobs.usage(a).unwrap(), jobs.usage(b).unwrap());
    let window = Duration::from_secs(2);
    std::thread::sleep(window);
    let (ua, ub) = (jobs.usage(a).unwrap() - a0, jobs.usage(b).unwrap() - b0);
    println!(
        "{:<48} {:>9.2}    (weights {:?}, {} burners each, {:.2} + {:.2} CPU-s in {:?})",
        "usage ratio at tickets 3:1 (ideal 3.00)",
        ua.as_secs_f64() / ub.as_secs_f64().max(1e-9),
        weights.iter().map(|&(_, w)| w).collect::<Vec<_>>(),
        cpus,
        ua.as_secs_f64(),
        ub.as_secs_f64(),
        window,
    );
    for id in [a, b] {
        jobs.destroy(id).unwrap();
    }
    for mut c in burners {
        rt.block_on(c.wait()).unwrap();
    }
}
