//! Start-up errors of the real binary name their cause once: a CPU the machine lacks,
//! a missing key file, a key others may read, a metrics address in use (a missing
//! config file: `cli`). (Each used to
//! print twice: the error's message held its source, which was also chained, and
//! the binary printed the chain.)

use std::process::Command;

use certs::Role;
use rexecd::cgroup::{JobCgroups, ParentName};

use super::util::{NODE, can_run, cpu_dir, pki};

/// rexecd's one line of standard error when started with `args` and a config file
/// holding `toml`, after checking that it failed.
fn failed_start(toml: &str, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rexecd.toml");
    std::fs::write(&config, toml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rexecd"))
        .arg("--config")
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(!out.status.success(), "rexecd started: {out:?}");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

/// The node's TLS settings with `key` as its key, and a parent cgroup of its own.
fn node_config(key: &std::path::Path, parent: &str) -> String {
    let tls = pki().tls_paths(Role::Node, NODE);
    format!(
        "name = \"{NODE}\"\ncgroup_parent = \"{parent}\"\nca = {:?}\ncert = {:?}\nkey = {key:?}\n",
        tls.ca, tls.cert
    )
}

fn assert_once(err: &str, cause: &str) {
    assert_eq!(
        err.matches(cause).count(),
        1,
        "{cause:?} not once in: {err}"
    );
}

#[test]
fn a_cpu_the_machine_lacks_is_named_once() {
    if !can_run("a_cpu_the_machine_lacks_is_named_once") {
        return;
    }
    // A CPU number past every CPU this machine has (7 on the two-CPU test hosts).
    let cpu = std::thread::available_parallelism().map_or(7, |n| n.get().max(7));
    let parent = format!("rexecd-test-{}-startup-cpus", std::process::id());
    let key = pki().tls_paths(Role::Node, NODE).key;
    let toml = format!("{}cpus = \"{cpu}\"\n", node_config(&key, &parent));
    let err = failed_start(&toml, &[]);
    // Leave no parent cgroup behind, whatever rexecd made before it refused.
    if let Ok(name) = ParentName::new(&parent)
        && cpu_dir(&parent).is_some_and(|d| d.exists())
        && let Ok(jobs) = JobCgroups::detect(&name)
    {
        let _ = jobs.remove_parent();
    }
    assert!(
        err.starts_with("rexecd: cannot set up job cgroups: "),
        "{err}"
    );
    assert_once(&err, &format!("CPU {cpu} "));
}

#[test]
fn a_missing_key_and_a_key_others_may_read_are_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.key");
    let parent = format!("rexecd-test-{}-startup-key", std::process::id());
    let err = failed_start(&node_config(&missing, &parent), &[]);
    assert!(
        err.starts_with("rexecd: cannot load the TLS configuration: "),
        "{err}"
    );
    assert_once(&err, "does not exist");
    assert_once(&err, &missing.display().to_string());

    let open = dir.path().join("open.key");
    std::fs::copy(pki().tls_paths(Role::Node, NODE).key, &open).unwrap();
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let err = failed_start(&node_config(&open, &parent), &[]);
    assert!(
        err.starts_with("rexecd: cannot load the TLS configuration: "),
        "{err}"
    );
    assert_once(&err, "(mode 0644)");
}

#[test]
fn a_metrics_address_in_use_stops_rexecd_in_one_line() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let parent = format!("rexecd-test-{}-startup-metrics", std::process::id());
    let key = pki().tls_paths(Role::Node, NODE).key;
    let toml = format!(
        "{}[metrics]\nlisten = \"{addr}\"\n",
        node_config(&key, &parent)
    );
    let err = failed_start(&toml, &[]);
    assert!(
        err.starts_with(&format!(
            "rexecd: cannot serve metrics on {addr} ([metrics] listen): "
        )),
        "{err}"
    );
    assert_once(&err, "in use");
    // Refused before any cgroup was made.
    assert!(
        !cpu_dir(&parent).is_some_and(|d| d.exists()),
        "{parent} was created"
    );
}
