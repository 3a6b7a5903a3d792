//! Bad input gets one clear line and leaves nothing running: bids out of
//! range, unknown nodes, a certificate of the wrong role, a missing
//! program, and (from a hand-made client) a malformed frame and a frame
//! over the size limit in the middle of a running job.

use std::time::Duration;

use certs::Role;
use proto::node::{FromNode, Hello, JobId, Launch, ToNode};
use proto::{DEFAULT_MAX_FRAME, Framed};
use rexec_tests::cluster::{Cluster, TEST_USER};
use rexec_tests::procs::MARK_VAR;
use rexec_tests::wait_until;
use tokio::io::AsyncWriteExt;

fn one_clear_line(stderr: &str) {
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.starts_with("rexec: "), "{stderr:?}");
}

#[test]
fn bad_bids_and_unknown_nodes_are_refused_before_anything_starts() {
    if !rexec_tests::can_run("bad_bids_and_unknown_nodes_are_refused_before_anything_starts") {
        return;
    }
    let cluster = Cluster::start(1);
    // The harness's client configuration sets max_rate = "100".
    // Malformed is a usage error (2); negative or over max_rate is refused
    // as the market refuses a bid (254).
    for (rate, code) in [
        ("-1", 254),
        ("NaN", 2),
        ("2,5", 2),
        ("1e3", 2),
        ("0.0000001", 2),
        ("100.5", 254),
    ] {
        let out = cluster.rexec().args(["-r", rate, "sleep", "100"]).run();
        assert_eq!(out.code, Some(code), "rate {rate}: {out:?}");
        one_clear_line(&out.stderr);
    }
    let out = cluster.rexec().args(["-r", "100.5", "true"]).run();
    assert!(out.stderr.contains("max_rate"), "{}", out.stderr);
    let out = cluster.rexec().args(["--nodes", "n1,n9", "true"]).run();
    assert_eq!(out.code, Some(2), "{out:?}");
    one_clear_line(&out.stderr);
    assert!(out.stderr.contains("\"n9\""), "{}", out.stderr);
    assert!(cluster.marked(&[]).is_empty() && cluster.job_cgroups().is_empty());
}

#[test]
fn a_node_certificate_cannot_launch_jobs() {
    if !rexec_tests::can_run("a_node_certificate_cannot_launch_jobs") {
        return;
    }
    let cluster = Cluster::start(1);
    let config = cluster.client_config(Role::Node, "n1");
    let out = cluster.rexec().config(&config).args(["sleep", "100"]).run();
    assert_eq!(out.code, Some(255), "{out:?}");
    one_clear_line(&out.stderr);
    assert!(out.stderr.contains("user certificates"), "{}", out.stderr);
    assert!(cluster.marked(&[]).is_empty() && cluster.job_cgroups().is_empty());
}

#[test]
fn a_missing_program_is_reported_by_every_node_and_nothing_runs() {
    if !rexec_tests::can_run("a_missing_program_is_reported_by_every_node_and_nothing_runs") {
        return;
    }
    let cluster = Cluster::start(2);
    let out = cluster
        .rexec()
        .args(["--nodes", "n1,n2", "/no/such/program", "x"])
        .run();
    assert_eq!(out.code, Some(127), "{out:?}");
    assert!(out.stderr.contains("node n1 (rank 0)"), "{}", out.stderr);
    assert!(out.stderr.contains("node n2 (rank 1)"), "{}", out.stderr);
    assert!(out.stderr.contains("/no/such/program"), "{}", out.stderr);
    assert!(cluster.marked(&[]).is_empty() && cluster.job_cgroups().is_empty());
}

