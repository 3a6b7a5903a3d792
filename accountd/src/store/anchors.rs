//! Signed chain heads ("anchors"), kept outside the database. At intervals
//! accountd signs the head of the hash chain (the last entry's id and hash,
//! and the time) with its service key and appends the result, one line, to
//! a file of its own. Anyone holding such lines can later check that the
//! ledger still has those hashes at those ids, which catches what the chain
//! alone cannot: every entry rewritten and every hash recomputed.
//!
//! A line: `anchor v1 ID HASH AT_US SIGNATURE CERT`, the hash, signature
//! (ECDSA P-256 SHA-256, ASN.1) and the signer's certificate (DER) in hex.
//! The signature covers `"rexec-ledger-anchor-v1\0"`, the id and time as 8
//! bytes big-endian, and the hash. A line is accepted only when its
//! certificate is a `service` certificate named `accountd` that chains to the
//! cluster CA, and the signature holds under its key.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use rcgen::{KeyPair, SigningKey};
use ring::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use proto::account::{AuditProblem, SignedHead};

use super::chain::{Hash, hex, unhex};
use super::rows::Rows;

const CONTEXT: &[u8] = b"rexec-ledger-anchor-v1\0";

/// Why an anchor cannot be made, read or trusted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnchorError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The key or certificate is unusable.
    #[error("{0}")]
    Key(String),
    /// A line is not an anchor.
    #[error("line {line} of the anchors is not an anchor: {why}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// The signature or certificate does not hold.
    #[error("the anchor of entry {id} is not signed by the cluster's accountd: {why}")]
    Forged {
        /// Entry id the anchor names.
        id: i64,
        /// What failed.
        why: String,
    },
}

/// One signed chain head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// Last entry id at signing.
    pub id: i64,
    /// Its chain hash.
    pub hash: Hash,
    /// When it was signed, UTC microseconds.
    pub at_us: i64,
    /// ECDSA signature (ASN.1).
    pub signature: Vec<u8>,
    /// The signer's certificate, DER.
    pub cert: Vec<u8>,
}

fn message(id: i64, hash: &Hash, at_us: i64) -> Vec<u8> {
    let mut m = CONTEXT.to_vec();
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&at_us.to_be_bytes());
    m.extend_from_slice(hash);
    m
}

fn public_key(cert: &[u8]) -> Result<Vec<u8>, String> {
    let (_, parsed) =
        x509_parser::parse_x509_certificate(cert).map_err(|e| format!("bad certificate: {e}"))?;
    Ok(parsed.public_key().subject_public_key.data.to_vec())
}

