//! decide() table rows about the stages beside the forecast: the fast path, sizing in the HPA's
//! units and its next step, scheduled windows, the seasonal blend with a calibrated band.

use super::*;

pub(super) fn rows() -> Vec<Row> {
    vec![
        Row {
            // 6 ready replicas of 1 slot; waiting 12 + running 6 = 18 ≥ 2 × 6: the fast
            // path fires. End of ramp max(18, 5 req/s × 1 s) = 18 replicas, 6 in place →
            // 12, past the step-up limit of 4 in one tick. The hold remembers only what the
            // forecast wants (0): the fast path's spare is for replicas being created now.
            name: "fast path",
            observed: Observation {
                waiting: series_ending(NOW, &[12.0, 12.0]),
                running: series_ending(NOW, &[6.0, 6.0]),
                ..observe(&[5.0; 8], Some(6))
            },
            action: Action::ScaleUp,
            desired: 12,
            reasons: vec![
                Reason::Forecast,
                Reason::FastPath {
                    in_system: 18.0,
                    ready_slots: 6.0,
                    replicas: 18,
                },
            ],
            hold: hold(0, NOW + 300.0),
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // The tick after "fast path": its 12 are ordered, and the HPA's 12 new pods
            // are pending on the nodes they launched (the queue still triggers it). In
            // place 6 + 12 pending = the 18 it wants → its own spare 0, the forecast's 0.
            // The pending pods take the 12 placeholders' nodes, so the spare is handed to
            // them at once (holding it would launch a second node for each pod).
            name: "fast path hands its spare to the pods it was for",
            observed: Observation {
                waiting: series_ending(NOW, &[12.0, 12.0]),
                running: series_ending(NOW, &[6.0, 6.0]),
                pending_pods: 12,
                ..observe(&[5.0; 8], Some(6))
            },
            prior: prior(12),
            action: Action::ScaleDown,
            desired: 0,
            reasons: vec![
                Reason::Forecast,
                Reason::FastPath {
                    in_system: 18.0,
                    ready_slots: 6.0,
                    replicas: 18,
                },
                Reason::PendingPods { count: 12 },
            ],
            hold: hold(0, NOW + 300.0),
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // Below the trigger (waiting 5 + running 6 = 11 < 12): nothing.
            name: "fast path below its trigger",
            observed: Observation {
                waiting: series_ending(NOW, &[5.0, 5.0]),
                running: series_ending(NOW, &[6.0, 6.0]),
                ..observe(&[5.0; 8], Some(6))
            },
            ..steady()
        },
        Row {
            // HPA units: 1 request in the system per replica; 5 req/s × 1 s = 5 in system
            // → the HPA wants 5. 3 ready + 1 loading in place → spare 1. (Erlang C would
            // want 6 against 3 serving: 3.)
            name: "HPA units",
            observed: Observation {
                hpa: Some(hpa(HpaMetric::InSystemPerReplica {
                    target_average: 1.0,
                })),
                loading_replicas: Some(1),
                ..observe(&[5.0; 8], Some(3))
            },
            action: Action::ScaleUp,
            desired: 1,
            hold: hold(1, NOW + 300.0),
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // The HPA runs 7 (its noise overshoot) for 5 req/s; the calibrated band 2 makes
            // the upper 7 req/s → the HPA wants 7, 7 ready → the forecast's spare 0. The
            // upper band is above the 5 observed, the HPA is below its max 50: one step.
            name: "next step: the HPA's next scale-out lands warm",
            target: TargetSpec {
                next_step_spare: 1,
                ..test_target()
            },
            observed: next_step_observation(7, 50),
            prior: band_of_two(),
            action: Action::ScaleUp,
            desired: 1,
            reasons: vec![Reason::Forecast, Reason::NextStep { replicas: 1 }],
            hold: hold(1, NOW + 300.0),
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // The same with nextStepSpare 0 (the default): the forecast's 0.
            name: "next step off",
            observed: next_step_observation(7, 50),
            prior: band_of_two(),
            ..steady()
        },
        Row {
            // The HPA at its max 7 cannot scale out: no step.
            name: "next step at the HPA's max",
            target: TargetSpec {
                next_step_spare: 1,
                ..test_target()
            },
            observed: next_step_observation(7, 7),
            prior: band_of_two(),
            ..steady()
        },
        Row {
            // An HPA on CPU: Erlang C (6 for 5 req/s, 6 serve → 0), and the log says why.
            name: "HPA metric not predictable",
            observed: Observation {
                hpa: Some(hpa(HpaMetric::Unpredictable {
                    why: "resource cpu".into(),
                })),
                ..observe(&[5.0; 8], Some(6))
            },
            reasons: vec![
                Reason::Forecast,
                Reason::QueueSizing {
                    why: "HPA metric not predictable from the queue: resource cpu".into(),
                },
            ],
            ..steady()
        },
        Row {
            // A window every minute lasting 2 minutes is always on: its minimum 3 is a
            // floor, logged as the window's.
            name: "scheduled window",
            target: TargetSpec {
                schedules: vec![ScheduleWindow {
                    cron: "* * * * *".into(),
                    time_zone: None,
                    duration_seconds: 120.0,
                    min_spare: 3,
                }],
                ..test_target()
            },
            action: Action::ScaleUp,
            desired: 3,
            reasons: vec![
                Reason::Forecast,
                Reason::Scheduled {
                    min_spare: 3,
                    window: 0,
                },
            ],
            hold: hold(3, NOW + 300.0),
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // Cached calibration: band 2, seasonal weight 0.5. Trend 5 (flat); yesterday was
            // 5 over the window too (scale 1) and 9 over the next lead time: blend
            // 0.5·5 + 0.5·9 = 7, + 2 = 9 req/s → 10 replicas, 6 serve → 4. The trend alone
            // (5 + 2 = 7 → 8 replicas) asks for 2 fewer: a seasonal rise of 2.
            name: "seasonal blend with a calibrated band",
            observed: Observation {
                seasonal: vec![SeasonSeries {
                    period_s: 86_400.0,
                    samples: series_ending(NOW + 180.0, &[&[5.0; 8][..], &[9.0; 12][..]].concat()),
                }],
                ..observe(&[5.0; 8], Some(6))
            },
            prior: HeadroomState {
                calibration: Some(calibrated(2.0, 0.5)),
                ..prior(0)
            },
            action: Action::ScaleUp,
            desired: 4,
            reasons: vec![Reason::Forecast, Reason::SeasonalRise { replicas: 2 }],
            hold: hold(4, NOW + 300.0),
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
    ]
}
