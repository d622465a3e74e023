//! A change detector for moves, not a proof of correctness: two small `prewarm simulate` runs
//! (the `bursty` scenario with five policies, and a compressed `cron-bursts` day) whose whole
//! tables and JSON are pinned byte for byte in tests/data/. A refactoring that claims "behaviour unchanged" must leave both files as they are.
//! When a change is meant to move the figures, rewrite them with
//! `UPDATE_PINNED=1 cargo test --test simulate_pinned` and say why in the commit. Whether the
//! figures are right is the business of simulate_hand_computed.rs.

use std::path::PathBuf;

#[path = "common/prewarm_bin.rs"]
mod prewarm_bin;

/// The run: short (about a second in a debug build) but it exercises every part a comparison
/// has (the HPA, Karpenter's launches and ICE draws, prewarm's decide() with its swept knob and
/// release, the buffer's grid, the node hints (asked for by their old name "oracle"), the ideal
/// packing and the lower bound). Two threads, so the parallel job order is part of what is
/// pinned.
const ARGS: [&str; 7] = [
    "simulate",
    "--scenario",
    "bursty",
    "--policies",
    "reactive,buffer,prewarm,oracle,ideal,lower-bound",
    "--threads",
    "2",
];

/// The second run, because in `bursty` prewarm's chosen row delays exactly what reactive's does:
/// a change to what prewarm sees or decides could leave that pin as it is. Here prewarm's row
/// differs from reactive's (lower p99 wait, different GPU-h), so its eyes and decide() are pinned
/// too. One day of `cron-bursts` played four times as fast (six simulated hours, hourly bursts
/// every 15 min) with long requests (4000 output tokens) so the run stays near three seconds in
/// a debug build.
const CRON_ARGS: [&str; 13] = [
    "simulate",
    "--scenario",
    "cron-bursts",
    "--days",
    "1",
    "--speed",
    "4",
    "--scenario-output-tokens",
    "4000",
    "--policies",
    "reactive,prewarm",
    "--threads",
    "2",
];

/// The third run, `--models 2`: the pool engine and its comparison (every pool policy, the split
/// included). A request trace written by the test (one hour: 2 requests/s with a 10-minute burst
/// at 8/s) superposed three times, so that it has three clients to split between two models.
const POOL_POLICIES: &str = "static-peak,hpa-target,buffer,prewarm-floor";

fn simulate(extra: &[&str]) -> String {
    run(&ARGS, extra)
}

fn run(args: &[&str], extra: &[&str]) -> String {
    prewarm_bin::run_prewarm(&[args, extra].concat())
}

/// The table without its one line that is not a function of the inputs (the wall-clock time).
fn deterministic(table: &str) -> String {
    table
        .lines()
        .filter(|l| !l.starts_with("simulated in "))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn pinned(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    if std::env::var_os("UPDATE_PINNED").is_some() {
        std::fs::write(&path, actual).expect("write the pinned output");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_PINNED=1 writes it)", path.display()));
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(e, a)| e != a)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from this build's output from line {}:\n  pinned: {:?}\n  now:    {:?}\n\
             (a move must not change it; if the change is meant, UPDATE_PINNED=1 and say why)",
            path.display(),
            first + 1,
            expected.lines().nth(first).unwrap_or("<end>"),
            actual.lines().nth(first).unwrap_or("<end>"),
        );
    }
}

#[test]
fn bursty_table_is_pinned() {
    pinned("simulate_bursty.txt", &deterministic(&simulate(&[])));
}

#[test]
fn bursty_json_is_pinned() {
    pinned("simulate_bursty.json", &simulate(&["--json"]));
}

#[test]
fn cron_bursts_table_is_pinned() {
    pinned(
        "simulate_cron_bursts.txt",
        &deterministic(&run(&CRON_ARGS, &[])),
    );
}

#[test]
fn cron_bursts_json_is_pinned() {
    pinned("simulate_cron_bursts.json", &run(&CRON_ARGS, &["--json"]));
}

/// The pool run's trace: Azure's CSV format, a fixed sequence of arrivals and token lengths.
fn pool_trace() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("prewarm-pinned-pool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("pool.csv");
    let mut csv = String::from("TIMESTAMP,ContextTokens,GeneratedTokens\n");
    let (mut t, mut i) = (0.0f64, 0u64);
    while t < 3600.0 {
        let (h, m, sec) = ((t / 3600.0) as u64, (t / 60.0) as u64 % 60, t % 60.0);
        csv.push_str(&format!(
            "2023-11-16 {h:02}:{m:02}:{sec:06.3},{},{}\n",
            200 + i * 37 % 1500,
            100 + i * 53 % 400
        ));
        t += if (1800.0..2400.0).contains(&t) {
            0.125
        } else {
            0.5
        };
        i += 1;
    }
    std::fs::write(&path, csv).expect("write the trace");
    path
}

#[test]
fn pool_table_is_pinned() {
    let trace = pool_trace();
    let out = run(
        &[
            "simulate",
            "--trace",
            trace.to_str().expect("UTF-8 path"),
            "--superpose",
            "3",
            "--models",
            "2",
            "--burn-in",
            "900",
            "--policies",
            POOL_POLICIES,
            "--threads",
            "2",
        ],
        &[],
    );
    let _ = std::fs::remove_dir_all(trace.parent().expect("dir"));
    // The pool's closing line counts requests and wall-clock seconds: only its count is kept.
    let table: String = out
        .lines()
        .map(|l| match l.split_once(" simulated in ") {
            Some((count, _)) => format!("{count}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    pinned("simulate_pool.txt", &table);
}
