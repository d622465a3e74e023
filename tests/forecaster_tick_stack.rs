//! The forecaster chosen at a target's first calibration, and used by the next tick, through the
//! real tick (`tick_once` as the stack's prewarm-lambda user) against the stack's Prometheus
//! (three days of known vLLM history backfilled, tests/common/prometheus_backfill.rs) and
//! kube-apiserver (the balloon's `prewarm.io/calibration` annotation).
//!
//! The history, every 15 s up to `END`, which is 50 minutes past a whole hour `H` (UTC): 1 req/s
//! of 1 s requests (8 running, none waiting), except 10 req/s over [H + 35 min, H + 55 min) one,
//! two and three days before (none today). SEASONS_SECONDS=none (the blend is the damped trend
//! alone), BAND_BY_HOUR=off, BAND_HISTORY_SECONDS three days, ERROR_QUANTILE 0.999,
//! FORECASTER=auto.
//!
//! By hand, as in policy::profile's tests: the calibration reads back to END − 3 days − 18 min
//! (H + 32 min three days ago, so the first burst is read, its start before the first window);
//! its windows (origins from H + 47 min three days ago) are fitted up to H + 47 min yesterday,
//! after the second and third bursts' starts, and the rest are held back (yesterday's burst's
//! end, and today, without a burst). The trend misses
//! each burst's start: its forecasts of about 1 made in the three minutes before one err by
//! about +9, six such errors fitted, so its 0.999 band (the ⌈0.999 × 2880⌉ = 2878th of about
//! 2880 errors) is about 9 and its mean upper band today about 1 + 9 = 10. The profile (the peak
//! of each 3-minute slot, a lead wide, on the days before: 480 slots) has seen each fitted
//! burst's start the day before: it forecasts 10 there and never less than what came, errors
//! ≤ 0, band 0, and a mean upper band held back of about 1. Both cover every window held back:
//! the profile is chosen, its table 10 in the slots inside the burst and 1 in those a rate
//! window or more away from it (the slots at its edges see a rate in between). (A first burst
//! the profile has not seen the day before errs by +9 and gives it the trend's band: then the
//! blend stays.)
//!
//! Tick 1 at END calibrates (nothing cached) and writes the choice on the balloon. Tick 2 a tick
//! later, in a fresh execution environment (nothing in memory), reads it back, does not
//! recalibrate (computed at tick 1), and sizes with the profile: 10 req/s over the lead (END +
//! 15 s and END + 195 s fall in the slots of H + 48 and H + 51 min, inside the burst of the days
//! before), while 1 req/s is observed.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use prewarm::core::spec::{Calibration, Forecaster};
use prewarm::handlers::tick::{tick_once, TickDeps};
use serde_json::json;

mod common;
use common::kwok_pools::{delete_namespace_and_pool, namespace_pool_and_balloon, unique_hex};
use common::{as_user, prometheus_backfill, tick_config};

const DAY: i64 = 86_400;

/// The rate (req/s) at `t` for a history ending 50 minutes past the hour `h`.
fn rate(t: i64, h: i64) -> i64 {
    if (1..=3).any(|k| (h + 2100 - k * DAY..h + 3300 - k * DAY).contains(&t)) {
        10
    } else {
        1
    }
}

fn backfill(model: &str, h: i64, end: i64) {
    let work = prometheus_backfill::scratch();
    let input = work.path().join("history.om");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    let start = end - 3 * DAY - 3600;
    let times: Vec<i64> = (0..)
        .map(|k| start + 15 * k)
        .take_while(|t| *t <= end)
        .collect();
    let label = format!("{{model_name=\"{model}\"}}");
    // Requests completed, and (every request takes 1 s) the latency summary's count and sum.
    let mut totals = Vec::with_capacity(times.len());
    let mut total = 0i64;
    for &t in &times {
        totals.push(total);
        total += 15 * rate(t, h);
    }
    writeln!(out, "# TYPE vllm:request_success counter").unwrap();
    for (t, n) in times.iter().zip(&totals) {
        writeln!(out, "vllm:request_success_total{label} {n} {t}").unwrap();
    }
    writeln!(out, "# TYPE vllm:e2e_request_latency_seconds summary").unwrap();
    for (t, n) in times.iter().zip(&totals) {
        writeln!(out, "vllm:e2e_request_latency_seconds_count{label} {n} {t}").unwrap();
        writeln!(out, "vllm:e2e_request_latency_seconds_sum{label} {n} {t}").unwrap();
    }
    for (family, value) in [
        ("vllm:num_requests_waiting", 0),
        ("vllm:num_requests_running", 8),
    ] {
        writeln!(out, "# TYPE {family} gauge").unwrap();
        for &t in &times {
            writeln!(out, "{family}{label} {value} {t}").unwrap();
        }
    }
    writeln!(out, "# EOF").unwrap();
    out.flush().unwrap();
    drop(out);
    prometheus_backfill::load_openmetrics(&input);
}

