//! decide() table rows about its inputs: what the forecast and sizing make of the series, and
//! failing static when the inputs cannot be trusted (holding, or raising only to a floor).

use super::*;

pub(super) fn rows() -> Vec<Row> {
    let freezing = TargetSpec {
        freeze_consolidation: true,
        ..test_target()
    };
    // Failing static with a floor above what is held: a target without metrics (scaled to zero:
    // no pods, so no series) still gets its floor, within the ceiling and the GPU cap. Values by
    // hand: the floor, or the room the cap leaves (cap 4 GPUs / 1 per replica - 3 serving = 1).
    let blind =
        |name, target: TargetSpec, prior_spare: u32, serving: Option<u32>, desired, reasons| Row {
            name,
            target,
            observed: Observation {
                serving_replicas: serving,
                ..Observation::default()
            },
            prior: HeadroomState {
                spare: prior_spare,
                ..HeadroomState::default()
            },
            action: Action::FailStatic,
            desired,
            reasons,
            detail: Some("arrival rate series is empty"),
            hold: None,
            cooldown: None,
            ..steady()
        };
    let every_minute = ScheduleWindow {
        cron: "* * * * *".into(),
        time_zone: None,
        duration_seconds: 3600.0,
        min_spare: 4,
    };
    let blind_rows = vec![
        blind(
            "failing static raises to minSpare",
            TargetSpec {
                min_spare: 2,
                ..test_target()
            },
            0,
            None,
            2,
            vec![Reason::Floor { min_spare: 2 }],
        ),
        blind(
            "failing static raises to a scheduled window (no pods, no metrics)",
            TargetSpec {
                schedules: vec![every_minute.clone()],
                ..test_target()
            },
            1,
            None,
            4,
            vec![Reason::Scheduled {
                min_spare: 4,
                window: 0,
            }],
        ),
        blind(
            "failing static: the GPU cap bounds the floor",
            TargetSpec {
                min_spare: 3,
                gpu_cap: Some(4),
                ..test_target()
            },
            0,
            Some(3),
            1,
            vec![
                Reason::Floor { min_spare: 3 },
                Reason::GpuCap { gpu_cap: 4 },
            ],
        ),
        blind(
            "failing static: a GPU cap with no count of what serves holds",
            TargetSpec {
                min_spare: 3,
                gpu_cap: Some(4),
                ..test_target()
            },
            0,
            None,
            0,
            vec![],
        ),
        blind(
            "failing static never lowers to the floor",
            TargetSpec {
                min_spare: 2,
                ..test_target()
            },
            5,
            None,
            5,
            vec![],
        ),
    ];
    let mut rows = vec![
        steady(),
        Row {
            // Serving unknown: in use = replicas for the current rate (6), same answer.
            name: "serving unknown",
            observed: observe(&[5.0; 8], None),
            ..steady()
        },
        Row {
            // α=β=φ=1, lead 3 steps, rates 2,3,4,5: level 5, trend 1, one-step errors
            // [1,0,0] → ⌈0.9·3⌉ = 3rd smallest = 1; upper 5 + 3·1 + 1 = 9 → 10 replicas.
            // 6 serve now → raw spare 4, exactly the step-up limit. Point forecast 8 needs
            // 9 > 6 for level 5, so consolidation freezes.
            name: "ramp",
            observed: observe(&[2.0, 3.0, 4.0, 5.0], Some(6)),
            target: freezing.clone(),
            policy: PolicySpec {
                ewma_alpha: 1.0,
                trend_beta: 1.0,
                trend_damping: 1.0,
                lead_time_s: 45.0,
                ..test_policy()
            },
            action: Action::ScaleUp,
            desired: 4,
            freeze: Some(true),
            hold: hold(4, NOW + 300.0),
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // Plain EWMA (β=0, α=0.5): ten samples at 2 then 10 → level 6, errors nine 0s
            // and one 8 → ⌈0.9·10⌉ = 9th smallest = 0. The horizon rate is
            // max(6, observed 10) = 10 → 11 replicas; 3 serve → raw 8, step-limited to 4.
            name: "burst",
            observed: observe(
                &[2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 10.0],
                Some(3),
            ),
            policy: PolicySpec {
                ewma_alpha: 0.5,
                trend_beta: 0.0,
                ..test_policy()
            },
            action: Action::ScaleUp,
            desired: 4,
            reasons: vec![Reason::Forecast, Reason::StepUpLimited { max_step_up: 4 }],
            hold: hold(8, NOW + 300.0),
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        fail_static_row(
            "missing data",
            Observation {
                arrival_rate: vec![],
                ..observe(&[], Some(6))
            },
            "arrival rate series is empty",
        ),
        fail_static_row(
            "NaN series",
            observe(&[f64::NAN; 8], Some(6)),
            "no finite sample",
        ),
        fail_static_row(
            "stale data",
            Observation {
                // STALE_AFTER_SECONDS 120 + INGESTION_LAG_SECONDS 30: 151 s is one too many.
                arrival_rate: series_ending(NOW - 151.0, &[5.0; 8]),
                ..observe(&[], Some(6))
            },
            "151 s old",
        ),
        fail_static_row(
            "source problem",
            Observation {
                problem: Some("prometheus: connection refused".into()),
                ..observe(&[5.0; 8], Some(6))
            },
            "connection refused",
        ),
        fail_static_row("single sample", observe(&[5.0], Some(6)), "fewer than two"),
        fail_static_row(
            "service time missing under load",
            Observation {
                service_time_s: series_ending(NOW, &[f64::NAN, 0.0]),
                ..observe(&[5.0; 8], Some(6))
            },
            "service time",
        ),
        Row {
            // No demand and no completed request: sizing needs no service time; 0 needed.
            name: "idle without service time",
            observed: Observation {
                service_time_s: vec![],
                ..observe(&[0.0; 8], Some(0))
            },
            prior: prior(2),
            action: Action::ScaleDown,
            desired: 1,
            reasons: vec![
                Reason::Forecast,
                Reason::StepDownLimited { max_step_down: 1 },
            ],
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // Fail static on a target that freezes consolidation: the budgets are left as
            // they are (None), whatever the forecast would have said.
            name: "fail static leaves a freeze alone",
            target: freezing.clone(),
            prior: HeadroomState {
                consolidation_frozen: true,
                cooldown_until: Some(NOW + 10.0),
                hold: hold(5, NOW + 50.0),
                ..prior(3)
            },
            freeze: None,
            ..fail_static_row(
                "fail static leaves a freeze alone",
                observe(&[], Some(6)),
                "arrival rate series is empty",
            )
        },
    ];
    rows.extend(blind_rows);
    rows
}
