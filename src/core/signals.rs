//! Stage 1, signals: checks the observation and extracts the numbers a decision may trust.
//! When they cannot be trusted the caller fails static (holds the current spare, never scales
//! down) and logs the reason this stage gives.

use super::forecast::{forecast, Forecast};
use super::plan::ForecastSummary;
use super::signal::{Observation, Sample};
use super::spec::PolicySpec;

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

/// The averaging window of the built-in mean-latency queries (`rate(…_sum[2m]) /
/// rate(…_count[2m])` in adapters::metrics::queries): a latency sample is the mean of the
/// requests completed in the 2 minutes up to it.
pub const LATENCY_WINDOW_SECONDS: f64 = 120.0;

/// The service time to size with, None when no request completed in the window.
///
/// The latency series is end to end, so a queue inflates it: on `bursty` in the simulator a
/// 5.25 s request read 17–24 s while a backlog drained, and sizing with that asked for the
/// backlog a second time (the HPA's own pods already chase it), 38 spare replicas on nodes that
/// then stood empty for consolidateAfter. A latency sample whose whole averaging window saw no
/// request waiting is the service time itself, so the newest such sample is used; never above
/// the newest sample (requests may have become shorter since). Without one (a queue over the
/// whole window, or no waiting series), the newest sample: inflated, but the only evidence.
/// 0 or NaN means no request completed in that step (sum/count of an idle histogram), not
/// that requests became free, and is skipped.
pub fn service_time(observed: &Observation) -> Option<f64> {
    let usable = |s: &&Sample| s.t.is_finite() && s.v.is_finite() && s.v > 0.0;
    let newest_of = |samples: Vec<Sample>| {
        samples
            .into_iter()
            .max_by(|a, b| a.t.total_cmp(&b.t))
            .map(|s| s.v)
    };
    let latencies: Vec<Sample> = observed
        .service_time_s
        .iter()
        .filter(usable)
        .copied()
        .collect();
    let newest = newest_of(latencies.clone())?;
    // Queue-free: at least one waiting sample in (t − window, t], and all of them zero.
    let queue_free = |t: f64| {
        let mut inside = observed
            .waiting
            .iter()
            .filter(|w| w.t.is_finite() && w.t > t - LATENCY_WINDOW_SECONDS && w.t <= t)
            .peekable();
        inside.peek().is_some() && inside.all(|w| w.v.is_finite() && w.v <= 0.0)
    };
    let free: Vec<Sample> = latencies.into_iter().filter(|s| queue_free(s.t)).collect();
    Some(newest_of(free).map_or(newest, |v| v.min(newest)))
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

    let service_time_s = match service_time(observed) {
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

    /// The fixed clock of every row.
    const NOW: f64 = 1_700_000_000.0;

    /// (seconds before NOW, value) pairs as samples.
    fn at(points: &[(f64, f64)]) -> Vec<Sample> {
        points
            .iter()
            .map(|&(ago, v)| Sample::new(NOW - ago, v))
            .collect()
    }

    /// Waiting 0 at every 15 s scrape from `from` seconds ago to NOW, except the given ones.
    fn waiting(from: f64, queued: &[(f64, f64)]) -> Vec<Sample> {
        let mut out = Vec::new();
        let mut ago = from;
        while ago >= 0.0 {
            let v = queued
                .iter()
                .find(|(q, _)| *q == ago)
                .map_or(0.0, |(_, v)| *v);
            out.push(Sample::new(NOW - ago, v));
            ago -= 15.0;
        }
        out
    }

    #[test]
    fn service_time_table() {
        // (name, latency samples, waiting samples, want)
        type Row = (&'static str, Vec<Sample>, Vec<Sample>, Option<f64>);
        let rows: Vec<Row> = vec![
            (
                "no queue: the newest sample",
                at(&[(30.0, 5.0), (15.0, 5.0), (0.0, 6.0)]),
                waiting(300.0, &[]),
                Some(6.0),
            ),
            (
                // The queue appears at NOW-30: the samples at NOW-30..NOW average requests that
                // waited; the one at NOW-45 saw waiting 0 at every scrape of (NOW-165, NOW-45].
                "queue building: the newest queue-free sample",
                at(&[
                    (60.0, 5.0),
                    (45.0, 5.25),
                    (30.0, 9.0),
                    (15.0, 14.0),
                    (0.0, 20.0),
                ]),
                waiting(300.0, &[(30.0, 30.0), (15.0, 50.0), (0.0, 10.0)]),
                Some(5.25),
            ),
            (
                // The queue drained by NOW-90, but its requests complete inside the 2-minute
                // windows of NOW-90..NOW (they include NOW-105). The window of NOW-120 is
                // (NOW-240, NOW-120]: the queue at NOW-105 is after it.
                "drained queue still inside the window: the sample before it",
                at(&[(135.0, 5.5), (120.0, 5.0), (90.0, 8.0), (0.0, 7.0)]),
                waiting(300.0, &[(105.0, 40.0)]),
                Some(5.0),
            ),
            (
                // A queue exactly 120 s before a sample is outside its half-open window:
                // the sample at NOW is queue-free.
                "queue exactly one window back: outside it",
                at(&[(15.0, 9.0), (0.0, 6.0)]),
                waiting(300.0, &[(120.0, 40.0)]),
                Some(6.0),
            ),
            (
                "queue over the whole window: the newest, inflated",
                at(&[(15.0, 18.0), (0.0, 20.0)]),
                (0..=20)
                    .map(|k| Sample::new(NOW - 15.0 * f64::from(k), 3.0))
                    .collect(),
                Some(20.0),
            ),
            (
                "no waiting series: the newest",
                at(&[(15.0, 5.0), (0.0, 20.0)]),
                vec![],
                Some(20.0),
            ),
            (
                // Requests became shorter: never above the newest sample.
                "newest below the queue-free one: the newest",
                at(&[(150.0, 6.0), (0.0, 4.0)]),
                waiting(300.0, &[(0.0, 5.0)]),
                Some(4.0),
            ),
            (
                // A NaN waiting sample is not evidence of an empty queue.
                "NaN waiting in the window: not queue-free",
                at(&[(15.0, 5.0), (0.0, 20.0)]),
                waiting(300.0, &[(15.0, f64::NAN), (0.0, f64::NAN)]),
                Some(20.0),
            ),
            (
                // 0 and NaN latencies mean no completion in that step; they are skipped.
                "idle steps skipped",
                at(&[(30.0, 5.0), (15.0, 0.0), (0.0, f64::NAN)]),
                waiting(300.0, &[]),
                Some(5.0),
            ),
            (
                "no completed request: none",
                at(&[(15.0, 0.0), (0.0, f64::NAN)]),
                waiting(300.0, &[]),
                None,
            ),
        ];
        for (name, latency, waiting, want) in rows {
            let observed = Observation {
                service_time_s: latency,
                waiting,
                ..Observation::default()
            };
            assert_eq!(service_time(&observed), want, "{name}");
        }
    }
}
