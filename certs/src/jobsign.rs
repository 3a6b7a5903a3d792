//! Signed batch jobs. A user signs a [`JobSpec`] with the key of their own `user`
//! certificate ([`sign`], or [`JobSigner`] loaded from the paths a client already
//! uses); a node checks the result against the cluster CA and its revocation list
//! ([`verify`] with a [`JobTrust`]) before it runs anything. The signature is ECDSA
//! P-256 with SHA-256 (ASN.1) over [`SIGNING_CONTEXT`] followed by the postcard
//! encoding of the spec, and the spec is decoded only from those signed bytes, so
//! nothing outside the signature can change what runs. Replays are stopped
//! elsewhere: the node claims each `(user, job, attempt, rank)` at accountd.
//!
//! ```
//! use certs::{Role, jobsign, testing::TestPki};
//! use proto::batch::{JobSpec, Worth};
//! use proto::node::JobId;
//! let pki = TestPki::new();
//! let signer = jobsign::JobSigner::load(&pki.tls_paths(Role::User, "alice")).unwrap();
//! let now = std::time::SystemTime::now();
//! let t = now.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
//! let spec = JobSpec {
//!     id: JobId(7), user: "alice".into(), argv: vec!["true".into()], env: vec![],
//!     cwd: None, width: 1, length_s: 60, worth: Worth::Rate(1_000_000), priority: 0,
//!     max_attempts: 1, signed_at: t, expires_at: t + 3600, array: None, after: vec![],
//!     options: Default::default(),
//! };
//! let signed = signer.sign(&spec).unwrap();
//! let trust = jobsign::JobTrust::load(&pki.ca().ca_cert_path(), Some(&pki.ca().crl_path())).unwrap();
//! let job = jobsign::verify(&signed, &trust, now).unwrap();
//! assert_eq!((job.spec, job.user.as_str()), (spec, "alice"));
//! ```

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proto::batch::{JobSpec, MAX_UTILITY_POINTS, SIGNING_CONTEXT, SignedJob, Worth};
use proto::node::Launch;
use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256, SigningKey};
use ring::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls::{CertificateError, RootCertStore};

use crate::config::{TlsPaths, crypto_provider};
use crate::error::CertError;
use crate::files;
use crate::identity::PeerIdentity;
use crate::role::Role;

/// How far in the future a job's `signed_at` may lie (clock skew between the
/// signer and the node).
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(300);

/// Why a job cannot be signed, or why a signed job is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobSignError {
    /// The key, certificate, CA or CRL could not be loaded.
    #[error(transparent)]
    Load(#[from] CertError),
    /// The signing key is not ECDSA P-256.
    #[error(
        "the signing key is not an ECDSA P-256 key; sign with the user key `rexec-certs issue` wrote"
    )]
    KeyAlgorithm,
    /// The signing key does not belong to the certificate sent with the signature.
    #[error(
        "the signing key does not belong to the certificate it is sent with; use the key and certificate issued together"
    )]
    KeyMismatch,
    /// Signing or encoding failed.
    #[error("cannot sign the job: {0}")]
    Sign(String),
    /// The signer's certificate does not verify against the cluster CA (another CA,
    /// expired, revoked, not for clients).
    #[error("the job's signer certificate is not accepted: {0}")]
    Certificate(String),
    /// The signer's certificate is not a `user` certificate.
    #[error("the job is signed by {signer}; only a user certificate can sign a job")]
    NotUser {
        /// The certificate's identity.
        signer: PeerIdentity,
    },
    /// The spec names another user than the certificate that signed it.
    #[error(
        "the job runs as user {spec_user:?} but is signed by user {signer:?}; a user can only sign their own jobs"
    )]
    WrongUser {
        /// The certificate's user.
        signer: String,
        /// The spec's user.
        spec_user: String,
    },
    /// The signature does not verify: the job was forged or altered after signing.
    #[error(
        "bad signature: the job does not verify against its signer's certificate (forged or altered)"
    )]
    BadSignature,
    /// The signed bytes are not a job spec.
    #[error("the signed job cannot be decoded: {0}")]
    Malformed(String),
    /// The job's expiry has passed.
    #[error("the signed job expired at {expires_at} (now {now}, UTC seconds); submit it again")]
    Expired {
        /// The spec's `expires_at`.
        expires_at: u64,
        /// The verifier's clock.
        now: u64,
    },
    /// The job claims to be signed too far in the future.
    #[error("the signed job says it was signed at {signed_at}, {ahead} s ahead of this clock (at most {} s allowed); check the clocks", MAX_CLOCK_SKEW.as_secs())]
    SignedInFuture {
        /// The spec's `signed_at`.
        signed_at: u64,
        /// Seconds ahead of the verifier's clock.
        ahead: u64,
    },
    /// The spec itself is not a runnable job.
    #[error("invalid job: {0}")]
    Invalid(String),
}

