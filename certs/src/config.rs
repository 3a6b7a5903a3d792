//! rustls configurations for mutual TLS 1.3. [`server_config`] and [`client_config`]
//! load a [`TlsPaths`] set, check the party's own certificate before any peer sees it
//! (exists, key private and matching, in its validity period, issued by the cluster CA,
//! not revoked, right purpose), and build configs with one explicit crypto provider
//! (ring), so nothing depends on a process-wide default. Session resumption is off on
//! both sides: every connection runs a full handshake and so a full certificate check,
//! which keeps revocation and expiry exact.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use rustls::client::Resumption;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{
    CertificateDer, CertificateRevocationListDer, PrivateKeyDer, ServerName, UnixTime,
};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{NoServerSessionStorage, WebPkiClientVerifier};
use rustls::{CertificateError, ClientConfig, CommonState, RootCertStore, ServerConfig};

use crate::error::CertError;
use crate::files;
use crate::identity::PeerIdentity;
use crate::inspect::check_validity_der;
use crate::names::check_dns;

/// Where a party's TLS material lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsPaths {
    /// The cluster CA certificate (PEM).
    pub ca: PathBuf,
    /// This party's certificate (PEM, the chain if any after it).
    pub cert: PathBuf,
    /// This party's private key (PEM, mode 0600 or stricter).
    pub key: PathBuf,
    /// The CA's revocation list (PEM); `None` disables revocation checks.
    pub crl: Option<PathBuf>,
}

impl TlsPaths {
    /// The usual layout: `ca.pem` and `crl.pem` in `ca_dir`, `ROLE-NAME.pem` and
    /// `ROLE-NAME.key` in `cert_dir` (what `rexec-certs issue` writes).
    pub fn in_dirs(ca_dir: &Path, cert_dir: &Path, role: crate::Role, name: &str) -> Self {
        TlsPaths {
            ca: ca_dir.join(crate::ca::CA_CERT_FILE),
            cert: cert_dir.join(format!("{role}-{name}.pem")),
            key: cert_dir.join(format!("{role}-{name}.key")),
            crl: Some(ca_dir.join(crate::ca::CRL_FILE)),
        }
    }

    /// A daemon's paths from its settings, each a flag's value already chosen over
    /// the config file's: the CA, certificate and key are required, the CRL is not.
    /// The error names the first one missing as an admin sets it, e.g.
    /// `"certificate (--cert)"`.
    ///
    /// ```
    /// use certs::TlsPaths;
    /// let p = |s: &str| Some(std::path::PathBuf::from(s));
    /// assert!(TlsPaths::from_settings(p("ca.pem"), p("d.pem"), p("d.key"), None).is_ok());
    /// let e = TlsPaths::from_settings(p("ca.pem"), None, p("d.key"), None);
    /// assert_eq!(e, Err("certificate (--cert)"));
    /// ```
    pub fn from_settings(
        ca: Option<PathBuf>,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        crl: Option<PathBuf>,
    ) -> Result<TlsPaths, &'static str> {
        Ok(TlsPaths {
            ca: ca.ok_or("CA certificate (--ca)")?,
            cert: cert.ok_or("certificate (--cert)")?,
            key: key.ok_or("private key (--key)")?,
            crl,
        })
    }
}

/// The one crypto provider used for every configuration: ring, offering only
/// TLS 1.3 suites, AES-128-GCM first.
///
/// AES-128-GCM is as safe as AES-256-GCM for this use and about a third
/// cheaper per byte, which matters when a job's output streams at gigabytes a
/// second through the node's and the client's TLS on shared CPUs.
///
/// ```
/// let provider = certs::crypto_provider();
/// assert_eq!(
///     provider.cipher_suites[0].suite(),
///     rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
/// );
/// ```
pub fn crypto_provider() -> Arc<CryptoProvider> {
    use rustls::crypto::ring::cipher_suite;
    Arc::new(CryptoProvider {
        cipher_suites: vec![
            cipher_suite::TLS13_AES_128_GCM_SHA256,
            cipher_suite::TLS13_AES_256_GCM_SHA384,
            cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
        ],
        ..rustls::crypto::ring::default_provider()
    })
}

struct Material {
    roots: Arc<RootCertStore>,
    crls: Vec<CertificateRevocationListDer<'static>>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    identity: PeerIdentity,
}

fn load(paths: &TlsPaths) -> Result<Material, CertError> {
    let now = SystemTime::now();
    let mut roots = RootCertStore::empty();
    for der in files::load_certs(&paths.ca, "CA certificate")? {
        check_validity_der(&der, &paths.ca, now)?;
        roots
            .add(der)
            .map_err(|e| files::malformed(&paths.ca, "CA certificate", e.to_string()))?;
    }
    let crls = match &paths.crl {
        Some(p) => files::load_crls(p)?,
        None => Vec::new(),
    };
    let chain = files::load_certs(&paths.cert, "certificate")?;
    check_validity_der(&chain[0], &paths.cert, now)?;
    let key = files::load_key(&paths.key, "private key")?;
    let identity = PeerIdentity::from_der(&chain[0], &paths.cert.display().to_string())?;
    Ok(Material {
        roots: Arc::new(roots),
        crls,
        chain,
        key,
        identity,
    })
}

