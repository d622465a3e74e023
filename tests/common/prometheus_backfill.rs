//! Known history for the stack's real Prometheus: an OpenMetrics file turned into blocks by
//! `promtool tsdb create-blocks-from openmetrics` (Debian's prometheus package) inside the
//! running server's data directory (`$STACK_RUN_DIR/prometheus`; the stack keeps 30 days,
//! tests/stack/up). Prometheus loads new blocks on its next block reload (about once a minute).

use std::process::Command;
use std::time::{Duration, Instant};

use super::env;

/// A scratch directory inside the stack's run directory (the same file system as Prometheus's
/// data, so the blocks move by rename).
pub fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env("STACK_RUN_DIR")).unwrap()
}

/// Turns the OpenMetrics file `input` (in a `scratch()` directory) into blocks and moves them
/// into Prometheus's data directory.
pub fn load_openmetrics(input: &std::path::Path) {
    let blocks = input.with_file_name("blocks");
    let status = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics", "-q"])
        .arg(input)
        .arg(&blocks)
        .status()
        .expect("promtool (Debian package prometheus) on PATH");
    assert!(status.success(), "promtool failed");
    let data = std::path::Path::new(&env("STACK_RUN_DIR")).join("prometheus");
    for block in std::fs::read_dir(&blocks).unwrap() {
        let block = block.unwrap();
        std::fs::rename(block.path(), data.join(block.file_name())).unwrap();
    }
}

/// Waits until the instant query `query` (URL-encoded) at `at` returns a value: the blocks are
/// loaded.
pub fn wait_for_value(query: &str, at: i64) {
    let url = format!(
        "{}/api/v1/query?query={query}&time={at}",
        env("PROMETHEUS_URL")
    );
    let started = Instant::now();
    loop {
        let body = Command::new("curl")
            .args(["-sg", &url])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        if body.contains("\"value\"") {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "backfilled blocks not loaded after 180 s: {body}"
        );
        std::thread::sleep(Duration::from_secs(5));
    }
}