impl Anchor {
    /// The line written to the anchors file (without its newline).
    pub fn line(&self) -> String {
        let sig: String = self.signature.iter().map(|b| format!("{b:02x}")).collect();
        let cert: String = self.cert.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "anchor v1 {} {} {} {sig} {cert}",
            self.id,
            hex(&self.hash),
            self.at_us
        )
    }

    /// As sent by accountd's `Head` answer.
    pub fn to_signed_head(&self) -> SignedHead {
        SignedHead {
            id: self.id,
            hash: self.hash.to_vec(),
            at_us: self.at_us,
            signature: self.signature.clone(),
            cert: self.cert.clone(),
        }
    }

    /// From accountd's `Head` answer; `None` when the hash is not 32 bytes.
    pub fn from_signed_head(h: &SignedHead) -> Option<Anchor> {
        Some(Anchor {
            id: h.id,
            hash: Hash::try_from(h.hash.as_slice()).ok()?,
            at_us: h.at_us,
            signature: h.signature.clone(),
            cert: h.cert.clone(),
        })
    }

    /// Parses a line written by [`Anchor::line`] (`line_no` names it in errors).
    pub fn parse(text: &str, line_no: usize) -> Result<Anchor, AnchorError> {
        let bad = |why: &str| AnchorError::Malformed {
            line: line_no,
            why: why.into(),
        };
        let f: Vec<&str> = text.split_whitespace().collect();
        let [a, v, id, hash, at, sig, cert] = f.as_slice() else {
            return Err(bad("expected 7 fields"));
        };
        if (*a, *v) != ("anchor", "v1") {
            return Err(bad("it does not start with `anchor v1`"));
        }
        let hash = unhex(hash)
            .and_then(|h| Hash::try_from(h).ok())
            .ok_or_else(|| bad("bad hash"))?;
        Ok(Anchor {
            id: id.parse().map_err(|_| bad("bad entry id"))?,
            hash,
            at_us: at.parse().map_err(|_| bad("bad time"))?,
            signature: unhex(sig).ok_or_else(|| bad("bad signature"))?,
            cert: unhex(cert).ok_or_else(|| bad("bad certificate"))?,
        })
    }

    /// Checks the certificate against the cluster CA (a `service` certificate
    /// for `accountd`, valid now) and the signature under its key.
    pub fn verify(&self, ca: &Path) -> Result<(), AnchorError> {
        let forged = |why: String| AnchorError::Forged { id: self.id, why };
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(ca).map_err(|e| forged(e.to_string()))? {
            roots
                .add(c.map_err(|e| forged(e.to_string()))?)
                .map_err(|e| forged(e.to_string()))?;
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            roots.into(),
            certs::crypto_provider(),
        )
        .build()
        .map_err(|e| forged(e.to_string()))?;
        let name = ServerName::try_from("accountd").map_err(|e| forged(e.to_string()))?;
        let now = UnixTime::now();
        verifier
            .verify_server_cert(
                &CertificateDer::from(self.cert.as_slice()),
                &[],
                &name,
                &[],
                now,
            )
            .map_err(|e| forged(format!("its certificate is not accepted ({e})")))?;
        let id = certs::PeerIdentity::from_der(&self.cert, "anchor signer")
            .map_err(|e| forged(e.to_string()))?;
        if id.role != certs::Role::Service {
            return Err(forged(format!("it is signed by {id}, not a service")));
        }
        UnparsedPublicKey::new(
            &ECDSA_P256_SHA256_ASN1,
            public_key(&self.cert).map_err(forged)?,
        )
        .verify(&message(self.id, &self.hash, self.at_us), &self.signature)
        .map_err(|_| forged("the signature does not hold".into()))
    }
}

/// Reads every anchor of a file.
pub fn read(path: &Path) -> Result<Vec<Anchor>, AnchorError> {
    let text = std::fs::read_to_string(path).map_err(|source| AnchorError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| Anchor::parse(l, i + 1))
        .collect()
}

/// accountd's key and certificate, signing chain heads into a file.
pub struct AnchorSigner {
    key: KeyPair,
    cert: Vec<u8>,
    path: PathBuf,
}

impl AnchorSigner {
    /// Loads the service key and certificate; anchors go to `path`.
    pub fn load(key: &Path, cert: &Path, path: PathBuf) -> Result<AnchorSigner, AnchorError> {
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| AnchorError::Io { path: p, source }
        };
        certs::check_key_mode(key).map_err(|e| AnchorError::Key(e.to_string()))?;
        let pem = std::fs::read_to_string(key).map_err(io(key))?;
        let key = KeyPair::from_pem(&pem).map_err(|e| AnchorError::Key(e.to_string()))?;
        let cert = CertificateDer::from_pem_file(cert)
            .map_err(|e| AnchorError::Key(format!("{}: {e}", cert.display())))?
            .to_vec();
        if public_key(&cert).map_err(AnchorError::Key)? != key.public_key_raw() {
            return Err(AnchorError::Key(
                "the service key does not belong to its certificate".into(),
            ));
        }
        Ok(AnchorSigner { key, cert, path })
    }

    /// Signs the head `(id, hash)` at `at_us`.
    pub fn sign(&self, id: i64, hash: Hash, at_us: i64) -> Result<Anchor, AnchorError> {
        let signature = self
            .key
            .sign(&message(id, &hash, at_us))
            .map_err(|e| AnchorError::Key(e.to_string()))?;
        Ok(Anchor {
            id,
            hash,
            at_us,
            signature,
            cert: self.cert.clone(),
        })
    }

    /// Signs the head and appends it to the file (fsynced).
    pub fn append(&self, id: i64, hash: Hash, at_us: i64) -> Result<Anchor, AnchorError> {
        let a = self.sign(id, hash, at_us)?;
        let io = |source| AnchorError::Io {
            path: self.path.clone(),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(io)?;
        writeln!(f, "{}", a.line()).map_err(io)?;
        f.sync_data().map_err(io)?;
        Ok(a)
    }
}

