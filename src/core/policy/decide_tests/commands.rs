//! One target's tick as commands (`plan_target`): skipped, or the plan, the residual's verdict,
//! the calibration cache kept and the HPA floor's write, from what the observe phase read.

use super::*;
use crate::spec::Calibration;

const NOON: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z

#[test]
fn overlapping_invocations_are_detected_within_half_a_tick() {
    let cases = [
        (None, false),
        (Some(NOON - 15.0), false),
        (Some(NOON - 7.5), false),
        (Some(NOON - 7.0), true),
        (Some(NOON), true),
        (Some(NOON + 3.0), true),
        (Some(NOON + 20.0), false),
    ];
    for (last, expected) in cases {
        assert_eq!(acted_recently(last, NOON, 15.0), expected, "{last:?}");
    }
}

fn target(hpa: Option<bool>) -> TargetSpec {
    let mut t = serde_json::json!({
        "name": "llama", "nodePool": "gpu", "maxSpare": 8,
        "headroom": {"kind": "balloon", "namespace": "prewarm", "name": "balloon-gpu"}
    });
    if let Some(raise) = hpa {
        t["hpa"] =
            serde_json::json!({"namespace": "ml", "name": "llama", "raiseMinReplicas": raise});
    }
    serde_json::from_value(t).unwrap()
}

fn calibration(computed_at: f64) -> Calibration {
    Calibration {
        computed_at,
        ..Calibration::default()
    }
}

/// The situations of one target's tick at noon, TICK_SECONDS 15, with no metrics at all
/// (so the plan fails static: what the floor does then is `Hold`, never a lowering). Each
/// row's commands by hand:
/// - written 5 s ago (< 7.5 s, half a tick): skipped, at that time;
/// - written 20 s ago, no HPA: acts, no floor command;
/// - HPA with the raise: hold the floor, lease 300 s (SCALE_DOWN_DELAY_SECONDS' default,
///   above `floor_lease_s`'s 120 s minimum), unchanged reported;
/// - HPA without the raise: give it back, unchanged not reported;
/// - a failed history read (first in a row): failures 1, retried one tick later (15 s);
/// - the environment's calibration (computed 60 s ago) is newer than the object's (600 s
///   ago): the cache keeps it.
#[test]
fn a_targets_commands_per_situation() {
    let policy = PolicySpec::default();
    // (name, last tick, raise, read outcome, object's calibration, environment's,
    //  skipped at, floor (intent, report unchanged), failures, retry at, cache computed at)
    type Row<'a> = (
        &'a str,
        Option<f64>,
        Option<bool>,
        ReadOutcome,
        Option<f64>,
        Option<f64>,
        Option<f64>,
        Option<(FloorIntent, bool)>,
        u32,
        Option<f64>,
        Option<f64>,
    );
    let rows: [Row; 6] = [
        (
            "acted 5 s ago",
            Some(NOON - 5.0),
            None,
            ReadOutcome::NotRead,
            None,
            None,
            Some(NOON - 5.0),
            None,
            0,
            None,
            None,
        ),
        (
            "no HPA",
            Some(NOON - 20.0),
            None,
            ReadOutcome::NotRead,
            None,
            None,
            None,
            None,
            0,
            None,
            None,
        ),
        (
            "raise on",
            None,
            Some(true),
            ReadOutcome::NotRead,
            None,
            None,
            None,
            Some((FloorIntent::Hold, true)),
            0,
            None,
            None,
        ),
        (
            "raise off",
            None,
            Some(false),
            ReadOutcome::NotRead,
            None,
            None,
            None,
            Some((FloorIntent::Restore, false)),
            0,
            None,
            None,
        ),
        (
            "history failed",
            None,
            None,
            ReadOutcome::Failed,
            None,
            None,
            None,
            None,
            1,
            Some(NOON + 15.0),
            None,
        ),
        (
            "environment's newer",
            None,
            None,
            ReadOutcome::NotRead,
            Some(NOON - 600.0),
            Some(NOON - 60.0),
            None,
            None,
            0,
            None,
            Some(NOON - 60.0),
        ),
    ];
    for (name, last, raise, read, on_object, kept, skipped, floor, failures, retry, cached) in rows
    {
        let seen = TargetSeen {
            state: HeadroomState {
                last_tick: last,
                calibration: on_object.map(calibration),
                ..HeadroomState::default()
            },
            calibrations: CalibrationCache {
                calibration: kept.map(calibration),
                ..CalibrationCache::default()
            },
            calibration_read: read,
            ..TargetSeen::default()
        };
        let acts = match plan_target(seen, &target(raise), &policy, NOON) {
            TargetCommands::Skip { acted_at } => {
                assert_eq!(Some(acted_at), skipped, "{name}");
                continue;
            }
            TargetCommands::Act(acts) => acts,
        };
        assert_eq!(skipped, None, "{name}");
        assert_eq!(acts.plan.action, Action::FailStatic, "{name}");
        assert_eq!(
            acts.floor.map(|f| (f.intent, f.report_unchanged)),
            floor,
            "{name}"
        );
        if let Some(f) = acts.floor {
            assert_eq!(f.lease_s, 300.0, "{name}");
        }
        assert_eq!(acts.residual, None, "{name}: no samples, no verdict");
        assert_eq!(acts.calibrations.failures, failures, "{name}");
        assert_eq!(acts.calibrations.retry_at, retry, "{name}");
        assert_eq!(
            acts.calibrations.calibration.map(|c| c.computed_at),
            cached,
            "{name}"
        );
    }
}

/// The pool's frozen consolidation reaches the decision as the prior state: a plan that
/// fails static keeps what it was given, so a frozen pool's plan carries `true` on.
#[test]
fn the_pools_freeze_is_the_decisions_prior() {
    for frozen in [false, true] {
        let seen = TargetSeen {
            pool_frozen: frozen,
            ..TargetSeen::default()
        };
        let TargetCommands::Act(acts) =
            plan_target(seen, &target(None), &PolicySpec::default(), NOON)
        else {
            panic!("no last tick: never skipped");
        };
        assert_eq!(acts.plan.next_state.consolidation_frozen, frozen);
    }
}
