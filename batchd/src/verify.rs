//! Checking a submitted signed job before it is queued, with the same
//! verification a node does before it runs a rank (`certs::jobsign::verify`):
//! the signer's certificate chains to the cluster CA and is not revoked, it is
//! a user's, the signature covers the spec bytes, the spec decodes from those
//! bytes alone and names that user, it has not expired, and it is a runnable
//! job. A job that fails here is refused at once rather than queued to be
//! refused by every node later.

use std::time::{Duration, UNIX_EPOCH};

use certs::jobsign::{JobSignError, JobTrust};
use proto::batch::{BatchError, BatchErrorCode, JobSpec, SignedJob};

/// What the queue trusts: the cluster CA (and CRL) of its TLS files.
pub struct Verifier {
    trust: JobTrust,
}

impl Verifier {
    /// Loads the CA (and CRL) of the queue's TLS files.
    pub fn load(paths: &certs::TlsPaths) -> Result<Verifier, JobSignError> {
        Ok(Verifier {
            trust: JobTrust::from_tls_paths(paths)?,
        })
    }
}

/// The spec of `signed` when it verifies at `now` (UTC seconds).
pub fn verify(v: &Verifier, signed: &SignedJob, now: u64) -> Result<JobSpec, BatchError> {
    let at = UNIX_EPOCH + Duration::from_secs(now);
    match certs::jobsign::verify(signed, &v.trust, at) {
        Ok(job) => Ok(job.spec),
        Err(e) => {
            let code = match e {
                JobSignError::Malformed(_) | JobSignError::Invalid(_) => BatchErrorCode::Malformed,
                _ => BatchErrorCode::BadSignature,
            };
            Err(BatchError::new(code, format!("job refused: {e}")))
        }
    }
}
