//! A job's terms as the queue's policies weigh them, in one place below both the
//! queue (which builds each job's utility once, as it enters) and the snapshot
//! (which hands it to the policy): the utility of a job's `Worth`, and times as
//! whole seconds since the queue's epoch.

use batch::utility::Utility;
use proto::batch::{JobSpec, Worth};

/// Seconds since the epoch of a UTC ms time.
pub fn secs(epoch_ms: i64, at_ms: i64) -> i64 {
    (at_ms - epoch_ms).div_euclid(1000)
}

/// The utility a spec stands for.
pub fn utility(spec: &JobSpec) -> Utility {
    match &spec.worth {
        Worth::Rate(r) => {
            let v = *r as i128 * spec.width as i128 * spec.length_s as i128 / 60;
            Utility::constant(v.clamp(0, i64::MAX as i128) as i64)
        }
        Worth::Utility(points) => {
            Utility::new(points.clone()).unwrap_or_else(|_| Utility::constant(0))
        }
    }
}
