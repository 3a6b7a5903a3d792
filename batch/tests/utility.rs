//! Utility functions evaluate exactly at their breakpoints and stay between neighbouring
//! breakpoint values in between; Lee's generator draws valid functions of each shape.

use batch::rng::Rng;
use batch::utility::Utility;
use batch::workload::lee::{LeeConfig, generate_one};
use proptest::prelude::*;

fn breakpoints() -> impl Strategy<Value = Vec<(i64, i64)>> {
    prop::collection::vec(
        (1i64..100_000, -1_000_000_000_000i64..1_000_000_000_000),
        1..12,
    )
    .prop_map(|v| {
        let mut t = 0;
        v.into_iter()
            .map(|(dt, val)| {
                t += dt;
                (t, val)
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn exact_at_breakpoints_and_bounded_between(points in breakpoints(), probe in 0i64..2_000_000) {
        let u = Utility::new(points.clone()).unwrap();
        for &(t, v) in &points {
            prop_assert_eq!(u.value_at(t), v);
        }
        let v = u.value_at(probe);
        let lo = points.iter().map(|p| p.1).min().unwrap();
        let hi = points.iter().map(|p| p.1).max().unwrap();
        prop_assert!(lo <= v && v <= hi);
        if let Some(w) = points.windows(2).find(|w| w[0].0 <= probe && probe <= w[1].0) {
            prop_assert!(w[0].1.min(w[1].1) <= v && v <= w[0].1.max(w[1].1));
        }
    }

    #[test]
    fn batch_preset_is_flat_to_slowdown_one_then_linear_to_zero(runtime in 1i64..100_000, value in 0i64..1_000_000_000, tol in 0.1f64..10.0) {
        let u = Utility::batch(runtime, value, tol);
        prop_assert_eq!(u.value_at(0), value);
        prop_assert_eq!(u.value_at(runtime), value);
        let zero = u.points()[1].0;
        prop_assert_eq!(u.value_at(zero), 0);
        prop_assert_eq!(u.value_at(zero + 1_000_000), 0);
        prop_assert!(u.value_at((runtime + zero) / 2) <= value);
    }
}

#[test]
fn lee_generator_draws_a_third_of_each_shape_and_valid_functions() {
    let cfg = LeeConfig::default();
    let mut rng = Rng::new(11);
    let mut counts = [0usize; 3];
    for k in 0..3000 {
        let (pts, decay) = generate_one(
            &mut rng,
            &cfg,
            (k % 3) as u8,
            1 + k % 8,
            600,
            (k as i64 * 37) % 5000,
        );
        counts[decay as usize] += 1;
        let u = Utility::new(pts.clone()).expect("valid breakpoints");
        assert_eq!(
            u.value_at(pts.last().unwrap().0),
            0,
            "value zero at the deadline"
        );
        assert!(
            pts.windows(2).all(|w| w[1].1 <= w[0].1),
            "never increases: {pts:?}"
        );
        for &(t, v) in &pts {
            assert_eq!(u.value_at(t), v);
        }
    }
    for c in counts {
        assert!((850..1150).contains(&c), "{counts:?}");
    }
}

#[test]
fn higher_priority_gets_higher_start_values_on_average() {
    let cfg = LeeConfig::default();
    let mut rng = Rng::new(3);
    let mean = |rng: &mut Rng, p| {
        (0..2000)
            .map(|_| generate_one(rng, &cfg, p, 1, 60, 100).0[0].1 as f64)
            .sum::<f64>()
            / 2000.0
    };
    let (hi, mid, lo) = (mean(&mut rng, 0), mean(&mut rng, 1), mean(&mut rng, 2));
    assert!(hi > mid && mid > lo, "{hi} {mid} {lo}");
}