fn crl_error(paths: &TlsPaths, e: impl std::fmt::Display) -> CertError {
    CertError::Crl {
        path: paths.crl.clone().unwrap_or_default(),
        detail: e.to_string(),
    }
}

fn client_verifier(
    m: &Material,
    provider: &Arc<CryptoProvider>,
    paths: &TlsPaths,
) -> Result<Arc<dyn ClientCertVerifier>, CertError> {
    WebPkiClientVerifier::builder_with_provider(m.roots.clone(), provider.clone())
        .with_crls(m.crls.clone())
        .only_check_end_entity_revocation()
        .build()
        .map_err(|e| crl_error(paths, e))
}

fn server_verifier(
    m: &Material,
    provider: &Arc<CryptoProvider>,
    paths: &TlsPaths,
) -> Result<Arc<WebPkiServerVerifier>, CertError> {
    WebPkiServerVerifier::builder_with_provider(m.roots.clone(), provider.clone())
        .with_crls(m.crls.clone())
        .only_check_end_entity_revocation()
        .build()
        .map_err(|e| crl_error(paths, e))
}

/// Builds the configuration of a server (node or service) that requires a client
/// certificate from the cluster CA, not revoked, on every connection.
pub fn server_config(paths: &TlsPaths) -> Result<Arc<ServerConfig>, CertError> {
    let provider = crypto_provider();
    let m = load(paths)?;
    if !m.identity.role.is_server() {
        return Err(CertError::Unusable {
            path: paths.cert.clone(),
            reason: format!(
                "a {} certificate cannot serve; servers use node or service certificates",
                m.identity.role
            ),
        });
    }
    let name = check_dns(&m.identity.name).map_err(|reason| CertError::Unusable {
        path: paths.cert.clone(),
        reason,
    })?;
    server_verifier(&m, &provider, paths)?
        .verify_server_cert(
            &m.chain[0],
            &m.chain[1..],
            &ServerName::DnsName(name),
            &[],
            UnixTime::now(),
        )
        .map_err(|e| own_cert_error(paths, e))?;
    let verifier = client_verifier(&m, &provider, paths)?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|source| config_error(paths, source))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(m.chain, m.key)
        .map_err(|source| config_error(paths, source))?;
    config.session_storage = Arc::new(NoServerSessionStorage {});
    config.send_tls13_tickets = 0;
    Ok(Arc::new(config))
}

/// Builds the configuration of a client that presents its certificate and accepts only
/// servers certified by the cluster CA (and not revoked, when a CRL is given). Which
/// server it meant to reach is checked per connection by [`crate::connect`].
pub fn client_config(paths: &TlsPaths) -> Result<Arc<ClientConfig>, CertError> {
    let provider = crypto_provider();
    let m = load(paths)?;
    client_verifier(&m, &provider, paths)?
        .verify_client_cert(&m.chain[0], &m.chain[1..], UnixTime::now())
        .map_err(|e| own_cert_error(paths, e))?;
    let verifier = server_verifier(&m, &provider, paths)?;
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|source| config_error(paths, source))?
        .with_webpki_verifier(verifier)
        .with_client_auth_cert(m.chain, m.key)
        .map_err(|source| config_error(paths, source))?;
    config.resumption = Resumption::disabled();
    Ok(Arc::new(config))
}

/// The identity in the peer's verified certificate. Call it after the handshake; the
/// verifiers in [`server_config`] and [`client_config`] have by then checked the chain.
pub fn peer_identity(conn: &CommonState) -> Result<PeerIdentity, CertError> {
    let der = conn
        .peer_certificates()
        .and_then(|chain| chain.first())
        .ok_or(CertError::NoPeerCertificate)?;
    PeerIdentity::from_der(der, "peer certificate")
}

fn config_error(paths: &TlsPaths, source: rustls::Error) -> CertError {
    match source {
        rustls::Error::InconsistentKeys(_) => CertError::KeyMismatch {
            cert: paths.cert.clone(),
            key: paths.key.clone(),
        },
        source => CertError::Config {
            path: paths.cert.clone(),
            source,
        },
    }
}

/// Explains why our own certificate failed the check a peer would make.
fn own_cert_error(paths: &TlsPaths, e: rustls::Error) -> CertError {
    let path = paths.cert.clone();
    let rustls::Error::InvalidCertificate(ce) = e else {
        return CertError::Unusable {
            path,
            reason: e.to_string(),
        };
    };
    match ce {
        CertificateError::UnknownIssuer | CertificateError::BadSignature => CertError::WrongCa {
            path,
            ca: paths.ca.clone(),
        },
        CertificateError::Revoked => CertError::Revoked {
            path,
            crl: paths.crl.clone().unwrap_or_default(),
        },
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => CertError::Expired {
            path,
            not_after: "its end of validity".to_string(),
        },
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            CertError::NotYetValid {
                path,
                not_before: "its start of validity".to_string(),
            }
        }
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            CertError::Unusable {
                path,
                reason: "it lacks the TLS purpose (server or client) this use needs".to_string(),
            }
        }
        other => CertError::Unusable {
            path,
            reason: crate::explain::explain_certificate_error(&other),
        },
    }
}
