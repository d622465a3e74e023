//! The `prometheus` and `amp` metric sources against a real Prometheus (the stack's, at
//! `PROMETHEUS_URL`, started with `--web.enable-remote-write-receiver`).
//!
//! Known series are pushed with the remote-write protocol under a label value unique to the test
//! run, so the expected values follow from the test's own generator, not from the code under test.
//! The remote-write body (protobuf `WriteRequest`, snappy block) is encoded by hand below: both
//! formats are small, and no protobuf or snappy crate is a dependency of the project.

mod common;
use common::{now_whole_seconds, unique_series};

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_credential_types::provider::SharedCredentialsProvider;
use aws_credential_types::Credentials;
use prewarm::adapters::metrics::{amp, MetricSource, PrometheusSource, RecentSignals, Window};
use prewarm::config::MetricSourceConfig;
use prewarm::core::spec::{HeadroomKind, ServerKind};
use prewarm::core::{PolicySpec, TargetSpec};
use prewarm::Error;

fn prometheus_url() -> String {
    std::env::var("PROMETHEUS_URL").expect("PROMETHEUS_URL (source tests/stack/.run/env)")
}

fn target(model: &str) -> TargetSpec {
    TargetSpec {
        selector: format!(r#"model_name="{model}""#),
        ..TargetSpec::new(
            format!("t-{model}"),
            "gpu",
            HeadroomKind::NodePoolReplicas,
            4,
        )
    }
}

// ---- remote write: protobuf + snappy by hand --------------------------------------------------

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field_bytes(field: u64, bytes: &[u8], out: &mut Vec<u8>) {
    varint(field << 3 | 2, out);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// `prometheus.TimeSeries` with sorted labels and samples `(ms, value)`.
fn time_series(labels: &[(&str, &str)], samples: &[(i64, f64)]) -> Vec<u8> {
    let mut sorted = labels.to_vec();
    sorted.sort();
    let mut ts = Vec::new();
    for (name, value) in sorted {
        let mut label = Vec::new();
        field_bytes(1, name.as_bytes(), &mut label);
        field_bytes(2, value.as_bytes(), &mut label);
        field_bytes(1, &label, &mut ts);
    }
    for (ms, v) in samples {
        let mut sample = Vec::new();
        varint(1 << 3 | 1, &mut sample); // value: double, fixed64
        sample.extend_from_slice(&v.to_le_bytes());
        varint(2 << 3, &mut sample); // timestamp: int64 varint
        varint(*ms as u64, &mut sample);
        field_bytes(2, &sample, &mut ts);
    }
    ts
}

/// A snappy block holding `data` as one literal (valid snappy, just not compressed).
fn snappy_literal(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(data.len() as u64, &mut out);
    if !data.is_empty() {
        out.push(63 << 2); // literal, length-1 in the next 4 bytes
        out.extend_from_slice(&((data.len() - 1) as u32).to_le_bytes());
        out.extend_from_slice(data);
    }
    out
}

/// Writes each series under `model_name=<model>`. A name may carry more labels after `|`, as
/// `name|label=value|label=value` (series of one family told apart by a label).
async fn remote_write(series: &[(String, Vec<(i64, f64)>)], model: &str) {
    let mut request = Vec::new();
    for (name, samples) in series {
        let mut parts = name.split('|');
        let mut labels = vec![("__name__", parts.next().unwrap_or_default())];
        labels.extend(parts.filter_map(|l| l.split_once('=')));
        labels.push(("model_name", model));
        let ts = time_series(&labels, samples);
        field_bytes(1, &ts, &mut request);
    }
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/write", prometheus_url()))
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "snappy")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .body(snappy_literal(&request))
        .send()
        .await
        .expect("remote write reaches Prometheus");
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    assert!(status.is_success(), "remote write: {status} {body}");
}

// ---- the known history ------------------------------------------------------------------------

/// Samples every 5 s for the 20 minutes up to `now` (whole seconds), k = 0, 1, 2, ...:
/// waiting = k (grows 0.2/s), running = 4, completions 2/s, latency sum 3 s/s.
/// Expected: arrival rate = 2 + 0.2 = 2.2/s, service time = 3 / 2 = 1.5 s.
const SPACING_S: i64 = 5;
const HISTORY_S: i64 = 1200;

fn known_history(now: i64) -> Vec<(String, Vec<(i64, f64)>)> {
    known_history_of(ServerKind::Vllm, now)
}

/// The same demand in the metric names and units of each server kind, so every kind's built-in
/// queries must produce the same observation (arrival 2.2/s, service 1.5 s, running 4, waiting k).
fn known_history_of(kind: ServerKind, now: i64) -> Vec<(String, Vec<(i64, f64)>)> {
    let t0 = now - HISTORY_S;
    let n = HISTORY_S / SPACING_S;
    let series = |f: &dyn Fn(f64) -> f64| -> Vec<(i64, f64)> {
        (0..=n)
            .map(|k| ((t0 + k * SPACING_S) * 1000, f(k as f64)))
            .collect()
    };
    let waiting = |k: f64| k;
    let running = |_: f64| 4.0;
    let completed = |k: f64| 10.0 * k; // 2/s
    let latency_sum = |k: f64| 15.0 * k; // 3 s of latency per second: 1.5 s per request
    let named = |pairs: Vec<(&str, &dyn Fn(f64) -> f64)>| {
        pairs
            .into_iter()
            .map(|(name, f)| (name.to_string(), series(f)))
            .collect::<Vec<_>>()
    };
    match kind {
        ServerKind::Vllm => named(vec![
            ("vllm:num_requests_waiting", &waiting),
            ("vllm:num_requests_running", &running),
            ("vllm:request_success_total", &completed),
            ("vllm:e2e_request_latency_seconds_sum", &latency_sum),
            ("vllm:e2e_request_latency_seconds_count", &completed),
        ]),
        ServerKind::Triton => named(vec![
            ("nv_inference_pending_request_count", &waiting),
            ("nv_inference_request_success", &completed),
            // microseconds: 3e6 us/s over 2 requests/s = 1.5 s
            ("nv_inference_request_duration_us", &|k| 15e6 * k),
            // 4 requests in compute at any time: 4e6 us of compute per second
            ("nv_inference_compute_infer_duration_us", &|k| 20e6 * k),
        ]),
        // TGI counts arrivals directly: 2.2/s.
        ServerKind::Tgi => named(vec![
            ("tgi_queue_size", &waiting),
            ("tgi_batch_current_size", &running),
            ("tgi_request_count", &|k| 11.0 * k),
            ("tgi_request_duration_sum", &latency_sum),
            ("tgi_request_duration_count", &completed),
        ]),
        ServerKind::Sglang => named(vec![
            ("sglang:num_queue_reqs", &waiting),
            ("sglang:num_running_reqs", &running),
            ("sglang:e2e_request_latency_seconds_sum", &latency_sum),
            ("sglang:e2e_request_latency_seconds_count", &completed),
        ]),
        // The backend's gauges by request type (the "active" count is not what is read:
        // 100 would show in running); Triton's pending count stays 0.
        ServerKind::TritonTrtllm => named(vec![
            ("nv_trt_llm_request_metrics|request_type=waiting", &waiting),
            (
                "nv_trt_llm_request_metrics|request_type=scheduled",
                &running,
            ),
            ("nv_trt_llm_request_metrics|request_type=active", &|_| 100.0),
            ("nv_inference_pending_request_count", &|_| 0.0),
            ("nv_inference_request_success", &completed),
            ("nv_inference_request_duration_us", &|k| 15e6 * k),
        ]),
        ServerKind::TrtllmServe => named(vec![
            ("trtllm_num_requests_waiting", &waiting),
            ("trtllm_num_requests_running", &running),
            ("trtllm_request_success_total", &completed),
            ("trtllm_e2e_request_latency_seconds_sum", &latency_sum),
            ("trtllm_e2e_request_latency_seconds_count", &completed),
        ]),
        // Queued (k) is a subset of inflight (k + 4): running 4.
        ServerKind::Dynamo => named(vec![
            ("dynamo_frontend_queued_requests", &waiting),
            ("dynamo_frontend_inflight_requests", &|k| k + 4.0),
            ("dynamo_frontend_requests_total", &completed),
            ("dynamo_frontend_request_duration_seconds_sum", &latency_sum),
            ("dynamo_frontend_request_duration_seconds_count", &completed),
        ]),
        // The decode pods carry the demand; a prefill pod's series (other numbers, growing
        // too) would change every figure if they were read.
        ServerKind::LlmD => named(vec![
            ("vllm:num_requests_waiting|llm_d_ai_role=decode", &waiting),
            ("vllm:num_requests_running|llm_d_ai_role=decode", &running),
            (
                "vllm:request_success_total|llm_d_ai_role=decode",
                &completed,
            ),
            (
                "vllm:e2e_request_latency_seconds_sum|llm_d_ai_role=decode",
                &latency_sum,
            ),
            (
                "vllm:e2e_request_latency_seconds_count|llm_d_ai_role=decode",
                &completed,
            ),
            ("vllm:num_requests_waiting|llm_d_ai_role=prefill", &|k| {
                3.0 * k
            }),
            ("vllm:num_requests_running|llm_d_ai_role=prefill", &|_| 7.0),
            ("vllm:request_success_total|llm_d_ai_role=prefill", &|k| {
                50.0 * k
            }),
            (
                "vllm:e2e_request_latency_seconds_sum|llm_d_ai_role=prefill",
                &|k| k,
            ),
            (
                "vllm:e2e_request_latency_seconds_count|llm_d_ai_role=prefill",
                &|k| 50.0 * k,
            ),
        ]),
    }
}

/// Checks an observation of `known_history(now)` with the default policy (900 s window, 15 s
/// step): 61 grid points from now-900 to now, each at a sample time.
fn assert_known(obs: &RecentSignals, now: i64) {
    let policy = PolicySpec::default();
    let points = (policy.window_s / policy.step_s) as usize + 1;
    let grid: Vec<f64> = (0..points)
        .map(|j| (now as f64 - policy.window_s) + j as f64 * policy.step_s)
        .collect();
    let times = |s: &[prewarm::core::Sample]| s.iter().map(|x| x.t).collect::<Vec<_>>();
    for (name, series) in [
        ("waiting", &obs.waiting),
        ("running", &obs.running),
        ("arrival", &obs.arrival_rate),
        ("service", &obs.service_time_s),
    ] {
        assert_eq!(times(series), grid, "{name} grid");
    }
    let t0 = (now - HISTORY_S) as f64;
    for s in &obs.waiting {
        let k = ((s.t - t0) / SPACING_S as f64).floor();
        assert_eq!(s.v, k, "waiting at {}", s.t);
    }
    assert!(obs.running.iter().all(|s| s.v == 4.0), "{:?}", obs.running);
    for s in &obs.arrival_rate {
        assert!((s.v - 2.2).abs() < 1e-6, "arrival {} at {}", s.v, s.t);
    }
    for s in &obs.service_time_s {
        assert!((s.v - 1.5).abs() < 1e-9, "service time {} at {}", s.v, s.t);
    }
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn prometheus_source_reads_known_pushed_series() {
    let model = unique_series("prom");
    let now = now_whole_seconds();
    remote_write(&known_history(now), &model).await;
    let source = PrometheusSource::new(&prometheus_url()).unwrap();
    let obs = source
        .observe(
            &target(&model),
            Window::ending_at(now as f64, &PolicySpec::default()),
        )
        .await
        .unwrap();
    assert_known(&obs, now);
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn every_server_kinds_built_in_queries_run_on_real_prometheus() {
    let source = PrometheusSource::new(&prometheus_url()).unwrap();
    for kind in [
        ServerKind::Vllm,
        ServerKind::Triton,
        ServerKind::Tgi,
        ServerKind::Sglang,
        ServerKind::TritonTrtllm,
        ServerKind::TrtllmServe,
        ServerKind::Dynamo,
        ServerKind::LlmD,
    ] {
        let model = unique_series(&format!("{kind:?}").to_lowercase());
        let now = now_whole_seconds();
        remote_write(&known_history_of(kind, now), &model).await;
        let mut t = target(&model);
        t.server = kind;
        let obs = source
            .observe(&t, Window::ending_at(now as f64, &PolicySpec::default()))
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_known(&obs, now);
    }
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn amp_source_signed_requests_are_well_formed_end_to_end() {
    // Prometheus ignores the SigV4 headers, so this proves the signed request (URL encoding,
    // extra headers) is accepted and answered by the same parsing as the plain source.
    let model = unique_series("amp");
    let now = now_whole_seconds();
    remote_write(&known_history(now), &model).await;
    let creds = Credentials::new("AKIDTEST", "secret", Some("session".into()), None, "test");
    let signer = Arc::new(amp::ApsSigner::new(
        "us-east-1",
        SharedCredentialsProvider::new(creds),
    ));
    signer.preload().await.unwrap();
    let source = amp::source(&format!("{}/", prometheus_url()), signer).unwrap();
    let obs = source
        .observe(
            &target(&model),
            Window::ending_at(now as f64, &PolicySpec::default()),
        )
        .await
        .unwrap();
    assert_known(&obs, now);
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn amp_from_config_loads_credentials_from_the_environment_chain() {
    // The stack's env file holds static test credentials; keep IMDS (a non-loopback address)
    // out of the chain in any case.
    std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
    for (k, v) in [
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
    ] {
        if std::env::var(k).is_err() {
            std::env::set_var(k, v);
        }
    }
    let model = unique_series("ampcfg");
    let now = now_whole_seconds();
    remote_write(&known_history(now), &model).await;
    let source = prewarm::adapters::metrics::from_config(
        &MetricSourceConfig::Amp {
            workspace_url: prometheus_url(),
            region: "us-east-1".into(),
        },
        // RATE_WINDOW_SECONDS 60, the default
        &PolicySpec::default(),
    )
    .await
    .unwrap();
    let obs = source
        .observe(
            &target(&model),
            Window::ending_at(now as f64, &PolicySpec::default()),
        )
        .await
        .unwrap();
    assert_known(&obs, now);
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_selector_without_data_gives_empty_series_not_an_error() {
    let source = PrometheusSource::new(&prometheus_url()).unwrap();
    let now = now_whole_seconds() as f64;
    let obs = source
        .observe(
            &target(&unique_series("none")),
            Window::ending_at(now, &PolicySpec::default()),
        )
        .await
        .unwrap();
    assert_eq!(obs, RecentSignals::default());
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_bad_query_is_a_final_error_naming_target_and_signal() {
    let source = PrometheusSource::new(&prometheus_url()).unwrap();
    let mut t = target("x");
    t.queries.running = Some("sum(rate(foo[1m])".into()); // unbalanced parenthesis
    let err = source
        .observe(
            &t,
            Window::ending_at(now_whole_seconds() as f64, &PolicySpec::default()),
        )
        .await
        .unwrap_err();
    match &err {
        Error::Metrics {
            target,
            message,
            retryable,
        } => {
            assert_eq!(target, "t-x");
            assert!(message.contains("running query"), "{message}");
            assert!(message.contains("HTTP 400"), "{message}");
            assert!(!retryable);
        }
        other => panic!("expected a metrics error, got {other:?}"),
    }
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn unaggregated_override_is_rejected_not_summed() {
    let model = unique_series("multi");
    let now = now_whole_seconds();
    // Two series of one name under two pods: a query without sum() returns both.
    for pod in ["a", "b"] {
        let mut request = Vec::new();
        let samples: Vec<(i64, f64)> = (0..=12).map(|k| ((now - 60 + 5 * k) * 1000, 1.0)).collect();
        let ts = time_series(
            &[
                ("__name__", "h4_multi"),
                ("model_name", &model),
                ("pod", pod),
            ],
            &samples,
        );
        field_bytes(1, &ts, &mut request);
        let r = reqwest::Client::new()
            .post(format!("{}/api/v1/write", prometheus_url()))
            .header("Content-Encoding", "snappy")
            .header("Content-Type", "application/x-protobuf")
            .body(snappy_literal(&request))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }
    let source = PrometheusSource::new(&prometheus_url()).unwrap();
    let mut t = target(&model);
    t.queries.waiting = Some(format!(r#"h4_multi{{model_name="{model}"}}"#));
    let err = source
        .observe(&t, Window::ending_at(now as f64, &PolicySpec::default()))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("expected one series, got 2"),
        "{err}"
    );
    assert!(!err.retryable());
}

#[tokio::test]
async fn an_unreachable_server_is_a_retryable_error() {
    // Bind a port, then close it, so nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let source = PrometheusSource::new(&format!("http://127.0.0.1:{port}")).unwrap();
    let err = source
        .observe(
            &target("x"),
            Window::ending_at(1_700_000_000.0, &PolicySpec::default()),
        )
        .await
        .unwrap_err();
    assert!(err.retryable(), "{err}");
    assert_eq!(err.kind(), "metrics");
    assert!(err.to_string().contains("t-x"), "{err}");
}

// ---- scraped end to end: the stack's load generator --------------------------------------------

async fn loadgen(path: &str, body: serde_json::Value) {
    let url = std::env::var("LOADGEN_URL").expect("LOADGEN_URL (source tests/stack/.run/env)");
    let r = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .json(&body)
        .send()
        .await
        .expect("load generator reachable");
    assert!(r.status().is_success(), "loadgen {path}: {}", r.status());
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn built_in_vllm_queries_read_the_scraped_load_generator() {
    // One replica with 8 slots whose requests take 1000 s: after the first second, 8 requests
    // run and the rest of the 3/s arrivals queue up. So running = 8, waiting grows, and the
    // arrival rate (completions 8/1000 per second + growth of the queue) is about 3/s.
    let model = unique_series("loadgen");
    loadgen(
        "/capacity",
        serde_json::json!({"model": model, "replicas": 1, "concurrency": 8, "service_s": 1000.0}),
    )
    .await;
    loadgen(
        "/scenario",
        serde_json::json!({"model": model, "name": "constant", "rps": 3.0}),
    )
    .await;
    let source = PrometheusSource::new(&prometheus_url()).unwrap();
    let policy = PolicySpec {
        step_s: 2.0,
        window_s: 60.0,
        ..PolicySpec::default()
    };
    let mut last = RecentSignals::default();
    let mut seen = false;
    // Wait (not a timing assertion) for enough scrapes that deriv has points to work on.
    for _ in 0..45 {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        last = source
            .observe(&target(&model), Window::ending_at(now, &policy))
            .await
            .unwrap();
        let newest = |s: &[prewarm::core::Sample]| s.last().map(|x| x.v);
        if newest(&last.running) == Some(8.0)
            && newest(&last.waiting).is_some_and(|w| w >= 10.0)
            && newest(&last.arrival_rate).is_some_and(|a| (a - 3.0).abs() < 0.3)
        {
            seen = true;
            break;
        }
    }
    loadgen(
        "/scenario",
        serde_json::json!({"model": model, "name": "idle"}),
    )
    .await;
    assert!(
        seen,
        "never saw running 8, a queue and ~3/s arrivals: {last:?}"
    );
}

// ---- answers a real Prometheus cannot be made to give on demand --------------------------------

/// Serves one canned HTTP answer to every connection on 127.0.0.1 (a stand-in for a proxy or an
/// overloaded server in front of Prometheus; documented fake, since Prometheus itself cannot be
/// told to fail this way).
async fn canned_server(status_line: &'static str, body: &'static str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let _ = conn.read(&mut buf).await;
                let answer = format!(
                    "HTTP/1.1 {status_line}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn http_answers_map_to_retryable_or_final_errors() {
    let cases = [
        ("503 Service Unavailable", "overloaded", true, "HTTP 503"),
        ("429 Too Many Requests", "slow down", true, "HTTP 429"),
        (
            "422 Unprocessable Entity",
            r#"{"status":"error","errorType":"execution","error":"too many samples"}"#,
            false,
            "execution: too many samples",
        ),
        ("403 Forbidden", "denied", false, "HTTP 403"),
        (
            "200 OK",
            "<html>login</html>",
            false,
            "not a Prometheus API answer",
        ),
        (
            "200 OK",
            r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
            false,
            "expected a matrix",
        ),
    ];
    for (status, body, retryable, needle) in cases {
        let url = canned_server(status, body).await;
        let err = PrometheusSource::new(&url)
            .unwrap()
            .observe(
                &target("x"),
                Window::ending_at(1_700_000_000.0, &PolicySpec::default()),
            )
            .await
            .unwrap_err();
        assert_eq!(err.retryable(), retryable, "{status}: {err}");
        assert!(err.to_string().contains(needle), "{status}: {err}");
        assert!(err.to_string().contains("t-x"), "{err}");
    }
}

// ---- seasonal history: the same clock time one (compressed) season back -------------------------

/// A compressed "day" of 20 minutes (SEASONS_SECONDS is a setting for this): 40 minutes of
/// history, completions at 2/s in the older 20 minutes and 6/s in the newer 20, nothing waiting
/// and 4 running throughout. Reading the observation window one season back must give 2/s,
/// today's 6/s: what `offset 20m` gives, without `offset` having to bind to every selector of
/// the arrival-rate expression.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn seasonal_history_reads_the_window_one_season_back() {
    const SEASON: i64 = 1200;
    let model = unique_series("season");
    let now = now_whole_seconds();
    let t0 = now - 2 * SEASON;
    let n = 2 * SEASON / SPACING_S;
    let boundary = now - SEASON;
    let mut count = 0.0;
    let mut completed = Vec::new();
    for k in 0..=n {
        let t = t0 + k * SPACING_S;
        if k > 0 {
            count += if t <= boundary { 2.0 } else { 6.0 } * SPACING_S as f64;
        }
        completed.push((t * 1000, count));
    }
    let flat = |v: f64| (0..=n).map(|k| ((t0 + k * SPACING_S) * 1000, v)).collect();
    remote_write(
        &[
            ("vllm:request_success_total".into(), completed),
            ("vllm:num_requests_waiting".into(), flat(0.0)),
            ("vllm:num_requests_running".into(), flat(4.0)),
        ],
        &model,
    )
    .await;
    let source = PrometheusSource::new(&prometheus_url()).unwrap();
    let target = target(&model);
    // Today's window, stopping 2 minutes short of now and starting 2 minutes after the
    // boundary, so no 1 m rate straddles the change.
    let today = prewarm::adapters::metrics::Window {
        start: (boundary + 120) as f64,
        end: (now - 120) as f64,
        step: 15.0,
    };
    let back = today.shifted_back(SEASON as f64);
    let then = source.arrival_history(&target, back).await.unwrap();
    let current = source.arrival_history(&target, today).await.unwrap();
    let expected_points = ((today.end - today.start) / 15.0) as usize + 1;
    assert_eq!(then.len(), expected_points, "{then:?}");
    assert_eq!(current.len(), expected_points);
    assert_eq!(then[0].t, back.start);
    for s in &then {
        assert!(
            (s.v - 2.0).abs() < 1e-6,
            "one season back: {} at {}",
            s.v,
            s.t
        );
    }
    for s in &current {
        assert!((s.v - 6.0).abs() < 1e-6, "today: {} at {}", s.v, s.t);
    }

    // The same history at a 0.05 s step is 16,801 points: above Prometheus' 11,000 per query,
    // so it comes in two chunks that must join without a duplicate or a gap.
    let fine = prewarm::adapters::metrics::Window {
        start: today.start,
        end: today.start + 840.0,
        step: 0.05,
    };
    let joined = source.arrival_history(&target, fine).await.unwrap();
    assert_eq!(joined.len(), 16_801);
    assert!(joined.windows(2).all(|w| w[1].t > w[0].t));
}
