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

use super::assess::{assess, Inputs};
use super::band::{self, Calibration};
use super::fast_path::{fast_path, queue_now};
use super::hpa_sizing::{hpa_replicas, hpa_replicas_for_in_system};
use super::next_step::next_step_spare;
use super::observation::Observation;
use super::plan::{Action, ForecastSummary, Plan, Reason};
use super::rails::Rails;
use super::schedule::scheduled_floor;
use super::seasonal::{seasonal_forecast, Seasonal};
use super::sizing::replicas_for;
use crate::spec::{BandSlots, Forecaster, HeadroomState, PolicySpec, TargetSpec};

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
    let hpa_floor = Rails::new(target, prior, 0).replica_floor(
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

/// The point forecast plus the band: the hour's profile when the calibration chose it, else the
/// blend. The trend model's point forecast is blended with
/// the seasonal one (weight from the calibration; an even blend before the first one), and
/// the lead-time band of the calibration is added; without it, the one-step band of the trend
/// model (the fallback, logged). Never below the rate observed now (`rate_to_cover`).
fn horizon_rate(
    observed: &Observation,
    policy: &PolicySpec,
    inputs: &Inputs,
    calibration: Option<&Calibration>,
    now: f64,
    summary: &mut ForecastSummary,
) -> f64 {
    let trend = inputs.forecast.point_over_horizon;
    summary.trend_peak = trend;
    let seasonal = if policy.seasons_s.is_empty() {
        None
    } else {
        match seasonal_forecast(
            &observed.arrival_rate,
            &observed.seasonal,
            now,
            policy.lead_time_s,
            policy.step_s,
        ) {
            Seasonal::Forecast { peak, .. } => Some(peak),
            Seasonal::Unavailable { why } => {
                summary.trend_only = Some(why);
                None
            }
        }
    };
    summary.seasonal_peak = seasonal;
    let weight = match (seasonal, calibration) {
        (None, _) => 0.0,
        (Some(_), Some(c)) if c.band.is_some() => c.seasonal_weight,
        (Some(_), _) => 0.5,
    };
    summary.seasonal_weight = weight;
    let blend = match seasonal {
        Some(s) => (1.0 - weight) * trend + weight * s,
        None => trend,
    };
    // The forecaster the calibration chose: the profile of the hour's peaks, or the blend (also
    // for an hour the profile never saw).
    let zone = policy.zone();
    summary.profile_peak = calibration.and_then(|c| c.profile_peak(now, &zone));
    let point = summary.profile_peak.unwrap_or(blend);
    summary.forecaster = match summary.profile_peak {
        Some(_) => Forecaster::Profile,
        None => Forecaster::Blend,
    }
    .label()
    .into();
    let band = match calibration.map(|c| (c, c.band_at(now, &zone))) {
        Some((c, Some(b))) => {
            summary.band_source = "lead_time".into();
            summary.quantile = c.quantile;
            summary.coverage = c.coverage;
            summary.band_by = BandSlots::of(c.by_hour.len()).label().into();
            summary.hour_coverage = c.hour_coverage_at(now, &zone);
            b
        }
        other => {
            summary.band_source = "one_step".into();
            summary.quantile = policy.error_quantile;
            let why = match other {
                Some((c, None)) => c.note.clone().unwrap_or_else(|| "no band".into()),
                _ => "not calibrated yet".into(),
            };
            summary.one_step_band = Some(why);
            inputs.forecast.error_quantile
        }
    };
    summary.error_quantile = band;
    rate_to_cover(point, band, inputs.observed_rate)
}

/// The rate to cover over the lead time: the forecast's `point` plus the `band`, never below
/// the rate `observed` now (the smoothed level lags a burst, and demand that is already here is
/// the best evidence of the next minutes).
fn rate_to_cover(point: f64, band: f64, observed: f64) -> f64 {
    (point + band).max(0.0).max(observed)
}

/// The replicas the seasonal forecast (or the hour's profile, when it sizes) adds at the horizon
/// above the trend-only forecast (the same band and the same floor at the observed rate, sized
/// the same way): 0 without either, or when the trend alone asks for as many.
fn seasonal_rise(
    observed: &Observation,
    target: &TargetSpec,
    policy: &PolicySpec,
    inputs: &Inputs,
    summary: &ForecastSummary,
    at_horizon: u32,
) -> u32 {
    let seasonal = summary.seasonal_peak.is_some() && summary.seasonal_weight > 0.0;
    if !seasonal && summary.profile_peak.is_none() {
        return 0;
    }
    let trend_rate = rate_to_cover(
        summary.trend_peak,
        summary.error_quantile,
        inputs.observed_rate,
    );
    if trend_rate >= summary.rate_at_horizon {
        return 0;
    }
    let trend_only = size(observed, target, policy, inputs, trend_rate).at_horizon;
    at_horizon.saturating_sub(trend_only)
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

/// Replicas wanted now and at the horizon, and those in place (ready, loading, pending).
struct Sized {
    now: u32,
    at_horizon: u32,
    in_place: u32,
    units: &'static str,
    fallback: Option<String>,
}

/// Sizing. In the HPA's units when the target names its HPA and its metric is predictable:
/// what the HPA will want at the horizon, against the replicas ready, loading and pending (a
/// pending pod is demand the HPA already counted, not capacity). Else Erlang C replicas for
/// the rate, against those serving (or, unknown, needed now), loading and pending.
fn size(
    observed: &Observation,
    target: &TargetSpec,
    policy: &PolicySpec,
    inputs: &Inputs,
    rate_at_horizon: f64,
) -> Sized {
    let loading = observed.loading_replicas.unwrap_or(0);
    let pending = observed.pending_pods;
    let mut fallback = None;
    if let Some(hpa) = &observed.hpa {
        let s = inputs.service_time_s;
        match (
            hpa_replicas(hpa, inputs.observed_rate, s),
            hpa_replicas(hpa, rate_at_horizon, s),
        ) {
            (Ok(now), Ok(at_horizon)) => {
                let ready = observed.serving_replicas.unwrap_or(hpa.current_replicas);
                return Sized {
                    now,
                    at_horizon,
                    in_place: ready.saturating_add(loading).saturating_add(pending),
                    units: "hpa",
                    fallback: None,
                };
            }
            (Err(why), _) | (_, Err(why)) => {
                fallback = Some(format!("HPA metric not predictable from the queue: {why}"))
            }
        }
    } else if target.hpa.is_some() {
        fallback = Some("HPA not read".into());
    }
    let size = |rate| queue_replicas(rate, inputs, target, policy);
    let now = size(inputs.observed_rate);
    let in_use = observed.serving_replicas.unwrap_or(now);
    Sized {
        now,
        at_horizon: size(rate_at_horizon),
        in_place: in_use.saturating_add(loading).saturating_add(pending),
        units: "queue",
        fallback,
    }
}

/// Replicas the queue model sizes for `rate` req/s with the target's service time, slots and
/// wait target.
fn queue_replicas(rate: f64, inputs: &Inputs, target: &TargetSpec, policy: &PolicySpec) -> u32 {
    replicas_for(
        rate,
        inputs.service_time_s,
        target.replica_concurrency,
        policy.target_wait_s,
    )
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

#[cfg(test)]
#[path = "decide_tests/mod.rs"]
mod tests;
