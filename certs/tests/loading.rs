//! Loading TLS material: every way it can be wrong gives its own clear error, before any
//! peer is involved.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use certs::testing::TestPki;
use certs::{CertError, Role, TlsPaths, client_config, server_config};

#[test]
fn missing_file_names_the_path_and_the_fix() {
    let pki = TestPki::new();
    let mut paths = pki.tls_paths(Role::User, "alice");
    paths.cert = pki.dir().join("nope.pem");
    let err = client_config(&paths).unwrap_err();
    assert!(matches!(err, CertError::Missing { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("nope.pem") && msg.contains("rexec-certs issue"),
        "{msg}"
    );

    let mut paths = pki.tls_paths(Role::User, "alice");
    paths.ca = pki.dir().join("no-ca.pem");
    let msg = client_config(&paths).unwrap_err().to_string();
    assert!(
        msg.contains("CA certificate") && msg.contains("rexec-certs init"),
        "{msg}"
    );
}

#[test]
fn unreadable_file_is_reported_with_its_path() {
    let pki = TestPki::new();
    let mut paths = pki.tls_paths(Role::User, "alice");
    // A directory where a file should be: unreadable even for root.
    paths.key = pki.dir().to_path_buf();
    let err = client_config(&paths).unwrap_err();
    assert!(matches!(err, CertError::Read { .. }), "{err}");
    assert!(err.to_string().contains("cannot read private key"), "{err}");
}

#[test]
fn key_readable_by_others_is_refused_with_the_chmod_that_fixes_it() {
    let pki = TestPki::new();
    let paths = pki.tls_paths(Role::Node, "n1");
    for mode in [0o644, 0o640, 0o604] {
        fs::set_permissions(&paths.key, fs::Permissions::from_mode(mode)).unwrap();
        let err = server_config(&paths).unwrap_err();
        assert!(matches!(err, CertError::KeyPermissions { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("chmod 600 {}", paths.key.display())),
            "{msg}"
        );
    }
    fs::set_permissions(&paths.key, fs::Permissions::from_mode(0o600)).unwrap();
    server_config(&paths).unwrap();
}

#[test]
fn expired_and_not_yet_valid_certificates_are_refused_at_load() {
    let pki = TestPki::new();
    let old = pki.expired(Role::User, "alice").unwrap();
    let err = client_config(&old).unwrap_err();
    assert!(matches!(err, CertError::Expired { .. }), "{err}");
    assert!(err.to_string().contains("expired on"), "{err}");

    let future = pki.not_yet_valid(Role::Node, "n1").unwrap();
    let err = server_config(&future).unwrap_err();
    assert!(matches!(err, CertError::NotYetValid { .. }), "{err}");
    assert!(
        err.to_string().contains("check this machine's clock"),
        "{err}"
    );
}

#[test]
fn certificate_from_another_ca_is_refused_at_load() {
    let ours = TestPki::new();
    let theirs = TestPki::new();
    let mut paths = theirs.tls_paths(Role::Node, "n1");
    paths.ca = ours.ca().ca_cert_path();
    paths.crl = None;
    let err = server_config(&paths).unwrap_err();
    assert!(matches!(err, CertError::WrongCa { .. }), "{err}");
    let err = client_config(&paths).unwrap_err();
    assert!(matches!(err, CertError::WrongCa { .. }), "{err}");
}

#[test]
fn revoked_own_certificate_is_refused_at_load() {
    let pki = TestPki::new();
    let paths = pki.revoke(Role::User, "alice").unwrap();
    let err = client_config(&paths).unwrap_err();
    assert!(matches!(err, CertError::Revoked { .. }), "{err}");
    // Without the CRL the same files load (revocation needs the list).
    let without = TlsPaths { crl: None, ..paths };
    client_config(&without).unwrap();
}

#[test]
fn key_of_another_certificate_is_refused() {
    let pki = TestPki::new();
    let mut paths = pki.tls_paths(Role::Node, "n1");
    paths.key = pki.tls_paths(Role::Node, "n2").key;
    let err = server_config(&paths).unwrap_err();
    assert!(matches!(err, CertError::KeyMismatch { .. }), "{err}");
}

#[test]
fn client_only_certificates_cannot_build_a_server() {
    let pki = TestPki::new();
    for role in [Role::User, Role::Admin] {
        let err = server_config(&pki.tls_paths(role, "someone")).unwrap_err();
        assert!(matches!(err, CertError::Unusable { .. }), "{err}");
        assert!(err.to_string().contains("cannot serve"), "{err}");
    }
}

#[test]
fn garbage_files_are_reported_as_malformed() {
    let pki = TestPki::new();
    let mut paths = pki.tls_paths(Role::User, "alice");
    let junk = pki.dir().join("junk.pem");
    fs::write(&junk, "not a certificate\n").unwrap();
    paths.crl = Some(junk.clone());
    // A CRL file without any CRL is an empty list: fine.
    client_config(&paths).unwrap();
    paths.cert = junk;
    let err = client_config(&paths).unwrap_err();
    assert!(matches!(err, CertError::Malformed { .. }), "{err}");
}

#[test]
fn configs_use_the_explicit_provider_and_install_no_process_default() {
    let pki = TestPki::new();
    server_config(&pki.tls_paths(Role::Service, "vexecd")).unwrap();
    client_config(&pki.tls_paths(Role::Admin, "ops")).unwrap();
    assert!(rustls::crypto::CryptoProvider::get_default().is_none());
}

#[test]
fn ca_refuses_to_be_overwritten_without_force() {
    let pki = TestPki::new();
    let dir = pki.ca().dir().to_path_buf();
    let err = certs::Ca::init(&dir, "test", false).unwrap_err();
    assert!(matches!(err, CertError::AlreadyExists { .. }), "{err}");
    assert!(err.to_string().contains("--force"), "{err}");
    let before = fs::read(pki.ca().ca_cert_path()).unwrap();
    certs::Ca::init(&dir, "test", true).unwrap();
    assert_ne!(fs::read(pki.ca().ca_cert_path()).unwrap(), before);
}

#[test]
fn issuing_checks_names_days_and_sans() {
    let pki = TestPki::new();
    let out = pki.dir().join("out");
    let ca = pki.ca();
    for (role, name) in [
        (Role::User, "Alice"),
        (Role::User, "../etc"),
        (Role::Node, "10"),
    ] {
        let err = ca.issue(role, name, &[], 1, &out).unwrap_err();
        assert!(
            matches!(err, CertError::InvalidName { .. }),
            "{name}: {err}"
        );
    }
    let err = ca.issue(Role::User, "alice", &[], 0, &out).unwrap_err();
    assert!(matches!(err, CertError::InvalidValidity(_)), "{err}");
    let err = ca.issue(Role::User, "alice", &[], 4000, &out).unwrap_err();
    assert!(matches!(err, CertError::InvalidValidity(_)), "{err}");
    let err = ca
        .issue(Role::Node, "n1", &["bad name!".into()], 1, &out)
        .unwrap_err();
    assert!(matches!(err, CertError::InvalidSan { .. }), "{err}");
    let err = ca
        .issue(Role::User, "alice", &["x.example".into()], 1, &out)
        .unwrap_err();
    assert!(matches!(err, CertError::InvalidSan { .. }), "{err}");
    // Nothing was written by the refusals.
    assert!(!out.exists() || fs::read_dir(&out).unwrap().count() == 0);
}

#[test]
fn one_test_pki_can_be_shared_across_threads() {
    let pki = std::sync::Arc::new(TestPki::new());
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let pki = pki.clone();
            std::thread::spawn(move || {
                // Everyone asks for the same node, half also revoke a user of their own.
                let node = pki.tls_paths(Role::Node, "n1");
                if i % 2 == 0 {
                    pki.revoke(Role::User, &format!("u{i}")).unwrap();
                }
                server_config(&node).map(|_| ()).map_err(|e| e.to_string())
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    let state = pki.ca().crl_state().unwrap();
    assert_eq!(state.revoked.len(), 4, "no revocation lost: {state:?}");
}
