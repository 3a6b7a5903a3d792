//! The per-job log lines: one `job started` line naming the user, job, rank and pid,
//! and one `job ended` line naming the user, job, rank, how the job ended and the CPU
//! seconds it used (the same figure the client's `Exit` carries).

use std::time::Instant;

use proto::node::{ExitStatus, Signal};

use crate::util::*;

/// Burns at least 0.3 s of CPU in the shell itself (counted in clock ticks from
/// `/proc/$$/stat`, so a loaded machine makes it slower, never lighter), then exits 5.
const BURN: &str = "hz=$(getconf CLK_TCK); \
    while :; do \
      i=0; while [ $i -lt 2000 ]; do i=$((i + 1)); done; \
      read -r stat < /proc/$$/stat; set -- $stat; \
      [ $((${14} + ${15})) -ge $((hz * 3 / 10)) ] && exit 5; \
    done";

/// The only complete line with `message` about job `job`, waiting for it; panics when
/// there is none in time or there are several.
fn job_line(d: &Daemon, message: &str, job: &str) -> Vec<(String, String)> {
    let of_job = |l: &str| log_fields(l, message).is_some_and(|f| field(&f, "job") == Some(job));
    let line = d.wait_for_log_line(PATIENCE, of_job);
    let count = d.log().lines().filter(|l| of_job(l)).count();
    assert_eq!(
        count,
        1,
        "{message:?} logged {count} times; log:\n{}",
        d.log()
    );
    log_fields(&line, message).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_start_and_end_are_logged_with_user_job_rank_exit_and_cpu_seconds() {
    if !can_run("job_log_lines") {
        return;
    }
    // The test sends no heartbeats; the CPU burn may take a while on a loaded machine.
    let d = Daemon::start("joblog", &["--heartbeat-timeout", "120s"]);
    let mut request = launch(&["/bin/sh", "-c", BURN]);
    request.rank = 2;
    request.nranks = 3;
    let job = request.job.to_string();
    let mut c = d.user().await;
    let begun = Instant::now();
    let started = c.start(request).await;
    let out = c.outcome().await;
    let wall = begun.elapsed();
    assert_eq!(out.status(), ExitStatus::Code(5), "{out:?}");
    let exit_cpu = out.exit.as_ref().map_or(0, |e| e.cpu_nanos) as f64 / 1e9;

    let start = job_line(&d, "job started", &job);
    assert_eq!(field(&start, "user"), Some(USER), "{start:?}");
    assert_eq!(field(&start, "rank"), Some("2"), "{start:?}");
    assert_eq!(
        field(&start, "pid"),
        Some(started.pid.to_string().as_str()),
        "{start:?}"
    );

    let end = job_line(&d, "job ended", &job);
    assert_eq!(field(&end, "user"), Some(USER), "{end:?}");
    assert_eq!(field(&end, "rank"), Some("2"), "{end:?}");
    assert_eq!(field(&end, "exit"), Some("code 5"), "{end:?}");
    let cpu: f64 = field(&end, "cpu_seconds")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no CPU seconds figure: {end:?}"));
    // At least what the shell counted for itself, at most the wall time of a
    // single-threaded job: seconds, not milliseconds or nanoseconds.
    assert!(
        cpu >= 0.25 && cpu <= wall.as_secs_f64() + 0.1,
        "cpu_seconds={cpu} for a 0.3 s burn that took {wall:?}: {end:?}"
    );
    assert!(
        (cpu - exit_cpu).abs() < 1e-6,
        "the log says {cpu} s, the client was told {exit_cpu} s"
    );

    // The start comes first, and both lines name the user the same way, so that
    // `grep user=NAME` finds both.
    let log = d.log();
    let at = |message: &str| {
        log.lines()
            .position(|l| log_fields(l, message).is_some_and(|f| field(&f, "job") == Some(&job)))
    };
    assert!(at("job started") < at("job ended"), "{log}");
    let token = format!(" user={USER} ");
    for message in ["job started", "job ended"] {
        let line = log
            .lines()
            .find(|l| log_fields(l, message).is_some_and(|f| field(&f, "job") == Some(&job)))
            .unwrap_or_default();
        assert!(line.contains(&token), "{token:?} not in {line:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_killed_by_a_signal_is_logged_with_the_signal() {
    if !can_run("job_log_signal") {
        return;
    }
    let d = Daemon::start("joblogsig", &[]);
    let request = launch(&["/bin/sh", "-c", "kill -TERM $$"]);
    let job = request.job.to_string();
    let out = run(&d, request).await;
    assert!(
        matches!(
            out.status(),
            ExitStatus::Signaled {
                signal: Signal::Term,
                ..
            }
        ),
        "{out:?}"
    );
    let end = job_line(&d, "job ended", &job);
    assert_eq!(field(&end, "user"), Some(USER), "{end:?}");
    assert_eq!(field(&end, "rank"), Some("0"), "{end:?}");
    assert_eq!(field(&end, "exit"), Some("signal SIGTERM"), "{end:?}");
    let cpu: f64 = field(&end, "cpu_seconds")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no CPU seconds figure: {end:?}"));
    assert!(cpu > 0.0 && cpu < 5.0, "{end:?}");
}
