//! `prewarm query-cost`: what the metric reads of the tick cost a month, counted from the reads
//! the tick issues (the read plan `core::policy::observe::plan` and `calibration_window`, the
//! PromQL of `queries::for_target`, the CloudWatch source's metrics per read) at the default
//! policy, for a fleet of vLLM targets given on the command line, and priced for Amazon Managed
//! Prometheus (query samples processed) and CloudWatch (metrics requested by GetMetricData).
//! Changes when the tick's reads, vLLM's series or the way the two services bill change.
//!
//! Samples one PromQL range query processes. A range query over `[start, end]` with step `s` is
//! evaluated at K = floor((end - start) / s) + 1 instants. At each instant Prometheus loads, for
//! every series a selector matches, one sample for an instant selector (`sum(x{..})`) and the
//! samples inside `(t - w, t]` for a range selector (`rate(x{..}[w])`, `deriv`): w / scrape of
//! them with a fixed scrape interval (Prometheus 2's closed range adds one when a scrape falls
//! exactly on t - w). AMP bills `totalQueryableSamples`, which Prometheus adds up per instant
//! (`totalQueryableSamplesPerStep`, "Get statistics about each query", AMP user guide): a sample
//! inside the windows of several instants counts once per instant. So
//!
//!   samples = K × Σ_selectors series × (1 | w / scrape),
//!
//! not series × (r + w) / scrape (each sample once), which is lower by about w / s: with the
//! defaults (r = 900 s, s = 15 s, w = 60 s, scrape 15 s) 61 × 4 = 244 against 64 per series.
//!
//! CloudWatch bills each metric a GetMetricData call asks for, whatever the number of datapoints
//! (one call holds the tick's answers: its datapoints stay far below the 100,800 a page).

use clap::Args;

use crate::adapters::metrics::cloudwatch::{HISTORY_METRICS, RECENT_METRICS};
use crate::adapters::metrics::queries::for_target;
use crate::core::policy::observe::{calibration_window, plan, Window};
use crate::core::policy::season_cache::{SeasonCache, SeasonSource};
use crate::core::spec::{HeadroomKind, ServerKind};
use crate::core::{PolicySpec, TargetSpec};

#[derive(Debug, Args)]
pub struct QueryCostArgs {
    /// Targets (models) one tick serves.
    #[arg(long, default_value_t = 20)]
    pub targets: u32,
    /// vLLM engines per target (pods, or data-parallel ranks: each exports its own series).
    #[arg(long, default_value_t = 10)]
    pub engines: u32,
    /// Seconds between two scrapes of an engine (SCRAPE_INTERVAL_SECONDS).
    #[arg(long, default_value_t = 15.0)]
    pub scrape_interval: f64,
    /// Series of `vllm:request_success_total` per engine: one per finish reason, all exported
    /// from start-up (stop, length, abort, error, repetition in current vLLM).
    #[arg(long, default_value_t = 5)]
    pub finish_reasons: u32,
    /// USD per billion query samples processed (AMP, us-east-1 list price).
    #[arg(long, default_value_t = 0.10)]
    pub amp_usd_per_billion: f64,
    /// USD per 1,000 metrics requested (CloudWatch GetMetricData, us-east-1 list price).
    #[arg(long, default_value_t = 0.01)]
    pub cloudwatch_usd_per_thousand: f64,
    /// Days in the month priced.
    #[arg(long, default_value_t = 30.0)]
    pub days: f64,
}

/// Series one vLLM engine exports of each metric the built-in queries read
/// (vllm-project/vllm, `vllm/v1/metrics/loggers.py`, `PrometheusStatLogger`: every metric has
/// the labels `model_name` and `engine`; `vllm:request_success` adds `finished_reason` and
/// creates one child per `FinishReason` at start-up; the e2e latency histogram's `_sum` and
/// `_count` are one series each, its 22 `_bucket` series are not read). None: a metric this
/// table does not know.
pub fn vllm_series_per_engine(metric: &str, finish_reasons: u32) -> Option<f64> {
    match metric {
        "vllm:request_success_total" => Some(f64::from(finish_reasons)),
        "vllm:num_requests_waiting"
        | "vllm:num_requests_running"
        | "vllm:e2e_request_latency_seconds_sum"
        | "vllm:e2e_request_latency_seconds_count" => Some(1.0),
        _ => None,
    }
}

/// One selector of a PromQL text: the metric and the range in seconds (None: instant).
#[derive(Clone, Debug, PartialEq)]
pub struct Selector {
    pub metric: String,
    pub range_s: Option<f64>,
}

/// The selectors of a PromQL text whose selectors all carry matchers (`name{...}`, optionally
/// `[duration]`), as the built-in queries of a target with a selector do.
pub fn selectors(promql: &str) -> Result<Vec<Selector>, String> {
    let bytes = promql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(open) = promql[i..].find('{').map(|k| k + i) {
        let name_start = promql[..open]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |k| k + 1);
        let close = promql[open..]
            .find('}')
            .map(|k| k + open)
            .ok_or_else(|| format!("unclosed selector in {promql:?}"))?;
        let range_s = if bytes.get(close + 1) == Some(&b'[') {
            let end = promql[close..]
                .find(']')
                .map(|k| k + close)
                .ok_or_else(|| format!("unclosed range in {promql:?}"))?;
            Some(duration_s(&promql[close + 2..end])?)
        } else {
            None
        };
        out.push(Selector {
            metric: promql[name_start..open].to_string(),
            range_s,
        });
        i = close + 1;
    }
    Ok(out)
}

