//! Looking inside a certificate without trusting it: role and name, SANs, validity,
//! serial, issuer, purposes and SHA-256 fingerprint. Used by `rexec-certs show`, by the
//! loaders to explain an expired or not-yet-valid certificate with its dates, and by
//! revocation to find a certificate's serial number.

use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256;
use x509_parser::extensions::GeneralName;
use x509_parser::time::ASN1Time;

use crate::error::CertError;
use crate::files;
use crate::identity::PeerIdentity;

/// What a certificate says about itself (unverified).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CertInfo {
    /// The rexec identity, if the certificate carries a valid one.
    pub identity: Option<PeerIdentity>,
    /// DNS SANs.
    pub dns: Vec<String>,
    /// IP address SANs.
    pub ips: Vec<IpAddr>,
    /// URI SANs (including the `rexec:` one).
    pub uris: Vec<String>,
    /// Subject distinguished name.
    pub subject: String,
    /// Issuer distinguished name.
    pub issuer: String,
    /// Serial number, big-endian bytes as encoded.
    pub serial: Vec<u8>,
    /// Start of validity, seconds since the Unix epoch.
    pub not_before: i64,
    /// End of validity, seconds since the Unix epoch.
    pub not_after: i64,
    /// Whether this is a CA certificate.
    pub is_ca: bool,
    /// Whether it may authenticate a TLS server.
    pub server_auth: bool,
    /// Whether it may authenticate a TLS client.
    pub client_auth: bool,
    /// SHA-256 of the DER encoding, lower-case hex pairs joined by ':'.
    pub fingerprint: String,
}

impl CertInfo {
    /// Parses a DER certificate. `source` names it in errors.
    pub fn from_der(der: &[u8], source: &Path) -> Result<Self, CertError> {
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| files::malformed(source, "certificate", e.to_string()))?;
        let mut info = CertInfo {
            identity: PeerIdentity::from_der(der, &source.display().to_string()).ok(),
            dns: Vec::new(),
            ips: Vec::new(),
            uris: Vec::new(),
            subject: cert.subject().to_string(),
            issuer: cert.issuer().to_string(),
            serial: cert.raw_serial().to_vec(),
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
            is_ca: cert.is_ca(),
            server_auth: false,
            client_auth: false,
            fingerprint: fingerprint(der),
        };
        if let Ok(Some(eku)) = cert.extended_key_usage() {
            info.server_auth = eku.value.server_auth || eku.value.any;
            info.client_auth = eku.value.client_auth || eku.value.any;
        }
        if let Ok(Some(sans)) = cert.subject_alternative_name() {
            for general in &sans.value.general_names {
                match general {
                    GeneralName::DNSName(d) => info.dns.push(d.to_string()),
                    GeneralName::URI(u) => info.uris.push(u.to_string()),
                    GeneralName::IPAddress(b) => {
                        if let Ok(a) = <[u8; 4]>::try_from(*b) {
                            info.ips.push(IpAddr::from(a));
                        } else if let Ok(a) = <[u8; 16]>::try_from(*b) {
                            info.ips.push(IpAddr::from(a));
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(info)
    }

    /// Reads the first certificate of a PEM file.
    pub fn load(path: &Path) -> Result<Self, CertError> {
        let certs = files::load_certs(path, "certificate")?;
        CertInfo::from_der(&certs[0], path)
    }

    /// The serial number as lower-case hex.
    pub fn serial_hex(&self) -> String {
        hex(&self.serial)
    }

    /// Checks the validity period against `now`, explaining a failure with the dates.
    pub fn check_validity(&self, path: &Path, now: SystemTime) -> Result<(), CertError> {
        within(self.not_before, self.not_after, path, now)
    }
}

/// Checks that the DER certificate read from `path` is in its validity period at `now`:
/// what `CertInfo::from_der(der, path)?.check_validity(path, now)` says, errors
/// included, without the rest of [`CertInfo`]. The loaders call it on every start, and
/// skipping the names spares building x509-parser's table of OID names (about a third
/// of a millisecond of a client's start-up).
pub(crate) fn check_validity_der(
    der: &[u8],
    path: &Path,
    now: SystemTime,
) -> Result<(), CertError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| files::malformed(path, "certificate", e.to_string()))?;
    let validity = cert.validity();
    within(
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
        path,
        now,
    )
}

fn within(not_before: i64, not_after: i64, path: &Path, now: SystemTime) -> Result<(), CertError> {
    let now = unix_seconds(now);
    if now < not_before {
        return Err(CertError::NotYetValid {
            path: path.to_path_buf(),
            not_before: format_time(not_before),
        });
    }
    if now > not_after {
        return Err(CertError::Expired {
            path: path.to_path_buf(),
            not_after: format_time(not_after),
        });
    }
    Ok(())
}

impl fmt::Display for CertInfo {
    /// The multi-line report printed by `rexec-certs show`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (role, name) = match &self.identity {
            Some(id) => (id.role.to_string(), id.name.clone()),
            None if self.is_ca => ("CA".to_string(), self.subject.clone()),
            None => (
                "(none: not a rexec certificate)".to_string(),
                "-".to_string(),
            ),
        };
        let now = unix_seconds(SystemTime::now());
        let state = if now < self.not_before {
            "NOT YET VALID"
        } else if now > self.not_after {
            "EXPIRED"
        } else {
            "valid now"
        };
        let mut purposes = Vec::new();
        if self.server_auth {
            purposes.push("server");
        }
        if self.client_auth {
            purposes.push("client");
        }
        let mut sans: Vec<String> = self.dns.iter().map(|d| format!("DNS:{d}")).collect();
        sans.extend(self.ips.iter().map(|i| format!("IP:{i}")));
        sans.extend(self.uris.iter().map(|u| format!("URI:{u}")));
        writeln!(f, "role:        {role}")?;
        writeln!(f, "name:        {name}")?;
        writeln!(
            f,
            "SANs:        {}",
            if sans.is_empty() {
                "-".to_string()
            } else {
                sans.join(", ")
            }
        )?;
        writeln!(f, "not before:  {}", format_time(self.not_before))?;
        writeln!(f, "not after:   {} ({state})", format_time(self.not_after))?;
        writeln!(
            f,
            "purposes:    {}",
            if self.is_ca {
                "certificate authority".to_string()
            } else {
                purposes.join(", ")
            }
        )?;
        writeln!(f, "serial:      {}", self.serial_hex())?;
        writeln!(f, "subject:     {}", self.subject)?;
        writeln!(f, "issuer:      {}", self.issuer)?;
        write!(f, "fingerprint: SHA256:{}", self.fingerprint)
    }
}

