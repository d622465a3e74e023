//! The rate to cover and the replicas it needs at the lead time: the forecast's point (the
//! blend of trend and seasons, or the hour's profile) plus the calibrated band, sized in the
//! HPA's units or by Erlang C, and what the seasons add above the trend alone. `decide` uses it.

use super::assess::Inputs;
use super::band::Calibration;
use super::hpa_sizing::hpa_replicas;
use super::observation::Observation;
use super::plan::ForecastSummary;
use super::seasonal::{seasonal_forecast, Seasonal};
use super::sizing::replicas_for;
use crate::spec::{BandSlots, Forecaster, PolicySpec, TargetSpec};

/// The point forecast plus the band: the hour's profile when the calibration chose it, else the
/// blend. The trend model's point forecast is blended with
/// the seasonal one (weight from the calibration; an even blend before the first one), and
/// the lead-time band of the calibration is added; without it, the one-step band of the trend
/// model (the fallback, logged). Never below the rate observed now (`rate_to_cover`).
pub(super) fn horizon_rate(
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
pub(super) fn rate_to_cover(point: f64, band: f64, observed: f64) -> f64 {
    (point + band).max(0.0).max(observed)
}

/// The replicas the seasonal forecast (or the hour's profile, when it sizes) adds at the horizon
/// above the trend-only forecast (the same band and the same floor at the observed rate, sized
/// the same way): 0 without either, or when the trend alone asks for as many.
pub(super) fn seasonal_rise(
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

/// Replicas wanted now and at the horizon, and those in place (ready, loading, pending).
pub(super) struct Sized {
    pub(super) now: u32,
    pub(super) at_horizon: u32,
    pub(super) in_place: u32,
    pub(super) units: &'static str,
    pub(super) fallback: Option<String>,
}

/// Sizing. In the HPA's units when the target names its HPA and its metric is predictable:
/// what the HPA will want at the horizon, against the replicas ready, loading and pending (a
/// pending pod is demand the HPA already counted, not capacity). Else Erlang C replicas for
/// the rate, against those serving (or, unknown, needed now), loading and pending.
pub(super) fn size(
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
pub(super) fn queue_replicas(
    rate: f64,
    inputs: &Inputs,
    target: &TargetSpec,
    policy: &PolicySpec,
) -> u32 {
    replicas_for(
        rate,
        inputs.service_time_s,
        target.replica_concurrency,
        policy.target_wait_s,
    )
}
