//! decide()'s tests: situations with a fixed clock and the decision expected, worked out by
//! hand. This file holds the fixtures and the table's runner; the rows live by stage in
//! rows_inputs, rows_rails and rows_stages, and the seasonal rise, the forecast summary and the
//! properties in files of their own.

use super::*;
use crate::policy::observation::{HpaMetric, HpaStatus, Sample, SeasonSeries};
use crate::spec::{HeadroomKind, Hold, ScaleDownDelay, ScheduleWindow};

/// The fixed clock of every row.
const NOW: f64 = 1_700_000_000.0;

/// Sizing in these rows is hand-checkable: one slot per replica, a service time of 1 s and a
/// 600 s target wait make Erlang C reduce to the stability condition (c > a, and then
/// W = C·S/(c−a) ≤ 1 s ≪ 600 s when c − a ≥ 1), so a rate r needs ⌊r⌋ + 1 replicas, 0 at 0.
fn test_policy() -> PolicySpec {
    PolicySpec {
        target_wait_s: 600.0,
        ..PolicySpec::default()
    }
}

fn test_target() -> TargetSpec {
    TargetSpec {
        replica_concurrency: 1,
        ..TargetSpec::new(
            "llama",
            "gpu",
            HeadroomKind::Balloon {
                namespace: "prewarm".into(),
                name: "llama".into(),
            },
            20,
        )
    }
}

/// `values` on the 15 s grid, the newest at `end`.
fn series_ending(end: f64, values: &[f64]) -> Vec<Sample> {
    let n = values.len();
    values
        .iter()
        .enumerate()
        .map(|(i, v)| Sample::new(end - 15.0 * (n - 1 - i) as f64, *v))
        .collect()
}

fn observe(rates: &[f64], serving: Option<u32>) -> Observation {
    Observation {
        arrival_rate: series_ending(NOW, rates),
        service_time_s: series_ending(NOW, &[1.0]),
        serving_replicas: serving,
        ..Observation::default()
    }
}

struct Row {
    name: &'static str,
    observed: Observation,
    target: TargetSpec,
    policy: PolicySpec,
    prior: HeadroomState,
    action: Action,
    desired: u32,
    reasons: Vec<Reason>,
    /// For fail-static rows: a piece of the MetricsMissing detail (reasons are not compared).
    detail: Option<&'static str>,
    freeze: Option<bool>,
    hold: Option<Hold>,
    cooldown: Option<f64>,
}

/// Steady demand of 5 req/s served by 6 replicas (⌊5⌋+1): nothing to do. Each row below
/// changes only what its situation needs.
fn steady() -> Row {
    Row {
        name: "steady",
        observed: observe(&[5.0; 8], Some(6)),
        target: test_target(),
        policy: test_policy(),
        prior: HeadroomState::default(),
        action: Action::None,
        desired: 0,
        reasons: vec![Reason::Forecast],
        detail: None,
        freeze: None,
        hold: Some(Hold {
            spare: 0,
            until: NOW + 300.0,
        }),
        cooldown: None,
    }
}

fn prior(spare: u32) -> HeadroomState {
    HeadroomState {
        spare,
        ..HeadroomState::default()
    }
}

fn hold(spare: u32, until: f64) -> Option<Hold> {
    Some(Hold { spare, until })
}

fn fail_static_row(name: &'static str, observed: Observation, detail: &'static str) -> Row {
    let prior = HeadroomState {
        spare: 3,
        cooldown_until: Some(NOW + 10.0),
        hold: hold(5, NOW + 50.0),
        ..HeadroomState::default()
    };
    Row {
        name,
        observed,
        prior,
        action: Action::FailStatic,
        desired: 3,
        reasons: vec![],
        detail: Some(detail),
        hold: hold(5, NOW + 50.0),
        cooldown: Some(NOW + 10.0),
        ..steady()
    }
}

fn hpa(metric: HpaMetric) -> HpaStatus {
    HpaStatus {
        min_replicas: 1,
        max_replicas: 50,
        current_replicas: 3,
        desired_replicas: 3,
        metric,
    }
}

