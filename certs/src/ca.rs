//! The cluster CA: creating it, loading it, and issuing certificates from it. A CA
//! directory holds `ca.pem` (the CA certificate every party trusts), `ca.key` (its
//! private key, mode 0600), `crl.pem` (the revocation list servers load), `crl.state`
//! (the revoked serials and CRL number, see the `crl` module) and `crl.lock` (which
//! serialises changes to the state). Issued certificates carry the identity URI SAN
//! `rexec:ROLE:NAME`, a DNS SAN equal to the name for nodes and services, and the TLS
//! purposes their role needs.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use crate::error::CertError;
use crate::files::{self, KEY_MODE, PUBLIC_MODE};
use crate::identity::PeerIdentity;
use crate::inspect::{CertInfo, format_time, unix_seconds};
use crate::names::{check_dns, check_plain_name};
use crate::role::Role;

/// File name of the CA certificate inside a CA directory.
pub const CA_CERT_FILE: &str = "ca.pem";
/// File name of the CA private key inside a CA directory.
pub const CA_KEY_FILE: &str = "ca.key";
/// File name of the revocation list inside a CA directory.
pub const CRL_FILE: &str = "crl.pem";
/// File name of the lock that serialises changes to the revocation state, across
/// processes (two admins revoking at once must both be listed).
pub const CRL_LOCK_FILE: &str = "crl.lock";
/// How long a new CA is valid, in days.
pub const CA_DAYS: u32 = 3650;
/// Longest validity accepted for an issued certificate, in days.
pub const MAX_DAYS: u32 = 3650;
/// How far back a new certificate's validity starts, to tolerate small clock skew.
pub const BACKDATE: Duration = Duration::from_secs(300);

const DAY: u64 = 86_400;

/// Paths of a freshly issued certificate and its private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The certificate (PEM, mode 0644).
    pub cert: PathBuf,
    /// The private key (PEM, mode 0600).
    pub key: PathBuf,
}

/// A loaded cluster CA, able to issue and revoke certificates.
pub struct Ca {
    pub(crate) dir: PathBuf,
    pub(crate) cluster: String,
    pub(crate) issuer: Issuer<'static, KeyPair>,
    pub(crate) info: CertInfo,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca")
            .field("dir", &self.dir)
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

impl Ca {
    /// Creates a new CA for `cluster` in `dir` (created if needed). Refuses to replace an
    /// existing CA unless `force` is set; replacing one also resets its revocation list.
    pub fn init(dir: &Path, cluster: &str, force: bool) -> Result<Ca, CertError> {
        check_plain_name(cluster)?;
        files::ensure_dir(dir)?;
        // Held until the new CA has its empty list, so a concurrent `revoke` either
        // finishes with the old CA first or sees the new one and refuses.
        let _lock = lock_dir(dir)?;
        let cert_path = dir.join(CA_CERT_FILE);
        let key_path = dir.join(CA_KEY_FILE);
        if !force {
            for p in [&key_path, &cert_path] {
                if p.exists() {
                    return Err(CertError::AlreadyExists {
                        path: p.clone(),
                        consequence: " (every certificate the old CA issued would stop working)"
                            .to_string(),
                    });
                }
            }
        }
        let key = KeyPair::generate().map_err(|source| CertError::Generate {
            what: "CA key",
            source,
        })?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "rexec");
        dn.push(DnType::OrganizationalUnitName, cluster);
        dn.push(DnType::CommonName, format!("rexec cluster CA {cluster}"));
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let now = SystemTime::now();
        params.not_before = (now - BACKDATE).into();
        params.not_after = (now + Duration::from_secs(u64::from(CA_DAYS) * DAY)).into();
        let cert = params
            .self_signed(&key)
            .map_err(|source| CertError::Generate {
                what: "CA certificate",
                source,
            })?;
        files::write_atomic(&key_path, key.serialize_pem().as_bytes(), KEY_MODE)?;
        files::write_atomic(&cert_path, cert.pem().as_bytes(), PUBLIC_MODE)?;
        let ca = Ca::load(dir)?;
        ca.reset_crl_locked()?;
        Ok(ca)
    }

