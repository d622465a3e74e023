//! `prewarm explain --target NAME --since 7d`: the requests that waited longer than the SLO
//! wait over a running target's metric history, decomposed as the simulator does
//! (core::policy::residual): the history is read from the target's metric source the way
//! `prewarm backtest --target` reads it (the tick's configuration, queries and credentials),
//! the first `--train-days` days learn the largest rise over one lead, the rest is scored.

use crate::core::policy::band::{self, Calibration};
use crate::core::policy::residual::{self, Decomposition, Series, Setting};
use crate::core::policy::residual_history::from_history;
use crate::error::Result;
use crate::sim::report::print::residual_table;

/// The settings of one `explain --target` run (flags of `prewarm explain`).
#[derive(Clone, Debug)]
pub struct TargetExplain {
    pub target: String,
    pub since_s: f64,
    pub until: Option<f64>,
    pub train_days: f64,
    pub step_s: f64,
    pub slo_wait_s: f64,
    pub usd_per_gpu_hour: Option<f64>,
    pub json: bool,
}

/// The GPU-hour price when neither `--usd-per-gpu-hour` nor GPU_HOUR_COST gives one: the
/// simulator's default node (g5.12xlarge on demand, per GPU), so both price a reserve alike.
fn default_usd_per_gpu_hour() -> f64 {
    crate::sim::model::instance_type("g5.12xlarge")
        .map_or(0.0, |i| i.on_demand_usd_per_hour / f64::from(i.gpus.max(1)))
}

/// `7d`, `36h`, `90m`, `600s` or plain seconds.
pub fn since_seconds(raw: &str) -> std::result::Result<f64, String> {
    let raw = raw.trim();
    let (number, unit) = match raw.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(k) => raw.split_at(k),
        None => (raw, "s"),
    };
    let factor = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return Err(format!("{raw:?}: a duration like 7d, 36h, 90m or 600s")),
    };
    match number.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => Ok(n * factor),
        _ => Err(format!(
            "{raw:?}: a positive duration like 7d, 36h, 90m or 600s"
        )),
    }
}

pub async fn run(args: &TargetExplain) -> Result<()> {
    let name = &args.target;
    let read =
        super::backtest::target_history("explain", name, args.until, args.since_s, args.step_s)
            .await?;
    let (config, target, observed) = (&read.config, &read.target, &read.observed);
    let (start, end) = (read.start, read.end);
    let n = ((end - start) / args.step_s).floor() as usize + 1;
    let h = from_history(
        &observed.arrival_rate,
        &observed.waiting,
        &observed.running,
        (start, args.step_s, n),
        target.replica_concurrency,
        args.slo_wait_s,
    );
    let train = ((args.train_days * 86_400.0) / args.step_s).round() as usize;
    let usd = args
        .usd_per_gpu_hour
        .or(config.policy.gpu_hour_cost)
        .unwrap_or_else(default_usd_per_gpu_hour);
    let d = residual::decompose(
        &Series {
            start_s: start,
            step_s: args.step_s,
            demand: &h.demand,
            upper: &h.upper,
            capacity: &h.capacity,
            need: &h.need,
            delayed: &h.delayed,
        },
        &Setting {
            lead_steps: Setting::lead_steps(config.policy.lead_time_s, args.step_s),
            training: 0..train.min(n),
            scored: train.min(n)..n,
            gpus_per_replica: f64::from(target.gpus_per_replica),
            usd_per_gpu_hour: usd,
        },
    );
    let lead = super::explain_lead::horizon(config, target, crate::clock::unix_now()).await;
    // The tick's calibration on the newest of this history: its band and the forecaster it
    // chooses (at the nominal quantile of the mean service time read).
    let service: Vec<f64> = observed.service_time_s.iter().map(|s| s.v).collect();
    let service_s = service.iter().sum::<f64>() / service.len().max(1) as f64;
    let q = band::quantile(&config.policy, target, service_s);
    let calibration = band::calibrate(&observed.arrival_rate, &config.policy, q, end);
    if args.json {
        let steps: Vec<_> = d.steps.clone();
        let out = serde_json::json!({
            "target": name,
            "start": start,
            "end": end,
            "step_s": args.step_s,
            "train_days": args.train_days,
            "lead_time_s": config.policy.lead_time_s,
            "lead": lead,
            "calibration": calibration,
            "slo_wait_s": args.slo_wait_s,
            "usd_per_gpu_hour": usd,
            "decomposition": d,
            "steps": steps,
        });
        println!("{out}");
    } else {
        print!("{}", text(name, args, &d, config.policy.lead_time_s, usd));
        print!("{}", forecaster_text(&calibration));
        print!("{}", super::explain_lead::text(&lead));
    }
    Ok(())
}

