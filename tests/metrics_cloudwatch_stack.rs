//! The `cloudwatch` metric source against LocalStack 4.13.1 (`LOCALSTACK_URL`), which speaks the
//! rpc-v2-cbor protocol of aws-sdk-cloudwatch. The source is built by `from_config` with
//! `AWS_ENDPOINT_URL` pointing at LocalStack, as a user would configure it.
//!
//! Known datapoints are put with PutMetricData (high resolution) in a namespace unique to the
//! test run; the expectations follow from the generator below. LocalStack answers `MetricStat`
//! queries like CloudWatch for this use (sums and averages per period); it does not support
//! metric math or percentiles, which the source does not use.

mod common;
use common::{now_whole_seconds, unique_series};

use aws_config::{BehaviorVersion, Region};
use aws_sdk_cloudwatch::types::{Dimension, MetricDatum, StandardUnit};
use aws_smithy_types::DateTime;
use prewarm::adapters::metrics::{cloudwatch, from_config, MetricSource, RecentSignals, Window};
use prewarm::config::MetricSourceConfig;
use prewarm::core::spec::HeadroomKind;
use prewarm::core::{PolicySpec, TargetSpec};

fn localstack_url() -> String {
    std::env::var("LOCALSTACK_URL").expect("LOCALSTACK_URL (source tests/stack/.run/env)")
}

/// Points the AWS configuration chain at LocalStack. Every test sets the same values, so tests
/// running in parallel in this binary agree.
fn use_localstack() {
    std::env::set_var("AWS_ENDPOINT_URL", localstack_url());
    // Never let the chain ask instance metadata (a non-loopback address).
    std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
    for (k, v) in [
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
    ] {
        if std::env::var(k).is_err() {
            std::env::set_var(k, v);
        }
    }
}

async fn sdk_client() -> aws_sdk_cloudwatch::Client {
    use_localstack();
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .load()
        .await;
    aws_sdk_cloudwatch::Client::new(&sdk)
}

fn target(name: &str, selector: &str) -> TargetSpec {
    TargetSpec {
        selector: selector.into(),
        ..TargetSpec::new(name, "gpu", HeadroomKind::NodePoolReplicas, 4)
    }
}

/// What the source (no lag) reads for `target` over the default policy's window ending at `now`.
async fn observe_at(namespace: &str, target: &TargetSpec, now: f64) -> RecentSignals {
    source(namespace)
        .await
        .observe(target, Window::ending_at(now, &PolicySpec::default()))
        .await
        .unwrap()
}

/// A namespace unique to the test run (`prefix` names the test) and the target `llama` without
/// a selector, whose datapoints carry the dimension `Target=llama`.
fn llama_by_target_dimension(prefix: &str) -> (String, TargetSpec, [Dimension; 1]) {
    (
        format!("PrewarmTest/{}", unique_series(prefix)),
        target("llama", ""),
        [Dimension::builder().name("Target").value("llama").build()],
    )
}

/// The source as `from_config` builds it, with no ingestion lag: the tests put datapoints up to
/// now and read them back at once, as from a store that shows them at once.
async fn source(namespace: &str) -> Box<dyn MetricSource> {
    source_with_lag(namespace, 0.0).await
}

/// The source with INGESTION_LAG_SECONDS = `lag_s` (publishers every 10 s, high resolution).
async fn source_with_lag(namespace: &str, lag_s: f64) -> Box<dyn MetricSource> {
    use_localstack();
    let policy = PolicySpec {
        ingestion_lag_s: lag_s,
        ..PolicySpec::default()
    };
    from_config(
        &MetricSourceConfig::CloudWatch {
            namespace: namespace.into(),
            publish_s: PERIOD as f64,
        },
        &policy,
    )
    .await
    .unwrap()
}

/// With the default policy (15 s step) the source uses 10 s periods.
const PERIOD: i64 = 10;
const PERIODS: i64 = 100;

/// One datapoint per metric at the start of every 10 s period k = 0..100 ending at `end`:
/// waiting = k, running = 4, completed = 20 (2/s), latency 1.5 s.
/// Expected: arrival = (20 + growth 1) / 10 = 2.1/s, service time 1.5 s.
async fn put_known_history(namespace: &str, dims: &[Dimension], end: i64) {
    let publisher = Publisher {
        offset_s: 0,
        waiting_base: 0.0,
        waiting_growth: 1.0,
        running: 4.0,
        completed: 20.0,
    };
    put(&sdk_client().await, namespace, &publisher.data(dims, end)).await;
}