    /// Loads the CA in `dir`, checking that its key is private and matches its certificate.
    pub fn load(dir: &Path) -> Result<Ca, CertError> {
        let cert_path = dir.join(CA_CERT_FILE);
        let key_path = dir.join(CA_KEY_FILE);
        let der = files::load_certs(&cert_path, "CA certificate")?.remove(0);
        let key_pem = files::load_key_pem(&key_path, "CA private key")?;
        let key = KeyPair::from_pem(&key_pem)
            .map_err(|e| files::malformed(&key_path, "CA private key", e.to_string()))?;
        let info = CertInfo::from_der(&der, &cert_path)?;
        if !info.is_ca {
            return Err(files::malformed(
                &cert_path,
                "CA certificate",
                "it is not a CA certificate".to_string(),
            ));
        }
        let (_, parsed) = x509_parser::parse_x509_certificate(&der)
            .map_err(|e| files::malformed(&cert_path, "CA certificate", e.to_string()))?;
        if parsed.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
            return Err(CertError::KeyMismatch {
                cert: cert_path,
                key: key_path,
            });
        }
        let cluster = parsed
            .subject()
            .iter_organizational_unit()
            .next()
            .and_then(|ou| ou.as_str().ok())
            .unwrap_or("")
            .to_string();
        let issuer = Issuer::from_ca_cert_der(&der, key)
            .map_err(|e| files::malformed(&cert_path, "CA certificate", e.to_string()))?;
        Ok(Ca {
            dir: dir.to_path_buf(),
            cluster,
            issuer,
            info,
        })
    }

    /// The cluster name this CA was created for.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The CA directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of the CA certificate (what every party trusts).
    pub fn ca_cert_path(&self) -> PathBuf {
        self.dir.join(CA_CERT_FILE)
    }

    /// Path of the current revocation list.
    pub fn crl_path(&self) -> PathBuf {
        self.dir.join(CRL_FILE)
    }

    /// Issues a certificate for `role` `name`, valid from a few minutes ago for `days`
    /// days, writing `ROLE-NAME.pem` and `ROLE-NAME.key` into `out_dir` (replacing them if
    /// present). `sans` adds DNS names or IP addresses; only node and service
    /// certificates may carry them. Each file is replaced atomically, but two issuers
    /// writing the same name into one directory at once may pair one's key with the
    /// other's certificate; serialise them (as [`crate::testing::TestPki`] does).
    pub fn issue(
        &self,
        role: Role,
        name: &str,
        sans: &[String],
        days: u32,
        out_dir: &Path,
    ) -> Result<Issued, CertError> {
        if days == 0 || days > MAX_DAYS {
            return Err(CertError::InvalidValidity(format!(
                "--days must be between 1 and {MAX_DAYS}, not {days}"
            )));
        }
        let now = SystemTime::now();
        let not_after = now + Duration::from_secs(u64::from(days) * DAY);
        if unix_seconds(not_after) > self.info.not_after {
            let left = (self.info.not_after - unix_seconds(now)).max(0) / DAY as i64;
            return Err(CertError::InvalidValidity(format!(
                "the CA itself expires on {}; use --days {left} or less",
                format_time(self.info.not_after)
            )));
        }
        let stem = format!("{role}-{name}");
        self.issue_between(role, name, sans, now - BACKDATE, not_after, out_dir, &stem)
    }

    /// Issues a certificate with an explicit validity period into `out_dir/STEM.pem` and
    /// `out_dir/STEM.key`. Meant for tests of expired and not-yet-valid certificates and
    /// for special cases; [`Ca::issue`] is the normal path.
    #[allow(clippy::too_many_arguments)]
    pub fn issue_between(
        &self,
        role: Role,
        name: &str,
        sans: &[String],
        not_before: SystemTime,
        not_after: SystemTime,
        out_dir: &Path,
        stem: &str,
    ) -> Result<Issued, CertError> {
        let id = PeerIdentity::new(role, name)?;
        check_plain_name(stem)?;
        if not_after <= not_before {
            return Err(CertError::InvalidValidity(
                "the end of validity must come after its start".to_string(),
            ));
        }
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "rexec");
        dn.push(DnType::OrganizationalUnitName, role.as_str());
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        params.subject_alt_names = subject_alt_names(&id, sans)?;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = if role.is_server() {
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ]
        } else {
            vec![ExtendedKeyUsagePurpose::ClientAuth]
        };
        params.use_authority_key_identifier_extension = true;
        params.not_before = not_before.into();
        params.not_after = not_after.into();
        let key = KeyPair::generate().map_err(|source| CertError::Generate {
            what: "key",
            source,
        })?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|source| CertError::Generate {
                what: "certificate",
                source,
            })?;
        files::ensure_dir(out_dir)?;
        let issued = Issued {
            cert: out_dir.join(format!("{stem}.pem")),
            key: out_dir.join(format!("{stem}.key")),
        };
        files::write_atomic(&issued.key, key.serialize_pem().as_bytes(), KEY_MODE)?;
        files::write_atomic(&issued.cert, cert.pem().as_bytes(), PUBLIC_MODE)?;
        Ok(issued)
    }
}

/// Takes the CA directory's revocation lock (`crl.lock`: see `crl`'s module docs).
pub(crate) fn lock_dir(dir: &Path) -> Result<std::fs::File, CertError> {
    files::lock_exclusive(&dir.join(CRL_LOCK_FILE))
}

fn subject_alt_names(id: &PeerIdentity, extra: &[String]) -> Result<Vec<SanType>, CertError> {
    let ia5 = |s: &str| {
        s.to_string()
            .try_into()
            .map_err(|source| CertError::Generate {
                what: "subject alternative name",
                source,
            })
    };
    let mut sans = vec![SanType::URI(ia5(&id.to_uri())?)];
    if id.role.is_server() {
        sans.push(SanType::DnsName(ia5(&id.name)?));
    } else if !extra.is_empty() {
        return Err(CertError::InvalidSan {
            san: extra[0].clone(),
            reason: format!("{} certificates carry no extra names", id.role),
        });
    }
    for san in extra {
        let entry = if let Ok(ip) = san.parse() {
            SanType::IpAddress(ip)
        } else {
            let lower = san.to_ascii_lowercase();
            check_dns(&lower).map_err(|reason| CertError::InvalidSan {
                san: san.clone(),
                reason: format!("not an IP address nor a DNS name: {reason}"),
            })?;
            SanType::DnsName(ia5(&lower)?)
        };
        if !sans.contains(&entry) {
            sans.push(entry);
        }
    }
    Ok(sans)
}
