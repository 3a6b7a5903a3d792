//! A throwaway PKI for tests. [`TestPki`] creates a cluster CA in a temporary directory
//! (removed on drop) and issues real certificates on demand, including expired,
//! not-yet-valid and revoked ones, so every crate's tests can run real mutual TLS
//! without fixtures checked into the tree.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::ca::Ca;
use crate::config::TlsPaths;
use crate::error::CertError;
use crate::role::Role;
use crate::stream::{acceptor, connector};

/// A cluster CA in a temporary directory, issuing certificates into it on demand.
///
/// ```
/// use certs::{Role, testing::TestPki};
/// let pki = TestPki::new();
/// let node = pki.tls_paths(Role::Node, "n1");
/// assert!(certs::server_config(&node).is_ok());
/// let alice = pki.tls_paths(Role::User, "alice");
/// assert!(certs::client_config(&alice).is_ok());
/// ```
#[derive(Debug)]
pub struct TestPki {
    dir: tempfile::TempDir,
    ca: Ca,
    /// Serialises issuance and revocation, so tests sharing one `TestPki` across threads
    /// never pair one thread's key with another's certificate or lose a CRL update.
    lock: Mutex<()>,
}

impl TestPki {
    /// Creates a CA for cluster "test".
    ///
    /// # Panics
    /// When the temporary directory or the CA cannot be created; this is test support,
    /// use [`TestPki::try_new`] to handle the error.
    pub fn new() -> Self {
        Self::try_new().unwrap_or_else(|e| panic!("cannot create test PKI: {e}"))
    }

    /// Creates a CA for cluster "test", returning errors.
    pub fn try_new() -> Result<Self, CertError> {
        Self::with_cluster("test")
    }

    /// Creates a CA for the named cluster, returning errors.
    pub fn with_cluster(cluster: &str) -> Result<Self, CertError> {
        let dir = tempfile::Builder::new()
            .prefix("rexec-pki-")
            .tempdir()
            .map_err(|source| CertError::Write {
                path: std::env::temp_dir(),
                source,
            })?;
        let ca = Ca::init(&dir.path().join("ca"), cluster, false)?;
        Ok(TestPki {
            dir,
            ca,
            lock: Mutex::new(()),
        })
    }

    /// The CA.
    pub fn ca(&self) -> &Ca {
        &self.ca
    }

    /// The temporary directory holding everything.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Where issued certificates go.
    pub fn issued_dir(&self) -> PathBuf {
        self.dir.path().join("issued")
    }

    /// TLS paths for `role` `name`, issuing a one-day certificate the first time.
    ///
    /// # Panics
    /// When issuance fails (for example an invalid name); use [`TestPki::try_tls_paths`].
    pub fn tls_paths(&self, role: Role, name: &str) -> TlsPaths {
        self.try_tls_paths(role, name)
            .unwrap_or_else(|e| panic!("cannot issue test certificate for {role} {name}: {e}"))
    }

    /// TLS paths for `role` `name`, issuing a one-day certificate the first time.
    pub fn try_tls_paths(&self, role: Role, name: &str) -> Result<TlsPaths, CertError> {
        let paths = TlsPaths::in_dirs(self.ca.dir(), &self.issued_dir(), role, name);
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        if !paths.cert.exists() || !paths.key.exists() {
            self.ca.issue(role, name, &[], 1, &self.issued_dir())?;
        }
        Ok(paths)
    }

    /// Issues a certificate for `role` `name` valid only between the two instants, under
    /// its own file names (`ROLE-NAME-TAG`), and returns its TLS paths.
    pub fn tls_paths_valid_between(
        &self,
        role: Role,
        name: &str,
        not_before: SystemTime,
        not_after: SystemTime,
        tag: &str,
    ) -> Result<TlsPaths, CertError> {
        let stem = format!("{role}-{name}-{tag}");
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let issued = self.ca.issue_between(
            role,
            name,
            &[],
            not_before,
            not_after,
            &self.issued_dir(),
            &stem,
        )?;
        Ok(TlsPaths {
            ca: self.ca.ca_cert_path(),
            cert: issued.cert,
            key: issued.key,
            crl: Some(self.ca.crl_path()),
        })
    }

    /// A certificate for `role` `name` that expired an hour ago (valid for the day before).
    pub fn expired(&self, role: Role, name: &str) -> Result<TlsPaths, CertError> {
        let now = SystemTime::now();
        self.tls_paths_valid_between(
            role,
            name,
            now - Duration::from_secs(25 * 3600),
            now - Duration::from_secs(3600),
            "expired",
        )
    }

    /// A certificate for `role` `name` whose validity starts in an hour.
    pub fn not_yet_valid(&self, role: Role, name: &str) -> Result<TlsPaths, CertError> {
        let now = SystemTime::now();
        self.tls_paths_valid_between(
            role,
            name,
            now + Duration::from_secs(3600),
            now + Duration::from_secs(25 * 3600),
            "future",
        )
    }

    /// Revokes the certificate [`TestPki::tls_paths`] issued for `role` `name` (issuing it
    /// first if needed) and returns its paths. Configs built afterwards refuse it.
    pub fn revoke(&self, role: Role, name: &str) -> Result<TlsPaths, CertError> {
        let paths = self.try_tls_paths(role, name)?;
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.ca.revoke(&paths.cert)?;
        Ok(paths)
    }

    /// A tokio-rustls acceptor for a server certificate `role` `name`.
    pub fn acceptor(&self, role: Role, name: &str) -> Result<TlsAcceptor, CertError> {
        acceptor(&self.try_tls_paths(role, name)?)
    }

    /// A tokio-rustls connector for a client certificate `role` `name`.
    pub fn connector(&self, role: Role, name: &str) -> Result<TlsConnector, CertError> {
        connector(&self.try_tls_paths(role, name)?)
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}
