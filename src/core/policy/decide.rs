//! `decide(observed, target, policy, prior, now) -> Plan`: the whole decision for one target,
//! with its safety rails. The model is documented in docs/decision-model.md; in short:
//!
//! 1. Check the inputs; when they cannot be trusted, fail static (hold the current spare).
//! 2. Forecast the arrival rate over the lead time and size both the horizon and now with
//!    Erlang C; the raw spare is what the horizon needs beyond what is in use or pending now.
//! 3. Rails, in order, each logged as a `Reason` when it changes the value: floor/ceiling, GPU
//!    cap, step limits, pending pods (no scale-down), scale-down delay, cooldown (scale-down
//!    only), then the hard limits again (ceiling, GPU cap and floor win over everything that only
//!    slows a change), then the interruption path's replacement reserve on top.
//!
//! `plan_target` wraps it into one target's tick as commands: given everything the tick's observe
//! phase read (`TargetSeen`) and `now`, what the executor writes (the headroom plan, the HPA
//! floor) and keeps (the calibration cache, the residual's verdict), or that the target is left
//! alone this tick. The reads happen before, the writes after (`handlers::tick::target`).
//! The NodePool's limits and budgets stay with the executor on purpose: they are planned against
//! the pool and its nodes right before the patch (a drain's room that started meanwhile), and the
//! floor's patch against the HPA read in the same call (`floor::plan_beside_surge`).

use super::assess::{assess, Inputs};
use super::band::{self, Calibration};
use super::calibration_cache::{CalibrationCache, ReadOutcome};
use super::fast_path::{fast_path, queue_now};
use super::horizon::{horizon_rate, queue_replicas, seasonal_rise, size};
use super::hpa_sizing::hpa_replicas_for_in_system;
use super::next_step::next_step_spare;
use super::observation::Observation;
use super::plan::{Action, ForecastSummary, Plan, Reason};
use super::rails::Rails;
use super::residual::{self, TickVerdict};
use super::schedule::scheduled_floor;
use crate::floor::FloorIntent;
use crate::spec::{HeadroomState, PolicySpec, TargetSpec};

/// The plan when the inputs cannot be trusted: never lower the headroom, raise it only to the
/// floor (`minSpare`, a scheduled window) within the ceiling and the GPU cap, say why, and leave
/// the hold, cooldown and consolidation untouched. The floor matters most where metrics are
/// missing for good reason: a target scaled to zero has no pods and so no metrics, and its
/// scheduled capacity must still come a lead time before the window.
fn fail_static(
    observed: &Observation,
    target: &TargetSpec,
    policy: &PolicySpec,
    prior: &HeadroomState,
    now: f64,
    detail: String,
    forecast: ForecastSummary,
) -> Plan {
    let mut reasons = vec![Reason::MetricsMissing { detail }];
    // With metrics missing there is no forecast of what is in use, so the GPU cap is judged
    // against what the API says serves or waits now. Without a count of what serves (no pod
    // selector) the cap's room is unknown: hold then, as the cap is a spend limit and must never
    // be passed on a guess.
    let scheduled = scheduled_floor(&target.schedules, &policy.zone(), now, policy.lead_time_s);
    let own = match (observed.serving_replicas, target.gpu_cap) {
        (None, Some(_)) => prior.spare.saturating_sub(prior.replacement_reserved),
        (serving, _) => Rails::new(target, prior, serving.unwrap_or(0) + observed.pending_pods)
            .with_scheduled_floor(scheduled)
            .blind_floor(&mut reasons),
    };
    let desired = own
        .saturating_add(prior.replacement_reserved)
        .max(prior.spare);
    Plan {
        target: target.name.clone(),
        action: Action::FailStatic,
        current_spare: prior.spare,
        desired_spare: desired,
        freeze_consolidation: None,
        forecast,
        reasons,
        hpa_floor: None,
        next_state: HeadroomState {
            spare: desired,
            last_tick: Some(now),
            ..prior.clone()
        },
    }
}

