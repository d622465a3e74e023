//! Demand forecast: Holt's damped-trend exponential smoothing (an EWMA level plus a damped trend)
//! and an upper quantile of recent one-step forecast error, projected over the provisioning lead
//! time.
//!
//! Why this model: it needs no training, costs O(window) per tick, follows ramps (trend) without
//! running away on them (damping), and its error band is measured on the same series, so noisy
//! targets get more headroom than smooth ones without per-target tuning.
//!
//! Error band: the quantile is taken over the *signed* one-step errors (actual − forecast) and
//! floored at zero, which equals the quantile of their positive part. Under-forecasts are what
//! make requests wait, so only they should widen the band; counting over-forecasts as zeros keeps
//! the calibration (P(actual ≤ forecast + band) ≈ `error_quantile`). Absolute errors would give a
//! two-sided band (the 0.9 quantile of |e| is the 0.95 one-sided quantile for symmetric noise)
//! and would add headroom during a decay, exactly when demand falls faster than forecast.

use super::observation::Sample;
use crate::spec::PolicySpec;

/// Gaps longer than this many steps are treated as this many: beyond it the damped trend has
/// died out anyway, and it bounds the arithmetic on absurd timestamps.
const MAX_GAP_STEPS: f64 = 1_000_000.0;

/// The forecast of one series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Forecast {
    /// Smoothed level now (at the newest finite sample).
    pub level: f64,
    /// Damped trend per step.
    pub trend: f64,
    /// Upper `error_quantile` of recent one-step forecast errors, floored at 0 (see module docs).
    pub error_quantile: f64,
    /// Highest point forecast over (now, now + lead time], without the error band (never
    /// negative). Used to tell a rising forecast from a flat one.
    pub point_over_horizon: f64,
    /// Highest point forecast over (now, now + lead time], plus the error quantile (never
    /// negative).
    pub upper_over_horizon: f64,
}

/// Sum of φ^1 + … + φ^k: how far a damped trend carries the level in `k` steps.
fn damped_steps(phi: f64, k: f64) -> f64 {
    if phi >= 1.0 {
        k
    } else if phi <= 0.0 {
        0.0
    } else {
        phi * (1.0 - damping(phi, k)) / (1.0 - phi)
    }
}

/// φ^k. Most gaps are one step, and φ^1 is φ (what `powf` returns for it too, its error being
/// under one ulp), without the cost of `powf` on every sample of every tick.
fn damping(phi: f64, k: f64) -> f64 {
    if k == 1.0 {
        phi
    } else {
        phi.powf(k)
    }
}

/// Nearest-rank upper quantile (the smallest value with at least `q` of the sample at or
/// below it). Conservative for small samples, and easy to check by hand.
pub fn upper_quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let rank = (q * values.len() as f64).ceil() as usize;
    // Under `total_cmp` equal values are the same bits, so the selected value is the sorted one.
    *values
        .select_nth_unstable_by(rank.clamp(1, values.len()) - 1, f64::total_cmp)
        .1
}