/// What one publisher (a pod, an agent) puts: one datapoint per metric per 10 s period k =
/// 0..100 ending at `end`, `offset_s` into the period: waiting = `waiting_base` +
/// `waiting_growth` · k, the constant running and completions, latency 1.5 s.
#[derive(Clone, Copy)]
struct Publisher {
    offset_s: i64,
    waiting_base: f64,
    waiting_growth: f64,
    running: f64,
    completed: f64,
}

impl Publisher {
    fn data(&self, dims: &[Dimension], end: i64) -> Vec<MetricDatum> {
        let t0 = end - PERIODS * PERIOD;
        let mut data = Vec::new();
        for k in 0..PERIODS {
            let t = DateTime::from_secs(t0 + k * PERIOD + self.offset_s);
            for (name, value, unit) in [
                (
                    cloudwatch::WAITING,
                    self.waiting_base + self.waiting_growth * k as f64,
                    StandardUnit::Count,
                ),
                (cloudwatch::RUNNING, self.running, StandardUnit::Count),
                (cloudwatch::COMPLETED, self.completed, StandardUnit::Count),
                (cloudwatch::LATENCY, 1.5, StandardUnit::Seconds),
            ] {
                data.push(
                    MetricDatum::builder()
                        .metric_name(name)
                        .set_dimensions(Some(dims.to_vec()))
                        .timestamp(t)
                        .value(value)
                        .unit(unit)
                        .storage_resolution(1)
                        .build(),
                );
            }
        }
        data
    }
}

/// PutMetricData in batches (CloudWatch takes up to 1000 datums a call).
async fn put(client: &aws_sdk_cloudwatch::Client, namespace: &str, data: &[MetricDatum]) {
    for chunk in data.chunks(100) {
        client
            .put_metric_data()
            .namespace(namespace)
            .set_metric_data(Some(chunk.to_vec()))
            .send()
            .await
            .expect("PutMetricData on LocalStack");
    }
}

fn assert_known(obs: &RecentSignals, now: f64, end: i64) {
    assert_signals(obs, now, end, 0.0, 4.0);
}

/// The grid of the default policy ending at `now`, waiting = `waiting_base` + k of the newest
/// complete period k, running = `running`, arrival 2.1/s, service time 1.5 s.
fn assert_signals(obs: &RecentSignals, now: f64, end: i64, waiting_base: f64, running: f64) {
    let policy = PolicySpec::default();
    let points = (policy.window_s / policy.step_s) as usize + 1;
    let grid: Vec<f64> = (0..points)
        .map(|j| now - policy.window_s + j as f64 * policy.step_s)
        .collect();
    let times = |s: &[prewarm::core::Sample]| s.iter().map(|x| x.t).collect::<Vec<_>>();
    for (name, s) in [
        ("waiting", &obs.waiting),
        ("running", &obs.running),
        ("arrival", &obs.arrival_rate),
        ("service", &obs.service_time_s),
    ] {
        assert_eq!(times(s), grid, "{name} grid");
    }
    let t0 = (end - PERIODS * PERIOD) as f64;
    for s in &obs.waiting {
        // The newest complete period at the grid point started one period before its end.
        let period_end = (s.t / PERIOD as f64).floor() * PERIOD as f64;
        let k = (period_end - PERIOD as f64 - t0) / PERIOD as f64;
        assert_eq!(s.v, waiting_base + k, "waiting at {}", s.t);
    }
    assert!(
        obs.running.iter().all(|s| s.v == running),
        "{:?}",
        obs.running
    );
    for s in &obs.arrival_rate {
        assert!((s.v - 2.1).abs() < 1e-9, "arrival {} at {}", s.v, s.t);
    }
    assert!(
        obs.service_time_s.iter().all(|s| s.v == 1.5),
        "{:?}",
        obs.service_time_s
    );
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn cloudwatch_source_reads_known_datapoints_by_target_dimension() {
    let (namespace, t, dims) = llama_by_target_dimension("cw");
    let end = now_whole_seconds() / PERIOD * PERIOD;
    put_known_history(&namespace, &dims, end).await;
    // Every phase of `now` within a period lands on the same known values.
    let src = source(&namespace).await;
    for offset in [0.0, 3.0, 5.0, 7.5, 9.9] {
        let now = end as f64 + offset;
        let obs = src
            .observe(&t, Window::ending_at(now, &PolicySpec::default()))
            .await
            .unwrap();
        assert_known(&obs, now, end);
    }
}

/// Two publishers of one target (two pods, same dimensions), each putting one datapoint per
/// metric per 10 s period, 1 s apart: pod A waiting k, running 4, 10 completions; pod B waiting
/// 2, running 4, 10 completions. The target's gauges are the sums, waiting 2 + k and running 8
/// (Average would say 1 + k/2 and 4); completions 20 a period as before, so the arrival rate is
/// (20 + growth 1) / 10 = 2.1/s.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn two_publishers_of_one_gauge_are_summed() {
    let (namespace, t, dims) = llama_by_target_dimension("cwpub");
    let end = now_whole_seconds() / PERIOD * PERIOD;
    let pod_a = Publisher {
        offset_s: 0,
        waiting_base: 0.0,
        waiting_growth: 1.0,
        running: 4.0,
        completed: 10.0,
    };
    let pod_b = Publisher {
        offset_s: 1,
        waiting_base: 2.0,
        waiting_growth: 0.0,
        ..pod_a
    };
    let mut data = pod_a.data(&dims, end);
    data.extend(pod_b.data(&dims, end));
    put(&sdk_client().await, &namespace, &data).await;
    let now = end as f64 + 5.0;
    let obs = observe_at(&namespace, &t, now).await;
    assert_signals(&obs, now, end, 2.0, 8.0);
}

