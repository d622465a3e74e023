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

/// Whether the newest sample, taken at `newest_t`, is fresh at `now`: no older than
/// STALE_AFTER_SECONDS past what the source can show (a read ends INGESTION_LAG_SECONDS before
/// `now`). Age is judged against `now`, not against the read's end, so a source that stops
/// answering goes stale on the clock; the lag is added knowingly, as a sample `lag` old is as
/// fresh as the source allows. `Err` says how old it is.
pub fn fresh(newest_t: f64, policy: &PolicySpec, now: f64) -> Result<(), String> {
    let age = now - newest_t;
    if age > policy.stale_after_s + policy.ingestion_lag_s {
        return Err(format!(
            "newest arrival rate sample is {age:.0} s old (STALE_AFTER_SECONDS={} + \
             INGESTION_LAG_SECONDS={})",
            policy.stale_after_s, policy.ingestion_lag_s
        ));
    }
    Ok(())
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
    fresh(newest.t, policy, now)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: f64 = 1_000_000.0;

    #[test]
    fn staleness_is_judged_against_now_with_the_lag_added() {
        // (name, INGESTION_LAG_SECONDS, STALE_AFTER_SECONDS, age of the newest sample at NOW,
        // fresh). The default lag is 30 s and STALE_AFTER_SECONDS 120 s: fresh up to 150 s.
        let rows = [
            ("a sample lag old is fresh", 30.0, 120.0, 30.0, true),
            ("lag + 1 s old is fresh", 30.0, 120.0, 31.0, true),
            ("stale after + lag old: fresh", 30.0, 120.0, 150.0, true),
            ("one second more: stale", 30.0, 120.0, 151.0, false),
            ("no lag: 120 s fresh", 0.0, 120.0, 120.0, true),
            ("no lag: 121 s stale", 0.0, 120.0, 121.0, false),
            ("a long lag counts too", 300.0, 10.0, 310.0, true),
            ("past it", 300.0, 10.0, 311.0, false),
            ("a sample from the future is fresh", 30.0, 120.0, -5.0, true),
        ];
        for (name, lag, stale_after, age, want) in rows {
            let policy = PolicySpec {
                ingestion_lag_s: lag,
                stale_after_s: stale_after,
                ..PolicySpec::default()
            };
            let got = fresh(NOW - age, &policy, NOW);
            assert_eq!(got.is_ok(), want, "{name}: {got:?}");
            if let Err(message) = got {
                assert!(message.contains(&format!("{age:.0} s old")), "{message}");
                assert!(message.contains("STALE_AFTER_SECONDS"), "{message}");
                assert!(message.contains("INGESTION_LAG_SECONDS"), "{message}");
            }
        }
        assert_eq!(PolicySpec::default().ingestion_lag_s, 30.0);
    }
}