/// The printed report: what was read, the table, how to read it.
fn text(name: &str, args: &TargetExplain, d: &Decomposition, lead_s: f64, usd: f64) -> String {
    let scored_days = d.scored_hours / 24.0;
    let mut out = format!(
        "{name}: {:.1} days of history every {:.0} s; the first {} days learn the largest rise over the {lead_s:.0} s lead ({}), the last {scored_days:.2} days are scored; a step is delayed when its queue would wait more than {:.0} s (waiting / arrival rate)\n",
        args.since_s / 86_400.0,
        args.step_s,
        args.train_days,
        d.training_rise
            .map_or("none: every delayed step is unforecastable".into(), |r| format!("{r:.3} req/s")),
        args.slo_wait_s,
    );
    out.push_str(&residual_table(&[(name.to_string(), d)]));
    if d.delayed() == 0 {
        out.push_str("no scored step was delayed\n");
    } else {
        out.push_str(&format!(
            "delayed steps: {} forecastable (a higher ERROR_QUANTILE, or DELAYED_REQUEST_COST against GPU_HOUR_COST, covers them), {} unforecastable at this lead (a constant reserve of {} loaded replicas removes them: {:.1} GPU-hours, ${:.2} at ${usd:.3} per GPU-hour over the scored days; or a longer lead). A metric history holds no forecasts, so lead misses show only in the simulator.\n",
            d.forecastable, d.unforecastable, d.reserve_replicas, d.reserve_gpu_hours, d.reserve_usd,
        ));
    }
    out
}

/// The forecaster the tick's calibration chooses on this history, with its band.
fn forecaster_text(c: &Calibration) -> String {
    let note = c
        .note
        .as_deref()
        .map_or(String::new(), |n| format!(" ({n})"));
    match (c.band, c.coverage) {
        (Some(band), Some(coverage)) => format!(
            "forecaster: {}, the narrowest upper band held back as the tick's calibration chooses it on this history: band {band:.3} req/s, {:.1}% of the newest third covered at a quantile of {:.1}%{note}\n",
            c.forecaster.label(),
            100.0 * coverage,
            100.0 * c.quantile,
        ),
        _ => format!("forecaster: {}, no band on this history{note}\n", c.forecaster.label()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report of the stack test's history (tests/explain_prometheus_stack.rs derives these
    /// numbers by hand): 2 forecastable and 2 unforecastable minutes, R = 2 req/s, 9 replicas
    /// for 1441 scored minutes at $2: 9 × 1441 / 60 = 216.15 GPU-h (printed 216.1: the float
    /// `decompose` computes is 216.149…), $432.30.
    #[test]
    fn the_report_reads_as_docs_operations_shows_it() {
        let d = Decomposition {
            forecastable: 2,
            lead_miss: 0,
            unforecastable: 2,
            training_rise: Some(2.0),
            reserve_replicas: 9,
            // As `decompose` multiplies: steps × step / 3600, then × replicas × GPUs.
            reserve_gpu_hours: 9.0 * (1441.0 * 60.0 / 3600.0),
            reserve_usd: 9.0 * (1441.0 * 60.0 / 3600.0) * 2.0,
            scored_hours: 1441.0 * 60.0 / 3600.0,
            steps: Vec::new(),
        };
        let args = TargetExplain {
            target: "ex".into(),
            since_s: 3.0 * 86_400.0,
            until: None,
            train_days: 2.0,
            step_s: 60.0,
            slo_wait_s: 10.0,
            usd_per_gpu_hour: Some(2.0),
            json: false,
        };
        let out = text("ex", &args, &d, 180.0, 2.0);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("ex: 3.0 days of history every 60 s; the first 2 days learn the largest rise over the 180 s lead (2.000 req/s), the last 1.00 days are scored; "), "{out}");
        assert_eq!(lines[1], "policy  delayed  forecastable  lead miss  unforecastable  training rise     reserve  reserve GPU-h  reserve $", "{out}");
        assert_eq!(lines[2], "ex            4       2 (50%)     0 (0%)         2 (50%)     2.00 req/s  9 replicas          216.1        432", "{out}");
        assert!(lines[3].contains("$432.30 at $2.000 per GPU-hour"), "{out}");
    }

    #[test]
    fn the_forecaster_chosen_is_named_with_its_band() {
        let c = band::calibrate(&[], &crate::core::PolicySpec::default(), 0.9, 0.0);
        assert_eq!(
            forecaster_text(&c),
            "forecaster: blend, no band on this history (no history)\n"
        );
        let c = Calibration {
            band: Some(2.0),
            coverage: Some(0.995),
            forecaster: crate::core::spec::Forecaster::Profile,
            note: None,
            ..c
        };
        assert_eq!(forecaster_text(&c), "forecaster: profile, the narrowest upper band held back as the tick's calibration chooses it on this history: band 2.000 req/s, 99.5% of the newest third covered at a quantile of 90.0%\n");
    }

    #[test]
    fn since_takes_days_hours_minutes_seconds() {
        // (flag, seconds) by hand.
        for (raw, want) in [
            ("7d", 604_800.0),
            ("36h", 129_600.0),
            ("90m", 5_400.0),
            ("600s", 600.0),
            ("600", 600.0),
            ("1.5d", 129_600.0),
        ] {
            assert_eq!(since_seconds(raw), Ok(want), "{raw}");
        }
        for raw in ["", "0d", "-1d", "7w", "d", "soon"] {
            assert!(since_seconds(raw).is_err(), "{raw}");
        }
    }
}