/// Forecasts `series` (oldest first, on the `policy.step_s` grid) over `policy.lead_time_s`.
///
/// Non-finite samples are skipped and a missing step is a gap: the model is carried over the gap
/// without correction and the next sample's error is its error over the whole gap (which widens
/// the band — the conservative direction). Samples whose time is not at least half a step after
/// the previous one are ignored (duplicates, out of order). Negative values are read as 0: a rate
/// derived from counter deltas can dip below zero by noise, never by demand.
///
/// Returns None when there are fewer than two usable samples.
pub fn forecast(series: &[Sample], policy: &PolicySpec) -> Option<Forecast> {
    let alpha = policy.ewma_alpha.clamp(f64::MIN_POSITIVE, 1.0);
    let beta = policy.trend_beta.clamp(0.0, 1.0);
    let phi = policy.trend_damping.clamp(0.0, 1.0);
    let step = if policy.step_s.is_finite() && policy.step_s > 0.0 {
        policy.step_s
    } else {
        return None;
    };

    let mut usable = series
        .iter()
        .filter(|s| s.t.is_finite() && s.v.is_finite())
        .map(|s| (s.t, s.v.max(0.0)));
    let (mut last_t, mut level) = usable.next()?;
    let mut trend = 0.0;
    let mut errors = Vec::with_capacity(series.len());

    for (t, y) in usable {
        let steps = ((t - last_t) / step).round();
        if steps < 1.0 {
            continue;
        }
        let steps = steps.min(MAX_GAP_STEPS);
        let predicted = level + trend * damped_steps(phi, steps);
        errors.push(y - predicted);
        let new_level = alpha * y + (1.0 - alpha) * predicted;
        // Trend per step: the level's change spread over the gap, blended with the damped
        // trend carried over it. For steps = 1 this is the textbook Holt update.
        trend = beta * (new_level - level) / steps + (1.0 - beta) * trend * damping(phi, steps);
        level = new_level;
        last_t = t;
    }
    if errors.is_empty() {
        return None;
    }

    let band = upper_quantile(&mut errors, policy.error_quantile).max(0.0);
    let horizon_steps = (policy.lead_time_s / step).ceil().clamp(1.0, MAX_GAP_STEPS);
    // The damped path is monotone (it moves towards level + trend·φ/(1−φ)), so its maximum
    // over the horizon is at the first or the last step.
    let first = level + trend * damped_steps(phi, 1.0);
    let last = level + trend * damped_steps(phi, horizon_steps);
    let point = first.max(last).max(0.0);
    Some(Forecast {
        level,
        trend,
        error_quantile: band,
        point_over_horizon: point,
        upper_over_horizon: (point + band).max(0.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: f64 = 1_700_000_000.0;

    fn policy(alpha: f64, beta: f64, phi: f64, lead_steps: f64) -> PolicySpec {
        PolicySpec {
            ewma_alpha: alpha,
            trend_beta: beta,
            trend_damping: phi,
            step_s: 15.0,
            lead_time_s: 15.0 * lead_steps,
            error_quantile: 0.9,
            ..PolicySpec::default()
        }
    }

    fn on_grid(values: &[f64]) -> Vec<Sample> {
        Sample::grid(T0, 15.0, values)
    }

    struct Row {
        name: &'static str,
        series: Vec<Sample>,
        policy: PolicySpec,
        // (level, trend, error_quantile, point_over_horizon, upper_over_horizon), derived by hand.
        want: Option<(f64, f64, f64, f64, f64)>,
    }

    #[test]
    fn forecast_table() {
        let rows = vec![
            Row {
                // Constant series: level stays 10, trend 0, every error 0.
                name: "flat",
                series: on_grid(&[10.0; 8]),
                policy: policy(0.3, 0.2, 0.9, 12.0),
                want: Some((10.0, 0.0, 0.0, 10.0, 10.0)),
            },
            Row {
                // α=β=φ=1: level = last value, trend = last difference. Trend starts at 0, so
                // the errors are [1, 0, 0, 0]; nearest rank ⌈0.9·4⌉ = 4th smallest = 1.
                // Point over 3 steps: 4 + 3·1 = 7; upper 7 + 1 = 8.
                name: "linear ramp, undamped",
                series: on_grid(&[0.0, 1.0, 2.0, 3.0, 4.0]),
                policy: policy(1.0, 1.0, 1.0, 3.0),
                want: Some((4.0, 1.0, 1.0, 7.0, 8.0)),
            },
            Row {
                // α=β=1, φ=0.5. Step 1: forecast 0, y=2, e=2, level 2, trend 2.
                // Step 2: forecast 2+0.5·2 = 3, y=4, e=1, level 4, trend (4−2) = 2.
                // Horizon 2 steps: 4 + 2·(0.5+0.25) = 5.5. Errors [2,1] → ⌈1.8⌉ = 2nd = 2.
                name: "ramp, damped",
                series: on_grid(&[0.0, 2.0, 4.0]),
                policy: policy(1.0, 1.0, 0.5, 2.0),
                want: Some((4.0, 2.0, 2.0, 5.5, 7.5)),
            },
            Row {
                // β=0 is a plain EWMA (α=0.5): 2,2,2,2 then 10 → level 0.5·10 + 0.5·2 = 6.
                // Errors [0,0,0,8]: ⌈3.6⌉ = 4th smallest = 8. Upper 6 + 8 = 14.
                name: "burst",
                series: on_grid(&[2.0, 2.0, 2.0, 2.0, 10.0]),
                policy: policy(0.5, 0.0, 0.9, 12.0),
                want: Some((6.0, 0.0, 8.0, 6.0, 14.0)),
            },
            Row {
                // Falling series, β=0, α=0.5: 8 → 4: forecast 8, e = −4, level 6.
                // 6 → 2: forecast 6, e = −4, level 4. Only over-forecasts: band 0, upper 4.
                name: "decay adds no band",
                series: on_grid(&[8.0, 4.0, 2.0]),
                policy: policy(0.5, 0.0, 0.9, 12.0),
                want: Some((4.0, 0.0, 0.0, 4.0, 4.0)),
            },
            Row {
                // NaN and inf are skipped; 0, NaN, 2 with α=β=φ=1 is a 2-step gap:
                // forecast 0 + 0·2 = 0, e = 2, level 2, trend (2−0)/2 = 1.
                // Horizon 2 steps: 2 + 2·1 = 4, band 2 → 6.
                name: "NaN is a gap",
                series: on_grid(&[0.0, f64::NAN, 2.0, f64::INFINITY]),
                policy: policy(1.0, 1.0, 1.0, 2.0),
                want: Some((2.0, 1.0, 2.0, 4.0, 6.0)),
            },
            Row {
                // Negative rates read as 0: 0, −3, 0 is flat at zero.
                name: "negative noise",
                series: on_grid(&[0.0, -3.0, 0.0]),
                policy: policy(0.3, 0.2, 0.9, 12.0),
                want: Some((0.0, 0.0, 0.0, 0.0, 0.0)),
            },
            Row {
                // A downward trend never projects below zero: α=β=φ=1, 4 → 0 gives level 0,
                // trend −4; every point forecast is negative, so point and upper are 0.
                name: "never negative",
                series: on_grid(&[4.0, 0.0]),
                policy: policy(1.0, 1.0, 1.0, 3.0),
                want: Some((0.0, -4.0, 0.0, 0.0, 0.0)),
            },
            Row {
                name: "one sample",
                series: on_grid(&[5.0]),
                policy: policy(0.3, 0.2, 0.9, 12.0),
                want: None,
            },
            Row {
                name: "all NaN",
                series: on_grid(&[f64::NAN, f64::NAN, f64::NAN]),
                policy: policy(0.3, 0.2, 0.9, 12.0),
                want: None,
            },
            Row {
                name: "empty",
                series: vec![],
                policy: policy(0.3, 0.2, 0.9, 12.0),
                want: None,
            },
            Row {
                // Duplicate timestamps are ignored: only the first 3.0 and the 5.0 count.
                // α=1, β=0: forecast 3, e = 2, level 5; band 2 → upper 7.
                name: "duplicate timestamp",
                series: vec![
                    Sample::new(T0, 3.0),
                    Sample::new(T0, 100.0),
                    Sample::new(T0 + 15.0, 5.0),
                ],
                policy: policy(1.0, 0.0, 0.9, 4.0),
                want: Some((5.0, 0.0, 2.0, 5.0, 7.0)),
            },
        ];
        for row in rows {
            let got = forecast(&row.series, &row.policy);
            match (got, row.want) {
                (None, None) => {}
                (Some(f), Some((level, trend, band, point, upper))) => {
                    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
                    assert!(
                        close(f.level, level)
                            && close(f.trend, trend)
                            && close(f.error_quantile, band)
                            && close(f.point_over_horizon, point)
                            && close(f.upper_over_horizon, upper),
                        "{}: got {f:?}, want level {level} trend {trend} band {band} point {point} upper {upper}",
                        row.name
                    );
                }
                (got, want) => panic!("{}: got {got:?}, want {want:?}", row.name),
            }
        }
    }

    #[test]
    fn upper_quantile_is_nearest_rank() {
        // 10 values 1..=10: ⌈0.9·10⌉ = 9th smallest = 9; ⌈0.5·10⌉ = 5th = 5.
        let mut v: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        assert_eq!(upper_quantile(&mut v, 0.9), 9.0);
        assert_eq!(upper_quantile(&mut v, 0.5), 5.0);
        assert_eq!(upper_quantile(&mut [], 0.9), 0.0);
    }

    #[test]
    fn damped_steps_sums_powers() {
        // 0.5 + 0.25 + 0.125 = 0.875
        assert!((damped_steps(0.5, 3.0) - 0.875).abs() < 1e-12);
        assert_eq!(damped_steps(1.0, 7.0), 7.0);
        assert_eq!(damped_steps(0.0, 7.0), 0.0);
    }

    proptest::proptest! {
        #[test]
        fn upper_is_finite_and_at_least_point(
            values in proptest::collection::vec(
                proptest::prop_oneof![0.0f64..1e6, proptest::strategy::Just(f64::NAN)], 0..80),
        ) {
            if let Some(f) = forecast(&on_grid(&values), &PolicySpec::default()) {
                proptest::prop_assert!(f.upper_over_horizon.is_finite());
                proptest::prop_assert!(f.upper_over_horizon >= f.point_over_horizon);
                proptest::prop_assert!(f.point_over_horizon >= 0.0);
            }
        }
    }
}
