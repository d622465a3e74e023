//! decide()'s table tests: situations with a fixed clock and the decision expected, worked
//! out by hand.

use super::*;
use crate::policy::observation::{HpaMetric, HpaStatus, Sample, SeasonSeries};
use crate::spec::{HeadroomKind, Hold, ScheduleWindow};

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

fn rows() -> Vec<Row> {
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
        Row {
            // Demand fell to 2 (3 replicas, all serving): raw 0. Step-down would give 5,
            // the hold of 6 until NOW+100 keeps 6.
            name: "decay, hold active",
            observed: observe(&[2.0; 8], Some(3)),
            prior: HeadroomState {
                hold: hold(6, NOW + 100.0),
                ..prior(6)
            },
            action: Action::None,
            desired: 6,
            reasons: vec![
                Reason::Forecast,
                Reason::StepDownLimited { max_step_down: 1 },
                Reason::ScaleDownDelay {
                    hold_spare: 6,
                    until: NOW + 100.0,
                },
            ],
            hold: hold(6, NOW + 100.0),
            ..steady()
        },
        Row {
            // Same, the hold ran out: one step down to 5, a new hold of the wanted 0.
            name: "decay, hold expired",
            observed: observe(&[2.0; 8], Some(3)),
            prior: HeadroomState {
                hold: hold(6, NOW - 1.0),
                ..prior(6)
            },
            action: Action::ScaleDown,
            desired: 5,
            reasons: vec![
                Reason::Forecast,
                Reason::StepDownLimited { max_step_down: 1 },
            ],
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // A hold above the current spare (a burst the step limit cut short) only
            // blocks decreases: from 4 the step gives 3, the hold keeps 4, never 8.
            name: "hold never raises the spare",
            observed: observe(&[2.0; 8], Some(3)),
            prior: HeadroomState {
                hold: hold(8, NOW + 100.0),
                ..prior(4)
            },
            desired: 4,
            reasons: vec![
                Reason::Forecast,
                Reason::StepDownLimited { max_step_down: 1 },
                Reason::ScaleDownDelay {
                    hold_spare: 8,
                    until: NOW + 100.0,
                },
            ],
            hold: hold(8, NOW + 100.0),
            ..steady()
        },
        Row {
            // A cooldown that ended at NOW−1 no longer blocks: 5 → 4, a new cooldown.
            name: "cooldown over",
            prior: HeadroomState {
                cooldown_until: Some(NOW - 1.0),
                ..prior(5)
            },
            action: Action::ScaleDown,
            desired: 4,
            reasons: vec![
                Reason::Forecast,
                Reason::StepDownLimited { max_step_down: 1 },
            ],
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // raw 0 from 6 with max step down 2 → 4.
            name: "step down limit",
            target: TargetSpec {
                max_step_down: 2,
                ..test_target()
            },
            prior: prior(6),
            action: Action::ScaleDown,
            desired: 4,
            reasons: vec![
                Reason::Forecast,
                Reason::StepDownLimited { max_step_down: 2 },
            ],
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // raw 0 from 5: step gives 4, the cooldown until NOW+30 keeps 5.
            name: "cooldown blocks scale-down",
            prior: HeadroomState {
                cooldown_until: Some(NOW + 30.0),
                ..prior(5)
            },
            action: Action::None,
            desired: 5,
            reasons: vec![
                Reason::Forecast,
                Reason::StepDownLimited { max_step_down: 1 },
                Reason::Cooldown { until: NOW + 30.0 },
            ],
            cooldown: Some(NOW + 30.0),
            ..steady()
        },
        Row {
            // 5 req/s needs 6, 3 serve → raw 3; the cooldown does not gate scale-up and
            // the change starts a new one.
            name: "cooldown lets scale-up through",
            observed: observe(&[5.0; 8], Some(3)),
            prior: HeadroomState {
                cooldown_until: Some(NOW + 30.0),
                ..prior(0)
            },
            action: Action::ScaleUp,
            desired: 3,
            hold: hold(3, NOW + 300.0),
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
                arrival_rate: series_ending(NOW - 121.0, &[5.0; 8]),
                ..observe(&[], Some(6))
            },
            "121 s old",
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
            // 2 GPUs per replica, cap 8 GPUs = 4 replicas; 3 serve → room 1 of raw 3.
            name: "GPU cap reached",
            observed: observe(&[5.0; 8], Some(3)),
            target: TargetSpec {
                gpus_per_replica: 2,
                gpu_cap: Some(8),
                ..test_target()
            },
            action: Action::ScaleUp,
            desired: 1,
            reasons: vec![Reason::Forecast, Reason::GpuCap { gpu_cap: 8 }],
            hold: hold(1, NOW + 300.0),
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // 4 replicas serve on 2 GPUs each = the whole cap of 8: room 0. The floor (2)
            // and the step-down limit (5 → 4) both yield to the cap.
            name: "GPU cap wins over floor and step",
            observed: observe(&[3.0; 8], Some(4)),
            target: TargetSpec {
                gpus_per_replica: 2,
                gpu_cap: Some(8),
                min_spare: 2,
                ..test_target()
            },
            prior: prior(5),
            action: Action::ScaleDown,
            desired: 0,
            reasons: vec![
                Reason::Forecast,
                Reason::Floor { min_spare: 2 },
                Reason::GpuCap { gpu_cap: 8 },
                Reason::StepDownLimited { max_step_down: 1 },
                Reason::GpuCap { gpu_cap: 8 },
            ],
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // 5 req/s needs 6; 3 serve and 2 are pending → need now 5, raw 1. From 4 the
            // step would give 3; pending pods (no fast path) forbid scale-down.
            name: "pending pods",
            observed: Observation {
                pending_pods: 2,
                ..observe(&[5.0; 8], Some(3))
            },
            prior: prior(4),
            action: Action::None,
            desired: 4,
            reasons: vec![
                Reason::Forecast,
                Reason::StepDownLimited { max_step_down: 1 },
                Reason::PendingPods { count: 2 },
            ],
            hold: hold(1, NOW + 300.0),
            ..steady()
        },
        Row {
            // Same signals from 0: pending pods count into the need (raw 1, not 3).
            name: "pending pods count as in use",
            observed: Observation {
                pending_pods: 2,
                ..observe(&[5.0; 8], Some(3))
            },
            action: Action::ScaleUp,
            desired: 1,
            reasons: vec![Reason::Forecast, Reason::PendingPods { count: 2 }],
            hold: hold(1, NOW + 300.0),
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // Spare 3 of which 2 reserved for replacements: the tick's share is 1, raw 0
            // → 0, plus the reserve → 2.
            name: "replacement reserved is kept",
            prior: HeadroomState {
                replacement_reserved: 2,
                ..prior(3)
            },
            action: Action::ScaleDown,
            desired: 2,
            reasons: vec![
                Reason::Forecast,
                Reason::ReplacementReserved { replicas: 2 },
            ],
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // 11 req/s needs 12, 3 serve → raw 9, ceiling 3; the reserve of 2 goes on
            // top of the ceiling: 5.
            name: "replacement reserved above ceiling",
            observed: observe(&[11.0; 8], Some(3)),
            target: TargetSpec {
                max_spare: 3,
                ..test_target()
            },
            prior: HeadroomState {
                replacement_reserved: 2,
                ..prior(2)
            },
            action: Action::ScaleUp,
            desired: 5,
            reasons: vec![
                Reason::Forecast,
                Reason::Ceiling { max_spare: 3 },
                Reason::ReplacementReserved { replicas: 2 },
            ],
            hold: hold(3, NOW + 300.0),
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            name: "floor",
            target: TargetSpec {
                min_spare: 2,
                ..test_target()
            },
            prior: prior(2),
            desired: 2,
            reasons: vec![Reason::Forecast, Reason::Floor { min_spare: 2 }],
            hold: hold(2, NOW + 300.0),
            ..steady()
        },
        Row {
            // Floor 6 from 0: the step-up limit (4) yields to the floor.
            name: "floor met past the step limit",
            target: TargetSpec {
                min_spare: 6,
                ..test_target()
            },
            action: Action::ScaleUp,
            desired: 6,
            reasons: vec![
                Reason::Forecast,
                Reason::Floor { min_spare: 6 },
                Reason::StepUpLimited { max_step_up: 4 },
                Reason::Floor { min_spare: 6 },
            ],
            hold: hold(6, NOW + 300.0),
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // 11 req/s → 12 replicas, 3 serve → raw 9, ceiling 3, already there.
            name: "ceiling",
            observed: observe(&[11.0; 8], Some(3)),
            target: TargetSpec {
                max_spare: 3,
                ..test_target()
            },
            prior: prior(3),
            desired: 3,
            reasons: vec![Reason::Forecast, Reason::Ceiling { max_spare: 3 }],
            hold: hold(3, NOW + 300.0),
            ..steady()
        },
        Row {
            // Ceiling lowered to 3 under a spare of 6: the step-down limit (→ 5) yields.
            name: "ceiling below current spare",
            target: TargetSpec {
                max_spare: 3,
                ..test_target()
            },
            prior: prior(6),
            action: Action::ScaleDown,
            desired: 3,
            reasons: vec![
                Reason::Forecast,
                Reason::StepDownLimited { max_step_down: 1 },
                Reason::Ceiling { max_spare: 3 },
            ],
            cooldown: Some(NOW + 60.0),
            ..steady()
        },
        Row {
            // Flat demand, frozen, no hold: restore consolidation.
            name: "unfreeze when flat and hold expired",
            target: freezing.clone(),
            prior: HeadroomState {
                consolidation_frozen: true,
                ..prior(0)
            },
            freeze: Some(false),
            ..steady()
        },
        Row {
            // Flat demand but the hold still runs: leave consolidation as it is.
            name: "freeze kept while hold lasts",
            target: freezing.clone(),
            prior: HeadroomState {
                consolidation_frozen: true,
                hold: hold(2, NOW + 100.0),
                ..prior(2)
            },
            desired: 2,
            reasons: vec![
                Reason::Forecast,
                Reason::StepDownLimited { max_step_down: 1 },
                Reason::ScaleDownDelay {
                    hold_spare: 2,
                    until: NOW + 100.0,
                },
            ],
            freeze: None,
            hold: hold(2, NOW + 100.0),
            ..steady()
        },
        Row {
            // COOLDOWN_SECONDS=0: a change persists no cooldown (5 req/s needs 6, 3 serve
            // → 3 from 0), and the next tick may step down at once.
            name: "cooldown 0 persists none",
            observed: observe(&[5.0; 8], Some(3)),
            policy: PolicySpec {
                cooldown_s: 0.0,
                ..test_policy()
            },
            action: Action::ScaleUp,
            desired: 3,
            hold: hold(3, NOW + 300.0),
            cooldown: None,
            ..steady()
        },
        Row {
            // COOLDOWN_SECONDS=0 with an old cooldown still running (the setting was
            // lowered): it still blocks the step down and is kept.
            name: "cooldown 0 keeps an old cooldown",
            policy: PolicySpec {
                cooldown_s: 0.0,
                ..test_policy()
            },
            prior: HeadroomState {
                cooldown_until: Some(NOW + 30.0),
                ..prior(2)
            },
            desired: 2,
            reasons: vec![
                Reason::Forecast,
                Reason::StepDownLimited { max_step_down: 1 },
                Reason::Cooldown { until: NOW + 30.0 },
            ],
            cooldown: Some(NOW + 30.0),
            ..steady()
        },
        Row {
            // SCALE_DOWN_DELAY_SECONDS=0: no hold is persisted; 2 → 1 in one step.
            name: "scale-down delay 0",
            policy: PolicySpec {
                scale_down_delay_s: 0.0,
                ..test_policy()
            },
            prior: prior(2),
            action: Action::ScaleDown,
            desired: 1,
            reasons: vec![
                Reason::Forecast,
                Reason::StepDownLimited { max_step_down: 1 },
            ],
            hold: None,
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
    ];
    rows.extend(blind_rows);
    rows
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
        by_hour: vec![],
        seasonal_weight,
        coverage: Some(0.88),
        windows: 100,
        note: None,
    }
}

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

