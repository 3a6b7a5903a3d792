//! Mutual TLS 1.3 over real loopback sockets: who gets in, who is refused, and what each
//! side is told.

use certs::testing::TestPki;
use certs::{AuthError, PeerIdentity, Role};

use crate::common::{exchange, raw_acceptor, raw_connector};

fn id(role: Role, name: &str) -> PeerIdentity {
    PeerIdentity::new(role, name).unwrap()
}

#[tokio::test]
async fn correct_pair_connects_and_both_sides_see_the_right_identity() {
    let pki = TestPki::new();
    let out = exchange(
        pki.acceptor(Role::Node, "n1").unwrap(),
        pki.connector(Role::User, "alice").unwrap(),
        (Role::Node, "n1"),
    )
    .await;
    assert_eq!(out.server.unwrap(), id(Role::User, "alice"));
    assert_eq!(out.client.unwrap(), id(Role::Node, "n1"));

    // A node is also a client of accountd, with the same certificate.
    let out = exchange(
        pki.acceptor(Role::Service, "accountd").unwrap(),
        pki.connector(Role::Node, "n1").unwrap(),
        (Role::Service, "accountd"),
    )
    .await;
    assert_eq!(out.server.unwrap(), id(Role::Node, "n1"));
    assert_eq!(out.client.unwrap(), id(Role::Service, "accountd"));
}

#[tokio::test]
async fn client_without_certificate_is_refused() {
    let pki = TestPki::new();
    let out = exchange(
        pki.acceptor(Role::Node, "n1").unwrap(),
        raw_connector(&pki.ca().ca_cert_path(), None),
        (Role::Node, "n1"),
    )
    .await;
    let server = out.server.unwrap_err();
    assert!(server.contains("presented no certificate"), "{server}");
    let client = out.client.unwrap_err();
    assert!(client.contains("requires a client certificate"), "{client}");
}

#[tokio::test]
async fn certificate_from_another_ca_is_refused_both_ways() {
    let ours = TestPki::new();
    // Another CA with the same cluster name (same issuer name, different key), and one
    // with a different name: both must be strangers.
    for theirs in [TestPki::new(), TestPki::with_cluster("elsewhere").unwrap()] {
        // Their user dials our node.
        let stranger = theirs.tls_paths(Role::User, "alice");
        let out = exchange(
            ours.acceptor(Role::Node, "n1").unwrap(),
            raw_connector(
                &ours.ca().ca_cert_path(),
                Some((&stranger.cert, &stranger.key)),
            ),
            (Role::Node, "n1"),
        )
        .await;
        let server = out.server.unwrap_err();
        assert!(server.contains("not issued by our cluster CA"), "{server}");
        let client = out.client.unwrap_err();
        assert!(client.contains("cluster CA"), "{client}");

        // Our user dials a node of theirs that calls itself n1.
        let out = exchange(
            theirs.acceptor(Role::Node, "n1").unwrap(),
            ours.connector(Role::User, "alice").unwrap(),
            (Role::Node, "n1"),
        )
        .await;
        let client = out.client.unwrap_err();
        assert!(client.contains("not issued by our cluster CA"), "{client}");
        let server = out.server.unwrap_err();
        assert!(server.contains("cluster CA"), "{server}");
    }
}

#[tokio::test]
async fn expired_client_certificate_is_refused() {
    let pki = TestPki::new();
    let old = pki.expired(Role::User, "alice").unwrap();
    let out = exchange(
        pki.acceptor(Role::Node, "n1").unwrap(),
        raw_connector(&old.ca, Some((&old.cert, &old.key))),
        (Role::Node, "n1"),
    )
    .await;
    let server = out.server.unwrap_err();
    assert!(server.contains("has expired"), "{server}");
    let client = out.client.unwrap_err();
    assert!(client.contains("expired"), "{client}");
}

