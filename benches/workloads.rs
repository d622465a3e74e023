//! Request generation alone, in requests per second (no simulation): the 14-day ServeGen
//! m-large workload (162 renewal processes merged, tokens sampled from the Azure conversation
//! trace), the Azure conversation trace superposed 200 times, and a rate CSV.
//!
//!     PREWARM_TRACES=/path/to/shared/traces cargo bench --bench workloads
//!
//! With PREWARM_FULL_PASS=1,0.1 (rate scales) it instead generates the whole 14-day ServeGen
//! workload once per scale, timed, and prints the request count and the ideal-packing peak
//! (8 slots per 1-GPU replica, 4000 prompt and 40 output tokens per second per slot: the
//! simulator's defaults).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use criterion::{Criterion, Throughput};
use std::hint::black_box;

use prewarm::sim::engine::Request;
use prewarm::sim::ideal;
use prewarm::sim::workload::rate_series::{RateRow, RateSeries};
use prewarm::sim::workload::servegen::ServeGen;
use prewarm::sim::workload::{self, DEFAULT_TOKENS_FILE};
use prewarm::sim::workload::{Source, Workload};

fn traces() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var("PREWARM_TRACES").unwrap_or("../shared/traces".into()));
    dir.join(DEFAULT_TOKENS_FILE).is_file().then_some(dir)
}

fn workload(name: &str, source: Source, superpose: u32, rate_scale: f64, dir: &Path) -> Workload {
    Workload {
        name: name.into(),
        source,
        speed: 1.0,
        scale: 1.0,
        seed: 1,
        superpose,
        rate_scale,
        tokens_from: Some(dir.join(DEFAULT_TOKENS_FILE)),
    }
}

const TAKE: usize = 2_000_000;

fn bench(c: &mut Criterion, dir: &Path) {
    let servegen = ServeGen::read_dir(&dir.join("servegen-m-large")).expect("servegen-m-large");
    let servegen = workload(
        "servegen",
        Source::ServeGen(Arc::new(servegen)),
        1,
        1.0,
        dir,
    );
    let superposed = workload(
        "conv x200",
        Source::Trace(dir.join(DEFAULT_TOKENS_FILE)),
        200,
        1.0,
        dir,
    );
    let rows = (0..=14 * 24 * 60)
        .map(|i| RateRow {
            t: i as f64 * 60.0,
            rate: 200.0 + 100.0 * (i as f64 / 229.0).sin(),
            cv: Some(2.0),
        })
        .collect();
    let rates = workload(
        "rate csv",
        Source::Rates(Arc::new(RateSeries::new(rows).unwrap())),
        1,
        1.0,
        dir,
    );
    let mut group = c.benchmark_group("workloads");
    group.sample_size(10);
    group.throughput(Throughput::Elements(TAKE as u64));
    for w in [&servegen, &superposed, &rates] {
        group.bench_function(&w.name, |b| {
            b.iter(|| {
                let records = workload::records(w).unwrap();
                black_box(records.take(TAKE).map(|r| r.unwrap().t).sum::<f64>())
            })
        });
    }
    group.finish();
}

/// The whole 14 days once: count, time and the ideal-packing peak.
fn full_pass(dir: &Path, rate_scale: f64) {
    let set = ServeGen::read_dir(&dir.join("servegen-m-large")).expect("servegen-m-large");
    let expected = set.expected_requests(rate_scale);
    let w = workload(
        "servegen",
        Source::ServeGen(Arc::new(set)),
        1,
        rate_scale,
        dir,
    );
    let started = Instant::now();
    let n = workload::records(&w).unwrap().count();
    let generate_s = started.elapsed().as_secs_f64();
    println!(
        "servegen-m-large 14 days, rate scale {rate_scale}: {n} requests (expected from the fits {expected:.0}) generated in {generate_s:.1} s = {:.1} M requests/s",
        n as f64 / generate_s / 1e6
    );
    let started = Instant::now();
    let requests = workload::records(&w).unwrap().map(|r| {
        let r = r.unwrap();
        Request {
            arrival: r.t,
            service_s: r.input_tokens as f64 / 4000.0 + r.output_tokens as f64 / 40.0,
            prefill_s: r.input_tokens as f64 / 4000.0,
            client: r.client,
        }
    });
    let packing = ideal::run(requests, 0.0, 8, 1, 4, 15.0, ideal::Setups::default());
    let busiest = packing
        .demand_gpus_per_step
        .iter()
        .cloned()
        .fold(0.0, f64::max)
        / 15.0;
    println!(
        "ideal packing: peak {} replicas (1 GPU each); busiest 15 s step {busiest:.0} GPUs on average; mean {:.0} GPUs; {:.1} s",
        packing.peak_replicas,
        packing.busy_gpu_seconds / packing.end_s,
        started.elapsed().as_secs_f64()
    );
}

fn main() {
    let Some(dir) = traces() else {
        eprintln!("set PREWARM_TRACES to the shared traces folder; skipping");
        return;
    };
    if let Ok(scales) = std::env::var("PREWARM_FULL_PASS") {
        for scale in scales.split(',') {
            full_pass(&dir, scale.parse().expect("PREWARM_FULL_PASS: rate scales"));
        }
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c, &dir);
    c.final_summary();
}
