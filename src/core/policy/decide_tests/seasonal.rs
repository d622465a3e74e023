//! The seasonal rise past the step-up limit: the part of the spare a recurring rise asks for
//! comes at once, the rest steps, and the next step is not lifted with it.

use super::*;

/// Flat 5 req/s served by 6 replicas; yesterday 5 over the window (scale 1) and `ahead`
/// over the next lead time (180 s, 12 samples).
fn seasonal_observation(ahead: f64) -> Observation {
    Observation {
        seasonal: vec![SeasonSeries {
            period_s: 86_400.0,
            samples: series_ending(NOW + 180.0, &[&[5.0; 8][..], &[ahead; 12][..]].concat()),
        }],
        ..observe(&[5.0; 8], Some(6))
    }
}

/// With nextStepSpare the next step can ask for more than the forecast's spare; only the
/// forecast's seasonal part passes the step-up limit. HPA units (1 request in the system per
/// replica, 1 s latency): yesterday's rise blends to 0.5·5 + 0.5·25 = 15 req/s → 15
/// replicas; 12 in place (the HPA's overshoot) → the forecast's spare 3. The trend alone
/// asks for 5 replicas: a seasonal rise of 10, of which the 12 in place cover 7, so 3 are
/// lifted. The next step: 8 (the HPA at 12 of 50) replaces the spare of 3 and steps:
/// limit max(0, 3) + 4 = 7.
#[test]
fn the_next_step_is_not_lifted_with_the_seasonal_rise() {
    let observed = Observation {
        seasonal: seasonal_observation(25.0).seasonal,
        ..next_step_observation(12, 50)
    };
    let target = TargetSpec {
        next_step_spare: 8,
        ..test_target()
    };
    let prior = HeadroomState {
        calibration: Some(calibrated(0.0, 0.5)),
        ..prior(0)
    };
    let plan = decide(&observed, &target, &test_policy(), &prior, NOW);
    assert_eq!(plan.desired_spare, 7, "{plan:#?}");
    assert_eq!(
        plan.reasons,
        vec![
            Reason::Forecast,
            Reason::NextStep { replicas: 8 },
            Reason::SeasonalRise { replicas: 3 },
            Reason::StepUpLimited { max_step_up: 4 },
        ]
    );
}

/// (name, observed, policy, prior spare, calibration (band, weight), desired, hold,
/// reasons after Forecast)
type SeasonRow = (
    &'static str,
    Observation,
    PolicySpec,
    u32,
    Option<(f64, f64)>,
    u32,
    u32,
    Vec<Reason>,
);

/// The seasonal forecast's rise above the trend-only forecast passes the step-up limit
/// (maxStepUp 4); the rest of the spare steps on top of it. Replicas are ⌊rate⌋ + 1.
#[test]
fn seasonal_rise_passes_the_step_limit() {
    let ramp_policy = PolicySpec {
        ewma_alpha: 1.0,
        trend_beta: 1.0,
        trend_damping: 1.0,
        lead_time_s: 45.0,
        ..test_policy()
    };
    let limited = Reason::StepUpLimited { max_step_up: 4 };
    let rows: Vec<SeasonRow> = vec![
        (
            // Blend 0.5·5 + 0.5·25 = 15, band 0 → 16 replicas, 6 serve: raw 10. The trend
            // alone: 5 → 6 replicas, so the seasonal forecast adds 10: all of it at once
            // (limit max(0, 10) + 4 = 14), where the plain limit would give 4.
            "seasonal rise lifted",
            seasonal_observation(25.0),
            test_policy(),
            0,
            Some((0.0, 0.5)),
            10,
            10,
            vec![Reason::SeasonalRise { replicas: 10 }],
        ),
        (
            // Band 8: blend 15 + 8 = 23 → 24 replicas, raw 18; the trend alone 5 + 8 = 13
            // → 14, so the seasonal part is 10; the band's 8 step on top of it: 10 + 4 = 14.
            "seasonal rise lifted, the band's part steps",
            seasonal_observation(25.0),
            test_policy(),
            0,
            Some((8.0, 0.5)),
            14,
            18,
            vec![Reason::SeasonalRise { replicas: 10 }, limited.clone()],
        ),
        (
            // The next tick of the row above: the current 14 covers the seasonal 10 first,
            // so the rest still steps: limit max(14, 10) + 4 = 18 = raw.
            "next tick: the rest keeps stepping",
            seasonal_observation(25.0),
            test_policy(),
            14,
            Some((8.0, 0.5)),
            18,
            18,
            vec![Reason::SeasonalRise { replicas: 10 }],
        ),
        (
            // A trend rise (α=β=φ=1, lead 3 steps, 2,4,6,8: level 8, trend 2, one-step
            // errors [2,0,0] → band 2, trend peak 14) that yesterday had too (2,4,6,8 then
            // 10,12,14: scale 1, seasonal 14). Blend 14 + 2 = 16 → 17 replicas, 9 serve:
            // raw 8. The trend alone asks for as many, so no seasonal rise: it steps to 4.
            "trend rise still steps",
            Observation {
                seasonal: vec![SeasonSeries {
                    period_s: 86_400.0,
                    samples: series_ending(NOW + 45.0, &[2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]),
                }],
                ..observe(&[2.0, 4.0, 6.0, 8.0], Some(9))
            },
            ramp_policy,
            0,
            None,
            4,
            8,
            vec![limited.clone()],
        ),
        (
            // Yesterday's history ends now (nothing over the next lead time): trend only,
            // 5 + band 10 = 15 → 16 replicas, raw 10, stepped to 4.
            "seasonal history missing: trend only, steps",
            Observation {
                seasonal: vec![SeasonSeries {
                    period_s: 86_400.0,
                    samples: series_ending(NOW, &[25.0; 8]),
                }],
                ..observe(&[5.0; 8], Some(6))
            },
            test_policy(),
            0,
            Some((10.0, 0.5)),
            4,
            10,
            vec![limited.clone()],
        ),
        (
            // The calibration weighs the seasonal forecast 0: the blend is the trend,
            // 5 + 10 = 15 → raw 10, stepped to 4.
            "seasonal weight 0: nothing lifted",
            seasonal_observation(25.0),
            test_policy(),
            0,
            Some((10.0, 0.0)),
            4,
            10,
            vec![limited.clone()],
        ),
    ];
    for (name, observed, policy, spare, cal, desired, held, reasons) in rows {
        let prior = HeadroomState {
            calibration: cal.map(|(band, w)| calibrated(band, w)),
            ..prior(spare)
        };
        let plan = decide(&observed, &test_target(), &policy, &prior, NOW);
        assert_eq!(plan.desired_spare, desired, "{name}: {plan:#?}");
        assert_eq!(plan.next_state.hold, hold(held, NOW + 300.0), "{name}");
        let want: Vec<Reason> = [vec![Reason::Forecast], reasons].concat();
        assert_eq!(plan.reasons, want, "{name}");
    }
    // The missing history is said in the decision log.
    let plan = decide(
        &Observation {
            seasonal: vec![SeasonSeries {
                period_s: 86_400.0,
                samples: series_ending(NOW, &[25.0; 8]),
            }],
            ..observe(&[5.0; 8], Some(6))
        },
        &test_target(),
        &test_policy(),
        &band_of_two(),
        NOW,
    );
    assert_eq!(
        plan.forecast.trend_only.as_deref(),
        Some("season 86400 s: no history over the next lead time")
    );
}
