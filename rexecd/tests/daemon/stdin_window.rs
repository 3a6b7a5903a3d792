//! Stdin flow control: rexecd counts back what the job took (`StdinTaken`), and a
//! client that keeps to the window is read on whatever the job does with its stdin, so
//! its heartbeats and signals behind unread stdin arrive.

use std::time::{Duration, Instant};

use proto::node::{
    CHUNK_SIZE, Chunk, ExitStatus, FromNode, Heartbeat, STDIN_WINDOW, Signal, ToNode,
};
use tokio::sync::mpsc;

use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_within_the_window_is_heard_behind_stdin_the_job_does_not_read() {
    if !can_run("stdin_window") {
        return;
    }
    // A short heartbeat timeout, so that three of them pass with the window full; 2 s
    // rather than 1 s, so a test process starved of CPU on a loaded machine is not
    // taken for dead.
    let d = Daemon::start("window", &["--heartbeat-timeout", "2s"]);
    let mut c = d.user().await;
    // The job takes 3 MiB, then never reads its stdin again.
    let script = "trap 'echo got-int; exit 7' INT; head -c 3145728 >/dev/null; \
                  echo read-all; while :; do sleep 0.05; done";
    c.start(launch(&["/bin/sh", "-c", script])).await;
    let (mut rx, mut tx) = c.framed.into_split();
    let (frames_tx, mut frames) = mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        while let Ok(Some(frame)) = rx.recv::<FromNode>().await {
            if frames_tx.send(frame).is_err() {
                break;
            }
        }
    });
    let mut taken = 0u64;
    let mut sent = 0u64;
    let mut stdout = String::new();
    let mut exit = None;
    let mut seq = 0;
    let mut last_beat = Instant::now();
    let mut interrupted = None::<Instant>;
    let mut full_since = None::<Instant>;
    let deadline = Instant::now() + Duration::from_secs(30);
    let chunk = Chunk(vec![b'x'; CHUNK_SIZE]);
    while exit.is_none() {
        assert!(
            Instant::now() < deadline,
            "no Exit; stdout {stdout:?}; log:\n{}",
            d.log()
        );
        while let Ok(frame) = frames.try_recv() {
            match frame {
                FromNode::StdinTaken(t) => {
                    assert!(
                        t.bytes >= taken && t.bytes <= sent,
                        "{t:?} after {taken}, {sent} sent"
                    );
                    taken = t.bytes;
                }
                FromNode::Stdout(c) => stdout.push_str(&String::from_utf8_lossy(&c)),
                FromNode::Exit(e) => exit = Some(e),
                FromNode::Heartbeat(_) | FromNode::Stderr(_) | FromNode::Notice(_) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        // Stdin as fast as the window allows, never more. Once the interrupted job has
        // exited, rexecd counts the rest as taken (it discards what the job will never
        // read) and closes the session after `Exit`: a write then may find the
        // connection gone before `Exit` has been read here, which is no failure.
        if sent - taken + CHUNK_SIZE as u64 <= STDIN_WINDOW as u64 {
            match tx.send(&ToNode::Stdin(chunk.clone())).await {
                Ok(()) => {}
                Err(_) if interrupted.is_some() => {
                    exit = drain_to_exit(&mut frames, &mut stdout).await;
                    break;
                }
                Err(e) => panic!(
                    "stdin write failed before the interrupt: {e}; log:\n{}",
                    d.log()
                ),
            }
            sent += CHUNK_SIZE as u64;
            continue;
        }
        if last_beat.elapsed() > Duration::from_millis(200) {
            tx.send(&ToNode::Heartbeat(Heartbeat { seq }))
                .await
                .unwrap();
            seq += 1;
            last_beat = Instant::now();
        }
        // Once the job has stopped reading, the window stays full; after three
        // heartbeat timeouts of that (heartbeats still flowing), interrupt the job.
        if stdout.contains("read-all") && full_since.is_none() {
            full_since = Some(Instant::now());
        }
        if interrupted.is_none() && full_since.is_some_and(|t| t.elapsed() > Duration::from_secs(6))
        {
            assert!(sent - taken + CHUNK_SIZE as u64 > STDIN_WINDOW as u64);
            tx.send(&ToNode::Signal(Signal::Int)).await.unwrap();
            interrupted = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let exit = exit.expect("the session closed without Exit");
    assert_eq!(
        exit.status,
        ExitStatus::Code(7),
        "stdout {stdout:?}; log:\n{}",
        d.log()
    );
    assert!(stdout.contains("got-int"), "{stdout:?}");
    // The job took 3 MiB (and the pipe holds a little more); rexecd reports its count
    // each time it has grown by half a window, so the last half window it took may go
    // unreported once the job stops reading.
    let reported_at_least = (3u64 << 20) - (STDIN_WINDOW as u64 / 2);
    assert!(
        taken >= reported_at_least,
        "only {taken} bytes counted back"
    );
    reader.abort();
}

/// Reads the frames left after the session closed, up to the `Exit`.
async fn drain_to_exit(
    frames: &mut mpsc::UnboundedReceiver<FromNode>,
    stdout: &mut String,
) -> Option<proto::node::Exit> {
    while let Some(frame) = frames.recv().await {
        match frame {
            FromNode::Stdout(c) => stdout.push_str(&String::from_utf8_lossy(&c)),
            FromNode::Exit(e) => return Some(e),
            _ => {}
        }
    }
    None
}
