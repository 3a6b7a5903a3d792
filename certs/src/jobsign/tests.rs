//! Signing and verifying against a real throwaway CA: every way a job can be
//! forged, altered, mis-signed or out of date is refused with its own error.

use super::*;
use crate::testing::TestPki;

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn spec(user: &str) -> JobSpec {
    let t = now_s();
    JobSpec {
        id: proto::node::JobId(0x1234),
        user: user.into(),
        argv: vec!["/bin/echo".into(), "hi".into()],
        env: vec![("PATH".into(), "/bin:/usr/bin".into())],
        cwd: Some("/tmp".into()),
        width: 2,
        length_s: 60,
        worth: Worth::Rate(2_000_000),
        priority: 0,
        max_attempts: 2,
        signed_at: t,
        expires_at: t + 3600,
        array: None,
        after: Vec::new(),
        options: Default::default(),
    }
}

fn trust(pki: &TestPki) -> JobTrust {
    JobTrust::load(&pki.ca().ca_cert_path(), Some(&pki.ca().crl_path())).unwrap()
}

fn signer(pki: &TestPki, role: Role, name: &str) -> (KeyPair, Vec<u8>) {
    let paths = pki.tls_paths(role, name);
    let key = KeyPair::from_pem(&std::fs::read_to_string(&paths.key).unwrap()).unwrap();
    let cert = files::load_certs(&paths.cert, "certificate").unwrap()[0].to_vec();
    (key, cert)
}

fn verify_now(signed: &SignedJob, pki: &TestPki) -> Result<VerifiedJob, JobSignError> {
    verify(signed, &trust(pki), SystemTime::now())
}

#[test]
fn a_signed_job_round_trips() {
    let pki = TestPki::new();
    let s = JobSigner::load(&pki.tls_paths(Role::User, "alice")).unwrap();
    assert_eq!(s.user(), "alice");
    let signed = s.sign(&spec("alice")).unwrap();
    let job = verify_now(&signed, &pki).unwrap();
    assert_eq!(job.spec, spec("alice"));
    assert_eq!(job.user, "alice");
    assert_eq!(job.digest, digest(&signed.spec));
    assert_ne!(job.digest, [0; 32]);
}

#[test]
fn an_altered_spec_byte_is_refused() {
    let pki = TestPki::new();
    let (key, cert) = signer(&pki, Role::User, "alice");
    let signed = sign(&spec("alice"), &key, &cert).unwrap();
    for i in 0..signed.spec.len() {
        let mut bad = signed.clone();
        bad.spec[i] ^= 0x01;
        let err = verify_now(&bad, &pki).unwrap_err();
        assert!(matches!(err, JobSignError::BadSignature), "byte {i}: {err}");
    }
    let mut longer = signed.clone();
    longer.spec.push(0);
    assert!(matches!(
        verify_now(&longer, &pki),
        Err(JobSignError::BadSignature)
    ));
}

#[test]
fn an_altered_signature_is_refused() {
    let pki = TestPki::new();
    let (key, cert) = signer(&pki, Role::User, "alice");
    let mut signed = sign(&spec("alice"), &key, &cert).unwrap();
    let last = signed.signature.len() - 1;
    signed.signature[last] ^= 0x01;
    let err = verify_now(&signed, &pki).unwrap_err();
    assert!(matches!(err, JobSignError::BadSignature), "{err}");
    assert!(err.to_string().starts_with("bad signature"), "{err}");
}

#[test]
fn another_users_key_with_this_users_certificate_is_refused() {
    let pki = TestPki::new();
    let (bob_key, _) = signer(&pki, Role::User, "bob");
    let (_, alice_cert) = signer(&pki, Role::User, "alice");
    // `sign` itself refuses the mismatched pair...
    let err = sign(&spec("alice"), &bob_key, &alice_cert).unwrap_err();
    assert!(matches!(err, JobSignError::KeyMismatch), "{err}");
    // ...and a forger who builds the message by hand is refused by the verifier.
    let bytes = postcard::to_stdvec(&spec("alice")).unwrap();
    let forged = SignedJob {
        signature: bob_key.sign(&signed_message(&bytes)).unwrap(),
        spec: bytes,
        cert: alice_cert,
    };
    let err = verify_now(&forged, &pki).unwrap_err();
    assert!(matches!(err, JobSignError::BadSignature), "{err}");
}

#[test]
fn bobs_signature_on_a_job_for_alice_is_refused() {
    let pki = TestPki::new();
    let (key, cert) = signer(&pki, Role::User, "bob");
    let signed = sign(&spec("alice"), &key, &cert).unwrap();
    let err = verify_now(&signed, &pki).unwrap_err();
    assert!(
        matches!(&err, JobSignError::WrongUser { signer, spec_user } if signer == "bob" && spec_user == "alice"),
        "{err}"
    );
    let s = JobSigner::load(&pki.tls_paths(Role::User, "bob")).unwrap();
    assert!(matches!(
        s.sign(&spec("alice")),
        Err(JobSignError::WrongUser { .. })
    ));
}

