//! Two batchd on one PostgreSQL database serve one queue: one leads (decides and
//! launches) under a lease, the other accepts submissions and answers from the
//! same database. `kill -9` of the leader: the other takes the lease over and
//! starts the queued jobs within 5 s. The leader paused (SIGSTOP) across a
//! takeover and resumed: it launches nothing (its lease view ran out, its store
//! writes are fenced by the lease row, and the nodes refuse its epoch), and every
//! job runs exactly once.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use certs::Role;
use nix::sys::signal::Signal;
use proto::batch::{BatchOp, BatchReply, JobState, Worth};
use rexec_tests::batch::{BatchMarket, BatchOptions, Batchd};
use rexec_tests::cluster::TEST_USER;
use rexec_tests::postgres::Postgres;

const LIMIT: Duration = Duration::from_secs(60);

fn leads(b: &Batchd) -> bool {
    b.log().contains("lease taken: leading")
}

/// The queue on a fresh database of a server of its own, its first instance
/// leading, a second following, and a directory the jobs write to; `None` when
/// test `name` cannot run here.
fn two_instances(name: &str) -> Option<(Postgres, BatchMarket, Batchd, tempfile::TempDir)> {
    if !rexec_tests::can_run(name) || !rexec_tests::postgres::available() {
        return None;
    }
    let pg = Postgres::start();
    pg.create_db("queue");
    let m = BatchMarket::start(BatchOptions {
        postgres: Some(pg.conninfo("queue")),
        ..BatchOptions::default()
    });
    let led = rexec_tests::wait_until(Duration::from_secs(10), || leads(&m.batchd));
    assert!(
        led.is_some(),
        "the first instance never led:\n{}",
        m.batchd.log()
    );
    let b = m.batchd.beside("batchd2");
    std::thread::sleep(Duration::from_secs(2));
    assert!(!leads(&b), "two leaders:\n{}", b.log());
    Some((pg, m, b, shared_dir()))
}

/// A directory every user may write, and a job of `id` that appends its id to
/// `ran` in it once it has slept `secs`.
fn job(m: &BatchMarket, dir: &Path, id: u64, width: u32, secs: u32) -> proto::batch::JobSpec {
    let script = format!("sleep {secs}; echo {id:x} >> {}/ran", dir.display());
    let mut spec = m.spec(id, &["sh", "-c", &script], width, 30, Worth::Rate(0));
    spec.max_attempts = 5;
    spec
}

fn shared_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// How many times each job appended its line.
fn runs(dir: &Path) -> BTreeMap<String, usize> {
    let mut n = BTreeMap::new();
    for l in std::fs::read_to_string(dir.join("ran"))
        .unwrap_or_default()
        .lines()
    {
        *n.entry(l.to_string()).or_default() += 1;
    }
    n
}

fn submit_at(m: &BatchMarket, b: &Batchd, spec: &proto::batch::JobSpec) {
    let r = m.call_at(b, Role::User, TEST_USER, BatchOp::Submit(m.sign(spec)));
    assert!(
        matches!(r, Ok(BatchReply::Submitted(_))),
        "{r:?}\n{}",
        b.log()
    );
}

fn ended(e: &proto::batch::QueueEntry) -> bool {
    e.state.is_ended()
}

