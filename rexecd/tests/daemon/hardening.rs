//! How long a client is trusted and what a job may do: a client stopped by Ctrl-Z keeps
//! its job for `stopped_client_limit` only, client connections carry TCP keepalive, and
//! job processes start with no new privileges, the configured umask and rlimits.

use std::process::Command;
use std::time::{Duration, Instant};

use certs::Role;
use proto::node::{ExitStatus, Signal, ToNode};

use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_client_keeps_its_job_for_the_stopped_client_limit_only() {
    if !can_run("stopped_client_limit") {
        return;
    }
    let d = Daemon::start(
        "stoplimit",
        &["--heartbeat-timeout", "1s", "--stopped-client-limit", "3s"],
    );
    let mut c = d.user().await;
    let started = c.start(launch(&["/bin/sleep", "100"])).await;
    let pid = started.pid as i32;
    // The client says it stops (Ctrl-Z), then says nothing more, its connection open.
    c.send(ToNode::Signal(Signal::Tstp)).await;
    let stopped = Instant::now();
    // Well past the heartbeat timeout, the stopped client is still trusted.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(
        !is_dead(pid),
        "killed before the stop limit; log:\n{}",
        d.log()
    );
    assert!(
        eventually_async(PATIENCE, || async { is_dead(pid) }).await,
        "a client stopped for longer than the limit still holds its job; log:\n{}",
        d.log()
    );
    let after = stopped.elapsed();
    assert!(after >= Duration::from_secs(3), "killed after {after:?}");
    assert!(
        eventually_async(PATIENCE, || async {
            d.log().contains("stopped_client_limit")
        })
        .await,
        "{}",
        d.log()
    );
    assert_nothing_left(&d, &[pid]).await;
    drop(c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_connections_carry_tcp_keepalive() {
    if !can_run("keepalive") {
        return;
    }
    let d = Daemon::start("keepalive", &["--heartbeat-interval", "1s"]);
    // A welcomed session that sends nothing more: its connection is idle.
    let c = d.user().await;
    let port = d.addr.rsplit(':').next().unwrap().to_string();
    let timers = || {
        let out = Command::new("ss")
            .args([
                "-tnoH",
                "state",
                "established",
                "sport",
                "=",
                &format!(":{port}"),
            ])
            .output()
            .expect("cannot run ss");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(
        eventually_async(PATIENCE, || async { timers().contains("keepalive") }).await,
        "rexecd's end of the connection has no keepalive timer: {}",
        timers()
    );
    drop(c);
}

/// Runs a job that prints its umask, no-new-privileges flag and open-file limits.
async fn job_settings(d: &Daemon) -> String {
    let script = "grep -E '^(Umask|NoNewPrivs):' /proc/self/status; \
                  grep 'Max open files' /proc/self/limits";
    let out = run(d, launch(&["/bin/sh", "-c", script])).await;
    assert_eq!(out.status(), ExitStatus::Code(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn config(tag: &str, extra: &str) -> (String, String) {
    let tls = pki().tls_paths(Role::Node, NODE);
    let parent = format!("rexecd-test-{}-{tag}", std::process::id());
    let toml = format!(
        "name = \"{NODE}\"\ncert = \"{}\"\nkey = \"{}\"\nca = \"{}\"\n\
         cgroup_parent = \"{parent}\"\nallowed_users = [\"{USER}\"]\n{extra}",
        tls.cert.display(),
        tls.key.display(),
        tls.ca.display(),
    );
    (parent, toml)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_get_no_new_privileges_and_the_configured_umask_and_rlimits() {
    if !can_run("job_limits") {
        return;
    }
    let (parent, toml) = config(
        "joblimits",
        "umask = \"027\"\n[rlimits]\nnofile = [200, 300]\n",
    );
    let d = Daemon::start_with_config(parent, &toml);
    let got = job_settings(&d).await;
    assert!(got.contains("Umask: 0027"), "{got}");
    assert!(got.contains("NoNewPrivs: 1"), "{got}");
    assert!(got.contains("Max open files 200 300 files"), "{got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_new_privs_can_be_turned_off_and_the_umask_defaults_to_022() {
    if !can_run("job_limits_off") {
        return;
    }
    let (parent, toml) = config("joblimitsoff", "no_new_privs = false\n");
    let d = Daemon::start_with_config(parent, &toml);
    let got = job_settings(&d).await;
    assert!(got.contains("Umask: 0022"), "{got}");
    assert!(got.contains("NoNewPrivs: 0"), "{got}");
}