/// Launch `sleep 1000` by hand on n1, then write `garbage` as raw bytes on
/// the session; return every frame the node sent afterwards.
fn launch_then_send(cluster: &Cluster, garbage: &[u8]) -> Vec<FromNode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let tls = cluster.pki.tls_paths(Role::User, TEST_USER);
        let connector = certs::connector(&tls).unwrap();
        let tcp = tokio::net::TcpStream::connect(cluster.node("n1").addr)
            .await
            .unwrap();
        let (stream, _) = certs::connect(&connector, tcp, Role::Node, "n1")
            .await
            .unwrap();
        let mut framed = Framed::new(stream, DEFAULT_MAX_FRAME);
        framed
            .send(&ToNode::Hello(Hello::new("e2e")))
            .await
            .unwrap();
        assert!(matches!(
            framed.recv().await.unwrap(),
            Some(FromNode::Welcome(_))
        ));
        let launch = Launch {
            job: JobId(0x0e2e),
            rank: 0,
            nranks: 1,
            bid: money::Bid::ZERO,
            argv: vec!["sleep".into(), "1000".into()],
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                (MARK_VAR.into(), cluster.mark.clone()),
            ],
            cwd: None,
            terminal: None,
            options: Default::default(),
        };
        framed.send(&ToNode::Launch(launch)).await.unwrap();
        loop {
            match framed.recv::<FromNode>().await.unwrap() {
                Some(FromNode::Started(_)) => break,
                Some(FromNode::Heartbeat(_)) => {}
                other => panic!("expected Started, got {other:?}"),
            }
        }
        let marked = || async { !cluster.marked(&[]).is_empty() };
        assert!(testhost::wait::eventually_async(Duration::from_secs(5), marked).await);
        framed.get_mut().write_all(garbage).await.unwrap();
        framed.get_mut().flush().await.unwrap();
        let mut after = Vec::new();
        let read_all = async {
            while let Ok(Some(frame)) = framed.recv::<FromNode>().await {
                after.push(frame);
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(5), read_all).await;
        after
    })
}

fn error_messages(frames: &[FromNode]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| match f {
            FromNode::Error(e) => Some(e.message.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_malformed_frame_gets_an_error_and_ends_the_job() {
    if !rexec_tests::can_run("a_malformed_frame_gets_an_error_and_ends_the_job") {
        return;
    }
    let cluster = Cluster::start(1);
    // A Stdin message (tag 3) whose length varint never ends.
    let frames = launch_then_send(
        &cluster,
        &[0, 0, 0, 7, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    );
    let errors = error_messages(&frames);
    assert!(errors.iter().any(|e| e.contains("malformed")), "{frames:?}");
    let gone = wait_until(Duration::from_secs(10), || {
        cluster.marked(&[]).is_empty() && cluster.job_cgroups().is_empty()
    });
    assert!(gone.is_some(), "{:?}", cluster.marked(&[]));
}

#[test]
fn a_frame_over_the_limit_gets_an_error_and_ends_the_job() {
    if !rexec_tests::can_run("a_frame_over_the_limit_gets_an_error_and_ends_the_job") {
        return;
    }
    let cluster = Cluster::start(1);
    // Declares a 16 MiB body; the limit is 1 MiB.
    let frames = launch_then_send(&cluster, &[1, 0, 0, 0]);
    let errors = error_messages(&frames);
    assert!(
        errors.iter().any(|e| e.contains("larger than the limit")),
        "{frames:?}\n{}",
        cluster.logs()
    );
    let gone = wait_until(Duration::from_secs(10), || {
        cluster.marked(&[]).is_empty() && cluster.job_cgroups().is_empty()
    });
    assert!(gone.is_some(), "{:?}", cluster.marked(&[]));
}

#[test]
fn a_node_answering_under_another_name_is_refused() {
    if !rexec_tests::can_run("a_node_answering_under_another_name_is_refused") {
        return;
    }
    // The configuration sends n1's traffic to n2: its certificate names n2.
    let cluster = Cluster::start(2);
    let config = cluster.client_config_via("n1", cluster.node("n2").addr);
    let out = cluster
        .rexec()
        .config(&config)
        .args(["--nodes", "n1", "true"])
        .run();
    assert_eq!(out.code, Some(255), "{out:?}");
    one_clear_line(&out.stderr);
    assert!(out.stderr.contains("node n1 (rank 0)"), "{}", out.stderr);
    assert!(
        out.stderr.contains("does not name the host we dialled"),
        "{}",
        out.stderr
    );
    assert!(cluster.marked(&[]).is_empty() && cluster.job_cgroups().is_empty());
}
