//! The Prometheus HTTP API source (`/api/v1/query_range`). The same code serves Amazon Managed
//! Prometheus: `amp.rs` only adds a SigV4 signer (through the `RequestSigner` trait, so the
//! dependency runs one way, amp → prometheus), every other step (URL, response parsing, error
//! mapping) is this file's.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;

use super::queries;
use super::{metrics_error, MetricSource, RecentSignals, Window};
use crate::core::{Sample, TargetSpec};
use crate::error::Error;

/// A whole query may take this long; a tick runs every 15 s and must not stall on one target.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Adds authentication headers to a GET (AMP's SigV4); the URL is final and percent-encoded.
#[async_trait]
pub trait RequestSigner: Send + Sync {
    async fn headers_for_get(&self, url: &str) -> Result<Vec<(String, String)>, Error>;
}

/// Prometheus answers at most this many points per series and query; longer histories are
/// fetched in chunks.
pub const MAX_POINTS_PER_QUERY: f64 = 10_000.0;

/// Reads the signals of a target from a Prometheus-compatible HTTP API.
pub struct PrometheusSource {
    http: reqwest::Client,
    /// Base URL without a trailing slash; `/api/v1/query_range` is appended.
    base_url: String,
    /// Present for Amazon Managed Prometheus.
    signer: Option<Arc<dyn RequestSigner>>,
    /// RATE_WINDOW_SECONDS: the built-in queries' `rate`/`deriv` range.
    rate_window_s: f64,
}

impl PrometheusSource {
    /// A plain Prometheus at `base_url` (e.g. `http://127.0.0.1:19090`).
    pub fn new(base_url: &str) -> Result<Self, Error> {
        Self::build(base_url, None)
    }

    pub fn build(base_url: &str, signer: Option<Arc<dyn RequestSigner>>) -> Result<Self, Error> {
        // reqwest is built without a TLS provider of its own (one TLS stack in the binary):
        // aws-lc-rs, which the AWS SDK and kube use, becomes the process default. An error only
        // says a default is already installed.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| Error::config("PROMETHEUS_URL", format!("HTTP client: {e}")))?;
        Ok(PrometheusSource {
            http,
            base_url: base_url.trim().trim_end_matches('/').to_string(),
            signer,
            rate_window_s: crate::core::PolicySpec::default().rate_window_s,
        })
    }

    /// The same source with the built-in queries' `rate`/`deriv` over `rate_window_s`
    /// (RATE_WINDOW_SECONDS; the mean latency over twice it).
    pub fn with_rate_window(self, rate_window_s: f64) -> Self {
        PrometheusSource {
            rate_window_s,
            ..self
        }
    }

    /// The full `query_range` URL. The query string is percent-encoded strictly (space as `%20`,
    /// `+` as `%2B`), so the URL sent is byte for byte the one SigV4 canonicalizes.
    pub fn range_url(&self, query: &str, w: &Window) -> String {
        format!(
            "{}/api/v1/query_range?query={}&start={}&end={}&step={}",
            self.base_url,
            strict_encode(query),
            fmt_seconds(w.start),
            fmt_seconds(w.end),
            fmt_seconds(w.step),
        )
    }

    /// Runs one range query and returns its single series (or none).
    async fn range(&self, query: &str, w: &Window) -> Result<Vec<Sample>, QueryError> {
        let url = self.range_url(query, w);
        let mut request = self.http.get(&url);
        if let Some(signer) = &self.signer {
            for (name, value) in signer.headers_for_get(&url).await.map_err(|e| QueryError {
                message: e.to_string(),
                retryable: e.retryable(),
            })? {
                request = request.header(name, value);
            }
        }
        let response = request.send().await.map_err(|e| QueryError {
            message: format!("request failed: {e}"),
            retryable: true,
        })?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| QueryError {
            message: format!("reading the response failed: {e}"),
            retryable: true,
        })?;
        if !status.is_success() {
            return Err(QueryError {
                message: format!("HTTP {status}: {}", error_text(&body)),
                // 429 and 5xx (overload, query timeout) may pass later; other 4xx mean a bad
                // query, a bad signature or a missing workspace, which trying again cannot fix.
                retryable: status.as_u16() == 429 || status.is_server_error(),
            });
        }
        parse_matrix(&body).map_err(|message| QueryError {
            message,
            retryable: false,
        })
    }
}