/// Seconds of a PromQL duration as `queries::duration` writes them (`1m`, `90s`, `1500ms`).
fn duration_s(text: &str) -> Result<f64, String> {
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map(|k| text.split_at(k))
        .ok_or_else(|| format!("duration {text:?} has no unit"))?;
    let n: f64 = number
        .parse()
        .map_err(|_| format!("duration {text:?} has no number"))?;
    match unit {
        "ms" => Ok(n / 1000.0),
        "s" => Ok(n),
        "m" => Ok(n * 60.0),
        "h" => Ok(n * 3600.0),
        _ => Err(format!("duration {text:?}: unit {unit:?}")),
    }
}

/// Samples one evaluation instant of `promql` loads (see the module docs), with `engines`
/// engines per target.
pub fn samples_per_instant(
    promql: &str,
    engines: f64,
    finish_reasons: u32,
    scrape_s: f64,
) -> Result<f64, String> {
    selectors(promql)?.iter().try_fold(0.0, |total, s| {
        let series = vllm_series_per_engine(&s.metric, finish_reasons)
            .ok_or_else(|| format!("no vLLM series count for {:?}", s.metric))?;
        let per_series = s.range_s.map_or(1.0, |w| w / scrape_s);
        Ok(total + engines * series * per_series)
    })
}

/// Evaluation instants of a range query over `w`.
pub fn instants(w: &Window) -> f64 {
    ((w.end - w.start) / w.step + 1e-9).floor() + 1.0
}

/// One kind of read of one target: its queries over one window, how many metrics CloudWatch
/// bills for it, and how often a month it happens.
#[derive(Clone, Debug, PartialEq)]
pub struct Read {
    pub name: String,
    pub promql: Vec<String>,
    pub window: Window,
    pub cloudwatch_metrics: usize,
    pub per_month: f64,
}

/// The reads the tick issues for one vLLM target a month at `policy`: the recent window every
/// tick, each season once per reach ahead, the band's history once per CALIBRATE_EVERY_SECONDS.
pub fn tick_reads(policy: &PolicySpec, days: f64) -> Vec<Read> {
    let target = TargetSpec {
        selector: r#"model_name="m""#.into(),
        server: ServerKind::Vllm,
        ..TargetSpec::new("m", "gpu", HeadroomKind::NodePoolReplicas, 8)
    };
    let q = for_target(&target, policy.rate_window_s);
    let month_s = days * 86_400.0;
    let ticks = month_s / policy.tick_s;
    // Any now: the windows' lengths do not depend on it.
    let now = 1_000_000_000.0;
    let reads = plan(policy, now);
    let mut out = vec![Read {
        name: "recent window".into(),
        promql: vec![q.waiting, q.running, q.arrival_rate.clone(), q.service_time],
        window: reads.recent,
        cloudwatch_metrics: RECENT_METRICS,
        per_month: ticks,
    }];
    // A season read reaches ahead (`season_cache`): the ticks after it take their frame out of
    // it until a frame ends past it, so it is read again one reach and one tick later. (A cold
    // start of the function reads again too: not counted.)
    for season in reads.seasons {
        let window = match SeasonCache::default().lookup(&season, now - policy.ingestion_lag_s) {
            SeasonSource::Read(window) => window,
            SeasonSource::Held(_) => unreachable!("an empty cache holds nothing"),
        };
        let reach_s = window.end - season.window.end;
        out.push(Read {
            name: format!("season {} s back", season.period_s),
            promql: vec![q.arrival_rate.clone()],
            window,
            cloudwatch_metrics: HISTORY_METRICS,
            per_month: month_s / (reach_s + policy.tick_s),
        });
    }
    if let Some(window) = calibration_window(policy, None, now) {
        out.push(Read {
            name: "band history".into(),
            promql: vec![q.arrival_rate],
            window,
            cloudwatch_metrics: HISTORY_METRICS,
            per_month: month_s / policy.calibrate_every_s,
        });
    }
    out
}

