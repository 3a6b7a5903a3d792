//! Launching jobs: output, exit codes, signals, stdin, environment, terminals.

use std::time::Duration;

use certs::Role;
use proto::node::{
    Chunk, ErrorCode, ExitStatus, FromNode, Hello, NoticeKind, Signal, ToNode, WindowSize,
};

use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_hi_prints_and_exits_zero_and_leaves_no_cgroup() {
    if !can_run("echo_hi") {
        return;
    }
    let d = Daemon::start("echo", &[]);
    let mut c = d.user().await;
    let started = c.start(launch(&["/bin/echo", "hi"])).await;
    assert!(started.pid > 0);
    let out = c.outcome().await;
    assert_eq!(out.stdout, b"hi\n");
    assert_eq!(out.status(), ExitStatus::Code(0));
    assert!(out.stderr.is_empty(), "{out:?}");
    assert_nothing_left(&d, &[started.pid as i32]).await;
    assert!(d.log().contains("job ended"), "{}", d.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_and_signal_deaths_propagate() {
    if !can_run("exit_codes") {
        return;
    }
    let d = Daemon::start("codes", &[]);
    let out = run(&d, launch(&["/bin/sh", "-c", "echo oops >&2; exit 7"])).await;
    assert_eq!(out.status(), ExitStatus::Code(7));
    assert_eq!(out.stderr, b"oops\n");
    let out = run(&d, launch(&["/bin/sh", "-c", "kill -TERM $$"])).await;
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
    assert_eq!(out.status().shell_code(), 143);
    // The job starts with SIGPIPE at its default action (rexecd itself ignores it).
    let out = run(&d, launch(&["/bin/sh", "-c", "yes | head -c 4"])).await;
    assert_eq!(
        (out.stdout.as_slice(), out.stderr.as_slice()),
        (&b"y\ny\n"[..], &b""[..])
    );
    assert!(d.job_cgroups().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_from_the_client_reaches_the_process_group() {
    if !can_run("client_signal") {
        return;
    }
    let d = Daemon::start("signal", &[]);
    let mut c = d.user().await;
    let script = "trap 'echo got-int; exit 3' INT; echo ready; while :; do sleep 0.05; done";
    let started = c.start(launch(&["/bin/sh", "-c", script])).await;
    c.read_until("ready").await;
    c.send(ToNode::Signal(Signal::Int)).await;
    let out = c.outcome().await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "got-int\n");
    assert_eq!(out.status(), ExitStatus::Code(3));
    assert_nothing_left(&d, &[started.pid as i32]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_reaches_the_job_and_binary_output_is_exact() {
    if !can_run("stdin") {
        return;
    }
    let d = Daemon::start("stdin", &[]);
    let mut c = d.user().await;
    c.start(launch(&["/bin/cat"])).await;
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    for piece in data.chunks(50_000) {
        c.send(ToNode::Stdin(Chunk(piece.to_vec()))).await;
    }
    c.send(ToNode::StdinEnd).await;
    let out = c.outcome().await;
    assert_eq!(out.status(), ExitStatus::Code(0));
    assert!(out.stdout == data, "got {} bytes back", out.stdout.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_user_and_cwd_are_as_sent_minus_the_deny_list() {
    if !can_run("env") {
        return;
    }
    let d = Daemon::start("env", &[]);
    let mut request = launch(&[
        "/bin/sh",
        "-c",
        "echo $FOO/${LD_PRELOAD-unset}/$USER; id -un; pwd",
    ]);
    request.env.push(("FOO".into(), "bar".into()));
    request
        .env
        .push(("LD_PRELOAD".into(), "/nonexistent.so".into()));
    request.cwd = Some("/tmp".into());
    let out = run(&d, request).await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("bar/unset/{USER}\n{USER}\n/tmp\n")
    );
    // A working directory that does not exist falls back to the user's home.
    let mut request = launch(&["/bin/pwd"]);
    request.cwd = Some("/no/such/dir".into());
    let out = run(&d, request).await;
    let home = rexecd::sys::lookup_user(USER).unwrap().unwrap().home;
    let expected = if home.is_dir() {
        home.display().to_string()
    } else {
        "/".to_string()
    };
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), expected);
    let text = format!(
        "working directory /no/such/dir does not exist here \
         (or is not accessible to {USER}); running in {expected}"
    );
    assert_eq!(dir_notices(&out), vec![text]);
}

/// The informational notices of a job that mention a directory.
fn dir_notices(out: &Outcome) -> Vec<String> {
    out.notices
        .iter()
        .filter(|n| n.kind == NoticeKind::Info && n.text.contains("directory"))
        .map(|n| n.text.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_directory_the_user_cannot_enter_is_reported_in_a_notice() {
    if !can_run("cwd_notice") {
        return;
    }
    let d = Daemon::start("cwdnotice", &[]);
    // Exists, but root's 0700 directory is closed to the job's user.
    let closed = tempfile::tempdir().unwrap();
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o700);
    std::fs::set_permissions(closed.path(), mode).unwrap();
    let mut request = launch(&["/bin/pwd"]);
    request.cwd = Some(closed.path().display().to_string());
    let out = run(&d, request).await;
    assert_eq!(out.status(), ExitStatus::Code(0));
    let ran_in = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_ne!(ran_in, closed.path().display().to_string());
    let text = format!(
        "working directory {} does not exist here \
         (or is not accessible to {USER}); running in {ran_in}",
        closed.path().display()
    );
    assert_eq!(dir_notices(&out), vec![text], "{out:?}");
    // A directory the user can enter: the job runs there, and nothing is said.
    let mut request = launch(&["/bin/pwd"]);
    request.cwd = Some("/tmp".into());
    let out = run(&d, request).await;
    assert_eq!(out.stdout, b"/tmp\n");
    assert!(dir_notices(&out).is_empty(), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_job_sees_its_window_size_and_resizes() {
    if !can_run("terminal") {
        return;
    }
    let d = Daemon::start("tty", &[]);
    let mut c = d.user().await;
    let mut request = launch(&[
        "/bin/sh",
        "-c",
        "stty size; trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.05; done",
    ]);
    request.terminal = Some(WindowSize { rows: 24, cols: 80 });
    let started = c.start(request).await;
    let seen = c.read_until("ready").await;
    assert!(seen.starts_with("24 80\r\n"), "{seen:?}");
    c.send(ToNode::Resize(WindowSize {
        rows: 50,
        cols: 132,
    }))
    .await;
    let out = c.outcome().await;
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("50 132"),
        "{out:?}"
    );
    assert_eq!(out.status(), ExitStatus::Code(0));
    assert_nothing_left(&d, &[started.pid as i32]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_runs_as_the_certificate_user() {
    if !can_run("runs_as_user") {
        return;
    }
    let d = Daemon::start("uid", &[]);
    let mut c = d.user().await;
    let started = c.start(launch(&["/bin/sleep", "30"])).await;
    let uid = rexecd::sys::lookup_user(USER).unwrap().unwrap().uid.0;
    assert_eq!(uid_of(started.pid as i32), Some(uid));
    c.send(ToNode::Signal(Signal::Kill)).await;
    let out = c.outcome().await;
    assert!(matches!(
        out.status(),
        ExitStatus::Signaled {
            signal: Signal::Kill,
            ..
        }
    ));
    assert_nothing_left(&d, &[started.pid as i32]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_job_reports_its_cpu_time() {
    if !can_run("cpu_time") {
        return;
    }
    let d = Daemon::start("cpu", &[]);
    // A fixed amount of work (about 0.2-0.4 s of CPU for dash), not a wall-clock span:
    // on a loaded machine a job busy for 0.3 s of wall time may get little of the CPU.
    let script = "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done";
    let out = run(&d, launch(&["/bin/sh", "-c", script])).await;
    assert_eq!(out.status(), ExitStatus::Code(0));
    let cpu = Duration::from_nanos(out.exit.unwrap().cpu_nanos);
    assert!(cpu >= Duration::from_millis(50), "cpu {cpu:?}");
}

/// `rexec` sends its `Hello` and its launch in one flight: rexecd answers them in
/// order, and a client whose `Hello` it refuses still reads the refusal, however
/// much was sent behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_sent_with_the_hello_runs_and_a_refused_hello_is_still_heard() {
    if !can_run("one_flight") {
        return;
    }
    let d = Daemon::start("oneflight", &[]);
    let mut c = Client::connect(&d.addr, Role::User, USER).await;
    let hello = ToNode::Hello(Hello::new("daemon-tests"));
    let echo = ToNode::Launch(launch(&["/bin/echo", "one flight"]));
    c.framed.send_all(&[hello, echo]).await.unwrap();
    let welcome = c.recv().await;
    assert!(matches!(welcome, Some(FromNode::Welcome(_))), "{welcome:?}");
    let started = match c.recv().await {
        Some(FromNode::Started(s)) => s,
        other => panic!("expected Started, got {other:?}"),
    };
    let out = c.outcome().await;
    assert_eq!(out.stdout, b"one flight\n");
    assert_eq!(out.status(), ExitStatus::Code(0));
    assert_nothing_left(&d, &[started.pid as i32]).await;

    // A Hello of versions rexecd does not speak, with a launch behind it far larger
    // than what rexecd reads at once: the refusal arrives, then the end of the stream.
    let mut c = Client::connect(&d.addr, Role::User, USER).await;
    let hello = ToNode::Hello(Hello {
        min_version: 90,
        max_version: 99,
        agent: "daemon-tests from the future".into(),
    });
    let mut big = launch(&["/bin/echo", "never"]);
    big.env.push(("BIG".into(), "x".repeat(600 * 1024)));
    c.framed
        .send_all(&[hello, ToNode::Launch(big)])
        .await
        .unwrap();
    match c.recv().await {
        Some(FromNode::Error(e)) => assert_eq!(e.code, ErrorCode::IncompatibleVersion, "{e:?}"),
        other => panic!("expected the refusal, got {other:?}"),
    }
    let end = c.recv().await;
    assert!(end.is_none(), "{end:?}");
    assert!(d.job_cgroups().is_empty(), "{:?}", d.job_cgroups());
    assert_eq!(d.log().matches("job ended").count(), 1, "{}", d.log());
}
