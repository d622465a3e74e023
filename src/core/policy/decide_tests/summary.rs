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
