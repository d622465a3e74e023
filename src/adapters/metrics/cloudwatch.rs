//! The CloudWatch source: one `GetMetricData` call with four `MetricStat` queries per target.
//!
//! Metrics prewarm reads (namespace `CLOUDWATCH_NAMESPACE`), published by whatever exports the
//! inference servers' numbers to CloudWatch (an agent, a sidecar, EMF logs), every publisher of
//! a target with the same dimensions:
//!
//! | signal         | metric name             | statistic | becomes                                 |
//! |----------------|-------------------------|-----------|-----------------------------------------|
//! | waiting        | `RequestsWaiting`       | Sum       | requests queued, summed over publishers |
//! | running        | `RequestsRunning`       | Sum       | requests served, summed over publishers |
//! | arrival rate   | `RequestsCompleted`     | Sum       | requests finished in the period         |
//! | service time   | `RequestLatencySeconds` | Average   | seconds per finished request            |
//!
//! The gauges are summed across publishers: each publisher puts one datapoint every
//! CLOUDWATCH_PUBLISH_SECONDS, so a period's `Sum` divided by the datapoints one publisher puts
//! in it is the target's total (`cloudwatch_periods::summed_gauge` has the arithmetic; `Average`
//! would divide by the number of publishers too). The counter's `Sum` is every publisher's
//! completions in the period, divided by the period for a rate.
//!
//! Dimensions: `Target=<target name>` when the target has no selector; otherwise the selector's
//! equality matchers (`model_name="llama"` → dimension `model_name=llama`). Regex and negative
//! matchers cannot be expressed as dimensions and are rejected. The PromQL query overrides do not
//! apply to this source.
//!
//! The arrival rate is built like the PromQL one (see `queries.rs`): completions per second plus
//! the growth of waiting + running per second, the growth clamped at zero. It is computed here
//! rather than with metric math because `Expression` queries are a different cost class and the
//! test emulator does not support them.
//!
//! Periods: CloudWatch accepts 1, 5, 10, 30 or a multiple of 60 seconds. The period is the
//! largest valid one not above the policy step; start-up checks that the publishers' interval
//! fills it (`cloudwatch_periods::publish_interval_problem`). Only complete periods are read,
//! each stamped at its end (the time its aggregate is known), and then put on the policy's step
//! grid ending at `now` (each grid point takes the newest period that ended within one step
//! before it).

use async_trait::async_trait;
use aws_sdk_cloudwatch::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_cloudwatch::operation::get_metric_data::GetMetricDataError;
use aws_sdk_cloudwatch::types::{
    Dimension, Metric, MetricDataQuery, MetricDataResult, MetricStat, ScanBy, StatusCode,
};
use aws_smithy_types::DateTime;

use super::queries::normalized_selector;
use super::{metrics_error, MetricSource, RecentSignals, Window};
use crate::core::cloudwatch_periods::{
    history_period, last_complete_end, period_for, summed_gauge,
};
use crate::core::{Sample, TargetSpec};
use crate::error::Error;

pub const WAITING: &str = "RequestsWaiting";
pub const RUNNING: &str = "RequestsRunning";
pub const COMPLETED: &str = "RequestsCompleted";
pub const LATENCY: &str = "RequestLatencySeconds";
/// The dimension naming the target when it has no selector.
pub const TARGET_DIMENSION: &str = "Target";

pub struct CloudWatchSource {
    client: aws_sdk_cloudwatch::Client,
    namespace: String,
    /// CLOUDWATCH_PUBLISH_SECONDS: how often each publisher puts a datapoint of each metric.
    publish_s: f64,
    /// INGESTION_LAG_SECONDS: a period that ended less than this long ago is not read.
    ingestion_lag_s: f64,
}

impl CloudWatchSource {
    /// A source whose publishers put a datapoint every `publish_s` seconds (validated at
    /// start-up against the step: `cloudwatch_periods::publish_interval_problem`).
    pub fn new(client: aws_sdk_cloudwatch::Client, namespace: &str, publish_s: f64) -> Self {
        CloudWatchSource {
            client,
            namespace: namespace.to_string(),
            publish_s,
            ingestion_lag_s: 0.0,
        }
    }

