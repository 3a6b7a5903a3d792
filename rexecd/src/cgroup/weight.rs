//! Kernel CPU weights: the valid range per cgroup version and the mapping from job
//! tickets to weights. The largest ticket count maps to the top of the range and every
//! other job proportionally below it, never under the kernel's minimum. The old OCI
//! shares-to-weight formula is deliberately not used (it maps the default 1024 to 39).

use super::error::{CgroupError, Result};

/// The closed range of weights the kernel accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightRange {
    /// Smallest valid weight.
    pub min: u64,
    /// Largest valid weight.
    pub max: u64,
}

impl WeightRange {
    /// cgroup v1 `cpu.shares`: [2, 262144].
    pub const V1_SHARES: WeightRange = WeightRange {
        min: 2,
        max: 262_144,
    };
    /// cgroup v2 `cpu.weight`: [1, 10000].
    pub const V2_WEIGHT: WeightRange = WeightRange {
        min: 1,
        max: 10_000,
    };

    /// `Ok` when `weight` is inside the range, else a [`CgroupError::WeightOutOfRange`].
    pub fn check(self, weight: u64) -> Result<u64> {
        if (self.min..=self.max).contains(&weight) {
            Ok(weight)
        } else {
            Err(CgroupError::WeightOutOfRange {
                weight,
                min: self.min,
                max: self.max,
            })
        }
    }
}

/// Maps job tickets to kernel weights, element by element: the largest ticket count gets
/// `range.max`, a job with t tickets gets `round(t * max / t_max)`, clamped to
/// `range.min`. When every job has zero tickets all get `range.max` (equal shares).
///
/// ```
/// use rexecd::cgroup::{weights_for_tickets, WeightRange};
/// let w = weights_for_tickets(&[300, 100, 0], WeightRange::V2_WEIGHT);
/// assert_eq!(w, vec![10_000, 3_333, 1]);
/// let w = weights_for_tickets(&[0, 0], WeightRange::V1_SHARES);
/// assert_eq!(w, vec![262_144, 262_144]);
/// ```
pub fn weights_for_tickets(tickets: &[u64], range: WeightRange) -> Vec<u64> {
    let top = tickets.iter().copied().max().unwrap_or(0);
    tickets
        .iter()
        .map(|&t| {
            if top == 0 {
                return range.max;
            }
            let scaled =
                (u128::from(t) * u128::from(range.max) + u128::from(top) / 2) / u128::from(top);
            // scaled <= range.max because t <= top, so the conversion cannot fail.
            u64::try_from(scaled)
                .unwrap_or(range.max)
                .clamp(range.min, range.max)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_maps_to_top_and_rest_proportionally() {
        let r = WeightRange::V1_SHARES;
        assert_eq!(
            weights_for_tickets(&[2, 4, 1], r),
            vec![131_072, 262_144, 65_536]
        );
        assert_eq!(weights_for_tickets(&[7], r), vec![262_144]);
        assert!(weights_for_tickets(&[], r).is_empty());
    }

    #[test]
    fn tiny_shares_clamp_to_the_minimum() {
        let w = weights_for_tickets(&[1_000_000, 1, 0], WeightRange::V2_WEIGHT);
        assert_eq!(w, vec![10_000, 1, 1]);
        let w = weights_for_tickets(&[1_000_000, 1, 0], WeightRange::V1_SHARES);
        assert_eq!(w, vec![262_144, 2, 2]);
    }

    #[test]
    fn huge_tickets_do_not_overflow() {
        let w = weights_for_tickets(&[u64::MAX, u64::MAX / 2], WeightRange::V2_WEIGHT);
        assert_eq!(w, vec![10_000, 5_000]);
    }

    #[test]
    fn every_weight_is_in_range() {
        for r in [WeightRange::V1_SHARES, WeightRange::V2_WEIGHT] {
            let tickets: Vec<u64> = (0..200).map(|i| i * i * 7919 % 100_003).collect();
            for w in weights_for_tickets(&tickets, r) {
                r.check(w).unwrap();
            }
        }
    }

    #[test]
    fn check_rejects_out_of_range() {
        assert!(WeightRange::V2_WEIGHT.check(0).is_err());
        assert!(WeightRange::V2_WEIGHT.check(10_001).is_err());
        assert!(WeightRange::V1_SHARES.check(1).is_err());
        assert_eq!(WeightRange::V1_SHARES.check(1024).unwrap(), 1024);
    }
}
