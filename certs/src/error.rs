//! Errors. [`CertError`] covers everything that can go wrong while issuing, loading or
//! checking certificates and while running a TLS handshake (the refusal of an
//! authenticated peer by an authorisation rule, [`crate::AuthError`], is
//! `identity`'s). Every message is one line that names the file or peer involved and,
//! where there is one, the command that fixes it.

use std::path::PathBuf;

/// Anything that can go wrong in the cluster PKI or a TLS handshake.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertError {
    /// A file we need does not exist.
    #[error("{what} {path} does not exist{hint}")]
    Missing {
        /// What the file was supposed to hold ("CA certificate", "private key", ...).
        what: &'static str,
        /// The path that was looked up.
        path: PathBuf,
        /// A hint on how to create it, starting with "; " (or empty).
        hint: String,
    },
    /// A file exists but could not be read.
    #[error("cannot read {what} {path}: {source}")]
    Read {
        /// What the file was supposed to hold.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file does not hold what it should (no PEM block, bad DER, bad state line).
    #[error("{path} is not a valid {what}: {detail}")]
    Malformed {
        /// What the file was supposed to hold.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// A private key is readable by group or others.
    #[error(
        "private key {path} is readable by group or others (mode {mode:04o}); fix it with `chmod 600 {path}`"
    )]
    KeyPermissions {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A private key does not belong to the certificate it was paired with.
    #[error(
        "private key {key} does not match certificate {cert}; issue a new pair with `rexec-certs issue`"
    )]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// A certificate's validity period is over.
    #[error("certificate {path} expired on {not_after}; issue a new one with `rexec-certs issue`")]
    Expired {
        /// The certificate file.
        path: PathBuf,
        /// Its end of validity, human readable.
        not_after: String,
    },
    /// A certificate's validity period has not started yet.
    #[error("certificate {path} is not valid before {not_before}; check this machine's clock")]
    NotYetValid {
        /// The certificate file.
        path: PathBuf,
        /// Its start of validity, human readable.
        not_before: String,
    },
    /// A certificate was not signed by the cluster CA in use.
    #[error("certificate {path} was not issued by the cluster CA {ca}; issue it from that CA")]
    WrongCa {
        /// The certificate file.
        path: PathBuf,
        /// The CA certificate it was checked against.
        ca: PathBuf,
    },
    /// A certificate appears on the CA's revocation list.
    #[error("certificate {path} has been revoked (listed in {crl}); issue a new one")]
    Revoked {
        /// The certificate file.
        path: PathBuf,
        /// The CRL that lists it.
        crl: PathBuf,
    },
    /// A certificate cannot be used for what it was loaded for (for example a user
    /// certificate given to a server).
    #[error("certificate {path} cannot be used here: {reason}")]
    Unusable {
        /// The certificate file.
        path: PathBuf,
        /// Why not.
        reason: String,
    },
    /// A name (node, user, service, admin or cluster) is not acceptable.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// The rule it breaks.
        reason: String,
    },
    /// A subject alternative name given with `--san` is not acceptable.
    #[error("invalid --san {san:?}: {reason}")]
    InvalidSan {
        /// The SAN as given.
        san: String,
        /// The rule it breaks.
        reason: String,
    },
    /// A requested validity period is not acceptable.
    #[error("invalid validity: {0}")]
    InvalidValidity(String),
    /// A file would be overwritten without permission.
    #[error("{path} already exists; pass --force to replace it{consequence}")]
    AlreadyExists {
        /// The existing file.
        path: PathBuf,
        /// What replacing it means, starting with " (" (or empty).
        consequence: String,
    },
    /// A certificate carries no valid `rexec:ROLE:NAME` identity.
    #[error("certificate {subject} carries no valid rexec identity: {detail}")]
    NoIdentity {
        /// Where the certificate came from (a path or "peer certificate").
        subject: String,
        /// What is wrong.
        detail: String,
    },
    /// Certificate or CRL generation failed inside rcgen.
    #[error("cannot generate {what}: {source}")]
    Generate {
        /// What was being generated.
        what: &'static str,
        /// The rcgen error.
        source: rcgen::Error,
    },
    /// rustls refused to build a configuration.
    #[error("cannot build TLS configuration from {path}: {source}")]
    Config {
        /// The file that caused it.
        path: PathBuf,
        /// The rustls error.
        source: rustls::Error,
    },
    /// The CRL could not be loaded into the verifier.
    #[error("cannot use revocation list {path}: {detail}")]
    Crl {
        /// The CRL file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// A TLS handshake failed.
    #[error("TLS handshake with {peer} failed: {detail}")]
    Handshake {
        /// The remote address.
        peer: String,
        /// What went wrong, as explained as we can.
        detail: String,
    },
    /// A TLS handshake did not finish in time.
    #[error("TLS handshake with {peer} did not finish within {seconds} s")]
    HandshakeTimeout {
        /// The remote address.
        peer: String,
        /// The limit.
        seconds: u64,
    },
    /// The server presented a valid certificate, but for someone else.
    #[error("{peer} presented a certificate for {got}, but we dialled {expected}")]
    WrongPeer {
        /// The remote address.
        peer: String,
        /// Who we meant to reach ("node n3").
        expected: String,
        /// Who answered.
        got: String,
    },
    /// A connection has no verified peer certificate (handshake not finished, or the
    /// configuration did not ask for one).
    #[error("connection has no verified peer certificate")]
    NoPeerCertificate,
}