/// SHA-256 of `der` as colon-separated hex, computed with the ring provider's hash.
pub fn fingerprint(der: &[u8]) -> String {
    let hash = TLS13_AES_128_GCM_SHA256
        .tls13()
        .map(|s| s.common.hash_provider.hash(der));
    match hash {
        Some(h) => h
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":"),
        None => String::new(),
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn unix_seconds(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

/// Formats seconds since the epoch as a UTC date and time.
pub(crate) fn format_time(secs: i64) -> String {
    match ASN1Time::from_timestamp(secs) {
        Ok(t) => t.to_string(),
        Err(_) => format!("{secs} s since 1970"),
    }
}

/// What a revocation list says (unverified): `rexec-certs show crl.pem`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CrlInfo {
    /// Issuer distinguished name.
    pub issuer: String,
    /// The CRL number, if present.
    pub number: Option<String>,
    /// When it was signed, seconds since the Unix epoch.
    pub this_update: i64,
    /// When a newer one is promised, seconds since the Unix epoch.
    pub next_update: Option<i64>,
    /// Revoked serials (hex) with their revocation times.
    pub revoked: Vec<(String, i64)>,
}

impl CrlInfo {
    /// Reads the first CRL of a PEM file.
    pub fn load(path: &Path) -> Result<Self, CertError> {
        let crls = files::load_crls(path)?;
        let der = crls.first().ok_or_else(|| {
            files::malformed(path, "revocation list", "no X509 CRL PEM block".to_string())
        })?;
        let (_, crl) = x509_parser::parse_x509_crl(der)
            .map_err(|e| files::malformed(path, "revocation list", e.to_string()))?;
        Ok(CrlInfo {
            issuer: crl.issuer().to_string(),
            number: crl.crl_number().map(|n| n.to_string()),
            this_update: crl.last_update().timestamp(),
            next_update: crl.next_update().map(|t| t.timestamp()),
            revoked: crl
                .iter_revoked_certificates()
                .map(|r| (hex(r.raw_serial()), r.revocation_date.timestamp()))
                .collect(),
        })
    }
}

impl fmt::Display for CrlInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "revocation list number {}",
            self.number.as_deref().unwrap_or("-")
        )?;
        writeln!(f, "issuer:      {}", self.issuer)?;
        writeln!(f, "signed:      {}", format_time(self.this_update))?;
        if let Some(next) = self.next_update {
            writeln!(f, "next update: {}", format_time(next))?;
        }
        write!(f, "revoked:     {}", self.revoked.len())?;
        for (serial, time) in &self.revoked {
            write!(f, "\n  {serial}  since {}", format_time(*time))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_sha256_in_colon_hex() {
        assert_eq!(
            fingerprint(b"").replace(':', ""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(fingerprint(b"abc").split(':').count(), 32);
    }

    #[test]
    fn times_and_validity() {
        assert_eq!(format_time(0), "Jan  1 00:00:00 1970 +00:00");
        let info = CertInfo {
            identity: None,
            dns: vec![],
            ips: vec![],
            uris: vec![],
            subject: String::new(),
            issuer: String::new(),
            serial: vec![1],
            not_before: 1_000,
            not_after: 2_000,
            is_ca: false,
            server_auth: false,
            client_auth: true,
            fingerprint: String::new(),
        };
        let at = |s| UNIX_EPOCH + std::time::Duration::from_secs(s);
        let p = Path::new("x.pem");
        assert!(info.check_validity(p, at(1_500)).is_ok());
        assert!(matches!(
            info.check_validity(p, at(999)),
            Err(CertError::NotYetValid { .. })
        ));
        assert!(matches!(
            info.check_validity(p, at(2_001)),
            Err(CertError::Expired { .. })
        ));
        assert!(info.to_string().contains("(none: not a rexec certificate)"));
    }

    /// The loaders' shortcut says what the full parse says, errors and dates included.
    #[test]
    fn the_der_validity_check_agrees_with_cert_info() {
        use crate::Role;
        let pki = crate::testing::TestPki::new();
        let now = SystemTime::now();
        let paths = [
            pki.tls_paths(Role::User, "ann"),
            pki.expired(Role::User, "old").unwrap(),
            pki.not_yet_valid(Role::User, "new").unwrap(),
        ];
        for tls in paths {
            let der = &files::load_certs(&tls.cert, "certificate").unwrap()[0];
            let full = CertInfo::from_der(der, &tls.cert)
                .unwrap()
                .check_validity(&tls.cert, now);
            let short = check_validity_der(der, &tls.cert, now);
            assert_eq!(format!("{short:?}"), format!("{full:?}"));
        }
        let p = Path::new("bad.pem");
        let full = CertInfo::from_der(b"not a certificate", p).map(|_| ());
        let short = check_validity_der(b"not a certificate", p, now);
        assert_eq!(format!("{short:?}"), format!("{full:?}"));
        assert!(short.is_err());
    }
}