use proptest::prelude::*;

fn arb_rates() -> impl Strategy<Value = Vec<f64>> {
    proptest::collection::vec(prop_oneof![8 => 0.0f64..200.0, 1 => Just(f64::NAN)], 0..40)
}

prop_compose! {
    fn arb_case()(
        rates in arb_rates(),
        service in prop_oneof![Just(f64::NAN), 0.05f64..30.0],
        serving in proptest::option::of(0u32..300),
        pending in 0u32..20,
        spare in 0u32..60,
        reserved in 0u32..10,
        hold_spare in proptest::option::of((0u32..60, -400.0f64..400.0)),
        cooldown in proptest::option::of(-100.0f64..100.0),
        min in 0u32..10,
        extra in 0u32..30,
        up in 1u32..8,
        down in 0u32..8,
        concurrency in 1u32..16,
    ) -> (Observation, TargetSpec, HeadroomState) {
        let observed = Observation {
            arrival_rate: series_ending(NOW, &rates),
            service_time_s: series_ending(NOW, &[service]),
            serving_replicas: serving,
            pending_pods: pending,
            ..Observation::default()
        };
        let target = TargetSpec {
            min_spare: min,
            max_spare: min + extra,
            max_step_up: up,
            max_step_down: down,
            replica_concurrency: concurrency,
            ..test_target()
        };
        let prior = HeadroomState {
            spare: spare + reserved,
            replacement_reserved: reserved,
            hold: hold_spare.map(|(spare, dt)| Hold { spare, until: NOW + dt }),
            cooldown_until: cooldown.map(|dt| NOW + dt),
            ..HeadroomState::default()
        };
        (observed, target, prior)
    }
}

