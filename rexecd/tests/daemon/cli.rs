//! The binary's edges: a TOML config file (with a CRL) instead of flags, one clear line
//! for a bad configuration, and the help text.

use std::process::Command;

use certs::Role;
use proto::node::{ExitStatus, Hello, ToNode};

use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_works_and_its_crl_refuses_revoked_users() {
    if !can_run("config_file") {
        return;
    }
    let pki = pki();
    // The client side refuses to load a revoked certificate, so prepare it first.
    let revoked = "rexecrevoked";
    let connector = certs::connector(&pki.tls_paths(Role::User, revoked)).unwrap();
    pki.revoke(Role::User, revoked).unwrap();
    let tls = pki.tls_paths(Role::Node, NODE);
    let parent = format!("rexecd-test-{}-config", std::process::id());
    let toml = format!(
        "name = \"{NODE}\"\ncert = \"{}\"\nkey = \"{}\"\nca = \"{}\"\ncrl = \"{}\"\n\
         cgroup_parent = \"{parent}\"\nheartbeat_timeout = \"2s\"\nallowed_users = [\"{USER}\"]\n",
        tls.cert.display(),
        tls.key.display(),
        tls.ca.display(),
        pki.ca().crl_path().display(),
    );
    let d = Daemon::start_with_config(parent, &toml);
    assert!(!d.log().contains("no CRL configured"), "{}", d.log());
    let out = run(&d, launch(&["/bin/echo", "from config"])).await;
    assert_eq!(out.stdout, b"from config\n");
    assert_eq!(out.status(), ExitStatus::Code(0));

    // TLS 1.3: the client's handshake completes, then the server's refusal arrives.
    let mut c = Client::connect_with(&d.addr, &connector).await;
    let _ = c.framed.send(&ToNode::Hello(Hello::new("tests"))).await;
    assert!(c.recv().await.is_none(), "revoked certificate accepted");
    assert!(
        eventually_async(PATIENCE, || async { d.log().contains("revoked") }).await,
        "{}",
        d.log()
    );
}

#[test]
fn starting_without_a_crl_warns_that_revoked_certificates_pass() {
    if !can_run("no_crl") {
        return;
    }
    let d = Daemon::start("nocrl", &[]);
    let log = d.log();
    let line = log
        .lines()
        .find(|l| l.contains("no CRL configured"))
        .unwrap_or_else(|| panic!("no CRL warning; log:\n{log}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("set `crl`"), "{line}");
}

#[test]
fn a_bad_configuration_is_one_clear_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_rexecd"))
        .args(["--config", "/no/such/rexecd.toml"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("rexecd: cannot read config file /no/such/rexecd.toml"),
        "{err}"
    );
    // The cause once, not also chained and printed again.
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");

    let out = Command::new(env!("CARGO_BIN_EXE_rexecd"))
        .args(["--name", "n1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(
        err.trim(),
        "rexecd: no cert configured; set `cert` in the config file or pass --cert"
    );
}

#[test]
fn help_explains_the_flags_and_the_bid_rules() {
    let out = Command::new(env!("CARGO_BIN_EXE_rexecd"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--config",
        "--cgroup-parent",
        "--heartbeat-timeout",
        "--ready-file",
        "--allow-root",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
    assert!(help.contains(stride::BID_HELP.split_whitespace().next().unwrap()));
}

#[test]
fn a_bad_cpu_list_stops_rexecd_with_one_line_naming_the_cpu() {
    if !can_run("bad_cpus") {
        return;
    }
    let parent = format!("rexecd-test-{}-badcpus", std::process::id());
    let tls = pki().tls_paths(Role::Node, NODE);
    let rexecd = |cpus: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_rexecd"))
            .args(["--name", NODE, "--listen", "127.0.0.1:0"])
            .args(["--cgroup-parent", &parent, "--cpus", cpus])
            .arg("--cert")
            .arg(&tls.cert)
            .arg("--key")
            .arg(&tls.key)
            .arg("--ca")
            .arg(&tls.ca)
            .env("RUST_LOG", "off")
            .output()
            .unwrap();
        assert!(!out.status.success(), "rexecd started with --cpus {cpus}");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(err.lines().count(), 1, "{err}");
        err
    };
    let err = rexecd("3-1");
    assert_eq!(
        err.trim(),
        "rexecd: invalid cpus \"3-1\": range \"3-1\" is reversed; write 1-3"
    );
    let err = rexecd("0,4095");
    assert!(
        err.starts_with(
            "rexecd: cannot set up job cgroups: CPU 4095 does not exist on this machine"
        ),
        "{err}"
    );
    assert!(
        cpu_dir(&parent).is_some_and(|d| !d.exists()),
        "parent left behind"
    );
}