    /// Leaves out the periods that ended less than `lag_s` before the wall clock's now
    /// (INGESTION_LAG_SECONDS): their datapoints may still be arriving.
    pub fn with_ingestion_lag(self, lag_s: f64) -> Self {
        CloudWatchSource {
            ingestion_lag_s: lag_s,
            ..self
        }
    }

    fn query(
        &self,
        id: &str,
        metric: &str,
        stat: &str,
        dims: &[Dimension],
        period: i32,
    ) -> MetricDataQuery {
        MetricDataQuery::builder()
            .id(id)
            .metric_stat(
                MetricStat::builder()
                    .metric(
                        Metric::builder()
                            .namespace(&self.namespace)
                            .metric_name(metric)
                            .set_dimensions(Some(dims.to_vec()))
                            .build(),
                    )
                    .period(period)
                    .stat(stat)
                    .build(),
            )
            .return_data(true)
            .build()
    }
}

/// (result id, metric name, statistic) of each signal: the recent read asks for all four
/// (`RECENT_METRICS`), a history read for the first three (`HISTORY_METRICS`). GetMetricData is
/// billed per metric asked for, so these counts are what a read costs (`prewarm query-cost`).
const ALL_SIGNALS: [(&str, &str, &str); 4] = [
    ("waiting", WAITING, "Sum"),
    ("running", RUNNING, "Sum"),
    ("completed", COMPLETED, "Sum"),
    ("latency", LATENCY, "Average"),
];

/// Metrics one recent read (`observe`) asks GetMetricData for.
pub const RECENT_METRICS: usize = ALL_SIGNALS.len();
/// Metrics one history read (`arrival_history`: completions, waiting, running) asks for.
pub const HISTORY_METRICS: usize = 3;

impl CloudWatchSource {
    /// One paginated GetMetricData call for `signals` over [start, end].
    async fn fetch(
        &self,
        target: &TargetSpec,
        dims: &[Dimension],
        start: f64,
        end: f64,
        period: i32,
        signals: &[(&str, &str, &str)],
    ) -> Result<Series, Error> {
        let p = f64::from(period);
        let queries: Vec<MetricDataQuery> = signals
            .iter()
            .map(|(id, metric, stat)| self.query(id, metric, stat, dims, period))
            .collect();
        let mut series = Series::default();
        let mut next_token: Option<String> = None;
        loop {
            let out = self
                .client
                .get_metric_data()
                .start_time(DateTime::from_secs_f64(start))
                .end_time(DateTime::from_secs_f64(end))
                .scan_by(ScanBy::TimestampAscending)
                .set_metric_data_queries(Some(queries.clone()))
                .set_next_token(next_token.take())
                .send()
                .await
                .map_err(|e| {
                    let (message, retryable) = describe_sdk_error(&e);
                    metrics_error(target, format!("GetMetricData: {message}"), retryable)
                })?;
            for r in out.metric_data_results() {
                series
                    .add(r, p, self.publish_s)
                    .map_err(|m| metrics_error(target, format!("GetMetricData: {m}"), false))?;
            }
            match out.next_token() {
                Some(t) if !t.is_empty() => next_token = Some(t.to_string()),
                _ => break,
            }
        }
        Ok(series)
    }
}

#[async_trait]
impl MetricSource for CloudWatchSource {
    /// Samples stay at their period ends (the seasonal forecaster pairs them with today's by
    /// nearest time), so a 1-minute history is not thinned onto a 15 s grid.
    async fn arrival_history(&self, target: &TargetSpec, w: Window) -> Result<Vec<Sample>, Error> {
        let dims = dimensions(target).map_err(|m| metrics_error(target, m, false))?;
        // CloudWatch's retention and its still-filling periods run on the wall clock, not the
        // window's (a backtest's window ends in the past, the band's at now).
        let now = crate::clock::unix_now();
        let period = history_period(w.step, now - w.start);
        let p = f64::from(period);
        let start = (w.start / p).floor() * p - p;
        let end = last_complete_end((w.end / p).ceil() * p, now, self.ingestion_lag_s, p);
        let series = self
            .fetch(
                target,
                &dims,
                start,
                end,
                period,
                &ALL_SIGNALS[..HISTORY_METRICS],
            )
            .await?;
        Ok(
            arrival_rate(&series.completed, &series.waiting, &series.running, p)
                .into_iter()
                .filter(|s| s.t >= w.start && s.t <= w.end + p)
                .collect(),
        )
    }

