//! decide()'s forecast summary: which stages ran, and the numbers behind the plan, for the log
//! line and the EMF metrics.

use super::*;

#[test]
fn summary_says_which_stages_were_used() {
    let plan = decide(
        &observe(&[5.0; 8], Some(6)),
        &test_target(),
        &test_policy(),
        &HeadroomState::default(),
        NOW,
    );
    let f = &plan.forecast;
    assert_eq!(f.sizing, "queue");
    assert_eq!(f.band_source, "one_step");
    assert_eq!(f.one_step_band.as_deref(), Some("not calibrated yet"));
    assert_eq!(f.trend_only.as_deref(), Some("no seasonal history"));
    // A history in the observation is fitted and persisted in the next state.
    let history: Vec<Sample> = (0..200)
        .map(|i| Sample::new(NOW - 60.0 * (199 - i) as f64, 5.0))
        .collect();
    let plan = decide(
        &Observation {
            calibration_history: history,
            ..observe(&[5.0; 8], Some(6))
        },
        &test_target(),
        &test_policy(),
        &HeadroomState::default(),
        NOW,
    );
    let c = plan.next_state.calibration.expect("calibrated");
    assert_eq!((c.computed_at, c.band), (NOW, Some(0.0)));
    assert_eq!(plan.forecast.band_source, "lead_time");
}

#[test]
fn summary_reports_the_numbers_behind_the_plan() {
    // The burst row: observed 10, level 6, band 0, horizon rate 10, 11 and 11 replicas.
    let plan = decide(
        &observe(
            &[2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 10.0],
            Some(3),
        ),
        &test_target(),
        &PolicySpec {
            ewma_alpha: 0.5,
            trend_beta: 0.0,
            ..test_policy()
        },
        &HeadroomState::default(),
        NOW,
    );
    let f = &plan.forecast;
    assert_eq!(
        (
            f.observed_rate,
            f.level,
            f.trend,
            f.error_quantile,
            f.rate_at_horizon
        ),
        (10.0, 6.0, 0.0, 0.0, 10.0)
    );
    assert_eq!(
        (f.service_time_s, f.replicas_now, f.replicas_at_horizon),
        (1.0, 11, 11)
    );
}

#[test]
fn the_hour_coverage_reported_is_the_hour_whose_band_was_used() {
    // NOW is 22:13:20 UTC; with a one-hour lead the band used is the 23:00 hour's (the hour the
    // lead ends in), so the coverage reported beside it must be that hour's too: 0.23, not 0.22.
    let policy = PolicySpec {
        lead_time_s: 3600.0,
        ..test_policy()
    };
    let calibration = Calibration {
        by_hour: (0..24).map(f64::from).collect(),
        coverage_by_hour: (0..24).map(|h| Some(f64::from(h) / 100.0)).collect(),
        lead_time_s: Some(3600.0),
        ..calibrated(2.0, 0.5)
    };
    let plan = decide(
        &observe(&[5.0; 8], Some(6)),
        &test_target(),
        &policy,
        &HeadroomState {
            calibration: Some(calibration),
            ..HeadroomState::default()
        },
        NOW,
    );
    let f = &plan.forecast;
    assert_eq!(f.band_by, "hour-of-day");
    assert_eq!(f.hour_coverage, Some(0.23));
}

#[test]
fn the_chosen_profile_sizes_the_tick_and_says_so() {
    // NOW is 22:13:20 UTC; the lead (180 s) ends at 22:16:20, inside the 22:00 hour. The
    // calibration chose the profile: 40 req/s at 22:00, 1 elsewhere, band 2. Observed 5 flat
    // with no seasonal history: the blend is the trend, 5.
    // (name, the profile's 22:00 hour, forecaster, profile peak, rate to cover, seasonal rise)
    // by hand: the profile 40 + 2 = 42 (43 replicas at one per req/s, ⌊r⌋ + 1) against the
    // trend's 5 + 2 = 7 (8): 35 replicas above the trend, within the forecast's 43 − 6 serving;
    // an hour the profile never saw: the blend, 7, and no rise.
    let rows = [
        (
            "the hour seen",
            Some(40.0),
            "profile",
            Some(40.0),
            42.0,
            Some(35),
        ),
        ("an hour never seen", None, "blend", None, 7.0, None),
    ];
    for (name, hour_22, forecaster, peak, rate, rise) in rows {
        let mut profile = vec![Some(1.0); 24];
        profile[22] = hour_22;
        let calibration = Calibration {
            forecaster: crate::spec::Forecaster::Profile,
            profile,
            lead_time_s: Some(180.0),
            ..calibrated(2.0, 0.0)
        };
        let plan = decide(
            &observe(&[5.0; 8], Some(6)),
            &test_target(),
            &test_policy(),
            &HeadroomState {
                calibration: Some(calibration),
                ..HeadroomState::default()
            },
            NOW,
        );
        let f = &plan.forecast;
        assert_eq!(
            (f.forecaster.as_str(), f.profile_peak, f.rate_at_horizon),
            (forecaster, peak, rate),
            "{name}"
        );
        let seasonal = plan.reasons.iter().find_map(|r| match r {
            Reason::SeasonalRise { replicas } => Some(*replicas),
            _ => None,
        });
        assert_eq!(seasonal, rise, "{name}: {:?}", plan.reasons);
    }
}
