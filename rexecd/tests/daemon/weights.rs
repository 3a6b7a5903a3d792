//! Kernel weights under concurrent launches and exits: after ranks start and end in
//! parallel, every remaining job cgroup holds exactly the weight its bid says among the
//! bids still running (`stride::tickets_for_bids`, then
//! `rexecd::cgroup::weights_for_tickets`). A weight computed from an older set of bids
//! and written after a newer one stays wrong, so out-of-order writes fail this test.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use money::Bid;
use proto::node::{ExitStatus, Signal, ToNode};
use rexecd::cgroup::{WeightRange, weights_for_tickets};
use tokio::task::JoinSet;

use crate::util::*;

/// Rounds of concurrent starts and ends.
const ROUNDS: u64 = 5;
/// Ranks started in each round (while about half of the running ones end).
const STARTS_PER_ROUND: u64 = 10;

/// A running rank: its session, its first process and its bid.
struct Running {
    client: Client,
    pid: i32,
    bid: Bid,
}

/// The bid of start `i` of round `round`: spread over 0..=99 credits a minute, with a
/// zero bid now and then (it gets the smallest weight among paying jobs) and, every
/// round, a new highest bid (its arrival and departure move every other weight).
fn bid_for(round: u64, i: u64) -> Bid {
    let credits = match i {
        0 => 90 + (round * 3) % 10,
        1 if round.is_multiple_of(2) => 0,
        _ => (round * 37 + i * 11) % 89 + 1,
    };
    Bid::from_credits(u32::try_from(credits).unwrap())
}

/// The weight file of a job cgroup and the range it takes.
fn weight_file(dir: &Path) -> (std::path::PathBuf, WeightRange) {
    let v1 = dir.join("cpu.shares");
    if v1.exists() {
        (v1, WeightRange::V1_SHARES)
    } else {
        (dir.join("cpu.weight"), WeightRange::V2_WEIGHT)
    }
}

/// Job cgroup directory name -> (pids in it, weight written).
fn read_cgroups(d: &Daemon) -> BTreeMap<String, (Vec<i32>, Option<u64>, WeightRange)> {
    let base = cpu_dir(&d.parent).unwrap();
    d.job_cgroups()
        .into_iter()
        .map(|name| {
            let dir = base.join(&name);
            let pids = std::fs::read_to_string(dir.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            let (file, range) = weight_file(&dir);
            let weight = std::fs::read_to_string(file)
                .ok()
                .and_then(|t| t.trim().parse().ok());
            (name, (pids, weight, range))
        })
        .collect()
}

/// Compares the job cgroups with what the bids of `running` say; `Err` says how they
/// differ.
fn check_weights(d: &Daemon, running: &[Running]) -> Result<(), String> {
    let cgroups = read_cgroups(d);
    if cgroups.len() != running.len() {
        return Err(format!(
            "{} job cgroups for {} running ranks: {:?}",
            cgroups.len(),
            running.len(),
            cgroups.keys().collect::<Vec<_>>()
        ));
    }
    let Some(range) = cgroups.values().next().map(|(_, _, r)| *r) else {
        return Ok(());
    };
    let bids: Vec<Bid> = running.iter().map(|r| r.bid).collect();
    let expected = weights_for_tickets(&stride::tickets_for_bids(&bids), range);
    let mut wrong = Vec::new();
    for (r, want) in running.iter().zip(expected) {
        let found = cgroups
            .iter()
            .find(|(_, (pids, _, _))| pids.contains(&r.pid));
        match found {
            None => wrong.push(format!("pid {} (bid {}) in no job cgroup", r.pid, r.bid)),
            Some((name, (_, got, _))) if *got != Some(want) => wrong.push(format!(
                "{name} (pid {}, bid {}): weight {got:?}, bids say {want}",
                r.pid, r.bid
            )),
            Some(_) => {}
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n"))
    }
}

/// Starts a sleeping rank bidding `bid` in a session of its own.
async fn start(d: Arc<Daemon>, bid: Bid) -> Running {
    let mut client = d.user().await;
    let mut request = launch(&["/bin/sleep", "600"]);
    request.bid = bid;
    let started = client.start(request).await;
    Running {
        client,
        pid: started.pid as i32,
        bid,
    }
}

/// Kills a rank and waits for its end.
async fn end(mut r: Running) -> i32 {
    r.client.send(ToNode::Signal(Signal::Kill)).await;
    let out = r.client.outcome().await;
    assert!(
        matches!(
            out.status(),
            ExitStatus::Signaled {
                signal: Signal::Kill,
                ..
            }
        ),
        "{out:?}"
    );
    r.pid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_launches_and_exits_leave_the_weights_the_bids_say() {
    if !can_run("weights_concurrent") {
        return;
    }
    // Open loop: the weights follow the bids exactly (closed loop would correct them by
    // measured shares). No accountd: nobody is charged and balances are not checked.
    let config = tempfile::tempdir().unwrap();
    let path = config.path().join("rexecd.toml");
    std::fs::write(&path, "[market]\nshare_control = \"open\"\n").unwrap();
    let d = Arc::new(Daemon::start(
        "concweights",
        // Raw sessions that send no heartbeats keep their ranks for the whole test.
        &[
            "--config",
            path.to_str().unwrap(),
            "--heartbeat-timeout",
            "10m",
        ],
    ));

    let mut running: Vec<Running> = Vec::new();
    let mut ended = 0usize;
    for round in 0..ROUNDS {
        // End every other running rank, the highest bidder included (its departure
        // changes every weight), while the new ranks start.
        running.sort_by_key(|r| std::cmp::Reverse(r.bid));
        let mut keep = Vec::new();
        let mut tasks: JoinSet<Option<Running>> = JoinSet::new();
        for (k, r) in running.into_iter().enumerate() {
            if k % 2 == 0 {
                tasks.spawn(async move {
                    end(r).await;
                    None
                });
            } else {
                keep.push(r);
            }
        }
        for i in 0..STARTS_PER_ROUND {
            let d = Arc::clone(&d);
            tasks.spawn(async move { Some(start(d, bid_for(round, i)).await) });
        }
        let before = keep.len();
        while let Some(joined) = tasks.join_next().await {
            match joined.unwrap() {
                Some(r) => keep.push(r),
                None => ended += 1,
            }
        }
        running = keep;
        assert_eq!(running.len() as u64, before as u64 + STARTS_PER_ROUND);

        // The engine writes within milliseconds; allow a generous settle period, then
        // the weights must stay put (nothing changes on an open-loop node of sleepers).
        let mut last = Err(String::new());
        let settled = eventually_async(PATIENCE, || {
            std::future::ready({
                last = check_weights(&d, &running);
                last.is_ok()
            })
        })
        .await;
        assert!(
            settled,
            "round {round}: weights do not match the bids:\n{}\nlog:\n{}",
            last.unwrap_err(),
            d.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        if let Err(e) = check_weights(&d, &running) {
            panic!("round {round}: weights moved after settling:\n{e}");
        }
    }
    assert!(ended >= 10, "only {ended} ranks ended");

    let mut tasks = JoinSet::new();
    let pids: Vec<i32> = running.iter().map(|r| r.pid).collect();
    for r in running {
        tasks.spawn(end(r));
    }
    while let Some(joined) = tasks.join_next().await {
        joined.unwrap();
    }
    assert_nothing_left(&d, &pids).await;
}