#[async_trait]
impl MetricSource for PrometheusSource {
    async fn observe(&self, target: &TargetSpec, w: Window) -> Result<RecentSignals, Error> {
        let q = queries::for_target(target, self.rate_window_s);
        let named = |signal: &'static str, query: String| async move {
            self.range(&query, &w).await.map_err(|e| {
                metrics_error(
                    target,
                    format!("{signal} query {query:?}: {}", e.message),
                    e.retryable,
                )
            })
        };
        let (waiting, running, arrival_rate, service_time_s) = futures::try_join!(
            named("waiting", q.waiting),
            named("running", q.running),
            named("arrival rate", q.arrival_rate),
            named("service time", q.service_time),
        )?;
        Ok(RecentSignals {
            arrival_rate,
            service_time_s,
            waiting,
            running,
        })
    }

    async fn arrival_history(&self, target: &TargetSpec, w: Window) -> Result<Vec<Sample>, Error> {
        let query = queries::for_target(target, self.rate_window_s).arrival_rate;
        let mut out = Vec::new();
        for chunk in chunks(&w, MAX_POINTS_PER_QUERY) {
            let mut part = self.range(&query, &chunk).await.map_err(|e| {
                metrics_error(
                    target,
                    format!("arrival rate history {query:?}: {}", e.message),
                    e.retryable,
                )
            })?;
            // Chunks share their boundary point; keep it once.
            if let (Some(last), Some(first)) = (out.last().map(|s: &Sample| s.t), part.first()) {
                if first.t <= last {
                    part.remove(0);
                }
            }
            out.extend(part);
        }
        Ok(out)
    }
}

/// Consecutive windows of at most `max_points` points covering `w`; neighbours share their
/// boundary point.
fn chunks(w: &Window, max_points: f64) -> Vec<Window> {
    let span = (max_points - 1.0).max(1.0) * w.step;
    let mut out = Vec::new();
    let mut start = w.start;
    loop {
        let end = (start + span).min(w.end);
        out.push(Window {
            start,
            end,
            step: w.step,
        });
        if end >= w.end {
            return out;
        }
        start = end;
    }
}

/// Why one query failed.
#[derive(Debug)]
struct QueryError {
    message: String,
    retryable: bool,
}

/// Prometheus answers `{"status":"error","errorType":...,"error":...}` on failures; otherwise the
/// start of the body helps (proxies answer HTML).
fn error_text(body: &[u8]) -> String {
    if let Ok(e) = serde_json::from_slice::<Envelope>(body) {
        if let Some(msg) = e.error {
            return format!("{}: {msg}", e.error_type.unwrap_or_default());
        }
    }
    String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned()
}

