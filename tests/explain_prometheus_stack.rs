//! `prewarm explain --target` against the stack's real Prometheus: three days of known vLLM
//! history backfilled (tests/common/prometheus_backfill.rs), two days of training, one day
//! scored, and the decomposition it prints checked against numbers derived by hand here.
//!
//! The history, in offsets from its start `S` (every sample every 15 s; the grid is every 60 s
//! from `S`, so step `m` is at `S + 60 m`):
//! - the completion counter grows at 1 req/s, except 3 req/s over [43 200, 43 800) (day 0,
//!   12:00, training), 2.5 req/s over [194 400, 195 000) (day 2, 06:00: event A) and 6 req/s
//!   over [237 600, 238 200) (day 2, 18:00: event B);
//! - the gauges: waiting 0 and running 80 everywhere, except waiting 40 / running 40 over
//!   [194 520, 194 640) (A) and waiting 72 / running 8 over [237 720, 237 840) (B). Waiting plus
//!   running is 80 at every sample, so the arrival query's `deriv` of the two adds up to 0 and
//!   the arrival rate is the counter's rate alone.
//!
//! The counter's increment written after the sample at `t` is the rate at `t` × 15, so
//! `rate(...[1m])` at a grid time `T` counts the increments of `T − 60 .. T − 15` (a range
//! closed on the left) or of `T − 45 .. T − 15` (open, extrapolated to the minute): either way
//! the rate at `T` is the rate over the minute before `T`. A step from the rate at `S + 60 k`
//! on shows at step `k + 1`: demand 3 at steps 721..=730, 2.5 at 3241..=3250, 6 at 3961..=3970,
//! 1 elsewhere.
//!
//! LEAD_TIME_SECONDS 180: a lead of L = 3 steps. Training steps 0..2880 (2 days): the largest
//! rise over three steps is 3 − 1 = 2 req/s (steps 721..=723 against 718..=720).
//!
//! Delayed steps (waiting / arrival rate > 10 s): the gauges' values at the grid are those of
//! their samples at it, so A's queue is at steps 3242 and 3243 (40 / 2.5 = 16 s) and B's at
//! 3962 and 3963 (72 / 6 = 12 s); nowhere else is anything waiting.
//! - A: 2.5 − 1 = 1.5 ≤ 2 over the lead (3242 against 3239, 3243 against 3240): forecastable,
//!   2 steps.
//! - B: 6 − 1 = 5 > 2 (3962 against 3959, 3963 against 3960): unforecastable, 2 steps. Capacity
//!   ⌈8 / 8⌉ = 1 replica (concurrency 8), need (72 + 8) / 8 = 10: a reserve of 9 replicas.
//! - No forecasts in a metric history: no lead miss.
//!
//! Scored: steps 2880..=4320 (the history's 3 × 1440 + 1 grid points), 1441 minutes:
//! 9 replicas × 1 GPU × 1441 / 60 h = 216.15 GPU-hours, × $2 = $432.30.

use std::io::Write;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

mod common;
use common::{env, prometheus_backfill};

/// (from, to, four times the rate in req/s) of the counter, offsets from the start.
const RATES: [(i64, i64, i64); 3] = [
    (43_200, 43_800, 12),   // 3 req/s
    (194_400, 195_000, 10), // 2.5 req/s
    (237_600, 238_200, 24), // 6 req/s
];

/// Four times the rate at offset `o` (req/s × 4 keeps 2.5 whole): the increment after a
/// sample is that × 15 / 4.
fn rate_x4(o: i64) -> i64 {
    RATES
        .iter()
        .find(|(from, to, _)| (*from..*to).contains(&o))
        .map_or(4, |r| r.2)
}

/// (waiting, running) at offset `o`.
fn gauges(o: i64) -> (i64, i64) {
    if (194_520..194_640).contains(&o) {
        (40, 40)
    } else if (237_720..237_840).contains(&o) {
        (72, 8)
    } else {
        (0, 80)
    }
}