/// A job whose signature, signer and expiry verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedJob {
    /// The spec, decoded from the signed bytes.
    pub spec: JobSpec,
    /// SHA-256 of the signed spec bytes (what a node claims at accountd).
    pub digest: [u8; 32],
    /// The signer (equal to `spec.user`).
    pub user: String,
    /// The terms signed after the spec (none set for most jobs).
    pub terms: proto::batch::JobTerms,
}

/// What a verifier trusts: the cluster CA and, where there is one, its CRL.
#[derive(Debug, Clone)]
pub struct JobTrust {
    verifier: Arc<dyn ClientCertVerifier>,
}

impl JobTrust {
    /// Loads the CA certificate and the CRL (a revoked user's jobs are refused).
    pub fn load(ca: &Path, crl: Option<&Path>) -> Result<Self, JobSignError> {
        let mut roots = RootCertStore::empty();
        for der in files::load_certs(ca, "CA certificate")? {
            roots
                .add(der)
                .map_err(|e| files::malformed(ca, "CA certificate", e.to_string()))?;
        }
        let crls = match crl {
            Some(p) => files::load_crls(p)?,
            None => Vec::new(),
        };
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), crypto_provider())
            .with_crls(crls)
            .only_check_end_entity_revocation()
            .build()
            .map_err(|e| CertError::Crl {
                path: crl.map(Path::to_path_buf).unwrap_or_default(),
                detail: e.to_string(),
            })?;
        Ok(JobTrust { verifier })
    }

    /// The CA and CRL of a party's TLS paths.
    pub fn from_tls_paths(paths: &TlsPaths) -> Result<Self, JobSignError> {
        Self::load(&paths.ca, paths.crl.as_deref())
    }
}

/// A user's key and certificate, ready to sign jobs.
#[derive(Debug)]
pub struct JobSigner {
    key: KeyPair,
    cert: Vec<u8>,
    user: String,
}

impl JobSigner {
    /// Loads the key and certificate a client config names (`paths.cert`, `paths.key`).
    pub fn load(paths: &TlsPaths) -> Result<Self, JobSignError> {
        let pem = files::load_key_pem(&paths.key, "private key")?;
        let key = KeyPair::from_pem(&pem)
            .map_err(|e| files::malformed(&paths.key, "private key", e.to_string()))?;
        let cert = files::load_certs(&paths.cert, "certificate")?
            .remove(0)
            .to_vec();
        let id = PeerIdentity::from_der(&cert, &paths.cert.display().to_string())?;
        if id.role != Role::User {
            return Err(JobSignError::NotUser { signer: id });
        }
        check_key(&key, &cert)?;
        Ok(JobSigner {
            key,
            cert,
            user: id.name,
        })
    }

    /// The user whose jobs this signer signs.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The user's key.
    pub fn key(&self) -> &KeyPair {
        &self.key
    }

    /// The user's certificate, DER.
    pub fn cert(&self) -> &[u8] {
        &self.cert
    }

    /// Signs `spec` (whose `user` must be this signer's).
    pub fn sign(&self, spec: &JobSpec) -> Result<SignedJob, JobSignError> {
        if spec.user != self.user {
            return Err(JobSignError::WrongUser {
                signer: self.user.clone(),
                spec_user: spec.user.clone(),
            });
        }
        sign(spec, &self.key, &self.cert)
    }