#[derive(Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    #[serde(default)]
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct MatrixSeries {
    #[serde(default)]
    metric: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

/// Parses a `query_range` answer into one series, oldest first. Non-finite values ("NaN" from
/// 0/0, "+Inf", "-Inf") and values past `MAX_SAMPLE_MAGNITUDE` (1e12) are left out: they carry
/// no demand information, and a gap is what the policy already treats as missing data. Several series are an error (a query that forgot to
/// aggregate); no series is an empty result, not an error.
pub fn parse_matrix(body: &[u8]) -> Result<Vec<Sample>, String> {
    let envelope: Envelope = serde_json::from_slice(body)
        .map_err(|e| format!("response is not a Prometheus API answer: {e}"))?;
    if envelope.status != "success" {
        return Err(format!(
            "status {:?}: {}",
            envelope.status,
            envelope.error.unwrap_or_default()
        ));
    }
    let data = envelope
        .data
        .ok_or_else(|| "answer has no data field".to_string())?;
    if data.result_type != "matrix" {
        return Err(format!(
            "expected a matrix (range query), got resultType {:?}",
            data.result_type
        ));
    }
    let series: Vec<MatrixSeries> = match data.result {
        serde_json::Value::Null => Vec::new(),
        other => serde_json::from_value(other).map_err(|e| format!("malformed matrix: {e}"))?,
    };
    match series.len() {
        0 => Ok(Vec::new()),
        1 => {
            let s = series.into_iter().next().expect("one series");
            let mut samples = Vec::with_capacity(s.values.len());
            for (t, raw) in s.values {
                let sample = Sample::new(t, parse_value(&raw)?);
                if sample.is_plausible() {
                    samples.push(sample);
                }
            }
            samples.sort_by(|a, b| a.t.total_cmp(&b.t));
            Ok(samples)
        }
        n => Err(format!(
            "expected one series, got {n} (first labels {:?}); aggregate the query, e.g. sum(...)",
            serde_json::Value::Object(series[0].metric.clone()).to_string()
        )),
    }
}

/// Prometheus sends sample values as strings: decimal numbers, "NaN", "+Inf", "-Inf".
fn parse_value(raw: &str) -> Result<f64, String> {
    match raw {
        "NaN" => Ok(f64::NAN),
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => raw
            .parse::<f64>()
            .map_err(|_| format!("sample value {raw:?} is not a number")),
    }
}

/// Seconds with millisecond precision, the resolution Prometheus keeps, rounded down: a query
/// `end` rounded up lies after the tick's clock, so its newest point (the sample that just
/// became visible) is stamped in the decision's future and left out (the e2e fast-path test saw
/// the spike one tick late about half the time).
fn fmt_seconds(s: f64) -> String {
    format!("{:.3}", (s * 1000.0).floor() / 1000.0)
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
fn strict_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(result_type: &str, result: &str) -> String {
        format!(
            r#"{{"status":"success","data":{{"resultType":"{result_type}","result":{result}}}}}"#
        )
    }

    #[test]
    fn a_matrix_becomes_one_series_oldest_first() {
        let body = ok(
            "matrix",
            r#"[{"metric":{},"values":[[1700000015,"3"],[1700000000,"2.5"],[1700000030,"1e1"]]}]"#,
        );
        assert_eq!(
            parse_matrix(body.as_bytes()).unwrap(),
            vec![
                Sample::new(1_700_000_000.0, 2.5),
                Sample::new(1_700_000_015.0, 3.0),
                Sample::new(1_700_000_030.0, 10.0)
            ]
        );
    }

    #[test]
    fn non_finite_values_are_dropped_not_fatal() {
        let body = ok(
            "matrix",
            r#"[{"metric":{"model_name":"m"},"values":[[1,"NaN"],[2,"+Inf"],[3,"-Inf"],[4,"7"]]}]"#,
        );
        assert_eq!(
            parse_matrix(body.as_bytes()).unwrap(),
            vec![Sample::new(4.0, 7.0)]
        );
    }

    #[test]
    fn values_past_a_trillion_are_dropped() {
        // 1e12 itself is kept (the bound); 1.5e12, -2e12 and 1e300 (finite, garbage) are not.
        let body = ok(
            "matrix",
            r#"[{"metric":{},"values":[[1,"1e12"],[2,"1.5e12"],[3,"-2e12"],[4,"1e300"],[5,"3"]]}]"#,
        );
        assert_eq!(
            parse_matrix(body.as_bytes()).unwrap(),
            vec![Sample::new(1.0, 1e12), Sample::new(5.0, 3.0)]
        );
    }

    #[test]
    fn empty_answers_are_empty_series() {
        for body in [
            ok("matrix", "[]"),
            ok("matrix", "null"),
            r#"{"status":"success","data":{"resultType":"matrix"}}"#.to_string(),
            ok("matrix", r#"[{"metric":{}}]"#),
        ] {
            assert_eq!(parse_matrix(body.as_bytes()).unwrap(), vec![], "{body}");
        }
    }

    #[test]
    fn malformed_answers_are_errors_naming_the_cause() {
        let cases = [
            ("not json", "not a Prometheus API answer"),
            ("", "not a Prometheus API answer"),
            (r#"{"data":{}}"#, "not a Prometheus API answer"),
            (r#"{"status":"success"}"#, "no data field"),
            (
                &ok("vector", r#"[{"metric":{},"value":[1,"2"]}]"#),
                "expected a matrix",
            ),
            (&ok("scalar", r#"[1,"2"]"#), "expected a matrix"),
            (&ok("matrix", r#"{"a":1}"#), "malformed matrix"),
            (
                &ok("matrix", r#"[{"metric":{},"values":[[1,2]]}]"#),
                "malformed matrix",
            ),
            (
                &ok("matrix", r#"[{"metric":{},"values":[["x","2"]]}]"#),
                "malformed matrix",
            ),
            (
                &ok("matrix", r#"[{"metric":{},"values":[[1,"lots"]]}]"#),
                r#"sample value "lots" is not a number"#,
            ),
            (
                &ok(
                    "matrix",
                    r#"[{"metric":{"pod":"a"},"values":[[1,"1"]]},{"metric":{"pod":"b"},"values":[[1,"1"]]}]"#,
                ),
                "expected one series, got 2",
            ),
            (
                r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
                "parse error",
            ),
        ];
        for (body, needle) in cases {
            let err = parse_matrix(body.as_bytes()).unwrap_err();
            assert!(err.contains(needle), "{body:?} -> {err:?}");
        }
    }

    #[test]
    fn error_bodies_are_summarized() {
        assert_eq!(
            error_text(br#"{"status":"error","errorType":"bad_data","error":"1:5: parse error"}"#),
            "bad_data: 1:5: parse error"
        );
        assert_eq!(error_text(b"<html>gateway</html>"), "<html>gateway</html>");
    }

    #[test]
    fn the_url_is_strictly_encoded() {
        let src = PrometheusSource::new("http://127.0.0.1:19090/").unwrap();
        let w = Window {
            start: 100.0,
            end: 1000.5,
            step: 15.0,
        };
        assert_eq!(
            src.range_url(r#"sum(a{b="c d"}) + 1"#, &w),
            "http://127.0.0.1:19090/api/v1/query_range?query=sum%28a%7Bb%3D%22c%20d%22%7D%29%20%2B%201&start=100.000&end=1000.500&step=15.000"
        );
    }

    #[test]
    fn query_times_are_rounded_down_to_the_millisecond() {
        // (seconds, as sent): never later than the clock it came from.
        for (t, want) in [
            (1796068178.5356, "1796068178.535"),
            (1796068178.5354, "1796068178.535"),
            (100.0, "100.000"),
            (1000.5, "1000.500"),
        ] {
            assert_eq!(fmt_seconds(t), want, "{t}");
        }
    }
}