/// Flat 5 req/s, an HPA on one request in the system per replica running `current` of
/// `max` replicas, all ready.
fn next_step_observation(current: u32, max: u32) -> Observation {
    Observation {
        hpa: Some(HpaStatus {
            current_replicas: current,
            desired_replicas: current,
            max_replicas: max,
            ..hpa(HpaMetric::InSystemPerReplica {
                target_average: 1.0,
            })
        }),
        ..observe(&[5.0; 8], Some(current))
    }
}

/// No spare yet, a cached calibration with a lead-time band of 2 req/s.
fn band_of_two() -> HeadroomState {
    HeadroomState {
        calibration: Some(calibrated(2.0, 0.5)),
        ..prior(0)
    }
}

fn calibrated(band: f64, seasonal_weight: f64) -> Calibration {
    Calibration {
        computed_at: NOW - 60.0,
        quantile: 0.9,
        band: Some(band),
        seasonal_weight,
        coverage: Some(0.88),
        windows: 100,
        ..Calibration::default()
    }
}

mod commands;
mod hpa_floor;
mod props;
mod rows_inputs;
mod rows_rails;
mod rows_stages;
mod seasonal;
mod summary;

fn rows() -> Vec<Row> {
    let mut rows = rows_inputs::rows();
    rows.extend(rows_rails::rows());
    rows.extend(rows_stages::rows());
    rows
}

#[test]
fn decide_table() {
    for row in rows() {
        let plan = decide(&row.observed, &row.target, &row.policy, &row.prior, NOW);
        let name = row.name;
        assert_eq!(plan.action, row.action, "{name}: action; plan {plan:#?}");
        assert_eq!(
            plan.desired_spare, row.desired,
            "{name}: desired; plan {plan:#?}"
        );
        assert_eq!(plan.current_spare, row.prior.spare, "{name}: current");
        match row.detail {
            Some(piece) => match plan.reasons.as_slice() {
                [Reason::MetricsMissing { detail }, rest @ ..] => {
                    assert!(detail.contains(piece), "{name}: detail {detail:?}");
                    assert_eq!(
                        rest,
                        row.reasons.as_slice(),
                        "{name}: reasons after the detail"
                    );
                }
                other => panic!("{name}: reasons {other:?}"),
            },
            None => assert_eq!(plan.reasons, row.reasons, "{name}: reasons"),
        }
        assert_eq!(plan.freeze_consolidation, row.freeze, "{name}: freeze");
        let next = &plan.next_state;
        assert_eq!(next.spare, row.desired, "{name}: next spare");
        assert_eq!(next.hold, row.hold, "{name}: hold");
        assert_eq!(next.cooldown_until, row.cooldown, "{name}: cooldown");
        assert_eq!(next.last_tick, Some(NOW), "{name}: last tick");
        assert_eq!(
            next.replacement_reserved, row.prior.replacement_reserved,
            "{name}: the tick never changes the reserve"
        );
    }
}

#[test]
fn realistic_sizing_uses_erlang_c() {
    // 1 req/s, 8 s per request, 4 slots per replica, 2 s target: a = 8 Erlangs.
    // 2 replicas (c = 8) are unstable; 3 replicas (c = 12): C(12, 8) from the textbook sum
    // Σ_{k<12} 8^k/k! = 2647.3 and 8^12/12!·12/4 = 143.46·3 = 430.4: C = 430.4/3077.7
    // = 0.140, W = 0.140·8/(12−8) = 0.28 s ≤ 2 s. So 3 replicas; with 3 serving, no spare.
    let observed = Observation {
        service_time_s: series_ending(NOW, &[8.0]),
        ..observe(&[1.0; 8], Some(3))
    };
    let target = TargetSpec {
        replica_concurrency: 4,
        ..test_target()
    };
    let policy = PolicySpec::default();
    let plan = decide(&observed, &target, &policy, &HeadroomState::default(), NOW);
    assert_eq!(plan.forecast.replicas_now, 3);
    assert_eq!(plan.desired_spare, 0);
}
