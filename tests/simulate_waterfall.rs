//! The GPU-hour waterfall adds up: on every shipped scenario (the day-long ones shortened to one
//! day played four times as fast with long requests, burst-180 as it is), every policy row's parts sum to its GPU-hours within 0.5 %, and its idle share is
//! everything but serving.

#[path = "common/prewarm_bin.rs"]
mod prewarm_bin;

const PARTS: [&str; 8] = [
    "serving",
    "target_headroom",
    "warm_excess",
    "draining",
    "loading",
    "node_boot",
    "balloons",
    "empty",
];

#[test]
fn waterfall_parts_add_up_to_every_rows_gpu_hours() {
    const SHORT_DAY: [&str; 6] = [
        "--days",
        "1",
        "--speed",
        "4",
        "--scenario-output-tokens",
        "4000",
    ];
    for (scenario, shorter) in [
        ("burst-180", &["--burn-in", "300"][..]),
        ("diurnal", &SHORT_DAY[..]),
        ("bursty", &[][..]),
        ("cron-bursts", &SHORT_DAY[..]),
    ] {
        let args = [&["simulate", "--scenario", scenario][..], shorter].concat();
        let out = prewarm_bin::run_prewarm(
            &[
                &args[..],
                &[
                    "--policies",
                    "reactive,static-peak,hpa-target,buffer,prewarm,prewarm-floor",
                    "--threads",
                    "2",
                    "--json",
                ],
            ]
            .concat(),
        );
        let json: serde_json::Value = serde_json::from_str(&out).unwrap();
        let rows = json[0]["rows"].as_array().unwrap();
        assert!(rows.len() >= 6, "{scenario}: {} rows", rows.len());
        for row in rows {
            let w = &row["waterfall"];
            let sum: f64 = PARTS.iter().map(|p| w[p].as_f64().unwrap()).sum();
            let total = row["gpu_hours"].as_f64().unwrap();
            let name = &row["policy"];
            assert!(total > 0.0, "{scenario} {name}");
            assert!(
                (sum - total).abs() <= 0.005 * total,
                "{scenario} {name}: parts {sum} vs {total} GPU-h: {w}"
            );
            let serving = w["serving"].as_f64().unwrap();
            let idle = row["idle_share"].as_f64().unwrap();
            assert!(
                (idle - (1.0 - serving / sum)).abs() < 1e-9,
                "{scenario} {name}"
            );
        }
    }
}

#[test]
fn plot_draws_a_stacked_bar_of_every_row() {
    let dir = std::env::temp_dir().join(format!("prewarm-waterfall-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plot = dir.join("bursty.svg");
    prewarm_bin::run_prewarm(&[
        "simulate",
        "--scenario",
        "bursty",
        "--policies",
        "reactive,buffer",
        "--threads",
        "2",
        "--plot",
        plot.to_str().unwrap(),
    ]);
    let svg = std::fs::read_to_string(dir.join("bursty-waterfall.svg")).unwrap();
    for text in [
        "reactive: ",
        "buffer: ",
        "% idle",
        "target headroom",
        "balloons",
    ] {
        assert!(svg.contains(text), "{text} missing from the waterfall plot");
    }
    // Eight parts per row (two rows), each a filled rectangle, besides the legend's eight.
    let bars = svg.matches("<rect").count();
    assert!(bars >= 8 * 2 + 8, "{bars} rectangles");
    std::fs::remove_dir_all(&dir).unwrap();
}