#[tokio::test]
async fn expired_server_certificate_is_refused() {
    let pki = TestPki::new();
    let old = pki.expired(Role::Node, "n1").unwrap();
    let out = exchange(
        raw_acceptor(&old.ca, &old.cert, &old.key),
        pki.connector(Role::User, "alice").unwrap(),
        (Role::Node, "n1"),
    )
    .await;
    let client = out.client.unwrap_err();
    assert!(client.contains("has expired"), "{client}");
    assert!(out.server.is_err());
}

#[tokio::test]
async fn revoked_certificate_is_refused() {
    let pki = TestPki::new();
    // Alice's connector is built before the revocation, as a client that has not heard.
    let alice = pki.connector(Role::User, "alice").unwrap();
    let bob = pki.connector(Role::User, "bob").unwrap();
    pki.revoke(Role::User, "alice").unwrap();
    // The server loads the new CRL when it builds its configuration.
    let acceptor = pki.acceptor(Role::Node, "n1").unwrap();

    let out = exchange(acceptor.clone(), alice, (Role::Node, "n1")).await;
    let server = out.server.unwrap_err();
    assert!(server.contains("has been revoked"), "{server}");
    let client = out.client.unwrap_err();
    assert!(client.contains("revoked"), "{client}");

    // Everyone else still gets in through the same configuration.
    let out = exchange(acceptor, bob, (Role::Node, "n1")).await;
    assert_eq!(out.server.unwrap(), id(Role::User, "bob"));
}

#[tokio::test]
async fn revoked_server_certificate_is_refused_by_clients_with_the_crl() {
    let pki = TestPki::new();
    let acceptor = pki.acceptor(Role::Node, "n1").unwrap();
    pki.revoke(Role::Node, "n1").unwrap();
    let out = exchange(
        acceptor,
        pki.connector(Role::User, "alice").unwrap(),
        (Role::Node, "n1"),
    )
    .await;
    let client = out.client.unwrap_err();
    assert!(client.contains("has been revoked"), "{client}");
}

#[tokio::test]
async fn user_certificate_where_a_node_is_required_is_refused_by_the_role_check() {
    let pki = TestPki::new();
    // accountd accepts any cluster certificate at the TLS layer ...
    let out = exchange(
        pki.acceptor(Role::Service, "accountd").unwrap(),
        pki.connector(Role::User, "alice").unwrap(),
        (Role::Service, "accountd"),
    )
    .await;
    let alice = out.server.unwrap();
    // ... and then only nodes may debit.
    let err = alice.require_role(&[Role::Node]).unwrap_err();
    assert!(matches!(err, AuthError::RoleNotAllowed { .. }));
    assert_eq!(
        err.to_string(),
        "user alice is not allowed to do this: only node certificates are accepted"
    );
    // Alice may read her own balance, not bob's.
    assert!(alice.require_self_or_admin("alice").is_ok());
    assert!(alice.require_self_or_admin("bob").is_err());
}

#[tokio::test]
async fn user_certificate_cannot_act_as_a_server() {
    let pki = TestPki::new();
    let mallory = pki.tls_paths(Role::User, "mallory");
    let out = exchange(
        raw_acceptor(&mallory.ca, &mallory.cert, &mallory.key),
        pki.connector(Role::User, "alice").unwrap(),
        (Role::Node, "mallory"),
    )
    .await;
    let client = out.client.unwrap_err();
    assert!(client.contains("refused"), "{client}");
}

#[tokio::test]
async fn node_n2_is_refused_when_the_client_dialled_n3() {
    let pki = TestPki::new();
    let out = exchange(
        pki.acceptor(Role::Node, "n2").unwrap(),
        pki.connector(Role::User, "alice").unwrap(),
        (Role::Node, "n3"),
    )
    .await;
    let client = out.client.unwrap_err();
    assert!(
        client.contains("does not name the host we dialled"),
        "{client}"
    );
    assert!(out.server.is_err());
}