async fn calibration_on(deployments: &Api<Deployment>, name: &str) -> Calibration {
    let d = deployments.get(name).await.unwrap();
    let raw = d.metadata.annotations.unwrap_or_default()["prewarm.io/calibration"].clone();
    serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{e}: {raw}"))
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn the_first_calibration_chooses_the_profile_and_the_next_tick_sizes_with_it() {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    // The hour before the current one: END = H + 50 min is at least 10 minutes ago.
    let h = now / 3600 * 3600 - 3600;
    let end = h + 3000;
    let model = format!("fc-{}-{now}", std::process::id());
    backfill(&model, h, end);
    prometheus_backfill::wait_for_value(
        &format!("count_over_time(vllm:num_requests_running{{model_name=%22{model}%22}}[4d])"),
        end,
    );

    let admin = as_user("KUBECONFIG").await;
    let ns = unique_hex("fcast-");
    let pool = unique_hex("fcast");
    namespace_pool_and_balloon(&admin, &ns, &pool, "prewarm.io/fcast", "balloon-fc").await;
    let deployments = Api::<Deployment>::namespaced(admin.clone(), &ns);

    let targets = json!([{
        "name": "fc", "nodePool": pool, "maxSpare": 16, "replicaConcurrency": 8,
        "selector": format!("model_name=\"{model}\""),
        "headroom": {"kind": "balloon", "namespace": ns, "name": "balloon-fc"}
    }])
    .to_string();
    let config = tick_config(&[
        ("PREWARM_TARGETS", targets),
        ("INGESTION_LAG_SECONDS", "0".to_string()),
        ("RATE_WINDOW_SECONDS", "60".to_string()),
        ("LEAD_TIME_SECONDS", "180".to_string()),
        ("LEARN_LEAD_TIMES", "false".to_string()),
        ("SEASONS_SECONDS", "none".to_string()),
        ("BAND_BY_HOUR", "off".to_string()),
        ("BAND_HISTORY_SECONDS", (3 * DAY).to_string()),
        ("ERROR_QUANTILE", "0.999".to_string()),
        ("TIME_ZONE", "UTC".to_string()),
        ("TICK_SECONDS", "15".to_string()),
        ("FORECASTER", "auto".to_string()),
    ]);
    let tick = |at: f64| {
        let config = config.clone();
        async move {
            let deps = Arc::new(TickDeps::build(config).await.unwrap());
            tick_once(&deps, at, false).await.remove(0)
        }
    };
    let result = async {
        // Tick 1: the first calibration, written on the balloon.
        let t1 = end as f64;
        let first = tick(t1).await;
        assert!(first.error.is_none(), "{first:?}");
        let c = calibration_on(&deployments, "balloon-fc").await;
        eprintln!("calibration at tick 1: {c:?}");
        assert_eq!(
            (c.computed_at, c.forecaster),
            (t1, Forecaster::Profile),
            "{c:?}"
        );
        // Slots of 180 s: the burst [H + 35 min, H + 55 min) holds slots starting at H + 36 …
        // H + 51 min whole (10); a slot starting a rate window (60 s) or more outside it sees 1.
        assert_eq!(c.profile.len(), 480, "{c:?}");
        let (from, to) = ((h % DAY + 2100) as f64, (h % DAY + 3300) as f64);
        for (i, peak) in c.profile.iter().enumerate() {
            let (start, end) = (i as f64 * 180.0, (i + 1) as f64 * 180.0);
            let got = peak.unwrap_or_else(|| panic!("slot {i} seen: {c:?}"));
            if start >= from && end <= to {
                assert!((got - 10.0).abs() < 1e-6, "slot {i} inside: {got}");
            } else if end + 60.0 <= from || start >= to + 60.0 {
                assert!((got - 1.0).abs() < 1e-6, "slot {i} outside: {got}");
            } else {
                assert!(
                    (1.0 - 1e-6..=10.0 + 1e-6).contains(&got),
                    "slot {i} edge: {got}"
                );
            }
        }

        // Tick 2, one tick later in a fresh execution environment: the cached choice, used.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let t2 = t1 + 15.0;
        let second = tick(t2).await;
        assert!(second.error.is_none(), "{second:?}");
        let plan = second.plan.as_ref().expect("tick 2 decided");
        let f = &plan.forecast;
        eprintln!("tick 2: {f:?}");
        assert_eq!(f.forecaster, "profile", "{f:?}");
        assert!((f.profile_peak.unwrap() - 10.0).abs() < 1e-6, "{f:?}");
        assert!((f.observed_rate - 1.0).abs() < 1e-6, "{f:?}");
        assert!(f.rate_at_horizon >= 10.0 - 1e-6, "{f:?}");
        let cached = calibration_on(&deployments, "balloon-fc").await;
        assert_eq!(cached.computed_at, t1, "not recalibrated at tick 2");
    }
    .await;
    delete_namespace_and_pool(&admin, &ns, &pool).await;
    result
}
