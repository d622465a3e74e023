//! `prewarm backtest --target` against the stack's real Prometheus, with three days of known
//! history backfilled by `promtool tsdb create-blocks-from openmetrics` (Debian's prometheus
//! package) into the running server's data directory (`$STACK_RUN_DIR/prometheus`; the stack
//! keeps 30 days, tests/stack/up). Prometheus loads new blocks on its next block reload (about
//! once a minute), so the test waits for the series to become queryable.
//!
//! The history: a vLLM completion counter scraped every 15 s whose rate is 0.2 req/s for the
//! first 12 h of each day and 0.6 req/s for the other 12 h. Three days hold
//! 3 x (43,200 x 0.2 + 43,200 x 0.6) = 103,680 requests.

use std::io::Write;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

mod common;
use common::{env, prometheus_backfill};

const EXPECTED: f64 = 103_680.0;

fn rate_at(offset_s: i64) -> i64 {
    // Counter increments per 15 s: 3 (0.2 req/s) or 9 (0.6 req/s).
    if offset_s.rem_euclid(86_400) < 43_200 {
        3
    } else {
        9
    }
}

/// Writes the OpenMetrics file and turns it into blocks inside Prometheus's data directory.
fn backfill(model: &str, start: i64, end: i64) {
    let work = prometheus_backfill::scratch();
    let input = work.path().join("history.om");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    writeln!(out, "# HELP vllm:request_success Completed requests.").unwrap();
    writeln!(out, "# TYPE vllm:request_success counter").unwrap();
    // Two minutes before the start so rate(...[1m]) has points at the first grid time.
    let mut counter = 0i64;
    let mut t = start - 120;
    while t <= end {
        writeln!(
            out,
            "vllm:request_success_total{{model_name=\"{model}\"}} {counter} {t}"
        )
        .unwrap();
        counter += rate_at(t - start);
        t += 15;
    }
    writeln!(out, "# EOF").unwrap();
    out.flush().unwrap();
    drop(out);
    prometheus_backfill::load_openmetrics(&input);
}

/// Waits until Prometheus has loaded the backfilled blocks.
fn wait_for_series(model: &str, at: i64) {
    prometheus_backfill::wait_for_value(
        &format!("count_over_time(vllm:request_success_total{{model_name=%22{model}%22}}[4d])"),
        at,
    );
}

#[test]
#[ignore = "needs the local stack (make e2e)"]
fn backtest_reads_days_of_history_from_prometheus() {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let end = now / 60 * 60 - 300;
    let start = end - 3 * 86_400;
    let model = format!("bt-{}-{now}", std::process::id());
    backfill(&model, start, end);
    wait_for_series(&model, end);

    let work = tempfile::tempdir().unwrap();
    // Every request 1000 prompt + 100 output tokens: 0.25 + 2.5 = 2.75 s with the defaults.
    let tokens = work.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.5,1000,100\n",
    )
    .unwrap();
    let targets = format!(
        r#"[{{"name":"bt","nodePool":"gpu","headroom":{{"kind":"balloon","namespace":"prewarm","name":"b"}},"selector":"model_name=\"{model}\"","maxSpare":256}}]"#
    );
    let output = Command::new(env!("CARGO_BIN_EXE_prewarm"))
        .args([
            "backtest",
            "--target",
            "bt",
            "--days",
            "3",
            "--resolution",
            "60",
        ])
        .args(["--until", &end.to_string(), "--tokens-from"])
        .arg(&tokens)
        // Every request scored (no burn-in): the count is checked against the backfill.
        .args(["--burn-in", "0"])
        .args(["--policies", "reactive,node-hints,ideal", "--json"])
        .env("METRIC_SOURCE", "prometheus")
        .env("PROMETHEUS_URL", env("PROMETHEUS_URL"))
        .env("PREWARM_TARGETS", targets)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");

    // The rate series itself: its expected count is the history's
    // (rate[1m] blends one minute at each of the 6 rate changes: at most 6 x 60 x 0.4 = 144
    // requests; the last point holds one more minute: at most 36).
    let summary = stderr
        .lines()
        .find(|l| l.starts_with("bt: "))
        .unwrap_or_else(|| panic!("no summary in {stderr}"));
    // 3 days of 60 s points (4,320 or 4,321 depending on whether the source returns both ends).
    let points: u32 = summary
        .split(' ')
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert!((4319..=4321).contains(&points), "{summary}");
    let expected: f64 = summary
        .split(" requests expected")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert!((expected - EXPECTED).abs() < 200.0, "{summary}");
    assert!(summary.contains("0.0 h without data"), "{summary}");

    // The comparison ran on Poisson arrivals of that series: 5 standard deviations of a Poisson
    // count of 103,680 are 1,610; plus the 200 above.
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let cmp = &json[0];
    assert!(cmp["workload"]
        .as_str()
        .unwrap()
        .starts_with("bt history 3d"));
    assert!(cmp["duration_s"].as_f64().unwrap() >= 3.0 * 86_400.0 - 60.0);
    let rows = cmp["rows"].as_array().unwrap();
    let policies: Vec<&str> = rows.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(policies, ["reactive", "node-hints", "ideal"]);
    for row in rows {
        let n = row["requests"].as_f64().unwrap();
        assert!((n - EXPECTED).abs() < 1_810.0, "{}: {n}", row["policy"]);
    }
}
