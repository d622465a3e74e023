//! `prewarm backtest`: the same policies as `simulate`, fed with a metrics history (arrival
//! rate and queue length per step, exported from Prometheus/AMP) instead of a request trace.
//! The CSV format and the export commands are in docs/simulator.md.

use std::path::PathBuf;

use clap::Args;

use super::simulate::{run_jobs, CommonArgs};
use crate::sim::compare::{Source, Workload};
use crate::sim::history;

#[derive(Debug, Args)]
pub struct BacktestArgs {
    /// CSV with the header `timestamp,arrival_rate,queue_length` (Unix seconds or RFC 3339).
    #[arg(long)]
    pub history: PathBuf,
    /// Mean seconds a request occupies a slot (your servers' request latency minus queueing,
    /// e.g. rate(vllm:request_inference_time_seconds_sum) / rate(..._count)).
    #[arg(long, default_value_t = 5.0)]
    pub service_time: f64,
    /// Time compression: 2 replays the history twice as fast.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    #[command(flatten)]
    pub common: CommonArgs,
}

pub fn run(args: BacktestArgs) -> crate::Result<()> {
    if !(args.service_time.is_finite() && args.service_time > 0.0) {
        return Err(crate::Error::config(
            "--service-time",
            "must be a positive number",
        ));
    }
    if !(args.speed.is_finite() && args.speed > 0.0) {
        return Err(crate::Error::config("--speed", "must be a positive number"));
    }
    let rows = history::read_file(&args.history)
        .map_err(|e| crate::Error::config("--history", e.to_string()))?;
    let name = args
        .history
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| args.history.display().to_string());
    let mut jobs = Vec::new();
    for lead in args.common.lead_times() {
        let setup = args.common.setup(lead)?;
        let workload = Workload {
            name: name.clone(),
            source: Source::History {
                rows: rows.clone(),
                service_s: args.service_time,
            },
            speed: args.speed,
            scale: 1.0,
            seed: 1,
            superpose: 1,
            rate_scale: 1.0,
            tokens_from: None,
        };
        jobs.push((workload, setup));
    }
    run_jobs(&args.common, jobs)
}