/// Checks the ledger against anchors (each already [`Anchor::verify`]d):
/// every anchored entry must still carry the anchored hash. Problems name
/// the first anchored entry where the ledger differs.
pub fn check(
    db: &mut dyn Rows,
    anchors: &[Anchor],
) -> Result<Vec<AuditProblem>, proto::account::AccountError> {
    let wanted: HashSet<i64> = anchors.iter().map(|a| a.id).collect();
    let mut found: HashMap<i64, Option<Vec<u8>>> = HashMap::new();
    db.each_chained(&mut |cols, _, hash| {
        if wanted.contains(&cols.id) {
            found.insert(cols.id, hash);
        }
    })?;
    let mut sorted: Vec<&Anchor> = anchors.iter().collect();
    sorted.sort_by_key(|a| a.id);
    let mut problems = Vec::new();
    for a in sorted {
        let when = crate::time::format_time(a.at_us);
        let what = match found.get(&a.id) {
            None => format!(
                "entry {} is gone, but the chain head signed at {when} names it: the ledger was cut back or rewritten",
                a.id
            ),
            Some(h) if h.as_deref() != Some(&a.hash[..]) => format!(
                "entry {} differs from the chain head signed at {when}: the history up to entry {} was rewritten",
                a.id, a.id
            ),
            Some(_) => continue,
        };
        problems.push(AuditProblem {
            what,
            user: None,
            entry_ids: vec![a.id],
        });
        break;
    }
    Ok(problems)
}

/// Where and how often to anchor (`[store] anchors`, `anchor_entries`,
/// `anchor_secs`), with the service key and certificate that sign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchorSettings {
    /// The file the anchors are appended to.
    pub path: PathBuf,
    /// The service key.
    pub key: PathBuf,
    /// The service certificate.
    pub cert: PathBuf,
    /// Entries between two anchors.
    pub entries: i64,
    /// Time between two anchors while the ledger grows.
    pub interval: std::time::Duration,
}

impl AnchorPolicy {
    /// Loads the signer the settings name.
    pub fn load(s: &AnchorSettings) -> Result<AnchorPolicy, AnchorError> {
        Ok(AnchorPolicy {
            signer: AnchorSigner::load(&s.key, &s.cert, s.path.clone())?,
            entries: s.entries.max(1),
            interval: s.interval,
        })
    }
}

/// When accountd signs the chain head: every `entries` new entries, and
/// every `interval` while entries were added.
pub struct AnchorPolicy {
    /// The signer and its file.
    pub signer: AnchorSigner,
    /// Entries between two anchors.
    pub entries: i64,
    /// Time between two anchors while the ledger grows.
    pub interval: std::time::Duration,
}

/// The latest anchor signed, shared by the writer with whoever answers `Head`.
pub type Latest = std::sync::Arc<std::sync::Mutex<Option<Anchor>>>;

/// The writer's anchoring state.
pub struct Anchoring {
    policy: AnchorPolicy,
    last_id: i64,
    last_at: std::time::Instant,
    latest: Latest,
}

impl Anchoring {
    /// Starts anchoring; the first head is signed at the first check.
    pub fn new(policy: AnchorPolicy) -> Anchoring {
        Anchoring {
            policy,
            last_id: -1,
            last_at: std::time::Instant::now(),
            latest: Latest::default(),
        }
    }

    /// Where the latest anchor signed is kept.
    pub fn latest(&self) -> Latest {
        self.latest.clone()
    }

    /// Signs the head `(id, hash)` when the policy says so (or `force` and it moved).
    pub fn tick(&mut self, head: Option<(i64, Vec<u8>)>, force: bool) {
        let Some((id, hash)) = head else { return };
        let moved = id != self.last_id;
        let due = id - self.last_id.max(0) >= self.policy.entries
            || self.last_at.elapsed() >= self.policy.interval
            || self.last_id < 0
            || force;
        if !moved || !due {
            return;
        }
        let Some(hash) = super::chain::stored(Some(&hash)) else {
            tracing::error!(entry = id, "the chain head has no hash; not anchored");
            return;
        };
        match self.policy.signer.append(id, hash, crate::time::now_us()) {
            Ok(a) => {
                if let Ok(mut latest) = self.latest.lock() {
                    *latest = Some(a);
                }
                self.last_id = id;
                self.last_at = std::time::Instant::now();
            }
            Err(e) => tracing::error!(error = %e, "cannot record a signed chain head"),
        }
    }
}