fn backfill(model: &str, start: i64, end: i64) {
    let work = prometheus_backfill::scratch();
    let input = work.path().join("history.om");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    let times: Vec<i64> = (0..)
        .map(|k| start - 120 + 15 * k)
        .take_while(|t| *t <= end)
        .collect();
    let label = format!("{{model_name=\"{model}\"}}");
    writeln!(out, "# TYPE vllm:request_success counter").unwrap();
    // Counted in quarter requests so that 2.5 req/s stays whole; written in requests (2.5
    // req/s adds 37.5 a sample: exact in binary floating point).
    let mut quarters = 0i64;
    for &t in &times {
        writeln!(
            out,
            "vllm:request_success_total{label} {} {t}",
            quarters as f64 / 4.0
        )
        .unwrap();
        quarters += 15 * rate_x4(t - start);
    }
    for (family, pick) in [
        ("vllm:num_requests_waiting", 0usize),
        ("vllm:num_requests_running", 1),
    ] {
        writeln!(out, "# TYPE {family} gauge").unwrap();
        for &t in &times {
            let (w, r) = gauges(t - start);
            writeln!(out, "{family}{label} {} {t}", [w, r][pick]).unwrap();
        }
    }
    writeln!(out, "# EOF").unwrap();
    out.flush().unwrap();
    drop(out);
    prometheus_backfill::load_openmetrics(&input);
}

#[test]
#[ignore = "needs the local stack (make e2e)"]
fn explain_target_decomposes_a_known_history_from_prometheus() {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let end = now / 60 * 60 - 300;
    let start = end - 3 * 86_400;
    let model = format!("ex-{}-{now}", std::process::id());
    backfill(&model, start, end);
    prometheus_backfill::wait_for_value(
        &format!("count_over_time(vllm:num_requests_waiting{{model_name=%22{model}%22}}[4d])"),
        end,
    );

    let targets = format!(
        r#"[{{"name":"ex","nodePool":"gpu","headroom":{{"kind":"balloon","namespace":"prewarm","name":"b"}},"selector":"model_name=\"{model}\"","replicaConcurrency":8,"gpusPerReplica":1,"maxSpare":16}}]"#
    );
    let output = Command::new(env!("CARGO_BIN_EXE_prewarm"))
        .args([
            "explain",
            "--target",
            "ex",
            "--since",
            "3d",
            "--train-days",
            "2",
        ])
        .args([
            "--until",
            &end.to_string(),
            "--usd-per-gpu-hour",
            "2",
            "--json",
        ])
        .env("METRIC_SOURCE", "prometheus")
        .env("PROMETHEUS_URL", env("PROMETHEUS_URL"))
        .env("PREWARM_TARGETS", targets)
        .env("LEAD_TIME_SECONDS", "180")
        .env("RATE_WINDOW_SECONDS", "60")
        .env("INGESTION_LAG_SECONDS", "0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)));
    let d = &json["decomposition"];
    let steps: Vec<(u64, &str)> = json["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["index"].as_u64().unwrap(), s["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        steps,
        [
            (3242, "forecastable"),
            (3243, "forecastable"),
            (3962, "unforecastable"),
            (3963, "unforecastable"),
        ],
        "{json}"
    );
    assert_eq!(d["forecastable"], 2, "{json}");
    assert_eq!(d["lead_miss"], 0, "{json}");
    assert_eq!(d["unforecastable"], 2, "{json}");
    let close = |key: &str, want: f64| {
        let got = d[key].as_f64().unwrap();
        assert!(
            (got - want).abs() < 1e-9,
            "{key}: {got}, want {want}: {json}"
        );
    };
    close("training_rise", 2.0);
    assert_eq!(d["reserve_replicas"], 9, "{json}");
    close("scored_hours", 1441.0 / 60.0);
    close("reserve_gpu_hours", 9.0 * 1441.0 / 60.0);
    close("reserve_usd", 2.0 * 9.0 * 1441.0 / 60.0);
}