/// Prints the cost table (markdown) at the default policy.
pub fn run(args: QueryCostArgs) -> crate::Result<()> {
    let policy = PolicySpec::default();
    let bad = |e: String| crate::Error::config("query-cost", e);
    let targets = f64::from(args.targets);
    let engines = f64::from(args.engines);
    println!(
        "{} vLLM targets x {} engines, scrape every {} s, a tick every {} s, {} days; \
         {} series of vllm:request_success_total per engine\n",
        args.targets,
        args.engines,
        args.scrape_interval,
        policy.tick_s,
        args.days,
        args.finish_reasons
    );
    println!(
        "| read (per target) | instants | AMP samples per read | reads a month | AMP samples a \
         month, all targets (billions) | CloudWatch metrics a month, all targets (millions) |"
    );
    println!("|---|---|---|---|---|---|");
    let (mut amp, mut cloudwatch) = (0.0, 0.0);
    let (mut amp_seasons, mut cloudwatch_seasons) = (0.0, 0.0);
    for read in tick_reads(&policy, args.days) {
        let k = instants(&read.window);
        let mut per_read = 0.0;
        for promql in &read.promql {
            per_read +=
                k * samples_per_instant(promql, engines, args.finish_reasons, args.scrape_interval)
                    .map_err(bad)?;
        }
        let samples = per_read * read.per_month * targets;
        let metrics = read.cloudwatch_metrics as f64 * read.per_month * targets;
        amp += samples;
        cloudwatch += metrics;
        if read.name.starts_with("season") {
            amp_seasons += samples;
            cloudwatch_seasons += metrics;
        }
        let queries = match read.promql.len() {
            1 => "1 query".to_string(),
            n => format!("{n} queries"),
        };
        println!(
            "| {} ({queries}) | {k} | {per_read} | {:.0} | {:.1} | {:.2} |",
            read.name,
            read.per_month,
            samples / 1e9,
            metrics / 1e6
        );
    }
    let amp_usd = amp / 1e9 * args.amp_usd_per_billion;
    let cloudwatch_usd = cloudwatch / 1e3 * args.cloudwatch_usd_per_thousand;
    println!(
        "| **total** | | | | **{:.1}: ${amp_usd:.2}** | **{:.2}: ${cloudwatch_usd:.2}** |",
        amp / 1e9,
        cloudwatch / 1e6
    );
    println!(
        "\nAMP ${amp_usd:.2} a month at ${} per billion samples; CloudWatch ${cloudwatch_usd:.2} \
         at ${} per 1,000 metrics ({:.1}x AMP). The seasonal reads are {:.0} % of AMP's samples \
         and {:.0} % of CloudWatch's metrics.",
        args.amp_usd_per_billion,
        args.cloudwatch_usd_per_thousand,
        cloudwatch_usd / amp_usd,
        100.0 * amp_seasons / amp,
        100.0 * cloudwatch_seasons / cloudwatch
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_and_their_ranges_come_from_the_text() {
        let q = r#"sum(rate(a:b_total{x="1"}[1m])) + (clamp_min(sum(deriv(c{x="1"}[90s])), 0) or vector(0)) + sum(d{x="1"})"#;
        let s = |m: &str, r: Option<f64>| Selector {
            metric: m.into(),
            range_s: r,
        };
        assert_eq!(
            selectors(q).unwrap(),
            vec![s("a:b_total", Some(60.0)), s("c", Some(90.0)), s("d", None)]
        );
        assert!(selectors(r#"rate(x{a="1"}[5parsecs])"#).is_err());
    }

    #[test]
    fn vllm_built_in_queries_load_these_samples_per_instant() {
        // One engine, 5 finish reasons, scrape 15 s, rate window 60 s (latency 120 s), by hand:
        // waiting/running: 1 series, instant: 1 each;
        // arrival: rate over 1m of 5 series (4 samples each: 20) + deriv over 1m of 2 gauges
        // (4 each: 8) = 28;
        // service time: rate over 2m of _sum and _count (8 each) = 16.
        let policy = PolicySpec::default();
        let recent = &tick_reads(&policy, 30.0)[0];
        let per_instant: Vec<f64> = recent
            .promql
            .iter()
            .map(|q| samples_per_instant(q, 1.0, 5, 15.0).unwrap())
            .collect();
        assert_eq!(per_instant, vec![1.0, 1.0, 28.0, 16.0]);
        // 10 engines: ten times as many.
        assert_eq!(
            samples_per_instant(&recent.promql[2], 10.0, 5, 15.0).unwrap(),
            280.0
        );
    }

    #[test]
    fn the_tick_reads_these_windows_this_often() {
        // Default policy, by hand: recent 900 s / 15 s + 1 = 61 instants every tick (4 a
        // minute: 172,800 in 30 days); each season (900 + 180 + 3,600 s read ahead) / 15 s + 1
        // = 313 instants, read again once the 240 ticks of its hour ahead have used it, every
        // 3,615 s: 2,592,000 / 3,615 a month; the band history (1 day + the shortest season
        // 1 day + 900 + 180 s = 173,880 s) / 60 s + 1 = 2,899 instants once an hour (720 in 30
        // days). CloudWatch: 4 metrics for the recent read, 3 for each history read.
        let reads = tick_reads(&PolicySpec::default(), 30.0);
        let got: Vec<(f64, usize, f64)> = reads
            .iter()
            .map(|r| (instants(&r.window), r.cloudwatch_metrics, r.per_month))
            .collect();
        assert_eq!(
            got,
            vec![
                (61.0, 4, 172_800.0),
                (313.0, 3, 2_592_000.0 / 3_615.0),
                (313.0, 3, 2_592_000.0 / 3_615.0),
                (2_899.0, 3, 720.0),
            ]
        );
    }
}