/// The band's history ends at now (`observe::calibration_window`): one pod puts, every 10 s
/// up to and including now, 20 completions, 0 waiting and 4 running (`put_minutes` without a
/// burst). With a 30 s ingestion lag the read ends at the last minute boundary at or before
/// now - 30 (`last_complete_end`): the minute holding now (a partial Sum, a fall in demand) and
/// the one that ended within the lag are left out. Every minute read is complete: 6 datapoints
/// of 20 completions = 120 / 60 s = 2/s, the gauges 6·0 and 6·4 over 6 datapoints = 0 and 4, no
/// growth: 2/s exactly.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn the_still_filling_period_is_not_read() {
    let (namespace, t, dims) = llama_by_target_dimension("cwfill");
    let now = now_whole_seconds();
    // No burst: every 10 s of [now - 1200, now], now included.
    put_minutes(&namespace, &dims, now - 1_200, now + 1, i64::MAX).await;
    let window = Window {
        start: (now - 600) as f64,
        end: now as f64,
        step: 60.0,
    };
    let got = source_with_lag(&namespace, 30.0)
        .await
        .arrival_history(&t, window)
        .await
        .unwrap();
    // The source reads its own clock, at or after `now` and at or before `after`: its last
    // period ends at the minute boundary at or before its now - 30, so no earlier than the one
    // at or before `now - 30` and no later than `after - 30`. Reading the still-filling minute
    // (as a read ending at now rounded up did) stamps the last sample at or after `now`.
    let after = now_whole_seconds();
    let newest = ((now - 30) / 60 * 60) as f64;
    let last = got.last().expect("complete minutes are read");
    assert!(
        last.t >= newest && last.t <= (after - 30) as f64,
        "newest sample at {} (now {now}): {got:?}",
        last.t
    );
    for s in &got {
        assert!((s.v - 2.0).abs() < 1e-9, "{} at {}: {got:?}", s.v, s.t);
    }
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn selector_matchers_become_dimensions() {
    let namespace = format!("PrewarmTest/{}", unique_series("cwsel"));
    let t = target("llama", r#"model_name="llama-3", pool="a""#);
    let dims = [
        Dimension::builder()
            .name("model_name")
            .value("llama-3")
            .build(),
        Dimension::builder().name("pool").value("a").build(),
    ];
    let end = now_whole_seconds() / PERIOD * PERIOD;
    put_known_history(&namespace, &dims, end).await;
    let now = end as f64 + 7.0;
    let obs = observe_at(&namespace, &t, now).await;
    assert_known(&obs, now, end);

    // Same namespace, a target whose dimension matches nothing: empty, not an error.
    let other = target("other", "");
    let empty = observe_at(&namespace, &other, now).await;
    assert_eq!(empty, RecentSignals::default());
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_regex_selector_is_a_final_error_naming_the_target() {
    let err = source("PrewarmTest/none")
        .await
        .observe(
            &target("llama", r#"model_name=~"llama.*""#),
            Window::ending_at(now_whole_seconds() as f64, &PolicySpec::default()),
        )
        .await
        .unwrap_err();
    assert!(!err.retryable());
    let text = err.to_string();
    assert!(
        text.contains("llama") && text.contains("not an equality"),
        "{text}"
    );
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_retryable_error() {
    // Bind a port, then close it, so nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let conf = aws_sdk_cloudwatch::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .credentials_provider(aws_credential_types::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .build();
    let source = cloudwatch::CloudWatchSource::new(
        aws_sdk_cloudwatch::Client::from_conf(conf),
        "PrewarmTest",
        10.0,
    );
    let err = source
        .observe(
            &target("llama", ""),
            Window::ending_at(1_700_000_000.0, &PolicySpec::default()),
        )
        .await
        .unwrap_err();
    assert!(err.retryable(), "{err}");
    assert_eq!(err.kind(), "metrics");
    assert!(err.to_string().contains("GetMetricData"), "{err}");
}

// ---- seasonal history: the same clock time one season back, at 1-minute periods ------------------

/// One publisher's datapoints every 10 s of `[from, to)` (the interval the source is declared
/// with), so a minute holds 6 of each: completions 20 each (120 a minute, 2/s) before `burst`,
/// 60 each (360 a minute, 6/s) from it on; running 4; waiting 0 before `burst` and 30 from it on
/// (so the first burst minute also grows the system by 30). A minute's gauge Sums are 6 x the
/// value, which the source divides by the 6 datapoints of one publisher.
async fn put_minutes(namespace: &str, dims: &[Dimension], from: i64, to: i64, burst: i64) {
    let client = sdk_client().await;
    let mut data = Vec::new();
    for t in (from..to).step_by(PERIOD as usize) {
        let burst_on = t >= burst;
        for (name, value, unit) in [
            (
                cloudwatch::COMPLETED,
                if burst_on { 60.0 } else { 20.0 },
                StandardUnit::Count,
            ),
            (cloudwatch::RUNNING, 4.0, StandardUnit::Count),
            (
                cloudwatch::WAITING,
                if burst_on { 30.0 } else { 0.0 },
                StandardUnit::Count,
            ),
        ] {
            data.push(
                MetricDatum::builder()
                    .metric_name(name)
                    .set_dimensions(Some(dims.to_vec()))
                    .timestamp(DateTime::from_secs(t))
                    .value(value)
                    .unit(unit)
                    .storage_resolution(1)
                    .build(),
            );
        }
    }
    put(&client, namespace, &data).await;
}

/// What the tick asks for its seasonal forecast (`handlers::tick::seasonal_history`): the
/// observation window and the next lead time (default policy: 900 s and 180 s, 15 s step), one
/// season back. For a compressed "day" of 20 minutes and for a real day, datapoints every 10 s
/// around that clock time, with a burst starting 2 minutes after it, are read back at
/// 1-minute periods (CloudWatch keeps sub-minute data only 3 hours), each period stamped at its
/// end, exactly:
/// - periods starting before the burst: 120 completions / 60 s = 2/s;
/// - the first burst minute: (360 + growth 30) / 60 = 6.5/s;
/// - later burst minutes: 360 / 60 = 6/s.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn seasonal_history_reads_known_minutes_one_season_back() {
    for season in [1200_i64, 86_400] {
        let (namespace, t, dims) = llama_by_target_dimension(&format!("cwseason{season}"));
        let now = now_whole_seconds() / 60 * 60;
        let policy = PolicySpec::default();
        let today = prewarm::adapters::metrics::Window {
            start: now as f64 - policy.window_s,
            end: now as f64 + policy.lead_time_s,
            step: policy.step_s,
        };
        let back = today.shifted_back(season as f64);
        let (from, to) = (back.start as i64 - 180, back.end as i64 + 180);
        let burst = now - season + 120;
        put_minutes(&namespace, &dims, from, to, burst).await;

        let got = source(&namespace)
            .await
            .arrival_history(&t, back)
            .await
            .unwrap();
        // Periods [s, s + 60) for s from back.start - 60 up to back.end - 60, stamped s + 60.
        let expected: Vec<(f64, f64)> = (back.start as i64..=back.end as i64)
            .step_by(60)
            .map(|stamp| {
                let period_start = stamp - 60;
                let v = if period_start < burst {
                    2.0
                } else if period_start == burst {
                    6.5
                } else {
                    6.0
                };
                (stamp as f64, v)
            })
            .collect();
        let got: Vec<(f64, f64)> = got.iter().map(|s| (s.t, s.v)).collect();
        assert_eq!(got.len(), expected.len(), "season {season}: {got:?}");
        for ((gt, gv), (et, ev)) in got.iter().zip(&expected) {
            assert_eq!(gt, et, "season {season}: stamps {got:?}");
            assert!(
                (gv - ev).abs() < 1e-9,
                "season {season}: {gv} at {gt}, want {ev}"
            );
        }
        // Shifted forward by the season, the burst sits 2 minutes after today's now: inside
        // the next lead time, where the seasonal forecaster looks.
        let burst_today = expected
            .iter()
            .find(|(_, v)| *v > 2.0)
            .map(|(t, _)| t + season as f64)
            .unwrap();
        assert_eq!(burst_today, (now + 180) as f64);
    }
}
