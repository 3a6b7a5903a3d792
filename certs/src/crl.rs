//! Revocation. The CA directory keeps `crl.state`, a small text file with the CRL number
//! and one line per revoked certificate (`revoked SERIAL_HEX UNIX_TIME LABEL`); every
//! change re-signs `crl.pem` from it with a higher CRL number. Servers load `crl.pem`
//! into their client-certificate verifier, so a revoked certificate fails the handshake.
//! Every change holds an exclusive lock on `crl.lock` in the CA directory, so concurrent
//! `rexec-certs revoke` runs (in one process or several) never lose an entry.
//! A configuration is immutable: a server picks up a new CRL when it rebuilds its
//! `ServerConfig` (at start, or on reload).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{CertificateRevocationListParams, KeyIdMethod, RevokedCertParams, SerialNumber};

use crate::ca::{BACKDATE, Ca, lock_dir};
use crate::error::CertError;
use crate::files::{self, PUBLIC_MODE};
use crate::inspect::{CertInfo, hex, unix_seconds};

/// File name of the revocation state inside a CA directory.
pub const CRL_STATE_FILE: &str = "crl.state";
/// How far ahead each CRL's `nextUpdate` is set, in days. Verifiers here do not enforce
/// it (rustls only does when asked), so an old CRL keeps working until replaced.
pub const CRL_DAYS: u64 = 365;

/// Latest revocation time a state file may hold: 9999-12-31T23:59:59Z, the end of
/// what a CRL's time fields can carry.
const MAX_TIME: i64 = 253_402_300_799;

/// One revoked certificate as kept in `crl.state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevokedEntry {
    /// Serial number bytes as encoded in the certificate.
    pub serial: Vec<u8>,
    /// When it was revoked, seconds since the Unix epoch.
    pub time: i64,
    /// Who it was issued to (`ROLE:NAME`), for people reading the file.
    pub label: String,
}

/// The CA's revocation state: the last CRL number and the revoked certificates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrlState {
    /// Number of the last CRL signed.
    pub number: u64,
    /// Revoked certificates, oldest first.
    pub revoked: Vec<RevokedEntry>,
}

impl CrlState {
    /// Reads the state file; a missing file is an empty state.
    pub fn load(path: &Path) -> Result<Self, CertError> {
        let text = match files::read(path, "revocation state") {
            Ok(bytes) => String::from_utf8(bytes)
                .map_err(|_| files::malformed(path, "revocation state", "not UTF-8".into()))?,
            Err(CertError::Missing { .. }) => return Ok(CrlState::default()),
            Err(e) => return Err(e),
        };
        let mut state = CrlState::default();
        for (i, line) in text.lines().enumerate() {
            let bad = |d: &str| {
                files::malformed(path, "revocation state", format!("line {}: {d}", i + 1))
            };
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                [] => {}
                [w, ..] if w.starts_with('#') => {}
                ["number", n] => {
                    state.number = n
                        .parse()
                        .ok()
                        .filter(|&n| n < u64::MAX)
                        .ok_or_else(|| bad("bad CRL number"))?
                }
                ["revoked", serial, time, label @ ..] => state.revoked.push(RevokedEntry {
                    serial: unhex(serial).ok_or_else(|| bad("bad serial"))?,
                    time: time
                        .parse()
                        .ok()
                        .filter(|t| (0..=MAX_TIME).contains(t))
                        .ok_or_else(|| bad("bad time (seconds since 1970, before year 10000)"))?,
                    label: label.join(" "),
                }),
                _ => return Err(bad("expected `number N` or `revoked SERIAL TIME LABEL`")),
            }
        }
        Ok(state)
    }

    /// Writes the state file atomically.
    pub fn save(&self, path: &Path) -> Result<(), CertError> {
        let mut text =
            String::from("# rexec-certs revocation state, maintained by `rexec-certs revoke`\n");
        let _ = writeln!(text, "number {}", self.number);
        for r in &self.revoked {
            let _ = writeln!(text, "revoked {} {} {}", hex(&r.serial), r.time, r.label);
        }
        files::write_atomic(path, text.as_bytes(), PUBLIC_MODE)
    }

    /// Whether a serial is listed.
    pub fn contains(&self, serial: &[u8]) -> bool {
        self.revoked.iter().any(|r| r.serial == serial)
    }
}

impl Ca {
    /// Path of the revocation state file.
    pub fn crl_state_path(&self) -> PathBuf {
        self.dir.join(CRL_STATE_FILE)
    }