#[tokio::test]
async fn right_name_but_wrong_role_is_refused() {
    let pki = TestPki::new();
    // A node that happens to be called "accountd" is not the accounting service.
    let out = exchange(
        pki.acceptor(Role::Node, "accountd").unwrap(),
        pki.connector(Role::User, "alice").unwrap(),
        (Role::Service, "accountd"),
    )
    .await;
    let client = out.client.unwrap_err();
    assert!(
        client
            .contains("presented a certificate for node accountd, but we dialled service accountd"),
        "{client}"
    );
}

#[tokio::test]
async fn extra_sans_do_not_change_the_identity() {
    let pki = TestPki::new();
    let dir = pki.dir().join("extra");
    let issued = pki
        .ca()
        .issue(
            Role::Node,
            "n4",
            &["127.0.0.1".into(), "n4.example".into()],
            1,
            &dir,
        )
        .unwrap();
    let paths = certs::TlsPaths {
        ca: pki.ca().ca_cert_path(),
        cert: issued.cert,
        key: issued.key,
        crl: Some(pki.ca().crl_path()),
    };
    let info = certs::CertInfo::load(&paths.cert).unwrap();
    assert_eq!(info.dns, ["n4", "n4.example"]);
    assert_eq!(info.ips, [std::net::IpAddr::from([127, 0, 0, 1])]);
    // The client dials the node by its own name (`connect` verifies the certificate for
    // the DNS name n4, whichever address the TCP connection went to): the extra SANs
    // change nothing, the identity both sides see is still node n4.
    let out = exchange(
        certs::acceptor(&paths).unwrap(),
        pki.connector(Role::Admin, "ops").unwrap(),
        (Role::Node, "n4"),
    )
    .await;
    assert_eq!(out.client.unwrap(), id(Role::Node, "n4"));
    assert_eq!(out.server.unwrap(), id(Role::Admin, "ops"));
    // Dialling the alias instead: the certificate is valid for the DNS name n4.example,
    // but it says node n4, not node n4.example, so `connect` refuses it.
    let out = exchange(
        certs::acceptor(&paths).unwrap(),
        pki.connector(Role::Admin, "ops").unwrap(),
        (Role::Node, "n4.example"),
    )
    .await;
    let client = out.client.unwrap_err();
    assert!(
        client.contains("presented a certificate for node n4, but we dialled node n4.example"),
        "{client}"
    );
    assert!(out.server.is_err());
}

#[tokio::test]
async fn a_reload_picks_up_a_revocation_and_a_broken_file_keeps_the_old_configuration() {
    let pki = TestPki::new();
    let paths = pki.tls_paths(Role::Node, "n1");
    let tls = certs::ReloadableAcceptor::load(paths.clone()).unwrap();
    // Clients built before the revocation (and the damage below), as clients that have
    // not heard: the node's verdict is what is tested.
    let alice_connector = pki.connector(Role::User, "alice").unwrap();
    let alice = || alice_connector.clone();
    let bob = pki.connector(Role::User, "bob").unwrap();

    pki.revoke(Role::User, "alice").unwrap();
    // Until the reload, the configuration loaded at start (without the revocation) holds.
    let out = exchange(tls.current(), alice(), (Role::Node, "n1")).await;
    assert_eq!(out.server.unwrap(), id(Role::User, "alice"));

    tls.reload().unwrap();
    let out = exchange(tls.current(), alice(), (Role::Node, "n1")).await;
    let server = out.server.unwrap_err();
    assert!(server.contains("has been revoked"), "{server}");

    // A CRL caught half-copied: the reload fails, names the file, and changes nothing.
    let crl = paths.crl.clone().unwrap();
    let good = std::fs::read(&crl).unwrap();
    std::fs::write(&crl, &good[..good.len() / 2]).unwrap();
    let err = tls.reload().unwrap_err().to_string();
    assert!(err.contains(&crl.display().to_string()), "{err}");
    let out = exchange(tls.current(), alice(), (Role::Node, "n1")).await;
    assert!(out.server.unwrap_err().contains("has been revoked"));
    let out = exchange(tls.current(), bob, (Role::Node, "n1")).await;
    assert_eq!(out.server.unwrap(), id(Role::User, "bob"));
}
