//! decide() table rows about the rails: hold and scale-down delay, cooldown, step limits, the GPU
//! cap, pending pods, drains' reserved replacements, floor and ceiling, consolidation freeze.

use super::*;

pub(super) fn rows() -> Vec<Row> {
    let freezing = TargetSpec {
        freeze_consolidation: true,
        ..test_target()
    };
    vec![
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
                scale_down_delay: ScaleDownDelay::Seconds(0.0),
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
    ]
}
