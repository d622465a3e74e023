//! One target's tick as commands: given everything its observe phase read (`TargetSeen`) and
//! the tick's `now`, what the executor writes (the headroom plan, the HPA floor) and keeps (the
//! calibration cache, the residual's verdict), or that the target is left alone this tick.
//! The reads happen before, the writes after (`handlers::tick::target`); nothing here waits.
//!
//! What stays with the executor, on purpose: the NodePool's limits and consolidation budgets
//! are planned against the pool and its nodes as they are right before the patch (the room of a
//! drain that started meanwhile, the version a headroom write on a static NodePool just moved),
//! and the floor's patch against the HPA as read in the same call (`floor::plan_beside_surge`).

use crate::floor::FloorIntent;
use crate::policy::calibration_cache::{CalibrationCache, ReadOutcome};
use crate::policy::residual::{self, TickVerdict};
use crate::{decide, Action, HeadroomState, Observation, Plan, PolicySpec, TargetSpec};

/// What one target's observe phase read, for the plan.
#[derive(Clone, Debug, Default)]
pub struct TargetSeen {
    /// Demand, pods, seasons, the HPA and, when it was due and read, the calibration history.
    pub observation: Observation,
    /// prewarm's state on the headroom object as read (its own calibration included).
    pub state: HeadroomState,
    /// Whether the NodePool as read has its consolidation frozen by prewarm.
    pub pool_frozen: bool,
    /// This execution environment's calibration cache before the tick.
    pub calibrations: CalibrationCache,
    /// How the calibration history read went (`observation.calibration_history`).
    pub calibration_read: ReadOutcome,
}

/// What one target's tick does.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetCommands {
    /// Another invocation acted on the headroom object at `acted_at`: nothing is decided or
    /// written, so two overlapping invocations never both act.
    Skip {
        acted_at: f64,
    },
    Act(Box<TargetActs>),
}

/// The commands of a target that acts this tick, in the executor's order.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetActs {
    /// The decision: written to the headroom object, then the NodePool's budgets follow
    /// `plan.freeze_consolidation`.
    pub plan: Plan,
    /// The residual's verdict on the newest sample (the report's UnforecastableShare).
    pub residual: Option<TickVerdict>,
    /// The calibration cache this environment keeps after the tick.
    pub calibrations: CalibrationCache,
    /// The HPA floor to write, None when the target names no HPA.
    pub floor: Option<FloorCommand>,
}

/// The HPA floor's write this tick.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloorCommand {
    pub intent: FloorIntent,
    /// How long the floor's lease lasts without a renewal (`PolicySpec::floor_lease_s`).
    pub lease_s: f64,
    /// Whether an unchanged floor is reported (a change or an error always is): only when the
    /// target asks for the raise.
    pub report_unchanged: bool,
}

/// Whether another invocation wrote this object less than half a tick ago: then this one
/// skips the target, so two overlapping invocations never both act.
pub fn acted_recently(last_tick: Option<f64>, now: f64, tick_s: f64) -> bool {
    last_tick.is_some_and(|t| (now - t).abs() < tick_s / 2.0)
}

/// The commands of `target`'s tick at `now`, deciding with `policy` (its lead time the
/// horizon the tick looks ahead by).
pub fn plan_target(
    seen: TargetSeen,
    target: &TargetSpec,
    policy: &PolicySpec,
    now: f64,
) -> TargetCommands {
    let TargetSeen {
        observation,
        mut state,
        pool_frozen,
        calibrations,
        calibration_read,
    } = seen;
    if acted_recently(state.last_tick, now, policy.tick_s) {
        return TargetCommands::Skip {
            acted_at: state.last_tick.unwrap_or_default(),
        };
    }
    state.consolidation_frozen = pool_frozen;
    // The calibration this environment computed is fresher than the object's under DRY_RUN
    // (nothing is written there): deciding with it keeps a dry run from re-reading days of
    // history every tick.
    let on_object = state.calibration.take();
    state.calibration = calibrations.freshest(on_object.as_ref());
    let plan = decide(&observation, target, policy, &state, now);
    // The training rise of the calibration this tick decided with (or just computed).
    let rise = plan
        .next_state
        .calibration
        .as_ref()
        .or(state.calibration.as_ref())
        .and_then(|c| c.rise);
    let residual = residual::tick_verdict(
        &observation.arrival_rate,
        &observation.waiting,
        policy.lead_time_s,
        residual::SLO_WAIT_S,
        rise,
    );
    let calibrations = calibrations.after_tick(
        policy,
        calibration_read,
        plan.next_state.calibration.as_ref(),
        now,
    );
    // A target whose raiseMinReplicas was turned off gets a raise still on its HPA given
    // back (nothing is written when there is none): no lease is left to outlive the option.
    // A drain's surge on the same floor stays, whatever the intent (`plan_beside_surge`).
    let floor = target.hpa.as_ref().map(|r| FloorCommand {
        intent: if r.raise_min_replicas {
            floor_intent(&plan)
        } else {
            FloorIntent::Restore
        },
        lease_s: policy.floor_lease_s(),
        report_unchanged: r.raise_min_replicas,
    });
    TargetCommands::Act(Box::new(TargetActs {
        plan,
        residual,
        calibrations,
        floor,
    }))
}

/// The HPA floor this tick: the replicas forecast for the horizon within the rails (the plan's
/// `hpa_floor`), or hold as is when failing static (never lowered on missing data; the lease
/// is renewed).
pub fn floor_intent(plan: &Plan) -> FloorIntent {
    match (plan.action, plan.hpa_floor) {
        (Action::FailStatic, _) | (_, None) => FloorIntent::Hold,
        (_, Some(floor)) => FloorIntent::AtLeast(floor),
    }
}

#[cfg(test)]
mod tests {
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
        for (name, last, raise, read, on_object, kept, skipped, floor, failures, retry, cached) in
            rows
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
}
