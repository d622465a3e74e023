//! Stage 1, signals: checks the observation and extracts the numbers a decision may trust.
//! When they cannot be trusted the caller fails static (holds the current spare, never scales
//! down) and logs the reason this stage gives.

use super::forecast::{forecast, Forecast};
use super::observation::{Observation, Sample};
use super::plan::ForecastSummary;
use crate::spec::PolicySpec;

/// The trusted inputs of one decision.
pub struct Inputs {
    pub observed_rate: f64,
    pub service_time_s: f64,
    pub forecast: Forecast,
}

/// The newest sample with a finite time and value (by time, not by position).
pub fn newest_finite(series: &[Sample]) -> Option<Sample> {
    series
        .iter()
        .filter(|s| s.t.is_finite() && s.v.is_finite())
        .copied()
        .max_by(|a, b| a.t.total_cmp(&b.t))
}

/// Checks the observation; `Err` carries the reason to fail static, `Ok` the numbers to size
/// with. A partial summary is filled either way for the log line.
pub fn assess(
    observed: &Observation,
    policy: &PolicySpec,
    now: f64,
    summary: &mut ForecastSummary,
) -> Result<Inputs, String> {
    if let Some(problem) = &observed.problem {
        return Err(format!("metric source problem: {problem}"));
    }
    let Some(newest) = newest_finite(&observed.arrival_rate) else {
        return Err(if observed.arrival_rate.is_empty() {
            "arrival rate series is empty".to_string()
        } else {
            format!(
                "arrival rate series has no finite sample ({} NaN/inf)",
                observed.arrival_rate.len()
            )
        });
    };
    let observed_rate = newest.v.max(0.0);
    summary.observed_rate = observed_rate;
    let age = now - newest.t;
    if age > policy.stale_after_s {
        return Err(format!(
            "newest arrival rate sample is {age:.0} s old (STALE_AFTER_SECONDS={})",
            policy.stale_after_s
        ));
    }
    let Some(forecast) = forecast(&observed.arrival_rate, policy) else {
        return Err("fewer than two finite arrival rate samples".to_string());
    };
    summary.level = forecast.level;
    summary.trend = forecast.trend;
    summary.error_quantile = forecast.error_quantile;
    summary.rate_at_horizon = forecast.upper_over_horizon.max(observed_rate);

    // The newest usable service time: 0 or NaN means no request completed in that step
    // (sum/count of an idle histogram), not that requests became free.
    let service = observed
        .service_time_s
        .iter()
        .filter(|s| s.t.is_finite() && s.v.is_finite() && s.v > 0.0)
        .max_by(|a, b| a.t.total_cmp(&b.t))
        .map(|s| s.v);
    let service_time_s = match service {
        Some(s) => s,
        // No completed request in the window and no demand: nothing to size, and zero demand
        // needs zero replicas whatever the service time. (Idle overnight must not freeze the
        // spare at its last value forever.)
        None if summary.rate_at_horizon == 0.0 => 0.0,
        None => {
            return Err(if observed.service_time_s.is_empty() {
                "service time series is empty".to_string()
            } else {
                "service time series has no finite positive sample".to_string()
            })
        }
    };
    summary.service_time_s = service_time_s;
    Ok(Inputs {
        observed_rate,
        service_time_s,
        forecast,
    })
}