#[test]
fn a_follower_takes_over_within_5s_of_the_leaders_kill_9_and_starts_the_queued_jobs() {
    let Some((_pg, mut m, mut b, dir)) = two_instances(
        "a_follower_takes_over_within_5s_of_the_leaders_kill_9_and_starts_the_queued_jobs",
    ) else {
        return;
    };
    // The leader schedules; a submission through the follower runs too.
    submit_at(&m, &m.batchd, &job(&m, dir.path(), 0xc1, 1, 0));
    submit_at(&m, &b, &job(&m, dir.path(), 0xc2, 1, 0));
    for id in [0xc1, 0xc2] {
        let e = m.wait_for(id, LIMIT, ended);
        assert_eq!(e.state, JobState::Finished, "{e:?}\n{}", m.batchd.log());
    }
    assert!(
        !b.log().contains("started"),
        "the follower launched:\n{}",
        b.log()
    );
    // The leader dies; jobs queued through the follower start once it leads.
    m.batchd.kill9();
    let killed = Instant::now();
    let queued = [0xc3, 0xc4, 0xc5, 0xc6];
    for id in queued {
        submit_at(&m, &b, &job(&m, dir.path(), id, 1, 1));
    }
    std::mem::swap(&mut m.batchd, &mut b);
    let started = rexec_tests::wait_until(Duration::from_secs(10), || {
        queued.iter().all(|&id| {
            let e = m.status(id);
            e.attempts >= 1 || ended(&e)
        })
    });
    let took = killed.elapsed();
    eprintln!("kill -9 of the leader -> every queued job started {took:?} later");
    assert!(
        started.is_some() && took <= Duration::from_secs(5),
        "took over in {took:?}:\n{}",
        m.batchd.log()
    );
    for id in queued {
        let e = m.wait_for(id, LIMIT, ended);
        assert_eq!(e.state, JobState::Finished, "{e:?}");
    }
    let n = runs(dir.path());
    assert_eq!(n.len(), 6, "{n:?}");
    assert!(n.values().all(|&c| c == 1), "a job ran twice: {n:?}");
}

#[test]
fn a_leader_paused_across_a_takeover_launches_nothing_when_resumed() {
    let Some((_pg, mut m, mut b, dir)) =
        two_instances("a_leader_paused_across_a_takeover_launches_nothing_when_resumed")
    else {
        return;
    };
    // Six jobs of two ranks on four processors: two run, four wait. Each runs
    // long enough that the ranks running at the pause are still running when the
    // successor settles them (a rank that ran to its end while no queue listened
    // is refused at every later attempt, as after a restart).
    let ids: Vec<u64> = (0xd1..=0xd6).collect();
    for &id in &ids {
        submit_at(&m, &m.batchd, &job(&m, dir.path(), id, 2, 6));
    }
    m.wait_for(ids[0], LIMIT, |e| e.state == JobState::Running);
    m.batchd.signal(Signal::SIGSTOP);
    let paused = Instant::now();
    let took = rexec_tests::wait_until(Duration::from_secs(10), || leads(&b));
    assert!(took.is_some(), "the follower never took over:\n{}", b.log());
    eprintln!(
        "leader paused -> follower leads {:?} later",
        paused.elapsed()
    );
    // The successor runs jobs; then the old leader comes back.
    // Under load the successor may miss a renewal and the old leader take the
    // lease back, legitimately, at a later epoch; at its first epoch it may
    // start nothing after the pause.
    let starts = |log: &str| {
        log.lines()
            .filter(|l| l.contains(" started ") && l.contains(" epoch=1 "))
            .count()
    };
    let before = starts(&m.batchd.log());
    std::thread::sleep(Duration::from_secs(3));
    m.batchd.signal(Signal::SIGCONT);
    std::mem::swap(&mut m.batchd, &mut b);
    for &id in &ids {
        let e = m.wait_for(id, Duration::from_secs(120), ended);
        assert_eq!(e.state, JobState::Finished, "{e:?}\n{}", m.batchd.log());
    }
    let old = b.log();
    assert_eq!(
        starts(&old),
        before,
        "the resumed old leader launched ranks:\n{old}"
    );
    let n = runs(dir.path());
    assert_eq!(n.len(), ids.len(), "{n:?}");
    // Each of a job's two ranks appends its line once.
    assert!(n.values().all(|&c| c == 2), "a job ran twice: {n:?}\n{old}");
    eprintln!(
        "old leader after resuming: {}",
        old.lines()
            .filter(|l| l.contains("lease")
                || l.contains("leading")
                || l.contains("fenced")
                || l.contains("Fenced"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