    async fn observe(&self, target: &TargetSpec, w: Window) -> Result<RecentSignals, Error> {
        let dims = dimensions(target).map_err(|m| metrics_error(target, m, false))?;
        let period = period_for(w.step);
        let p = f64::from(period);
        // Complete periods only: the newest one ends at or before the window's end (the tick's
        // is already one lag before now) and one lag before the wall clock's now. The oldest
        // grid point looks up to one step back, and its arrival rate needs the gauges of the
        // period before that, hence one extra period at the start.
        let now = crate::clock::unix_now();
        let end = last_complete_end((w.end / p).floor() * p, now, self.ingestion_lag_s, p);
        let start = ((w.start - w.step) / p).floor() * p - p;
        let series = self
            .fetch(target, &dims, start, end, period, &ALL_SIGNALS)
            .await?;
        let arrivals = arrival_rate(&series.completed, &series.waiting, &series.running, p);
        Ok(RecentSignals {
            arrival_rate: to_grid(&arrivals, &w),
            service_time_s: to_grid(&series.latency, &w),
            waiting: to_grid(&series.waiting, &w),
            running: to_grid(&series.running, &w),
        })
    }
}

/// The four raw series, stamped at period ends, oldest first.
#[derive(Default)]
struct Series {
    waiting: Vec<Sample>,
    running: Vec<Sample>,
    completed: Vec<Sample>,
    latency: Vec<Sample>,
}

impl Series {
    /// Adds one query's result; the gauges' `Sum`s become summed gauges (`summed_gauge`).
    fn add(&mut self, r: &MetricDataResult, period: f64, publish_s: f64) -> Result<(), String> {
        let id = r.id().unwrap_or_default();
        match r.status_code() {
            Some(StatusCode::InternalError) | Some(StatusCode::Forbidden) => {
                let why: Vec<_> = r.messages().iter().filter_map(|m| m.value()).collect();
                return Err(format!(
                    "query {id} status {:?}: {}",
                    r.status_code(),
                    why.join("; ")
                ));
            }
            _ => {}
        }
        if r.timestamps().len() != r.values().len() {
            return Err(format!(
                "query {id}: {} timestamps but {} values",
                r.timestamps().len(),
                r.values().len()
            ));
        }
        let (target, gauge) = match id {
            "waiting" => (&mut self.waiting, true),
            "running" => (&mut self.running, true),
            "completed" => (&mut self.completed, false),
            "latency" => (&mut self.latency, false),
            other => return Err(format!("unexpected result id {other:?}")),
        };
        // NaN, infinities and values past MAX_SAMPLE_MAGNITUDE are gaps (`Sample::is_plausible`).
        for (t, v) in r.timestamps().iter().zip(r.values()) {
            let v = if gauge {
                summed_gauge(*v, publish_s, period)
            } else {
                *v
            };
            let sample = Sample::new(t.as_secs_f64() + period, v);
            if sample.is_plausible() {
                target.push(sample);
            }
        }
        target.sort_by(|a, b| a.t.total_cmp(&b.t));
        Ok(())
    }
}

/// The dimensions of a target (see the module docs).
pub fn dimensions(target: &TargetSpec) -> Result<Vec<Dimension>, String> {
    let sel = normalized_selector(&target.selector);
    if sel.is_empty() {
        return Ok(vec![Dimension::builder()
            .name(TARGET_DIMENSION)
            .value(&target.name)
            .build()]);
    }
    let mut dims = Vec::new();
    for matcher in split_matchers(sel) {
        let matcher = matcher.trim();
        let (name, value) = matcher
            .split_once('=')
            .filter(|(n, v)| !n.ends_with('!') && !v.starts_with('~'))
            .ok_or_else(|| {
                format!(
                    "selector matcher {matcher:?} of target {} is not an equality; CloudWatch dimensions need name=\"value\"",
                    target.name
                )
            })?;
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        dims.push(Dimension::builder().name(name.trim()).value(value).build());
    }
    Ok(dims)
}

