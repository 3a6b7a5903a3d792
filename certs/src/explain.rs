//! What a failed handshake means, in one line a user can act on: rustls' errors,
//! the alerts a peer sends, and certificate refusals put in the terms of this
//! cluster ("the peer's certificate was refused: it has been revoked"). Used by the
//! handshakes ([`crate::stream`]) and by the loaders that check a certificate
//! before any connection ([`crate::config`]).

use std::io;

use rustls::{AlertDescription, CertificateError};

use crate::error::CertError;

/// Builds a [`CertError::Handshake`] from an I/O error returned by tokio-rustls.
pub fn handshake_error(peer: &str, e: &io::Error) -> CertError {
    CertError::Handshake {
        peer: peer.to_string(),
        detail: explain_io(e),
    }
}

/// Explains an I/O error from a TLS stream, looking inside for a rustls error.
pub fn explain_io(e: &io::Error) -> String {
    if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        return explain(tls);
    }
    match e.kind() {
        io::ErrorKind::UnexpectedEof => "the connection closed during the handshake".to_string(),
        _ => e.to_string(),
    }
}

/// Explains any error whose chain holds a TLS failure (for example a frame error
/// wrapping the I/O error of a connection the peer refused); other errors print as
/// they are.
pub fn explain_error(e: &(dyn std::error::Error + 'static)) -> String {
    explain_tls_error(e).unwrap_or_else(|| e.to_string())
}

/// The explanation of the TLS failure in `e`'s chain, if it holds one (a refused
/// certificate, a handshake alert); `None` for any other error.
pub fn explain_tls_error(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(explain(tls));
        }
        if let Some(tls) = err
            .downcast_ref::<io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(explain(tls));
        }
        next = err.source();
    }
    None
}

/// Explains a rustls error in the terms of this cluster.
pub fn explain(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InvalidCertificate(ce) => explain_certificate_error(ce),
        rustls::Error::NoCertificatesPresented => {
            "the client presented no certificate; a cluster certificate is required".to_string()
        }
        rustls::Error::AlertReceived(alert) => match alert {
            AlertDescription::CertificateRequired => {
                "the server requires a client certificate".to_string()
            }
            AlertDescription::UnknownCA => {
                "the peer does not trust our certificate: it was not issued by the peer's cluster CA"
                    .to_string()
            }
            AlertDescription::DecryptError => {
                "the peer could not verify our certificate's signature: it was probably issued by another cluster CA"
                    .to_string()
            }
            AlertDescription::CertificateExpired => {
                "the peer refused our certificate: it has expired or is not yet valid".to_string()
            }
            AlertDescription::CertificateRevoked => {
                "the peer refused our certificate: it has been revoked".to_string()
            }
            AlertDescription::BadCertificate | AlertDescription::UnsupportedCertificate => {
                "the peer refused our certificate as unusable here".to_string()
            }
            other => format!("the peer ended the handshake with alert {other:?}"),
        },
        other => other.to_string(),
    }
}

/// Explains why a peer's certificate was refused.
pub fn explain_certificate_error(e: &CertificateError) -> String {
    let what = match e {
        CertificateError::UnknownIssuer | CertificateError::BadSignature => {
            "it was not issued by our cluster CA"
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => "it has expired",
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "it is not valid yet (check the clocks)"
        }
        CertificateError::Revoked => "it has been revoked",
        CertificateError::UnknownRevocationStatus => "its revocation status is unknown",
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            "it does not name the host we dialled"
        }
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "it is not valid for this use (a client-only certificate presented by a server?)"
        }
        CertificateError::BadEncoding => "it is malformed",
        // webpki's reasons arrive as `Other`, named only by their Debug text.
        CertificateError::Other(other) => match other.to_string().as_str() {
            "CaUsedAsEndEntity" => {
                "it is a CA certificate (self-signed?), not one the cluster CA issued to a peer"
            }
            "EndEntityUsedAsCa" => "its chain uses a peer's certificate as a CA",
            "UnsupportedSignatureAlgorithm" | "UnsupportedSignatureAlgorithmForPublicKey" => {
                "it is signed with an algorithm this cluster does not accept"
            }
            _ => "it is not a certificate this cluster accepts",
        },
        _ => "it is not a certificate this cluster accepts",
    };
    format!("the peer's certificate was refused: {what}")
}