#[test]
fn a_certificate_from_another_ca_is_refused() {
    let pki = TestPki::new();
    let other = TestPki::with_cluster("other").unwrap();
    let (key, cert) = signer(&other, Role::User, "alice");
    let signed = sign(&spec("alice"), &key, &cert).unwrap();
    assert!(verify_now(&signed, &other).is_ok());
    let err = verify_now(&signed, &pki).unwrap_err();
    assert!(matches!(err, JobSignError::Certificate(_)), "{err}");
    assert!(
        err.to_string().contains("not issued by this cluster's CA"),
        "{err}"
    );
}

#[test]
fn node_and_service_certificates_cannot_sign() {
    let pki = TestPki::new();
    for (role, name) in [
        (Role::Node, "alice"),
        (Role::Service, "batchd"),
        (Role::Admin, "alice"),
    ] {
        let (key, cert) = signer(&pki, role, name);
        let signed = sign(&spec("alice"), &key, &cert).unwrap();
        let err = verify_now(&signed, &pki).unwrap_err();
        assert!(matches!(err, JobSignError::NotUser { .. }), "{role}: {err}");
        let loaded = JobSigner::load(&pki.tls_paths(role, name));
        assert!(
            matches!(loaded, Err(JobSignError::NotUser { .. })),
            "{role}"
        );
    }
}

#[test]
fn an_expired_job_is_refused() {
    let pki = TestPki::new();
    let s = JobSigner::load(&pki.tls_paths(Role::User, "alice")).unwrap();
    let mut old = spec("alice");
    old.signed_at -= 7200;
    old.expires_at = now_s() - 1;
    let err = verify_now(&s.sign(&old).unwrap(), &pki).unwrap_err();
    assert!(matches!(err, JobSignError::Expired { .. }), "{err}");
    // The same job verified before its expiry passes.
    let then = UNIX_EPOCH + Duration::from_secs(old.expires_at - 10);
    assert!(verify(&s.sign(&old).unwrap(), &trust(&pki), then).is_ok());
}

#[test]
fn a_job_signed_in_the_future_is_refused() {
    let pki = TestPki::new();
    let s = JobSigner::load(&pki.tls_paths(Role::User, "alice")).unwrap();
    let mut ahead = spec("alice");
    ahead.signed_at += MAX_CLOCK_SKEW.as_secs() + 60;
    ahead.expires_at += 7200;
    let err = verify_now(&s.sign(&ahead).unwrap(), &pki).unwrap_err();
    assert!(matches!(err, JobSignError::SignedInFuture { .. }), "{err}");
}

#[test]
fn a_revoked_user_cannot_sign() {
    let pki = TestPki::new();
    let s = JobSigner::load(&pki.tls_paths(Role::User, "alice")).unwrap();
    let signed = s.sign(&spec("alice")).unwrap();
    assert!(verify_now(&signed, &pki).is_ok());
    pki.revoke(Role::User, "alice").unwrap();
    let err = verify_now(&signed, &pki).unwrap_err();
    assert!(err.to_string().contains("revoked"), "{err}");
}

#[test]
fn an_unrunnable_spec_is_refused_even_when_signed() {
    let pki = TestPki::new();
    let s = JobSigner::load(&pki.tls_paths(Role::User, "alice")).unwrap();
    type Change = fn(&mut JobSpec);
    let cases: [(Change, &str); 8] = [
        (|j| j.argv.clear(), "no program"),
        (|j| j.width = 0, "width is 0"),
        (|j| j.max_attempts = 0, "max_attempts is 0"),
        (|j| j.worth = Worth::Rate(-1), "negative"),
        (|j| j.worth = Worth::Utility(vec![]), "breakpoints"),
        (
            |j| j.worth = Worth::Utility(vec![(5, 1), (5, 0)]),
            "strictly increasing",
        ),
        (|j| j.worth = Worth::Utility(vec![(-1, 1)]), "non-negative"),
        (|j| j.cwd = Some("rel".into()), "not an absolute path"),
    ];
    for (change, expect) in cases {
        let mut j = spec("alice");
        change(&mut j);
        let err = verify_now(&s.sign(&j).unwrap(), &pki).unwrap_err();
        assert!(matches!(err, JobSignError::Invalid(_)), "{expect}: {err}");
        assert!(err.to_string().contains(expect), "{expect}: {err}");
    }
    let ok = spec("alice");
    let mut utility = ok.clone();
    utility.worth = Worth::Utility(vec![(60, 5_000_000), (600, 0)]);
    assert!(verify_now(&s.sign(&utility).unwrap(), &pki).is_ok());
}