/// Splits `a="x,y", b="z"` at the commas outside quotes.
fn split_matchers(sel: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in sel.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&sel[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&sel[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// Completions per second plus the clamped growth of waiting + running per second, per period.
/// Where the gauges lack a point for this or the previous period the growth counts as zero, as in
/// the PromQL version.
pub fn arrival_rate(
    completed: &[Sample],
    waiting: &[Sample],
    running: &[Sample],
    period: f64,
) -> Vec<Sample> {
    let at = |s: &[Sample], t: f64| s.iter().find(|x| (x.t - t).abs() < 1e-6).map(|x| x.v);
    let in_system = |t: f64| Some(at(waiting, t)? + at(running, t)?);
    completed
        .iter()
        .map(|c| {
            let growth = match (in_system(c.t), in_system(c.t - period)) {
                (Some(now), Some(before)) => (now - before).max(0.0),
                _ => 0.0,
            };
            Sample::new(c.t, (c.v + growth) / period)
        })
        .collect()
}

/// Puts a series on the step grid of `w` (ending at `w.end`): each grid point gets the value of
/// the newest sample stamped in [point - step, point]; points without one are left out.
pub fn to_grid(samples: &[Sample], w: &Window) -> Vec<Sample> {
    let n = ((w.end - w.start) / w.step).floor() as i64;
    (0..=n)
        .rev()
        .filter_map(|k| {
            let g = w.end - k as f64 * w.step;
            samples
                .iter()
                .rev()
                .find(|s| s.t <= g + 1e-6 && s.t >= g - w.step - 1e-6)
                .map(|s| Sample::new(g, s.v))
        })
        .collect()
}

fn describe_sdk_error(e: &SdkError<GetMetricDataError>) -> (String, bool) {
    match e {
        SdkError::ServiceError(se) => {
            let err = se.err();
            let code = err.code().unwrap_or("unknown");
            let message = err.message().unwrap_or_default();
            // Throttling and server faults may pass next tick; bad parameters or access never.
            let retryable = se.raw().status().is_server_error()
                || se.raw().status().as_u16() == 429
                || code.contains("Throttl")
                || code.contains("InternalService")
                || code.contains("ServiceUnavailable");
            (format!("{code}: {message}"), retryable)
        }
        SdkError::ConstructionFailure(_) => (format!("{e:?}"), false),
        // Timeouts, connection failures and unreadable responses: the next tick may do better.
        other => (DisplayErrorContext(other).to_string(), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::spec::HeadroomKind;

    fn target(selector: &str) -> TargetSpec {
        TargetSpec {
            selector: selector.into(),
            ..TargetSpec::new("llama", "gpu", HeadroomKind::NodePoolReplicas, 4)
        }
    }

    fn pairs(d: Vec<Dimension>) -> Vec<(String, String)> {
        d.into_iter()
            .map(|d| {
                (
                    d.name().unwrap().to_string(),
                    d.value().unwrap().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn garbage_values_are_gaps() {
        // Periods of 60 s starting at 0, 60, ..., 300: stamped at their ends 60, 120, ... 360.
        // NaN, +inf and values past 1e12 are dropped; 1e12 itself and 4 are kept.
        let values = [4.0, f64::NAN, f64::INFINITY, 2e12, -1e13, 1e12];
        let result = MetricDataResult::builder()
            .id("waiting")
            .set_timestamps(Some((0..6).map(|k| DateTime::from_secs(60 * k)).collect()))
            .set_values(Some(values.to_vec()))
            .build();
        let mut series = Series::default();
        // published every 60 s, read at 60 s: the Sum is the summed gauge as it is
        series.add(&result, 60.0, 60.0).unwrap();
        assert_eq!(
            series.waiting,
            vec![Sample::new(60.0, 4.0), Sample::new(360.0, 1e12)]
        );
    }

    #[test]
    fn gauges_are_read_as_sums_and_summed_over_publishers() {
        // The gauges ask for Sum (Average would divide by the number of publishers too).
        let stats: Vec<_> = ALL_SIGNALS
            .iter()
            .map(|(id, _, stat)| (*id, *stat))
            .collect();
        assert_eq!(
            stats,
            [
                ("waiting", "Sum"),
                ("running", "Sum"),
                ("completed", "Sum"),
                ("latency", "Average")
            ]
        );
        // Two publishers every 10 s, read at 60 s: 3 and 5 waiting all along give a Sum of
        // 6·3 + 6·5 = 48, i.e. 8 waiting (48 / 6 datapoints per publisher). The same 48 as a
        // counter's Sum is 48 completions and stays 48.
        let result = |id: &str| {
            MetricDataResult::builder()
                .id(id)
                .set_timestamps(Some(vec![DateTime::from_secs(0)]))
                .set_values(Some(vec![48.0]))
                .build()
        };
        let mut series = Series::default();
        for id in ["waiting", "running", "completed"] {
            series.add(&result(id), 60.0, 10.0).unwrap();
        }
        assert_eq!(series.waiting, vec![Sample::new(60.0, 8.0)]);
        assert_eq!(series.running, vec![Sample::new(60.0, 8.0)]);
        assert_eq!(series.completed, vec![Sample::new(60.0, 48.0)]);
    }

    #[test]
    fn dimensions_from_name_or_selector() {
        let s = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            pairs(dimensions(&target("")).unwrap()),
            vec![s("Target", "llama")]
        );
        assert_eq!(
            pairs(dimensions(&target(r#"{model_name="llama-3", pool = "a,b"}"#)).unwrap()),
            vec![s("model_name", "llama-3"), s("pool", "a,b")]
        );
        for bad in [r#"model=~"l.*""#, r#"model!="x""#, "model"] {
            let err = dimensions(&target(bad)).unwrap_err();
            assert!(err.contains("not an equality"), "{bad}: {err}");
        }
    }

    #[test]
    fn arrivals_add_clamped_growth_to_completions() {
        let s = Sample::new;
        // period 10 s; in system 4 -> 10 -> 6 -> (missing running) ; completions 20, 30, 40, 50
        let completed = [s(10.0, 20.0), s(20.0, 30.0), s(30.0, 40.0), s(40.0, 50.0)];
        let waiting = [s(10.0, 1.0), s(20.0, 6.0), s(30.0, 2.0), s(40.0, 9.0)];
        let running = [s(10.0, 3.0), s(20.0, 4.0), s(30.0, 4.0)];
        assert_eq!(
            arrival_rate(&completed, &waiting, &running, 10.0),
            vec![
                s(10.0, 2.0), // no previous period: growth 0
                s(20.0, 3.6), // (30 + 6) / 10
                s(30.0, 4.0), // shrinking system: growth clamped to 0
                s(40.0, 5.0), // running missing: growth 0
            ]
        );
    }

    #[test]
    fn series_go_onto_the_step_grid_ending_now() {
        let s = Sample::new;
        let w = Window {
            start: 55.0,
            end: 100.0,
            step: 15.0,
        };
        // grid 55, 70, 85, 100; samples every 10 s, one gap at 80
        let raw = [
            s(50.0, 1.0),
            s(60.0, 2.0),
            s(70.0, 3.0),
            s(90.0, 5.0),
            s(100.0, 6.0),
        ];
        assert_eq!(
            to_grid(&raw, &w),
            vec![s(55.0, 1.0), s(70.0, 3.0), s(85.0, 3.0), s(100.0, 6.0)]
        );
        // nothing within one step before a grid point: the point is left out
        assert_eq!(
            to_grid(&[s(20.0, 1.0), s(99.0, 2.0)], &w),
            vec![s(100.0, 2.0)]
        );
        assert_eq!(to_grid(&[], &w), vec![]);
    }
}
