//! Limits that hold, and output where the user asked for it, on real nodes with
//! real cgroups: a batch job that runs past its length gets SIGTERM (which it sees)
//! and SIGKILL after the queue's `kill_wait`, and ends TIMEOUT; a rank over its
//! `--mem` is killed by the kernel's memory controller and its job ends
//! OUT_OF_MEMORY naming the rank and the node, while another job on the node runs
//! on (batch, and interactive `rexec --mem`, which says so in one line and exits
//! 252); `-o/-e` patterns put each rank's output in files the node opens as the
//! user, in the job's working directory, and a directory the user may not write
//! to refuses the job naming the file.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use proto::batch::{BatchReply, JobOptions, JobState, Worth};
use proto::node::{ExitStatus, Signal};
use rexec_tests::batch::{BatchMarket, BatchOptions};
use rexec_tests::cluster::{Cluster, ClusterOptions};

const LIMIT: Duration = Duration::from_secs(60);

/// Grows the shell past 150 MB in memory: far over a 32M limit.
const HOG: &str = "x=$(head -c 150000000 /dev/zero | tr '\\0' a); echo survived";

/// `rexec ARGS` as the test user, with the queue in its client configuration.
fn rexec(m: &BatchMarket, args: &[&str]) -> rexec_tests::rexec::Outcome {
    let base = &m.market.config;
    let config = base.with_extension("limits.toml");
    let text = std::fs::read_to_string(base).expect("client config");
    let table = format!("[batch]\naddress = \"{}\"\n", m.batchd.addr);
    std::fs::write(&config, format!("{text}{table}")).expect("client config");
    m.market.rexec().config(&config).args(args).run()
}

/// A directory in /tmp the test user owns (the job's files go there).
fn user_dir(name: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(name)
        .tempdir_in("/tmp")
        .unwrap();
    let user = testhost::user::test_user();
    std::os::unix::fs::chown(dir.path(), Some(user.uid), Some(user.gid)).unwrap();
    dir
}

#[test]
fn a_batch_job_past_its_length_gets_sigterm_then_sigkill_and_ends_timeout() {
    if !rexec_tests::can_run(
        "a_batch_job_past_its_length_gets_sigterm_then_sigkill_and_ends_timeout",
    ) {
        return;
    }
    let m = BatchMarket::start(BatchOptions {
        nodes: 1,
        kill_wait: "2s",
        ..BatchOptions::default()
    });
    let dir = user_dir("rexec-timeout-");
    let marker = dir.path().join("term");
    // Traps SIGTERM (writing a marker) and runs on regardless: only SIGKILL ends it.
    let script = format!(
        "trap 'echo TERM >> {m}' TERM; while :; do sleep 0.1; done",
        m = marker.display()
    );
    let spec = m.spec(0xd1, &["sh", "-c", &script], 1, 2, Worth::Rate(0));
    assert!(matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))));
    let running = m.wait_for(0xd1, LIMIT, |e| e.state == JobState::Running);
    let started = Instant::now();
    let ended = m.wait_for(0xd1, LIMIT, |e| e.state.is_ended());
    let took = started.elapsed();
    assert_eq!(
        ended.state,
        JobState::Timeout,
        "{ended:?}\n{}",
        m.batchd.log()
    );
    let term = std::fs::read_to_string(&marker).unwrap_or_default();
    assert!(term.contains("TERM"), "the job never saw SIGTERM: {term:?}");
    assert_eq!(
        ended.exit,
        Some(ExitStatus::Signaled {
            signal: Signal::Kill,
            core_dumped: false
        }),
        "SIGKILL after the grace: {ended:?}"
    );
    let reason = ended.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("time limit") && reason.contains("rank 0") && reason.contains("n1"),
        "{reason}"
    );
    // Length 2 s (+1 s over time) and 2 s of grace: not before, and not much after.
    let (s, e) = (running.started_at.unwrap(), ended.ended_at.unwrap());
    assert!(e - s >= 4, "ended {} s after its start", e - s);
    assert!(took < Duration::from_secs(20), "{took:?}");
    // Not requeued: a job that ran out of time ran.
    assert_eq!(ended.attempts, 1, "{ended:?}");
    let wait = rexec(&m, &["wait", "00000000000000d1"]);
    assert_eq!(wait.code, Some(251), "{wait:?}");
    assert!(wait.stderr.contains("ended TIMEOUT"), "{wait:?}");
}