    /// Signs `spec` under `terms` (see [`proto::batch::JobTerms`]).
    pub fn sign_with_terms(
        &self,
        spec: &JobSpec,
        terms: &proto::batch::JobTerms,
    ) -> Result<SignedJob, JobSignError> {
        if spec.user != self.user {
            return Err(JobSignError::WrongUser {
                signer: self.user.clone(),
                spec_user: spec.user.clone(),
            });
        }
        sign_bytes(
            terms
                .encode(spec)
                .map_err(|e| JobSignError::Sign(e.to_string()))?,
            &self.key,
            &self.cert,
        )
    }
}

/// Signs `spec` with `key`, attaching `cert_der` (the key's certificate).
pub fn sign(spec: &JobSpec, key: &KeyPair, cert_der: &[u8]) -> Result<SignedJob, JobSignError> {
    let bytes = postcard::to_stdvec(spec).map_err(|e| JobSignError::Sign(e.to_string()))?;
    sign_bytes(bytes, key, cert_der)
}

/// Signs the encoded spec `bytes` with `key`, attaching `cert_der`.
fn sign_bytes(bytes: Vec<u8>, key: &KeyPair, cert_der: &[u8]) -> Result<SignedJob, JobSignError> {
    check_key(key, cert_der)?;
    let signature = key
        .sign(&signed_message(&bytes))
        .map_err(|e| JobSignError::Sign(e.to_string()))?;
    Ok(SignedJob {
        spec: bytes,
        signature,
        cert: cert_der.to_vec(),
    })
}

/// Verifies a signed job at time `now`: the certificate chains to the CA and is not
/// revoked, it is a user's, the signature holds, the spec decodes from the signed
/// bytes alone and names that user, it has not expired, and it is a runnable job.
pub fn verify(
    signed: &SignedJob,
    trust: &JobTrust,
    now: SystemTime,
) -> Result<VerifiedJob, JobSignError> {
    let cert = CertificateDer::from(signed.cert.as_slice());
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    trust
        .verifier
        .verify_client_cert(&cert, &[], UnixTime::since_unix_epoch(since))
        .map_err(cert_refusal)?;
    let signer = PeerIdentity::from_der(&signed.cert, "job signer certificate")?;
    if signer.role != Role::User {
        return Err(JobSignError::NotUser { signer });
    }
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, public_key(&signed.cert)?)
        .verify(&signed_message(&signed.spec), &signed.signature)
        .map_err(|_| JobSignError::BadSignature)?;
    let (spec, terms) = decode(&signed.spec)?;
    if spec.user != signer.name {
        return Err(JobSignError::WrongUser {
            signer: signer.name,
            spec_user: spec.user,
        });
    }
    let now_s = since.as_secs();
    if spec.expires_at <= now_s {
        return Err(JobSignError::Expired {
            expires_at: spec.expires_at,
            now: now_s,
        });
    }
    if spec.signed_at > now_s + MAX_CLOCK_SKEW.as_secs() {
        return Err(JobSignError::SignedInFuture {
            signed_at: spec.signed_at,
            ahead: spec.signed_at - now_s,
        });
    }
    check_spec(&spec)?;
    Ok(VerifiedJob {
        digest: digest(&signed.spec),
        user: signer.name,
        spec,
        terms,
    })
}

