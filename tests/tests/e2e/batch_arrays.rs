//! Job arrays against a live queue, as a user types them: one `rexec submit
//! --array` of 10,000 tasks is one submission stored with one signature,
//! `rexec queue` folds it, `%MAX` bounds the tasks running at once (checked in
//! the queue's listing while it runs and in its own records afterwards), each
//! task sees its index, and `rexec cancel` takes one task or the whole array.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proto::batch::{BatchOp, BatchReply, JobState, QueueEntry, QueueQuery};
use proto::node::JobId;
use rexec_tests::batch::{BatchMarket, BatchOptions};
use rexec_tests::rexec::Outcome;

const LIMIT: Duration = Duration::from_secs(60);

fn start(test: &str, o: BatchOptions) -> Option<(BatchMarket, PathBuf)> {
    if !rexec_tests::can_run(test) {
        return None;
    }
    let m = BatchMarket::start(o);
    let base = &m.market.config;
    let text = std::fs::read_to_string(base).expect("client config");
    let path = base.with_extension("arrays.toml");
    let table = format!("[batch]\naddress = \"{}\"\n", m.batchd.addr);
    std::fs::write(&path, format!("{text}{table}")).expect("cannot write the client config");
    Some((m, path))
}

fn batch(m: &BatchMarket, config: &Path, args: &[&str]) -> Outcome {
    m.market.rexec().config(config).args(args).run()
}

fn job_id(out: &Outcome) -> String {
    assert_eq!(out.code, Some(0), "{out:?}");
    out.out().trim_end().to_string()
}

/// The queue's folded listing (the API's, as `rexec queue` gets it).
fn folded(m: &BatchMarket, ended: bool) -> Vec<QueueEntry> {
    match m.call(BatchOp::Queue(QueueQuery {
        user: None,
        ended,
        expand: false,
    })) {
        Ok(BatchReply::Queue(list)) => list,
        other => panic!("queue: {other:?}"),
    }
}

/// How many tasks of `array` the folded listing shows in `state`.
fn tasks_in(list: &[QueueEntry], array: JobId, state: JobState) -> u64 {
    list.iter()
        .filter(|e| e.state == state)
        .filter_map(|e| e.array.as_ref())
        .filter(|a| a.array == array)
        .map(|a| a.count())
        .sum()
}