#[test]
fn a_batch_rank_over_its_memory_ends_out_of_memory_and_another_job_runs_on() {
    if !rexec_tests::can_run(
        "a_batch_rank_over_its_memory_ends_out_of_memory_and_another_job_runs_on",
    ) {
        return;
    }
    let m = BatchMarket::start(BatchOptions {
        nodes: 1,
        ..BatchOptions::default()
    });
    // A neighbour on the same node, running until the hog has been killed, then
    // allocating as much, with no limit of its own.
    let dir = user_dir("rexec-oom-");
    let go = dir.path().join("go");
    let wait_then_hog = format!("while [ ! -e {} ]; do sleep 0.1; done; {HOG}", go.display());
    let other = m.spec(0xe2, &["sh", "-c", &wait_then_hog], 1, 60, Worth::Rate(0));
    assert!(matches!(m.submit(&other), Ok(BatchReply::Submitted(_))));
    m.wait_for(0xe2, LIMIT, |e| e.state == JobState::Running);
    // Typed as a user would; the queue and the node refuse nothing of it.
    let submitted = rexec(
        &m,
        &["submit", "--mem", "32M", "--length", "1m", "sh", "-c", HOG],
    );
    assert_eq!(submitted.code, Some(0), "{submitted:?}");
    let id = submitted.out().trim().to_string();
    let hog = u64::from_str_radix(&id, 16).expect("a job id");
    let ended = m.wait_for(hog, LIMIT, |e| e.state.is_ended());
    assert_eq!(
        ended.state,
        JobState::OutOfMemory,
        "{ended:?}\n{}",
        m.batchd.log()
    );
    let reason = ended.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("rank 0") && reason.contains("node n1") && reason.contains("32M"),
        "{reason}"
    );
    let (out, _) = m.output(hog);
    assert!(!String::from_utf8_lossy(&out).contains("survived"));
    let wait = rexec(&m, &["wait", &id]);
    assert_eq!(wait.code, Some(252), "{wait:?}");
    assert_eq!(wait.stderr.lines().count(), 1, "{wait:?}");
    assert!(
        wait.stderr.contains("OUT_OF_MEMORY") && wait.stderr.contains("rank 0 on node n1"),
        "{wait:?}"
    );
    let listed = rexec(&m, &["queue", "--ended"]);
    let row = listed
        .out()
        .lines()
        .find(|l| l.starts_with(&id))
        .map(str::to_string);
    assert!(
        row.as_deref().is_some_and(|r| r.contains("OUT_OF_MEMORY")),
        "{listed:?}"
    );
    assert_eq!(
        m.status(0xe2).state,
        JobState::Running,
        "the neighbour was hit"
    );
    std::fs::write(&go, "").unwrap();
    let done = m.wait_for(0xe2, LIMIT, |e| e.state.is_ended());
    assert_eq!(done.state, JobState::Finished, "{done:?}");
    assert_eq!(done.exit, Some(ExitStatus::Code(0)));
    let (out, _) = m.output(0xe2);
    assert_eq!(String::from_utf8_lossy(&out), "survived\n");
}

#[test]
fn rexec_over_its_memory_says_so_in_one_line_and_exits_252() {
    if !rexec_tests::can_run("rexec_over_its_memory_says_so_in_one_line_and_exits_252") {
        return;
    }
    let cluster = Cluster::start(2);
    // Another job on the same node, started first, running until the hog is gone.
    let dir = user_dir("rexec-oom-");
    let go = dir.path().join("go");
    let wait = format!(
        "echo started; while [ ! -e {} ]; do sleep 0.1; done; echo alive",
        go.display()
    );
    let neighbour = cluster
        .rexec()
        .args(["--nodes", "n2", "sh", "-c", &wait])
        .spawn();
    neighbour.wait_for_stdout("started", LIMIT);
    let script = format!("if [ $REXEC_RANK = 1 ]; then {HOG}; else sleep 1000; fi");
    let out = cluster
        .rexec()
        .args(["--nodes", "n1,n2", "--mem", "32M", "sh", "-c", &script])
        .run();
    assert_eq!(out.code, Some(252), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "one line: {:?}", out.stderr);
    assert!(
        out.stderr.starts_with("rexec: ")
            && out.stderr.contains("rank 1 on node n2 ran out of memory")
            && out.stderr.contains("32M"),
        "{:?}",
        out.stderr
    );
    assert!(!out.out().contains("survived"), "{out:?}");
    std::fs::write(&go, "").unwrap();
    let n = neighbour.wait(LIMIT);
    assert_eq!(n.code, Some(0), "{n:?}");
    assert_eq!(n.out(), "started\nalive\n");
}

