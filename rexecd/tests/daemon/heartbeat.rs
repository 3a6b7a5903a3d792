//! Heartbeats: a silent client loses its job within the timeout; a client that
//! heartbeats, a client stopped after `TSTP`, and a client whose stdin rexecd is not
//! reading (the job's stdin is full) keep theirs.

use std::time::{Duration, Instant};

use proto::node::{Chunk, ExitStatus, FromNode, Heartbeat, Signal, ToNode};

use crate::cleanup::{ESCAPE, escaped_pid};
use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_client_loses_its_job_within_the_heartbeat_timeout() {
    if !can_run("heartbeat") {
        return;
    }
    let d = Daemon::start("heartbeat", &["--heartbeat-timeout", "1s"]);
    // A client that keeps sending heartbeats keeps its job past the timeout. It beats
    // until the `Exit` arrives, as a real client does: a client that stops beating
    // before the job ends may rightly be taken for dead when the job ends late.
    let mut c = d.user().await;
    c.start(launch(&["/bin/sleep", "2"])).await;
    let (mut rx, mut tx) = c.framed.into_split();
    let beats = tokio::spawn(async move {
        for seq in 1u64.. {
            if tx
                .send(&ToNode::Heartbeat(Heartbeat { seq }))
                .await
                .is_err()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    let status = loop {
        match tokio::time::timeout(PATIENCE, rx.recv::<FromNode>()).await {
            Ok(Ok(Some(FromNode::Exit(exit)))) => break exit.status,
            Ok(Ok(Some(FromNode::Heartbeat(_)))) => {}
            other => panic!("no Exit: {other:?}; log:\n{}", d.log()),
        }
    };
    beats.abort();
    assert_eq!(status, ExitStatus::Code(0));

    // A connected but silent client does not.
    let mut c = d.user().await;
    let started = c.start(launch(&["/bin/sh", "-c", ESCAPE])).await;
    let grandchild = escaped_pid(&mut c).await;
    let silent_since = Instant::now();
    assert!(
        eventually_async(Duration::from_secs(5), || async {
            is_dead(started.pid as i32)
        })
        .await,
        "job still alive; log:\n{}",
        d.log()
    );
    assert!(silent_since.elapsed() < Duration::from_secs(4));
    assert_nothing_left(&d, &[grandchild]).await;
    // The daemon logs the end after it has removed the cgroup, so the line may lag.
    assert!(
        eventually_async(PATIENCE, || async { d.log().contains("missed heartbeats") }).await,
        "{}",
        d.log()
    );
    drop(c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_client_keeps_its_job_after_tstp() {
    if !can_run("tstp") {
        return;
    }
    // A timeout the test's own round trips (Started to TSTP, CONT to Kill, the kill
    // itself) stay well inside on a loaded machine, for they are silences too.
    let d = Daemon::start("tstp", &["--heartbeat-timeout", "1s"]);
    let mut c = d.user().await;
    let started = c.start(launch(&["/bin/sleep", "30"])).await;
    let pid = started.pid as i32;
    c.send(ToNode::Signal(Signal::Tstp)).await;
    // A heartbeat the client queued just before it stopped arrives after the TSTP
    // (a regression: it restarted the clock and the stopped client was declared dead).
    c.send(ToNode::Heartbeat(Heartbeat { seq: 1 })).await;
    assert!(eventually_async(PATIENCE, || async { state_of(pid) == Some('T') }).await);
    // Silent for three timeouts: the job must survive, stopped.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(state_of(pid), Some('T'));
    c.send(ToNode::Signal(Signal::Cont)).await;
    assert!(
        eventually_async(PATIENCE, || async {
            matches!(state_of(pid), Some('S' | 'R'))
        })
        .await
    );
    c.send(ToNode::Signal(Signal::Kill)).await;
    let out = c.outcome().await;
    assert!(matches!(
        out.status(),
        ExitStatus::Signaled {
            signal: Signal::Kill,
            ..
        }
    ));
    assert_nothing_left(&d, &[pid]).await;

    // A job that ends while its client is stopped keeps its output and exit for when
    // the client reads again (here the job ignores TSTP, so it runs to its end).
    let mut c = d.user().await;
    let script = "trap '' TSTP; echo ready; sleep 0.3; echo done";
    c.start(launch(&["/bin/sh", "-c", script])).await;
    // Only once the trap is set: before it, TSTP would rightly stop the shell.
    let mut stdout = c.read_until("ready").await;
    c.send(ToNode::Signal(Signal::Tstp)).await;
    // Silent for three timeouts, most of them after the job's end.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let out = c.outcome().await;
    stdout.push_str(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(stdout, "ready\ndone\n");
    assert_eq!(out.status(), ExitStatus::Code(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_blocked_on_a_full_stdin_is_not_taken_for_dead() {
    if !can_run("stdin_backpressure") {
        return;
    }
    let d = Daemon::start("backpressure", &["--heartbeat-timeout", "1s"]);
    let mut c = d.user().await;
    // The job never reads stdin; the client floods it and can send nothing else.
    c.start(launch(&["/bin/sleep", "2.5"])).await;
    let (mut rx, mut tx) = c.framed.into_split();
    let flood = tokio::spawn(async move {
        let chunk = Chunk(vec![b'x'; 64 * 1024]);
        for _ in 0..1024 {
            if tx.send(&ToNode::Stdin(chunk.clone())).await.is_err() {
                break;
            }
        }
    });
    let status = loop {
        match tokio::time::timeout(PATIENCE, rx.recv::<FromNode>()).await {
            Ok(Ok(Some(FromNode::Exit(exit)))) => break exit.status,
            Ok(Ok(Some(_))) => {}
            other => panic!("no Exit: {other:?}; log:\n{}", d.log()),
        }
    };
    assert_eq!(status, ExitStatus::Code(0));
    flood.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rexecd_sends_numbered_heartbeats_every_interval() {
    if !can_run("node_heartbeats") {
        return;
    }
    let d = Daemon::start("beats", &["--heartbeat-interval", "100ms"]);
    let mut c = d.user().await;
    // A job that runs until told to end, however slowly the heartbeats come.
    c.start(launch(&["/bin/cat"])).await;
    let start = Instant::now();
    let mut seqs = Vec::new();
    while seqs.len() < 6 {
        match tokio::time::timeout(PATIENCE, c.framed.recv::<FromNode>()).await {
            Ok(Ok(Some(FromNode::Heartbeat(Heartbeat { seq })))) => seqs.push(seq),
            other => panic!("expected heartbeats, got {other:?}"),
        }
    }
    // Six beats take 0.5 s at 100 ms (the first comes at once), about 5 s at the
    // default interval of 1 s; 2.5 s leaves room for a loaded machine.
    assert!(
        start.elapsed() < Duration::from_millis(2500),
        "{:?}",
        start.elapsed()
    );
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    c.send(ToNode::StdinEnd).await;
    assert_eq!(c.outcome().await.status(), ExitStatus::Code(0));
}
