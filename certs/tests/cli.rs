//! `rexec-certs` end to end: the real binary, a real CA directory.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use certs::{CertError, Role, TlsPaths};

fn rexec_certs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rexec-certs"))
        .args(args)
        .env_remove("REXEC_CA_DIR")
        .output()
        .expect("run rexec-certs")
}

fn ok(args: &[&str]) -> String {
    let out = rexec_certs(args);
    assert!(
        out.status.success(),
        "rexec-certs {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(args: &[&str]) -> String {
    let out = rexec_certs(args);
    assert!(
        !out.status.success(),
        "rexec-certs {args:?} should have failed"
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "one line of error: {stderr}");
    stderr
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn init_issue_show_revoke() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = tmp.path().join("ca");
    let out = tmp.path().join("out");
    let (ca_s, out_s) = (ca.to_str().unwrap(), out.to_str().unwrap());

    // init, and init again is refused without --force.
    ok(&["init", "--dir", ca_s, "--cluster", "lab"]);
    assert_eq!(mode(&ca.join("ca.key")), 0o600);
    assert_eq!(mode(&ca.join("ca.pem")), 0o644);
    assert!(ca.join("crl.pem").exists());
    let ca_pem = fs::read(ca.join("ca.pem")).unwrap();
    let err = fails(&["init", "--dir", ca_s, "--cluster", "lab"]);
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        fs::read(ca.join("ca.pem")).unwrap(),
        ca_pem,
        "refusal changed nothing"
    );
    let err = fails(&[
        "init",
        "--dir",
        tmp.path().join("x").to_str().unwrap(),
        "--cluster",
        "Lab!",
    ]);
    assert!(err.contains("invalid name"), "{err}");

    // issue each role.
    ok(&[
        "issue",
        "--dir",
        ca_s,
        "--out",
        out_s,
        "--days",
        "30",
        "node",
        "n1",
        "--san",
        "10.0.0.5",
        "--san",
        "n1.lab.example",
    ]);
    ok(&["issue", "--dir", ca_s, "--out", out_s, "user", "alice"]);
    ok(&[
        "issue",
        "--dir",
        ca_s,
        "--out",
        out_s,
        "service",
        "accountd",
        "--san",
        "127.0.0.1",
    ]);
    ok(&["issue", "--dir", ca_s, "--out", out_s, "service", "vexecd"]);
    ok(&["issue", "--dir", ca_s, "--out", out_s, "admin", "ops"]);
    for stem in [
        "node-n1",
        "user-alice",
        "service-accountd",
        "service-vexecd",
        "admin-ops",
    ] {
        assert_eq!(mode(&out.join(format!("{stem}.key"))), 0o600, "{stem}");
        assert_eq!(mode(&out.join(format!("{stem}.pem"))), 0o644, "{stem}");
    }
    // Only the two cluster services exist (a clap usage error, with its usual hints).
    let usage = rexec_certs(&["issue", "--dir", ca_s, "--out", out_s, "service", "sshd"]);
    assert!(!usage.status.success());
    let err = String::from_utf8_lossy(&usage.stderr);
    assert!(
        err.contains("'sshd'") && err.contains("accountd, vexecd"),
        "{err}"
    );
    let err = fails(&["issue", "--dir", ca_s, "--out", out_s, "user", "Alice"]);
    assert!(err.contains("invalid name"), "{err}");
    let before = fs::read(out.join("user-alice.pem")).unwrap();
    let err = fails(&["issue", "--dir", ca_s, "--out", out_s, "user", "alice"]);
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(fs::read(out.join("user-alice.pem")).unwrap(), before);

    // show.
    let node = ok(&["show", out.join("node-n1.pem").to_str().unwrap()]);
    for want in [
        "role:        node",
        "name:        n1",
        "DNS:n1",
        "DNS:n1.lab.example",
        "IP:10.0.0.5",
        "URI:rexec:node:n1",
        "(valid now)",
        "purposes:    server, client",
        "fingerprint: SHA256:",
        "rexec cluster CA lab",
    ] {
        assert!(node.contains(want), "missing {want:?} in\n{node}");
    }
    let user = ok(&["show", out.join("user-alice.pem").to_str().unwrap()]);
    assert!(
        user.contains("role:        user") && user.contains("name:        alice"),
        "{user}"
    );
    assert!(user.contains("purposes:    client\n"), "{user}");
    assert!(!user.contains("DNS:"), "{user}");
    let ca_show = ok(&["show", ca.join("ca.pem").to_str().unwrap()]);
    assert!(ca_show.contains("certificate authority"), "{ca_show}");
    let err = fails(&["show", tmp.path().join("none.pem").to_str().unwrap()]);
    assert!(err.contains("does not exist"), "{err}");

    // The issued material works for real configs.
    let alice = TlsPaths::in_dirs(&ca, &out, Role::User, "alice");
    certs::client_config(&alice).unwrap();
    certs::server_config(&TlsPaths::in_dirs(&ca, &out, Role::Node, "n1")).unwrap();

    // revoke.
    let said = ok(&[
        "revoke",
        "--dir",
        ca_s,
        out.join("user-alice.pem").to_str().unwrap(),
    ]);
    assert!(said.contains("revoked user alice"), "{said}");
    let state = fs::read_to_string(ca.join("crl.state")).unwrap();
    assert!(
        state.contains("user:alice") && state.contains("number 2"),
        "{state}"
    );
    let err = certs::client_config(&alice).unwrap_err();
    assert!(matches!(err, CertError::Revoked { .. }), "{err}");
    let crl = ok(&["show", ca.join("crl.pem").to_str().unwrap()]);
    assert!(
        crl.contains("revocation list number 2") && crl.contains("revoked:     1"),
        "{crl}"
    );
    // Revoking twice is harmless and keeps one entry.
    ok(&[
        "revoke",
        "--dir",
        ca_s,
        out.join("user-alice.pem").to_str().unwrap(),
    ]);
    let state = fs::read_to_string(ca.join("crl.state")).unwrap();
    assert_eq!(state.matches("user:alice").count(), 1, "{state}");
    // Others are unaffected.
    certs::client_config(&TlsPaths::in_dirs(&ca, &out, Role::Admin, "ops")).unwrap();
    // A certificate from another CA cannot be revoked here.
    let other = tmp.path().join("other");
    ok(&[
        "init",
        "--dir",
        other.to_str().unwrap(),
        "--cluster",
        "other",
    ]);
    ok(&["issue", "--dir", other.to_str().unwrap(), "user", "eve"]);
    let err = fails(&[
        "revoke",
        "--dir",
        ca_s,
        other.join("user-eve.pem").to_str().unwrap(),
    ]);
    assert!(err.contains("not issued by the cluster CA"), "{err}");

    // --force replaces an issued pair.
    ok(&[
        "issue", "--dir", ca_s, "--out", out_s, "--force", "user", "alice",
    ]);
    assert_ne!(fs::read(out.join("user-alice.pem")).unwrap(), before);
    certs::client_config(&alice).unwrap();
}

