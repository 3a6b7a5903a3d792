//! Test builders of queue jobs, shared by the unit tests of the modules that read
//! the queue (the scheduler's snapshot, the history): a job's spec and an empty
//! signed job to stand beside it.

use std::sync::Arc;

use proto::batch::{JobSpec, SignedJob, Worth};

/// Job 1 of alice running `true` on `width` CPUs for `length_s` seconds, worth `worth`.
pub(crate) fn spec(width: u32, length_s: u64, worth: Worth) -> JobSpec {
    JobSpec {
        id: proto::node::JobId(1),
        user: "alice".into(),
        argv: vec!["true".into()],
        env: vec![],
        cwd: None,
        width,
        length_s,
        worth,
        priority: 0,
        max_attempts: 1,
        signed_at: 0,
        expires_at: 1,
        array: None,
        after: Vec::new(),
        options: Default::default(),
    }
}

/// A signed job with nothing in it (the tests give the spec decoded).
pub(crate) fn unsigned() -> Arc<SignedJob> {
    Arc::new(SignedJob {
        spec: vec![],
        signature: vec![],
        cert: vec![],
    })
}
