//! `-t` from a real terminal: rank 0 sees the client's terminal size and
//! its changes (SIGWINCH becomes `Resize`), keys typed reach the remote
//! terminal (Ctrl-C there becomes the remote program's SIGINT), and the
//! client's terminal leaves raw mode on every exit path.

use std::time::Duration;

use rexec_tests::cluster::Cluster;

#[test]
fn t_shows_rank_0_the_terminal_size_and_its_changes() {
    if !rexec_tests::can_run("t_shows_rank_0_the_terminal_size_and_its_changes") {
        return;
    }
    let cluster = Cluster::start(1);
    let script = "trap 'echo size $(stty size)' WINCH; echo size $(stty size); \
                  while :; do sleep 0.05; done";
    let mut term = cluster
        .rexec()
        .args(["-t", "sh", "-c", script])
        .spawn_on_pty(33, 101);
    term.wait_for("size 33 101", Duration::from_secs(10));
    assert!(
        term.becomes_raw(Duration::from_secs(5)),
        "rexec -t puts its terminal in raw mode"
    );
    term.resize(40, 120);
    term.wait_for("size 40 120", Duration::from_secs(5));
    // Ctrl-D is data under -t: end the loop with Ctrl-C instead (default SIGINT).
    term.type_bytes(b"\x03");
    let code = term.wait(Duration::from_secs(10));
    assert_eq!(code, Some(130), "{:?}", term.screen());
    assert!(term.is_cooked(), "the terminal is restored after the run");
}

#[test]
fn ctrl_c_typed_under_t_reaches_the_remote_program() {
    if !rexec_tests::can_run("ctrl_c_typed_under_t_reaches_the_remote_program") {
        return;
    }
    let cluster = Cluster::start(1);
    let script = "trap 'echo got-int; exit 5' INT; echo ready; while :; do sleep 0.05; done";
    let mut term = cluster
        .rexec()
        .args(["-t", "sh", "-c", script])
        .spawn_on_pty(24, 80);
    term.wait_for("ready", Duration::from_secs(10));
    // Typed in raw mode, Ctrl-C is a byte for the remote terminal to turn
    // into SIGINT (in cooked mode the local one would, which proves less).
    assert!(term.becomes_raw(Duration::from_secs(5)));
    term.type_bytes(b"\x03");
    let code = term.wait(Duration::from_secs(10));
    assert_eq!(code, Some(5), "{:?}", term.screen());
    // The test reads the terminal in a thread of its own, which may not have
    // read the client's last bytes yet when the client's exit is seen.
    term.wait_for("got-int", Duration::from_secs(5));
    assert!(term.is_cooked());
}

#[test]
fn the_terminal_is_restored_when_a_failure_aborts_the_job() {
    if !rexec_tests::can_run("the_terminal_is_restored_when_a_failure_aborts_the_job") {
        return;
    }
    use rexec_tests::wait_until;

    let cluster = Cluster::start(2);
    // Rank 1 waits until the test kills it, so the failure always comes
    // after rank 0 is up and the terminal is raw, however slow the machine.
    let script = "if [ $REXEC_RANK = 1 ]; then exec sleep 1001; fi; echo ready; sleep 1000";
    let mut term = cluster
        .rexec()
        .args(["-t", "--nodes", "n1,n2", "sh", "-c", script])
        .spawn_on_pty(24, 80);
    term.wait_for("ready", Duration::from_secs(10));
    assert!(term.becomes_raw(Duration::from_secs(5)));
    let client = term.pid();
    let mut rank1 = None;
    wait_until(Duration::from_secs(10), || {
        rank1 = cluster
            .marked(&[client])
            .into_iter()
            .find(|p| p.cmd == "sleep 1001");
        rank1.is_some()
    });
    let rank1 = rank1.unwrap_or_else(|| panic!("rank 1 never started: {:?}", term.screen()));
    rexec_tests::procs::kill(rank1.pid);
    let code = term.wait(Duration::from_secs(10));
    assert_eq!(code, Some(137), "{:?}", term.screen());
    assert!(term.is_cooked(), "restored after the abort");
    // Printed before the client exited; the reader thread may still lag.
    term.wait_for(
        "node n2 (rank 1): killed by SIGKILL",
        Duration::from_secs(5),
    );
}

#[test]
fn ctrl_z_under_t_gives_the_terminal_back_while_stopped() {
    if !rexec_tests::can_run("ctrl_z_under_t_gives_the_terminal_back_while_stopped") {
        return;
    }
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use rexec_tests::procs::state;
    use rexec_tests::wait_until;

    let cluster = Cluster::start(1);
    let script = "echo ready; while :; do sleep 0.05; done";
    let mut term = cluster
        .rexec()
        .args(["-t", "sh", "-c", script])
        .spawn_on_pty(24, 80);
    term.wait_for("ready", Duration::from_secs(10));
    assert!(term.becomes_raw(Duration::from_secs(5)));
    let pid = term.pid();
    let job = || cluster.marked(&[pid]);

    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTSTP);
    let stopped = wait_until(Duration::from_secs(10), || {
        state(pid) == Some('T') && !job().is_empty() && job().iter().all(|p| p.state == 'T')
    });
    assert!(
        stopped.is_some(),
        "client {:?}, job {:?}",
        state(pid),
        job()
    );
    assert!(
        term.is_cooked(),
        "a stopped client leaves the terminal as it found it"
    );

    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGCONT);
    let resumed = wait_until(Duration::from_secs(10), || {
        state(pid) != Some('T') && job().iter().all(|p| p.state != 'T') && !term.is_cooked()
    });
    assert!(
        resumed.is_some(),
        "client {:?}, job {:?}",
        state(pid),
        job()
    );

    term.type_bytes(b"\x03");
    assert_eq!(
        term.wait(Duration::from_secs(10)),
        Some(130),
        "{:?}",
        term.screen()
    );
    assert!(term.is_cooked());
}