proptest! {
    #[test]
    fn desired_stays_within_floor_and_ceiling((observed, target, prior) in arb_case()) {
        let plan = decide(&observed, &target, &PolicySpec::default(), &prior, NOW);
        if plan.action != Action::FailStatic {
            let own = plan.desired_spare - prior.replacement_reserved;
            prop_assert!(own >= target.min_spare && own <= target.max_spare,
                "{own} outside [{}, {}]: {plan:?}", target.min_spare, target.max_spare);
        }
        prop_assert!(plan.desired_spare >= prior.replacement_reserved);
    }

    #[test]
    fn fail_static_never_lowers_spare(
        (observed, target, prior) in arb_case(),
        problem in proptest::option::of("[a-z ]{1,20}"),
        age in 0.0f64..1000.0,
    ) {
        let observed = Observation {
            problem,
            arrival_rate: observed.arrival_rate.iter()
                .map(|s| Sample::new(s.t - age, s.v)).collect(),
            ..observed
        };
        let plan = decide(&observed, &target, &PolicySpec::default(), &prior, NOW);
        if plan.action == Action::FailStatic {
            // Never lower; raised only to a floor (minSpare: arb_case has no schedules).
            prop_assert!(plan.desired_spare >= prior.spare, "{plan:?}");
            let own = prior.spare.saturating_sub(prior.replacement_reserved);
            if own >= target.min_spare {
                prop_assert_eq!(plan.desired_spare, prior.spare);
            }
        }
        let stale = age > PolicySpec::default().stale_after_s;
        if observed.problem.is_some() || stale || observed.arrival_rate.is_empty() {
            prop_assert_eq!(plan.action, Action::FailStatic);
        }
    }

    #[test]
    fn never_above_the_gpu_cap(
        (observed, target, prior) in arb_case(),
        gpus in 1u32..8,
        cap in 8u32..200,
    ) {
        let target = TargetSpec { gpus_per_replica: gpus, gpu_cap: Some(cap), ..target };
        let plan = decide(&observed, &target, &PolicySpec::default(), &prior, NOW);
        if plan.action != Action::FailStatic {
            let own = plan.desired_spare - prior.replacement_reserved;
            let in_use = observed.serving_replicas.unwrap_or(plan.forecast.replicas_now)
                + observed.pending_pods;
            prop_assert!(own == 0 || (in_use + own) * gpus <= cap, "{plan:?}");
        }
    }

    #[test]
    fn pending_pods_release_only_what_they_take((observed, target, prior) in arb_case()) {
        // While pods are pending the spare never falls, unless the ceiling cuts it; while
        // the fast path acts it falls by at most the pods pending (they take the room of
        // the spare it ordered for them).
        let plan = decide(&observed, &target, &PolicySpec::default(), &prior, NOW);
        let ceiling_cut = prior.spare - prior.replacement_reserved > target.max_spare;
        let fast = plan.reasons.iter().any(|r| matches!(r, Reason::FastPath { .. }));
        if observed.pending_pods > 0 && !ceiling_cut {
            let released = if fast { observed.pending_pods } else { 0 };
            prop_assert!(plan.desired_spare + released >= prior.spare, "{plan:?}");
        }
    }
}
