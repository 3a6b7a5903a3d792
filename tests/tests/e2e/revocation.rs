//! Revoking a user while a node runs: SIGHUP makes rexecd reload its CRL, new
//! launches with the revoked certificate are refused from then on, and the job
//! that was already running is left alone (restarting rexecd would have
//! killed it).

use std::time::Duration;

use certs::Role;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rexec_tests::cluster::{Cluster, TEST_USER};

#[test]
fn sighup_makes_rexecd_refuse_a_revoked_user_without_touching_running_jobs() {
    if !rexec_tests::can_run(
        "sighup_makes_rexecd_refuse_a_revoked_user_without_touching_running_jobs",
    ) {
        return;
    }
    let cluster = Cluster::start(1);
    // The user's client keeps no CRL of its own, as one that has not heard of
    // the revocation: the node's verdict is what is tested.
    let text = std::fs::read_to_string(&cluster.config).unwrap();
    let unaware: String = text
        .lines()
        .filter(|l| !l.starts_with("crl"))
        .map(|l| format!("{l}\n"))
        .collect();
    let config = cluster.dir.path().join("client-no-crl.toml");
    std::fs::write(&config, unaware).unwrap();

    let running = cluster
        .rexec()
        .config(&config)
        .args([
            "sh",
            "-c",
            "trap 'echo got-usr1; exit 0' USR1; echo started; while :; do sleep 0.05; done",
        ])
        .spawn();
    running.wait_for_stdout("started", Duration::from_secs(10));

    cluster.pki.revoke(Role::User, TEST_USER).unwrap();
    // Before the reload the node still works from the list it loaded at start.
    let out = cluster.rexec().config(&config).args(["true"]).run();
    assert_eq!(out.code, Some(0), "{out:?}");

    let rexecd = cluster.node("n1").pid().unwrap();
    kill(Pid::from_raw(rexecd as i32), Signal::SIGHUP).unwrap();
    let mut refused = None;
    rexec_tests::wait_until(Duration::from_secs(10), || {
        let out = cluster.rexec().config(&config).args(["true"]).run();
        let done = out.code != Some(0);
        refused = Some(out);
        done
    });
    let out = refused.unwrap();
    assert_eq!(out.code, Some(255), "{out:?}\n{}", cluster.logs());
    assert!(out.stderr.contains("revoked"), "{}", out.stderr);
    // The daemon logs the reload just after it swaps the configuration in.
    assert!(
        rexec_tests::wait_until(Duration::from_secs(5), || cluster
            .logs()
            .contains("reloaded the TLS configuration"))
        .is_some(),
        "{}",
        cluster.logs()
    );

    // The job admitted before the revocation still runs, and its connection
    // still carries signals one way and output the other.
    assert!(running.state().is_some(), "{}", running.stderr_now());
    running.signal(Signal::SIGUSR1);
    let done = running.wait(Duration::from_secs(10));
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.out(), "started\ngot-usr1\n");
}