pub fn decide(
    observed: &Observation,
    target: &TargetSpec,
    policy: &PolicySpec,
    prior: &HeadroomState,
    now: f64,
) -> Plan {
    let mut summary = ForecastSummary::default();
    let inputs = match assess(observed, policy, now, &mut summary) {
        Ok(inputs) => inputs,
        Err(detail) => return fail_static(observed, target, policy, prior, now, detail, summary),
    };
    let mut reasons = vec![Reason::Forecast];

    // Forecasters and band: the rate to cover over the lead time (`rate_to_cover`).
    let calibration = calibration(observed, target, policy, prior, &inputs, now);
    summary.rate_at_horizon = horizon_rate(
        observed,
        policy,
        &inputs,
        calibration.as_ref(),
        now,
        &mut summary,
    );

    // Sizing: in the HPA's units when it can be predicted, else Erlang C.
    let sized = size(observed, target, policy, &inputs, summary.rate_at_horizon);
    summary.replicas_now = sized.now;
    summary.replicas_at_horizon = sized.at_horizon;
    summary.sizing = sized.units.into();
    if let Some(why) = sized.fallback {
        reasons.push(Reason::QueueSizing { why });
    }
    let forecast_spare = sized.at_horizon.saturating_sub(sized.in_place);
    let mut forecast_raw = forecast_spare;
    // The HPA's next scale-out step, which the mean forecast cannot see (next_step.rs).
    let step = next_step_spare(
        target.next_step_spare,
        observed.hpa.as_ref().filter(|_| sized.units == "hpa"),
        inputs.observed_rate,
        summary.rate_at_horizon,
    );
    if step > forecast_raw {
        forecast_raw = step;
        reasons.push(Reason::NextStep { replicas: step });
    }
    // The part of the forecast's spare the seasonal forecast adds above the trend alone: a
    // recurring rise seen a lead time ahead, provisioned at once (rail 3). Bounded by the
    // forecast's own spare, not by the next step's: replicas in place may cover part of the
    // rise, and the next step keeps stepping.
    let seasonal = seasonal_rise(
        observed,
        target,
        policy,
        &inputs,
        &summary,
        sized.at_horizon,
    )
    .min(forecast_spare);
    if seasonal > 0 {
        reasons.push(Reason::SeasonalRise { replicas: seasonal });
    }
    let mut raw = forecast_raw;

    // Fast path: a queue building now provisions the end of the HPA's ramp in one step.
    let ready = observed.serving_replicas.unwrap_or(sized.now);
    let fast = fast_path(
        observed,
        target,
        policy,
        ready,
        inputs.observed_rate,
        inputs.service_time_s,
        now,
    );
    let fast_spare = fast
        .as_ref()
        .map_or(0, |f| f.replicas_wanted.saturating_sub(sized.in_place));
    if let Some(f) = &fast {
        raw = raw.max(fast_spare);
        reasons.push(Reason::FastPath {
            in_system: f.in_system,
            ready_slots: f.ready_slots,
            replicas: f.replicas_wanted,
        });
    }

    let scheduled = scheduled_floor(&target.schedules, &policy.zone(), now, policy.lead_time_s);
    let rails = Rails::new(target, prior, sized.in_place)
        .with_scheduled_floor(scheduled)
        .urgent(fast.as_ref().map(|_| fast_spare))
        .seasonal_rise(seasonal)
        .remember_at_most(forecast_raw);
    let spare = rails.apply(raw, observed.pending_pods, policy, now, &mut reasons);

    let reserved = prior.replacement_reserved;
    if reserved > 0 {
        reasons.push(Reason::ReplacementReserved { replicas: reserved });
    }
    let desired = spare.value.saturating_add(reserved);
    let action = match desired.cmp(&prior.spare) {
        std::cmp::Ordering::Greater => Action::ScaleUp,
        std::cmp::Ordering::Less => Action::ScaleDown,
        std::cmp::Ordering::Equal => Action::None,
    };

    // Any change of size starts a cooldown; it only gates scale-down (see the rail).
    let cooldown_until = if desired != prior.spare && policy.cooldown_s > 0.0 {
        Some(now + policy.cooldown_s)
    } else {
        prior.cooldown_until.filter(|until| *until > now)
    };

    let freeze_consolidation = consolidation(target, prior, &inputs, policy, now);
    // The HPA floor counts every replica, so its rails have no current need to subtract.
    let hpa_floor = Rails::new(target, prior, 0)
        .seasonal_rise(seasonal)
        .replica_floor(
            sized.at_horizon,
            sized.now,
            sized.in_place,
            hpa_asks(observed, policy, sized.units, now),
        );
    Plan {
        target: target.name.clone(),
        action,
        current_spare: prior.spare,
        desired_spare: desired,
        freeze_consolidation,
        forecast: summary,
        reasons,
        hpa_floor: Some(hpa_floor),
        next_state: HeadroomState {
            spare: desired,
            cooldown_until,
            hold: spare.hold,
            replacement_reserved: reserved,
            consolidation_frozen: freeze_consolidation.unwrap_or(prior.consolidation_frozen),
            last_tick: Some(now),
            calibration,
        },
    }
}

/// The calibration to use and persist: refitted when the tick fetched the long history (it
/// does so only when the cached one is due), else the cached one.
fn calibration(
    observed: &Observation,
    target: &TargetSpec,
    policy: &PolicySpec,
    prior: &HeadroomState,
    inputs: &Inputs,
    now: f64,
) -> Option<Calibration> {
    if observed.calibration_history.is_empty() {
        return prior.calibration.clone();
    }
    let q = band::quantile(policy, target, inputs.service_time_s);
    Some(band::calibrate(
        &observed.calibration_history,
        policy,
        q,
        now,
    ))
}

/// The replicas the HPA asks for now from the requests in its queue (what its next sync
/// scales towards), when it is sized in its own units; 0 when its metric or the queue cannot
/// be read.
fn hpa_asks(observed: &Observation, policy: &PolicySpec, units: &str, now: f64) -> u32 {
    let hpa = observed.hpa.as_ref().filter(|_| units == "hpa");
    match (hpa, queue_now(observed, policy, now)) {
        (Some(hpa), Some((_, in_system))) => {
            hpa_replicas_for_in_system(hpa, in_system).unwrap_or(0)
        }
        _ => 0,
    }
}

/// Freeze consolidation while the point forecast (without the error band) needs more replicas
/// at the horizon than the smoothed level needs now; restore it once that is no longer so and
/// the scale-down delay of the previous tick has run out (so a ramp that pauses for a tick does
/// not flap the budgets). The executor treats a restore with nothing saved as a no-op.
fn consolidation(
    target: &TargetSpec,
    prior: &HeadroomState,
    inputs: &Inputs,
    policy: &PolicySpec,
    now: f64,
) -> Option<bool> {
    if !target.freeze_consolidation {
        return None;
    }
    let size = |rate| queue_replicas(rate, inputs, target, policy);
    let rising = size(inputs.forecast.point_over_horizon) > size(inputs.forecast.level);
    let hold_expired = prior.hold.is_none_or(|h| h.until <= now);
    if rising {
        Some(true)
    } else if hold_expired {
        Some(false)
    } else {
        None
    }
}

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
#[path = "decide_tests/mod.rs"]
mod tests;