/// The most intervals `[start, end)` open at once (`None`: still open).
fn most_at_once(runs: &[(i64, Option<i64>)]) -> usize {
    let mut edges: Vec<(i64, i32)> = Vec::new();
    for &(s, e) in runs {
        edges.push((s, 1));
        edges.push((e.unwrap_or(i64::MAX), -1));
    }
    // An end at the same instant as a start frees its place first.
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

#[test]
fn an_array_of_10000_tasks_is_one_submission_folded_bounded_and_cancelled() {
    // 8 processors, so that %4 (not the market) is what bounds the array.
    let o = BatchOptions {
        nodes: 2,
        cpus: 4,
        ..BatchOptions::default()
    };
    let test = "an_array_of_10000_tasks_is_one_submission_folded_bounded_and_cancelled";
    let Some((m, config)) = start(test, o) else {
        return;
    };
    let script = "echo $REXEC_ARRAY_INDEX $REXEC_ARRAY_JOB; sleep 1";
    let t0 = Instant::now();
    let out = batch(
        &m,
        &config,
        &[
            "submit", "--array", "0-9999%4", "--length", "30s", "sh", "-c", script,
        ],
    );
    let took = t0.elapsed();
    let id = job_id(&out);
    eprintln!("rexec submit --array 0-9999%4 took {took:?} (the whole client)");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let array: JobId = id.parse().expect("an array id");

    // Folded: one line per state, JOBID_[...] holding every task.
    let out = batch(&m, &config, &["queue"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let listing = out.out();
    let rows: Vec<&str> = listing.lines().filter(|l| l.starts_with(&id)).collect();
    assert!((1..=3).contains(&rows.len()), "{listing}");
    assert!(
        rows.iter()
            .any(|r| r.contains("QUEUED") && r.contains("-9999]")),
        "{listing}"
    );
    assert!(listing.lines().count() <= 4, "folded: {listing}");

    // %4 holds while tasks of 1 s run and end on 8 processors.
    let mut most = 0;
    let done = rexec_tests::wait_until(LIMIT, || {
        let list = folded(&m, true);
        let running = tasks_in(&list, array, JobState::Running);
        most = most.max(running);
        assert!(running <= 4, "{running} tasks running: {list:?}");
        tasks_in(&list, array, JobState::Finished) >= 10
    });
    assert!(
        done.is_some(),
        "ten tasks never finished\n{}",
        m.batchd.log()
    );
    assert!(most >= 1);

    // Each task saw its own index and its array.
    let out = batch(&m, &config, &["output", &format!("{id}_0")]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.out(), format!("0 {id}\n"), "{out:?}");

    // One task, then the whole array.
    let out = batch(&m, &config, &["cancel", &format!("{id}_9999")]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.out(), format!("job {id}_9999 cancelled\n"), "{out:?}");
    let task = proto::batch::array::task_id(array, 9999);
    assert_eq!(m.status(task.0).state, JobState::Cancelled);
    assert_eq!(
        m.status(proto::batch::array::task_id(array, 9998).0).state,
        JobState::Queued
    );
    let t0 = Instant::now();
    let out = batch(&m, &config, &["cancel", &id]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.out().contains(" cancelled"), "{out:?}");
    eprintln!("rexec cancel of the array took {:?}", t0.elapsed());
    let out = batch(&m, &config, &["wait", &id]);
    assert_eq!(out.code, Some(253), "cancelled: {out:?}");
    let out = batch(&m, &config, &["queue"]);
    assert!(!out.out().contains(&id), "nothing of it waits: {out:?}");
    let list = folded(&m, true);
    let finished = tasks_in(&list, array, JobState::Finished);
    let cancelled = tasks_in(&list, array, JobState::Cancelled);
    assert_eq!(finished + cancelled, 10_000, "{list:?}");

    // The queue's own records: one signature for the array, and never more
    // than 4 of its tasks between their recorded start and end.
    let db = rusqlite::Connection::open_with_flags(
        m.batchd.store(),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("the queue's store");
    let count = |sql: &str| db.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
    assert_eq!(count("SELECT count(*) FROM jobs"), 10_000);
    assert_eq!(
        count("SELECT count(*) FROM jobs WHERE length(signed) > 0"),
        0
    );
    assert_eq!(count("SELECT count(*) FROM arrays"), 1);
    let mut stmt = db
        .prepare("SELECT started_ms, ended_ms FROM jobs WHERE started_ms IS NOT NULL")
        .unwrap();
    let runs: Vec<(i64, Option<i64>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(runs.len() >= 10, "{runs:?}");
    assert_eq!(most_at_once(&runs), 4, "{runs:?}");
}

/// `rexec submit --length 30s EXTRA...`; the job id.
fn submit(m: &BatchMarket, config: &Path, extra: &[&str]) -> String {
    let mut args = vec!["submit", "--length", "30s"];
    args.extend_from_slice(extra);
    job_id(&batch(m, config, &args))
}

/// The stored start and end (UTC ms) of job `id`.
fn times(m: &BatchMarket, id: JobId) -> (i64, i64) {
    let db = rusqlite::Connection::open_with_flags(
        m.batchd.store(),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("the queue's store");
    db.query_row(
        "SELECT started_ms, ended_ms FROM jobs WHERE id = ?1",
        [id.0 as i64],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap_or_else(|e| panic!("times of {id}: {e}"))
}

#[test]
fn an_afterok_chain_of_three_runs_in_order_through_an_array() {
    let test = "an_afterok_chain_of_three_runs_in_order_through_an_array";
    let Some((m, config)) = start(test, BatchOptions::default()) else {
        return;
    };
    let submit = |extra: &[&str]| submit(&m, &config, extra);
    let a = submit(&["sh", "-c", "sleep 2; echo a"]);
    // The middle one is an array: depended on and depending.
    let b = submit(&[
        "--array",
        "0-1",
        "--after",
        &a,
        "sh",
        "-c",
        "echo b$REXEC_ARRAY_INDEX",
    ]);
    let c = submit(&["--after", &format!("{b}:ok"), "sh", "-c", "echo c"]);

    // While the first runs, the others wait, saying on what.
    let out = batch(&m, &config, &["queue"]);
    let listing = out.out();
    let line = |id: &str| {
        listing
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("{id} in {listing}"))
            .to_string()
    };
    assert!(line(&c).contains("DEPENDENT"), "{listing}");
    assert!(
        line(&c).contains(&format!("waiting for {b}:ok")),
        "{listing}"
    );
    assert!(line(&b).contains("DEPENDENT"), "{listing}");
    assert!(
        line(&b).contains(&format!("{b}_[0-1]")),
        "folded: {listing}"
    );
    let out = batch(&m, &config, &["queue", "--expand"]);
    let expanded = out.out();
    for task in [format!("{b}_0 "), format!("{b}_1 ")] {
        assert!(
            expanded
                .lines()
                .any(|l| l.starts_with(&task) && l.contains("DEPENDENT")),
            "{task} in {expanded}"
        );
    }

    let out = batch(&m, &config, &["wait", &c]);
    assert_eq!(out.code, Some(0), "{out:?}\n{}", m.batchd.log());
    let out = batch(&m, &config, &["wait", &b]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let id = |s: &str| s.parse::<JobId>().unwrap();
    let (_, a_end) = times(&m, id(&a));
    let b0 = times(&m, proto::batch::array::task_id(id(&b), 0));
    let b1 = times(&m, proto::batch::array::task_id(id(&b), 1));
    let (c_start, _) = times(&m, id(&c));
    assert!(
        b0.0 >= a_end && b1.0 >= a_end,
        "b after a: {a_end} {b0:?} {b1:?}"
    );
    assert!(
        c_start >= b0.1.max(b1.1),
        "c after all of b: {b0:?} {b1:?} {c_start}"
    );
    let out = batch(&m, &config, &["output", &format!("{b}_1")]);
    assert_eq!(out.out(), "b1\n", "{out:?}");
}

#[test]
fn a_failed_parent_fails_its_child_saying_why() {
    let test = "a_failed_parent_fails_its_child_saying_why";
    let Some((m, config)) = start(test, BatchOptions::default()) else {
        return;
    };
    let submit = |extra: &[&str]| submit(&m, &config, extra);
    let a = submit(&["sh", "-c", "sleep 1; exit 3"]);
    let ok = submit(&["--after", &a, "sh", "-c", "echo never"]);
    let notok = submit(&["--after", &format!("{a}:notok"), "sh", "-c", "echo cleanup"]);
    let out = batch(&m, &config, &["wait", &ok]);
    assert_eq!(out.code, Some(253), "{out:?}");
    assert!(
        out.stderr.contains(&format!("{a} finished with status 3"))
            && out.stderr.contains(&format!("--after {a}:ok")),
        "{out:?}"
    );
    let e = m.status(ok.parse::<JobId>().unwrap().0);
    assert_eq!((e.state, e.attempts), (JobState::Failed, 0), "{e:?}");
    let out = batch(&m, &config, &["wait", &notok]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(batch(&m, &config, &["output", &notok]).out(), "cleanup\n");
    // A parent that is not yours, or not there, is refused at submission.
    let out = batch(
        &m,
        &config,
        &[
            "submit",
            "--length",
            "30s",
            "--after",
            "00000000000000aa",
            "true",
        ],
    );
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("--after"), "{out:?}");
}

#[test]
fn a_parent_that_ran_out_of_time_fails_its_afterok_child() {
    let test = "a_parent_that_ran_out_of_time_fails_its_afterok_child";
    let o = BatchOptions {
        kill_wait: "1s",
        ..BatchOptions::default()
    };
    let Some((m, config)) = start(test, o) else {
        return;
    };
    // Runs past its length of 1 s: SIGTERM, then SIGKILL, state TIMEOUT.
    let a = job_id(&batch(
        &m,
        &config,
        &["submit", "--length", "1s", "sh", "-c", "sleep 60"],
    ));
    let ok = submit(&m, &config, &["--after", &a, "sh", "-c", "echo never"]);
    let notok = submit(
        &m,
        &config,
        &["--after", &format!("{a}:notok"), "sh", "-c", "echo cleanup"],
    );
    let out = batch(&m, &config, &["wait", &a]);
    assert_eq!(out.code, Some(251), "{out:?}\n{}", m.batchd.log());
    // A job that ran out of time did not finish: --after :ok can never be met.
    let out = batch(&m, &config, &["wait", &ok]);
    assert_eq!(out.code, Some(253), "{out:?}");
    assert!(
        out.stderr.contains(&format!("{a} ended TIMEOUT"))
            && out.stderr.contains(&format!("--after {a}:ok")),
        "{out:?}"
    );
    let e = m.status(ok.parse::<JobId>().unwrap().0);
    assert_eq!((e.state, e.attempts), (JobState::Failed, 0), "{e:?}");
    let out = batch(&m, &config, &["wait", &notok]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(batch(&m, &config, &["output", &notok]).out(), "cleanup\n");
}
