//! Files on disk. Reading certificates, keys and CRLs from PEM with errors that name the
//! file and say what to do; refusing private keys that group or others can read; and
//! writing files atomically (temporary file, fsync, rename) with the right mode from the
//! first byte, so a key is never briefly world-readable and a crash never leaves half a
//! certificate behind.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer};

use crate::error::CertError;

/// Mode for private keys.
pub(crate) const KEY_MODE: u32 = 0o600;
/// Mode for certificates and CRLs (public data).
pub(crate) const PUBLIC_MODE: u32 = 0o644;

/// Reads a whole file, mapping "not found" and other I/O errors to clear errors.
pub(crate) fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, CertError> {
    fs::read(path).map_err(|source| read_error(path, what, source))
}

fn read_error(path: &Path, what: &'static str, source: std::io::Error) -> CertError {
    match source.kind() {
        ErrorKind::NotFound => CertError::Missing {
            what,
            path: path.to_path_buf(),
            hint: hint_for(what),
        },
        _ => CertError::Read {
            what,
            path: path.to_path_buf(),
            source,
        },
    }
}

/// Reads a private key file, checking the mode of the very file that is read:
/// one open, then read and `fstat` on that handle, so the file cannot be
/// swapped between the check and the read.
fn read_key(path: &Path, what: &'static str) -> Result<Vec<u8>, CertError> {
    let mut file = fs::File::open(path).map_err(|e| read_error(path, what, e))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| read_error(path, what, e))?;
    let meta = file.metadata().map_err(|e| read_error(path, what, e))?;
    check_mode(path, meta.permissions().mode())?;
    Ok(bytes)
}

fn hint_for(what: &str) -> String {
    match what {
        "CA certificate" | "CA private key" => {
            "; create a CA with `rexec-certs init --dir DIR --cluster NAME`".to_string()
        }
        "certificate" | "private key" => "; issue one with `rexec-certs issue`".to_string(),
        "revocation list" => "; the CA directory gets one from `rexec-certs init`".to_string(),
        _ => String::new(),
    }
}

/// Loads every certificate in a PEM file (at least one).
pub(crate) fn load_certs(
    path: &Path,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let bytes = read(path, what)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| malformed(path, what, e.to_string()))?;
    if certs.is_empty() {
        return Err(malformed(
            path,
            what,
            "no CERTIFICATE PEM block".to_string(),
        ));
    }
    Ok(certs)
}

/// Loads a private key, refusing it when group or others may read the file.
pub(crate) fn load_key(
    path: &Path,
    what: &'static str,
) -> Result<PrivateKeyDer<'static>, CertError> {
    let bytes = read_key(path, what)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| malformed(path, what, e.to_string()))
}

/// Loads the PEM text of a private key (for rcgen), with the same permission check.
pub(crate) fn load_key_pem(path: &Path, what: &'static str) -> Result<String, CertError> {
    let bytes = read_key(path, what)?;
    String::from_utf8(bytes).map_err(|_| malformed(path, what, "not PEM text".to_string()))
}

/// Refuses a key file whose mode gives group or others any access.
pub fn check_key_mode(path: &Path) -> Result<(), CertError> {
    let meta = fs::metadata(path).map_err(|source| CertError::Read {
        what: "private key",
        path: path.to_path_buf(),
        source,
    })?;
    check_mode(path, meta.permissions().mode())
}

fn check_mode(path: &Path, mode: u32) -> Result<(), CertError> {
    let mode = mode & 0o7777;
    if mode & 0o077 != 0 {
        return Err(CertError::KeyPermissions {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// Loads every CRL in a PEM file (an empty file is a valid, empty list).
pub(crate) fn load_crls(
    path: &Path,
) -> Result<Vec<CertificateRevocationListDer<'static>>, CertError> {
    let bytes = read(path, "revocation list")?;
    CertificateRevocationListDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| malformed(path, "revocation list", e.to_string()))
}

pub(crate) fn malformed(path: &Path, what: &'static str, detail: String) -> CertError {
    CertError::Malformed {
        what,
        path: path.to_path_buf(),
        detail,
    }
}

/// Writes `bytes` to `path` atomically with the given mode.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CertError> {
    let werr = |p: &Path| {
        let p = p.to_path_buf();
        move |source| CertError::Write { path: p, source }
    };
    let tmp = temp_name(path);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        // The umask may have cleared bits we want (0644); set the mode exactly.
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(werr(path)(e));
    }
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        werr(path)(e)
    })?;
    // The rename is durable only once the directory is: without this a power loss
    // could bring back the old file (an undone revocation, say).
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(werr(dir))
}

/// A temporary name beside `path`, unique per process and per call, so concurrent
/// writers never share one.
fn temp_name(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp{}.{n}", std::process::id()));
    path.with_file_name(name)
}

/// Takes an exclusive lock on `path` (created 0600 if missing), held until the returned
/// file is dropped. `flock` excludes other processes and other open descriptions in this
/// one alike, so read-modify-write cycles on shared files do not lose updates.
pub(crate) fn lock_exclusive(path: &Path) -> Result<fs::File, CertError> {
    let werr = |source| CertError::Write {
        path: path.to_path_buf(),
        source,
    };
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(werr)?;
    file.lock().map_err(werr)?;
    Ok(file)
}

/// Creates a directory (and parents) if needed.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), CertError> {
    fs::create_dir_all(dir).map_err(|source| CertError::Write {
        path: dir.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_sets_mode_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k.key");
        write_atomic(&p, b"one", KEY_MODE).unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        write_atomic(&p, b"two", PUBLIC_MODE).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }

    #[test]
    fn key_mode_check_names_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k.key");
        write_atomic(&p, b"x", 0o640).unwrap();
        let msg = check_key_mode(&p).unwrap_err().to_string();
        assert!(msg.contains("chmod 600"), "{msg}");
        assert!(msg.contains("0640"), "{msg}");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o400)).unwrap();
        check_key_mode(&p).unwrap();
    }

    #[test]
    fn key_loaders_refuse_an_open_key_and_report_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k.key");
        write_atomic(&p, b"-----BEGIN PRIVATE KEY-----\n", 0o644).unwrap();
        let err = load_key(&p, "private key").unwrap_err();
        assert!(
            matches!(err, CertError::KeyPermissions { mode: 0o644, .. }),
            "{err}"
        );
        let err = load_key_pem(&p, "CA private key").unwrap_err();
        assert!(matches!(err, CertError::KeyPermissions { .. }), "{err}");
        let gone = dir.path().join("gone.key");
        let err = load_key(&gone, "private key").unwrap_err();
        assert!(matches!(err, CertError::Missing { .. }), "{err}");
    }

    #[test]
    fn missing_and_malformed_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nope.pem");
        let msg = load_certs(&p, "certificate").unwrap_err().to_string();
        assert!(
            msg.contains("does not exist") && msg.contains("nope.pem"),
            "{msg}"
        );
        fs::write(&p, "hello").unwrap();
        let err = load_certs(&p, "certificate").unwrap_err();
        assert!(matches!(err, CertError::Malformed { .. }), "{err}");
    }
}
