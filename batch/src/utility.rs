//! Valuations: piecewise-linear utility functions of a job's completion time.
//!
//! A [`Utility`] is Lee's general form: any number of breakpoints `(t, value)` where `t` is
//! seconds from the job's submission to its completion and `value` is in micro-credits (may
//! be negative). Before the first breakpoint the value is the first value, after the last it
//! is the last value, and between two breakpoints it is the straight line through them,
//! computed in integers (`i128`, rounded toward negative infinity) so it is exact at every
//! breakpoint. [`Utility::batch`] is the batch paper's shape: full value up to slowdown 1,
//! then a linear decay to zero at the user's delay tolerance (a multiple of the job's length).
//! The breakpoints are shared behind an [`Arc`]: a clone (a queue's snapshot copying a job's
//! utility at every decision) allocates nothing.

use std::sync::Arc;

use thiserror::Error;

/// Money: micro-credits, as everywhere in rexec market.
pub type Micros = i64;
/// Micro-credits in one credit.
pub const MICROS_PER_CREDIT: Micros = 1_000_000;

/// Why a list of breakpoints is not a utility function.
#[derive(Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum UtilityError {
    /// No breakpoints at all.
    #[error("a utility function needs at least one breakpoint")]
    Empty,
    /// Breakpoint times must strictly increase.
    #[error("breakpoint times must strictly increase (breakpoint {index} at t={t})")]
    NotIncreasing {
        /// Index of the offending breakpoint.
        index: usize,
        /// Its time.
        t: i64,
    },
    /// A breakpoint time before submission.
    #[error("breakpoint {index} has negative time {t}")]
    NegativeTime {
        /// Index of the offending breakpoint.
        index: usize,
        /// Its time.
        t: i64,
    },
}

/// A piecewise-linear utility function of completion time (seconds after submission).
/// Cloning it shares its breakpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Utility {
    points: Arc<[(i64, Micros)]>,
}

impl Utility {
    /// A utility function through `points`, which must be non-empty with strictly
    /// increasing, non-negative times.
    pub fn new(points: Vec<(i64, Micros)>) -> Result<Self, UtilityError> {
        if points.is_empty() {
            return Err(UtilityError::Empty);
        }
        for (i, &(t, _)) in points.iter().enumerate() {
            if t < 0 {
                return Err(UtilityError::NegativeTime { index: i, t });
            }
            if i > 0 && t <= points[i - 1].0 {
                return Err(UtilityError::NotIncreasing { index: i, t });
            }
        }
        Ok(Utility {
            points: points.into(),
        })
    }

    /// The batch paper's shape: `value` if the job completes within `runtime` of
    /// submission (slowdown 1), then linear decay to zero at `runtime * (1 + tolerance)`.
    /// A tolerance of zero makes the value drop to zero one second after slowdown 1.
    pub fn batch(runtime: i64, value: Micros, tolerance: f64) -> Self {
        let runtime = runtime.max(1);
        let span = ((runtime as f64 * tolerance).round() as i64).max(1);
        Utility {
            points: Arc::new([(runtime, value), (runtime + span, 0)]),
        }
    }

    /// A constant value whatever the completion time.
    pub fn constant(value: Micros) -> Self {
        Utility {
            points: Arc::new([(0, value)]),
        }
    }

    /// The breakpoints.
    pub fn points(&self) -> &[(i64, Micros)] {
        &self.points
    }

    /// Whether `other` shares these breakpoints (one is a clone of the other), so
    /// holding both costs one allocation.
    pub fn shares(&self, other: &Utility) -> bool {
        std::sync::Arc::ptr_eq(&self.points, &other.points)
    }

    /// The value (micro-credits) of completing `t` seconds after submission.
    pub fn value_at(&self, t: i64) -> Micros {
        let p = &self.points;
        let first = p[0];
        if t <= first.0 {
            return first.1;
        }
        let last = p[p.len() - 1];
        if t >= last.0 {
            return last.1;
        }
        // First breakpoint strictly after t; t lies in [p[i-1].0, p[i].0).
        let i = p.partition_point(|&(bt, _)| bt <= t);
        let (t0, v0) = p[i - 1];
        let (t1, v1) = p[i];
        let num = (v1 as i128 - v0 as i128) * (t - t0) as i128;
        let den = (t1 - t0) as i128;
        (v0 as i128 + num.div_euclid(den)) as Micros
    }

    /// The highest value the function takes.
    pub fn max_value(&self) -> Micros {
        self.points.iter().map(|p| p.1).max().unwrap_or(0)
    }

    /// Shifts every breakpoint later by `dt` seconds (used when an SWF job's utility is
    /// written relative to its ideal completion).
    pub fn shifted(&self, dt: i64) -> Self {
        Utility {
            points: self
                .points
                .iter()
                .map(|&(t, v)| ((t + dt).max(0), v))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_shape() {
        let u = Utility::batch(100, 1000, 2.0);
        assert_eq!(u.value_at(0), 1000);
        assert_eq!(u.value_at(100), 1000);
        assert_eq!(u.value_at(200), 500);
        assert_eq!(u.value_at(300), 0);
        assert_eq!(u.value_at(10_000), 0);
    }

    #[test]
    fn rejects_bad_points() {
        assert_eq!(Utility::new(vec![]), Err(UtilityError::Empty));
        assert!(matches!(
            Utility::new(vec![(5, 1), (5, 0)]),
            Err(UtilityError::NotIncreasing { index: 1, t: 5 })
        ));
        assert!(Utility::new(vec![(-1, 1)]).is_err());
    }

    #[test]
    fn negative_values_and_interpolation() {
        let u = Utility::new(vec![(0, 10), (10, -10)]).unwrap();
        assert_eq!(u.value_at(5), 0);
        assert_eq!(u.value_at(3), 4);
        assert_eq!(u.value_at(20), -10);
    }
}