/// SHA-256 of a signed job's spec bytes.
pub fn digest(spec_bytes: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, spec_bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// A spec's own sanity, as [`Launch::validate`] checks a launch, plus the batch
/// fields: width and attempts at least 1, a non-negative rate, a utility of 1 to
/// [`MAX_UTILITY_POINTS`] breakpoints at strictly increasing, non-negative times.
pub fn check_spec(spec: &JobSpec) -> Result<(), JobSignError> {
    let invalid = |m: String| Err(JobSignError::Invalid(m));
    if spec.width == 0 {
        return invalid("width is 0; a job needs at least one rank".into());
    }
    if spec.max_attempts == 0 {
        return invalid("max_attempts is 0; a job needs at least one attempt".into());
    }
    match &spec.worth {
        Worth::Rate(r) if *r < 0 => return invalid(format!("rate {r} is negative")),
        Worth::Rate(_) => {}
        Worth::Utility(p) if p.is_empty() || p.len() > MAX_UTILITY_POINTS => {
            return invalid(format!(
                "utility has {} breakpoints (1 to {MAX_UTILITY_POINTS} allowed)",
                p.len()
            ));
        }
        Worth::Utility(p) => {
            let bad = p
                .iter()
                .enumerate()
                .any(|(i, &(t, _))| t < 0 || (i > 0 && t <= p[i - 1].0));
            if bad {
                return invalid(
                    "utility times must be non-negative and strictly increasing".into(),
                );
            }
        }
    }
    if let Some(a) = &spec.array {
        a.check()
            .map_err(|why| JobSignError::Invalid(format!("array: {why}")))?;
    }
    if spec.after.len() > proto::batch::after::MAX_AFTER {
        return invalid(format!(
            "{} dependencies (at most {} allowed)",
            spec.after.len(),
            proto::batch::after::MAX_AFTER
        ));
    }
    let own = |id: proto::node::JobId| {
        id == spec.id
            || spec.array.is_some_and(|a| {
                a.indices()
                    .any(|i| proto::batch::array::task_id(spec.id, i) == id)
            })
    };
    if let Some(a) = spec.after.iter().find(|a| own(a.job)) {
        return invalid(format!(
            "job {} cannot depend on itself ({})",
            spec.id, a.job
        ));
    }
    if spec.options.mem_bytes == Some(0) {
        return invalid("memory per rank is 0; ask for more than zero or none".into());
    }
    for pattern in [&spec.options.stdout, &spec.options.stderr]
        .into_iter()
        .flatten()
    {
        proto::output::check(pattern).map_err(|e| JobSignError::Invalid(e.to_string()))?;
    }
    let launch = Launch {
        job: spec.id,
        rank: 0,
        nranks: spec.width,
        bid: proto::node::Bid::ZERO,
        argv: spec.argv.clone(),
        env: spec.env.clone(),
        cwd: spec.cwd.clone(),
        terminal: None,
        options: Default::default(),
    };
    launch
        .validate()
        .map_err(|e| JobSignError::Invalid(e.to_string()))
}

fn signed_message(spec: &[u8]) -> Vec<u8> {
    [SIGNING_CONTEXT, spec].concat()
}

fn decode(bytes: &[u8]) -> Result<(JobSpec, proto::batch::JobTerms), JobSignError> {
    proto::batch::JobTerms::decode(bytes).map_err(JobSignError::Malformed)
}

/// The subject public key (the uncompressed EC point) of a DER certificate.
fn public_key(cert: &[u8]) -> Result<Vec<u8>, JobSignError> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert)
        .map_err(|e| JobSignError::Certificate(format!("cannot parse it: {e}")))?;
    Ok(parsed.public_key().subject_public_key.data.to_vec())
}

fn check_key(key: &KeyPair, cert: &[u8]) -> Result<(), JobSignError> {
    if key.algorithm() != &PKCS_ECDSA_P256_SHA256 {
        return Err(JobSignError::KeyAlgorithm);
    }
    if key.public_key_raw() != public_key(cert)? {
        return Err(JobSignError::KeyMismatch);
    }
    Ok(())
}

fn cert_refusal(e: rustls::Error) -> JobSignError {
    let why = match e {
        rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        ) => "it was not issued by this cluster's CA".to_string(),
        rustls::Error::InvalidCertificate(CertificateError::Revoked) => {
            "it has been revoked".to_string()
        }
        rustls::Error::InvalidCertificate(ce) => crate::explain::explain_certificate_error(&ce),
        other => other.to_string(),
    };
    JobSignError::Certificate(why)
}

#[cfg(test)]
mod tests;