#[test]
fn key_permissions_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = tmp.path().join("ca");
    let ca_s = ca.to_str().unwrap();
    ok(&["init", "--dir", ca_s, "--cluster", "lab"]);
    let key = ca.join("ca.key");
    fs::set_permissions(&key, fs::Permissions::from_mode(0o644)).unwrap();
    let err = fails(&["issue", "--dir", ca_s, "user", "alice"]);
    assert!(
        err.contains(&format!("chmod 600 {}", key.display())),
        "{err}"
    );
    assert!(!ca.join("user-alice.pem").exists());
    fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).unwrap();
    ok(&["issue", "--dir", ca_s, "user", "alice"]);
    // Issue without --dir says how to name the CA.
    let err = fails(&["issue", "user", "bob"]);
    assert!(err.contains("--dir"), "{err}");
}

#[test]
fn concurrent_revocations_from_several_processes_are_all_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = tmp.path().join("ca");
    let out = tmp.path().join("out");
    let (ca_s, out_s) = (ca.to_str().unwrap(), out.to_str().unwrap());
    ok(&["init", "--dir", ca_s, "--cluster", "lab"]);
    let users: Vec<String> = (0..12).map(|i| format!("u{i}")).collect();
    for u in &users {
        ok(&["issue", "--dir", ca_s, "--out", out_s, "user", u]);
    }
    // Start every revocation before waiting for any, so they overlap.
    let children: Vec<_> = users
        .iter()
        .map(|u| {
            Command::new(env!("CARGO_BIN_EXE_rexec-certs"))
                .args(["revoke", "--dir", ca_s])
                .arg(out.join(format!("user-{u}.pem")))
                .env_remove("REXEC_CA_DIR")
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("run rexec-certs")
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let state = fs::read_to_string(ca.join("crl.state")).unwrap();
    for u in &users {
        assert_eq!(state.matches(&format!("user:{u}\n")).count(), 1, "{state}");
    }
    // One CRL number per change: init's, then one per revocation.
    assert!(
        state.contains(&format!("number {}", 1 + users.len())),
        "{state}"
    );
    for u in &users {
        let paths = TlsPaths::in_dirs(&ca, &out, Role::User, u);
        let err = certs::client_config(&paths).unwrap_err();
        assert!(matches!(err, CertError::Revoked { .. }), "{u}: {err}");
    }
}

#[test]
fn a_revocation_by_a_replaced_ca_is_refused_and_signs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ca");
    let old = certs::Ca::init(&dir, "lab", false).unwrap();
    let issued = old.issue(Role::User, "alice", &[], 30, tmp.path()).unwrap();
    // Another admin replaces the CA while this one still holds the old one.
    certs::Ca::init(&dir, "lab", true).unwrap();
    let crl_before = fs::read(dir.join("crl.pem")).unwrap();
    let err = old.revoke(&issued.cert).unwrap_err().to_string();
    assert!(err.contains("the CA was replaced"), "{err}");
    assert_eq!(fs::read(dir.join("crl.pem")).unwrap(), crl_before);
    // The new CA's list is intact and loads.
    let new = certs::Ca::load(&dir).unwrap();
    assert!(new.crl_state().unwrap().revoked.is_empty());
}
