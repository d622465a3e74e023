//! `prewarm backtest`: the same comparison as `simulate`, on a target's own history. Two inputs:
//! - `--target NAME`: read straight from the target's metric source (METRIC_SOURCE and its
//!   variables, PREWARM_TARGETS: the tick's own configuration, queries and credentials) over the
//!   last `--days` days; the arrival-rate series becomes a rate series (Poisson arrivals, token
//!   lengths sampled from a request trace) and runs through the comparison.
//! - `--history CSV`: a metrics export (`timestamp,arrival_rate,queue_length`, see
//!   docs/simulator.md), replayed with one fixed service time.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;

use super::simulate::{run_jobs, CommonArgs};
use crate::adapters::metrics;
use crate::config::Config;
use crate::sim::history;
use crate::sim::workload::{self, rate_series};
use crate::sim::workload::{Source, Workload};

#[derive(Debug, Args)]
pub struct BacktestArgs {
    /// CSV with the header `timestamp,arrival_rate,queue_length` (Unix seconds or RFC 3339).
    #[arg(long, required_unless_present = "target", conflicts_with = "target")]
    pub history: Option<PathBuf>,
    /// Mean seconds a request occupies a slot (your servers' request latency minus queueing,
    /// e.g. rate(vllm:request_inference_time_seconds_sum) / rate(..._count)). --history only.
    #[arg(long, default_value_t = 5.0)]
    pub service_time: f64,
    /// Time compression: 2 replays the history twice as fast.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Read the history of this target (a name in PREWARM_TARGETS) from its metric source.
    #[arg(long)]
    pub target: Option<String>,
    /// Days of history to read (--target).
    #[arg(long, default_value_t = 7.0)]
    pub days: f64,
    /// Seconds between history points (--target), 1 to 86400.
    #[arg(long, default_value_t = 60.0, value_parser = resolution_seconds)]
    pub resolution: f64,
    /// End of the history, Unix seconds (--target; default: now).
    #[arg(long)]
    pub until: Option<f64>,
    /// Multiply every rate of the history (--target).
    #[arg(long, default_value_t = 1.0)]
    pub rate_scale: f64,
    /// Request trace to take token lengths from (--target; default:
    /// AzureLLMInferenceTrace_conv.csv in ../shared/traces).
    #[arg(long)]
    pub tokens_from: Option<PathBuf>,
    /// Seed of the arrivals and token lengths (--target).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The step of the history read: refused at parse time when it is not a number of seconds from 1
/// to a day. A zero or negative step never advances the read, and a step of a nanosecond asks
/// the metric source for trillions of points.
fn resolution_seconds(raw: &str) -> Result<f64, String> {
    match raw.trim().parse::<f64>() {
        Ok(v) if (1.0..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "{raw:?} is not a step in seconds from 1 to 86400 (the seconds between history points)"
        )),
    }
}

fn positive(flag: &str, v: f64) -> crate::Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(crate::Error::config(flag, "must be a positive number"))
    }
}

pub async fn run(args: BacktestArgs) -> crate::Result<()> {
    positive("--speed", args.speed)?;
    let workload = match (&args.history, &args.target) {
        (Some(path), _) => from_csv(&args, path)?,
        (None, Some(target)) => from_metric_source(&args, target).await?,
        (None, None) => unreachable!("clap requires --history or --target"),
    };
    let mut jobs = Vec::new();
    for lead in args.common.lead_times() {
        jobs.push((workload.clone(), args.common.setup(lead)?));
    }
    run_jobs(&args.common, jobs)
}

fn from_csv(args: &BacktestArgs, path: &Path) -> crate::Result<Workload> {
    positive("--service-time", args.service_time)?;
    let rows =
        history::read_file(path).map_err(|e| crate::Error::config("--history", e.to_string()))?;
    Ok(Workload {
        name: path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string()),
        source: Source::History {
            rows,
            service_s: args.service_time,
        },
        speed: args.speed,
        scale: 1.0,
        seed: 1,
        superpose: 1,
        rate_scale: 1.0,
        tokens_from: None,
    })
}