    /// Revokes the certificate in `cert` (which this CA must have issued) and re-signs the
    /// CRL. Revoking a certificate twice is harmless. Returns the CRL path.
    pub fn revoke(&self, cert: &Path) -> Result<PathBuf, CertError> {
        let info = CertInfo::load(cert)?;
        if info.issuer != self.info.subject {
            return Err(CertError::WrongCa {
                path: cert.to_path_buf(),
                ca: self.ca_cert_path(),
            });
        }
        if info.is_ca {
            return Err(CertError::Unusable {
                path: cert.to_path_buf(),
                reason:
                    "the CA cannot revoke itself; create a new CA with `rexec-certs init --force`"
                        .to_string(),
            });
        }
        let _lock = self.lock_crl()?;
        let mut state = CrlState::load(&self.crl_state_path())?;
        if !state.contains(&info.serial) {
            let label = info
                .identity
                .as_ref()
                .map(|id| format!("{}:{}", id.role, id.name))
                .unwrap_or_else(|| "-".to_string());
            state.revoked.push(RevokedEntry {
                serial: info.serial.clone(),
                time: unix_seconds(SystemTime::now()),
                label,
            });
        }
        self.sign_crl(state)
    }

    /// Re-signs the CRL from the current state with a new number and a fresh
    /// `nextUpdate`. Returns the CRL path.
    pub fn refresh_crl(&self) -> Result<PathBuf, CertError> {
        let _lock = self.lock_crl()?;
        let state = CrlState::load(&self.crl_state_path())?;
        self.sign_crl(state)
    }

    /// The current revocation state.
    pub fn crl_state(&self) -> Result<CrlState, CertError> {
        CrlState::load(&self.crl_state_path())
    }

    /// Starts an empty revocation list (used by [`Ca::init`], which holds the lock).
    pub(crate) fn reset_crl_locked(&self) -> Result<PathBuf, CertError> {
        self.sign_crl(CrlState::default())
    }

    /// Holds the revocation state for one read-modify-write cycle, and checks that the
    /// CA on disk is still the one loaded: an `init --force` that replaced it meanwhile
    /// must not get a list signed by the old key.
    fn lock_crl(&self) -> Result<std::fs::File, CertError> {
        let lock = lock_dir(&self.dir)?;
        let on_disk = CertInfo::load(&self.ca_cert_path())?;
        if on_disk.fingerprint != self.info.fingerprint {
            return Err(CertError::Unusable {
                path: self.ca_cert_path(),
                reason: "the CA was replaced (init --force) while this command ran; run it again"
                    .to_string(),
            });
        }
        Ok(lock)
    }

    fn sign_crl(&self, mut state: CrlState) -> Result<PathBuf, CertError> {
        state.number += 1;
        let now = SystemTime::now();
        let revoked_certs = state
            .revoked
            .iter()
            .map(|r| RevokedCertParams {
                serial_number: SerialNumber::from_slice(&r.serial),
                revocation_time: (UNIX_EPOCH + Duration::from_secs(r.time.max(0) as u64)).into(),
                reason_code: None,
                invalidity_date: None,
            })
            .collect();
        let params = CertificateRevocationListParams {
            this_update: (now - BACKDATE).into(),
            next_update: (now + Duration::from_secs(CRL_DAYS * 86_400)).into(),
            crl_number: SerialNumber::from(state.number),
            issuing_distribution_point: None,
            revoked_certs,
            key_identifier_method: KeyIdMethod::Sha256,
        };
        let crl = params
            .signed_by(&self.issuer)
            .map_err(|source| CertError::Generate {
                what: "revocation list",
                source,
            })?;
        let pem = crl.pem().map_err(|source| CertError::Generate {
            what: "revocation list",
            source,
        })?;
        // State first: if we crash between the two writes, the next revoke re-signs.
        state.save(&self.crl_state_path())?;
        let path = self.crl_path();
        files::write_atomic(&path, pem.as_bytes(), PUBLIC_MODE)?;
        Ok(path)
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.is_empty() || !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_rejects_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(CRL_STATE_FILE);
        assert_eq!(CrlState::load(&p).unwrap(), CrlState::default());
        let state = CrlState {
            number: 7,
            revoked: vec![RevokedEntry {
                serial: vec![0x00, 0x8f, 0x12],
                time: 1_700_000_000,
                label: "node:n3".into(),
            }],
        };
        state.save(&p).unwrap();
        assert_eq!(CrlState::load(&p).unwrap(), state);
        for (text, want) in [
            ("number 1\nrevoked 01 99999999999999 x\n", "bad time"),
            ("number 1\nrevoked 01 -5 x\n", "bad time"),
            ("number 18446744073709551615\n", "bad CRL number"),
        ] {
            std::fs::write(&p, text).unwrap();
            let msg = CrlState::load(&p).unwrap_err().to_string();
            assert!(msg.contains(want), "{text:?}: {msg}");
        }
        std::fs::write(&p, "number 1\nrevoked zz 1 x\n").unwrap();
        let msg = CrlState::load(&p).unwrap_err().to_string();
        assert!(
            msg.contains("line 2") && msg.contains("bad serial"),
            "{msg}"
        );
    }

    #[test]
    fn unhex_is_strict() {
        assert_eq!(unhex("00ff"), Some(vec![0, 255]));
        for bad in ["", "0", "0g", "é0"] {
            assert_eq!(unhex(bad), None, "{bad}");
        }
    }
}