#[test]
fn a_node_refuses_more_than_its_max_mem_per_rank_and_gives_its_default() {
    if !rexec_tests::can_run("a_node_refuses_more_than_its_max_mem_per_rank_and_gives_its_default")
    {
        return;
    }
    let options = ClusterOptions {
        nodes: 1,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start_with_node_config(options, |_, _, _| {
        Some("max_mem_per_rank = \"64M\"\n".into())
    });
    let out = cluster.rexec().args(["--mem", "1G", "true"]).run();
    assert_eq!(out.code, Some(2), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "one line: {:?}", out.stderr);
    assert!(
        out.stderr.contains("node n1")
            && out.stderr.contains("--mem 1G")
            && out.stderr.contains("max_mem_per_rank of 64M"),
        "{:?}",
        out.stderr
    );
    // A rank asking for nothing gets the ceiling as its limit; one asking less, that.
    let limit = "p=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup); \
                 cat /sys/fs/cgroup/memory$p/memory.limit_in_bytes";
    let out = cluster.rexec().args(["sh", "-c", limit]).run();
    assert_eq!(
        (out.code, out.out()),
        (Some(0), "67108864\n".into()),
        "{out:?}"
    );
    let out = cluster
        .rexec()
        .args(["--mem", "16M", "sh", "-c", limit])
        .run();
    assert_eq!(
        (out.code, out.out()),
        (Some(0), "16777216\n".into()),
        "{out:?}"
    );
}

#[test]
fn output_files_follow_their_patterns_and_belong_to_the_user() {
    if !rexec_tests::can_run("output_files_follow_their_patterns_and_belong_to_the_user") {
        return;
    }
    let m = BatchMarket::start(BatchOptions::default());
    let dir = user_dir("rexec-output-");
    let script = "echo out of $REXEC_RANK; echo err of $REXEC_RANK >&2";
    let mut spec = m.spec(0xf1, &["sh", "-c", script], 2, 30, Worth::Rate(0));
    spec.cwd = Some(dir.path().display().to_string());
    spec.options = JobOptions {
        mem_bytes: None,
        // Relative: in the job's working directory. Absolute: as given.
        stdout: Some("out-%j-%a-r%r-%n.txt".into()),
        stderr: Some(format!("{}/err-%j-%r.txt", dir.path().display())),
    };
    assert!(matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))));
    let done = m.wait_for(0xf1, LIMIT, |e| e.state.is_ended());
    assert_eq!(
        done.state,
        JobState::Finished,
        "{done:?}\n{}",
        m.batchd.log()
    );
    let user = testhost::user::test_user();
    let job = "00000000000000f1";
    let mut files = ls(dir.path());
    files.sort();
    assert_eq!(files.len(), 4, "two files per rank: {files:?}");
    for rank in 0..2 {
        // %n: the node the rank ran on, one of the market's.
        let prefix = format!("out-{job}-0-r{rank}-");
        let out = files
            .iter()
            .find(|f| f.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no {prefix}NODE.txt in {files:?}"));
        let node = out[prefix.len()..].trim_end_matches(".txt");
        assert!(["n1", "n2"].contains(&node), "{out}");
        let out = dir.path().join(out);
        let err = dir.path().join(format!("err-{job}-{rank}.txt"));
        for (path, want) in [(&out, "out"), (&err, "err")] {
            let text = std::fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("{}: {e}; dir holds {files:?}", path.display()));
            assert_eq!(text, format!("{want} of {rank}\n"), "{}", path.display());
            let meta = std::fs::metadata(path).unwrap();
            assert_eq!(
                (meta.uid(), meta.gid()),
                (user.uid, user.gid),
                "{} not the user's",
                path.display()
            );
        }
    }
    // Nothing for the queue to keep: the files have it.
    assert_eq!(m.output(0xf1), (Vec::new(), Vec::new()));

    // The user's permissions decide: a directory only root may write to refuses it.
    let closed = tempfile::Builder::new()
        .prefix("rexec-closed-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(closed.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut spec = m.spec(0xf2, &["echo", "hi"], 1, 30, Worth::Rate(0));
    let denied = format!("{}/out-%j.txt", closed.path().display());
    spec.options.stdout = Some(denied);
    assert!(matches!(m.submit(&spec), Ok(BatchReply::Submitted(_))));
    let failed = m.wait_for(0xf2, LIMIT, |e| e.state.is_ended());
    assert_eq!(failed.state, JobState::Failed, "{failed:?}");
    let reason = failed.reason.unwrap_or_default();
    assert!(
        reason.contains(&format!(
            "{}/out-00000000000000f2.txt",
            closed.path().display()
        )) && reason.contains(&user.name),
        "{reason}"
    );
    assert!(ls(closed.path()).is_empty(), "root wrote for the user");
}

fn ls(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}