async fn from_metric_source(args: &BacktestArgs, name: &str) -> crate::Result<Workload> {
    positive("--days", args.days)?;
    positive("--rate-scale", args.rate_scale)?;
    let tokens_from = match &args.tokens_from {
        Some(p) => p.clone(),
        None => workload::default_tokens_file(Path::new("../shared/traces/x"), None).ok_or_else(
            || {
                crate::Error::config(
                    "--tokens-from",
                    "the metric history carries no token lengths: give --tokens-from TRACE",
                )
            },
        )?,
    };
    let read = target_history(
        "backtest",
        name,
        args.until,
        args.days * 86_400.0,
        args.resolution,
    )
    .await?;
    let observed = read.observed;
    let samples: Vec<(f64, f64)> = observed.arrival_rate.iter().map(|s| (s.t, s.v)).collect();
    let (series, missing_s) = rate_series::from_samples(&samples, args.resolution)
        .map_err(|m| crate::Error::config("--target", format!("{name}: arrival rate: {m}")))?;
    let service = &observed.service_time_s;
    eprintln!(
        "{name}: {} arrival-rate points over {:.1} days, {:.0} requests expected; {:.1} h without data replayed as no requests; mean observed service time {}",
        samples.len(),
        series.end / 86_400.0,
        series.expected_requests(args.rate_scale),
        missing_s / 3600.0,
        if service.is_empty() {
            "unknown".to_string()
        } else {
            format!(
                "{:.2} s (includes queueing for vLLM's e2e latency)",
                service.iter().map(|s| s.v).sum::<f64>() / service.len() as f64
            )
        }
    );
    let mut label = format!("{name} history {}d", args.days);
    if args.rate_scale != 1.0 {
        label.push_str(&format!(" rate x{}", args.rate_scale));
    }
    Ok(Workload {
        name: label,
        source: Source::Rates(Arc::new(series)),
        speed: args.speed,
        scale: 1.0,
        seed: args.seed,
        superpose: 1,
        rate_scale: args.rate_scale,
        tokens_from: Some(tokens_from),
    })
}

/// A target's history read from its metric source with the tick's configuration (the
/// environment: METRIC_SOURCE and its variables, PREWARM_TARGETS, credentials).
pub(super) struct TargetHistory {
    pub config: Config,
    pub target: crate::core::TargetSpec,
    pub start: f64,
    pub end: f64,
    pub observed: crate::core::Observation,
}

/// Reads `name`'s signals over the `span_s` seconds before `until` (default: now, floored to
/// the second) every `step` seconds; `command` names the caller in the error.
pub(super) async fn target_history(
    command: &str,
    name: &str,
    until: Option<f64>,
    span_s: f64,
    step: f64,
) -> crate::Result<TargetHistory> {
    let config = Config::from_env()?;
    let Some(source_config) = &config.metric_source else {
        return Err(crate::Error::config(
            "METRIC_SOURCE",
            format!("{command} --target reads the target's metric source: set METRIC_SOURCE"),
        ));
    };
    let target = config
        .target(name)
        .ok_or_else(|| {
            crate::Error::config("PREWARM_TARGETS", format!("no target named {name:?}"))
        })?
        .clone();
    let source = metrics::from_config(source_config, &config.policy).await?;
    let end = until.unwrap_or_else(crate::clock::unix_now).floor();
    let start = end - span_s;
    let observed =
        metrics::history::read(source.as_ref(), &target, &config.policy, start, end, step).await?;
    Ok(TargetHistory {
        config,
        target,
        start,
        end,
        observed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: BacktestArgs,
    }

    #[test]
    fn the_step_is_refused_at_parse_time_unless_one_second_to_a_day() {
        let parse = |resolution: &str| {
            let flag = format!("--resolution={resolution}");
            Wrapper::try_parse_from(["prewarm", "--target", "llama", flag.as_str()])
                .map(|w| w.args.resolution)
                .map_err(|e| e.to_string())
        };
        // (flag value, accepted step) - the range by hand: [1, 86400] seconds.
        for (raw, want) in [
            ("60", Some(60.0)),
            ("1", Some(1.0)),
            ("86400", Some(86_400.0)),
        ] {
            assert_eq!(parse(raw).ok(), want, "{raw}");
        }
        for raw in ["0", "-60", "0.5", "86401", "NaN", "inf", "soon"] {
            let e = parse(raw).unwrap_err();
            assert!(
                e.contains("--resolution") && e.contains("from 1 to 86400"),
                "{raw}: {e}"
            );
        }
    }
}
