//! Weighs forecasters of the peak rate over the lead time on a simulator workload, out of
//! sample: prewarm's own (damped trend blended with the season, `core::band`'s replay and
//! calibration) against grafana's augurs, MSTL (a daily season, AutoETS on the rest) and
//! non-seasonal AutoETS, refitted every `--refit-every` minutes as a calibration would.
//!
//! The rate series is a workload's arrivals per minute (`prewarm simulate --rates-out`). Every
//! forecaster's band is the `ERROR_QUANTILE` upper quantile of `peak over the lead − its forecast` over the training days
//! (prewarm's: `band::calibrate` on them); each is scored on the days after: the coverage (share
//! of minutes whose peak stayed at or under forecast + band) and the width (mean of forecast +
//! band − peak). augurs' own prediction interval (one-sided at the quantile) is scored beside.
//!
//! `weigh-forecasters RATES.csv --train-days 3 [--leads 180,600] [--refit-every 60]`; the policy is
//! the Lambda's defaults (the simulator's prewarm), at each lead time.

use augurs::ets::{trend::AutoETSTrendModel, AutoETS};
use augurs::mstl::MSTLModel;
use augurs::prelude::*;
use prewarm_core::policy::band;
use prewarm_core::policy::forecast::upper_quantile;
use prewarm_core::{PolicySpec, Sample};

const DAY_MIN: usize = 1440;
/// A Monday, 00:00 UTC (2023-11-13): minute 0 of the series.
const T0: f64 = 1_699_833_600.0;

/// The value after `flag` on the command line, or `default`.
fn flag(args: &[String], flag: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map_or(default.to_string(), String::clone)
}

/// The rates of a `t_seconds,rate_per_s` CSV, one a minute.
fn read_rates(path: &str) -> Result<Vec<f64>, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path)?;
    let mut rates = Vec::new();
    for line in text.lines().skip(1) {
        let rate = line
            .split(',')
            .nth(1)
            .ok_or("expected t_seconds,rate_per_s")?;
        rates.push(rate.trim().parse()?);
    }
    Ok(rates)
}

/// The `q` upper quantile of `actual − point` over the training windows, floored at 0 (what
/// `band::calibrate` takes over its own replay).
fn band_of(training: &[(f64, f64)], q: f64) -> f64 {
    let mut errors: Vec<f64> = training.iter().map(|(a, p)| a - p).collect();
    upper_quantile(&mut errors, q).max(0.0)
}

/// Coverage and mean width of `point + band` over the scored `(actual, point)` windows.
fn score(scored: &[(f64, f64)], band: f64) -> (f64, f64) {
    if scored.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = scored.len() as f64;
    let covered = scored.iter().filter(|(a, p)| *a <= p + band).count() as f64;
    let width = scored.iter().map(|(a, p)| p + band - a).sum::<f64>();
    (covered / n, width / n)
}

/// One row of the table: the band, its coverage and mean width on the scored windows, the
/// width the scored windows' own quantile would have needed (in hindsight: how sharp the
/// forecaster is, whatever its calibration), how many windows, the fit's cost.
fn row(
    name: &str,
    lead_s: f64,
    forecaster: &str,
    band: f64,
    scored: &[(f64, f64)],
    q: f64,
    cost: &str,
) {
    let (coverage, width) = score(scored, band);
    let hindsight = score(scored, band_of(scored, q)).1;
    let n = scored.len();
    println!("| {name} | {lead_s:.0} s | {forecaster} | {band:.3} | {coverage:.3} | {width:.2} | {hindsight:.2} | {n} | {cost} |");
}

/// The highest of the `lead` steps after origin `i` on a path fitted at `c` (path[0] is the step
/// after `c`), never negative; None when the path does not reach that far.
fn peak_ahead(path: &[f64], c: usize, i: usize, lead: usize) -> Option<f64> {
    let from = i.checked_sub(c)?;
    let ahead = path.get(from..from + lead)?;
    Some(ahead.iter().copied().fold(0.0, f64::max))
}

/// CPU milliseconds this thread has run (Linux' schedstat): a fit's cost on a shared machine,
/// where the wall clock also counts the other processes' turns.
fn cpu_ms() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(f64::NAN, |ns| ns / 1e6)
}

/// One augurs model refitted every `every` minutes on the `history_min` minutes up to the refit
/// (the refit's minute included): per refit, the point and upper paths `horizon` minutes ahead
/// (None: the fit failed or had too little history) and its CPU milliseconds.
struct Fits {
    name: &'static str,
    paths: Vec<Option<(Vec<f64>, Vec<f64>)>>,
    fit_ms: Vec<f64>,
}

fn fit_along(
    name: &'static str,
    rates: &[f64],
    every: usize,
    horizon: usize,
    fit: &dyn Fn(&[f64]) -> Option<augurs::Forecast>,
    history_min: usize,
) -> Fits {
    let mut out = Fits {
        name,
        paths: Vec::new(),
        fit_ms: Vec::new(),
    };
    for c in (0..rates.len()).step_by(every) {
        let from = (c + 1).saturating_sub(history_min);
        let started = cpu_ms();
        let made = fit(&rates[from..=c]);
        out.fit_ms.push(cpu_ms() - started);
        out.paths.push(made.and_then(|f| {
            let upper = f.intervals?.upper;
            (f.point.len() >= horizon).then_some((f.point, upper))
        }));
    }
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: weigh-forecasters RATES.csv --train-days D")?;
    let train_days: usize = flag(&args, "--train-days", "3").parse()?;
    let every: usize = flag(&args, "--refit-every", "60").parse()?;
    let leads_s: Vec<f64> = flag(&args, "--leads", "180,600")
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let q = PolicySpec::default().error_quantile;
    let level = 2.0 * q - 1.0; // a two-sided interval whose upper edge is one-sided q
    let leads: Vec<usize> = leads_s.iter().map(|l| (l / 60.0).ceil() as usize).collect();
    let horizon = every + leads.iter().max().copied().unwrap_or(1);
    let name = std::path::Path::new(path)
        .file_stem()
        .map_or(path.clone(), |s| s.to_string_lossy().into_owned());
    let rates = read_rates(path)?;
    let split = train_days * DAY_MIN;
    let mstl = fit_along(
        "mstl",
        &rates,
        every,
        horizon,
        &|y| {
            let model = MSTLModel::new(
                vec![DAY_MIN],
                AutoETSTrendModel::from(AutoETS::non_seasonal()),
            );
            (y.len() >= 2 * DAY_MIN)
                .then(|| model.fit(y).ok()?.predict(horizon, level).ok())
                .flatten()
        },
        3 * DAY_MIN,
    );
    let ets = fit_along(
        "ets",
        &rates,
        every,
        horizon,
        &|y| {
            let f = AutoETS::non_seasonal().fit(y).ok()?;
            f.predict(horizon, level).ok()
        },
        360,
    );
    for (&lead_s, &lead) in leads_s.iter().zip(&leads) {
        let policy = PolicySpec {
            band_history_s: rates.len() as f64 * 60.0,
            lead_time_s: lead_s,
            ..PolicySpec::default()
        };
        let samples: Vec<Sample> = rates
            .iter()
            .enumerate()
            .map(|(i, v)| Sample::new(T0 + 60.0 * i as f64, *v))
            .collect();
        let train_end = T0 + 60.0 * split as f64;
        let cal = band::calibrate(&samples[..split], &policy, q, train_end - 60.0);
        let windows = band::replay(&samples, &policy, T0 + 60.0 * (rates.len() - 1) as f64);
        let index = |t: f64| ((t - T0) / 60.0).round() as usize;
        let (train, test): (Vec<_>, Vec<_>) = windows.iter().partition(|w| w.t < train_end);
        let today: Vec<(f64, f64)> = test
            .iter()
            .map(|w| (w.actual, w.point(cal.seasonal_weight)))
            .collect();
        row(
            &name,
            lead_s,
            "trend+seasons",
            cal.band.unwrap_or(f64::NAN),
            &today,
            q,
            "",
        );
        for fits in [&mstl, &ets] {
            let pairs = |part: &[&band::Window], upper: bool| -> Vec<(f64, f64)> {
                part.iter()
                    .filter_map(|w| {
                        let i = index(w.t);
                        let k = i / every;
                        let (point, up) = fits.paths.get(k)?.as_ref()?;
                        let path = if upper { up } else { point };
                        Some((w.actual, peak_ahead(path, k * every, i, lead)?))
                    })
                    .collect()
            };
            let b = band_of(&pairs(&train, false), q);
            let mean = fits.fit_ms.iter().sum::<f64>() / fits.fit_ms.len().max(1) as f64;
            let max = fits.fit_ms.iter().copied().fold(0.0, f64::max);
            let cost = format!("{mean:.0} (max {max:.0})");
            row(&name, lead_s, fits.name, b, &pairs(&test, false), q, &cost);
            let own = format!("{} own interval", fits.name);
            row(&name, lead_s, &own, 0.0, &pairs(&test, true), q, "");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_band_is_the_upper_quantile_of_the_training_errors() {
        // Errors actual − point: 1, −2, 3, 0, 5 → sorted −2, 0, 1, 3, 5; nearest rank
        // ⌈0.9·5⌉ = 5th = 5; ⌈0.5·5⌉ = 3rd = 1. Only over-forecasts: floored at 0.
        let training = [(2.0, 1.0), (1.0, 3.0), (4.0, 1.0), (2.0, 2.0), (6.0, 1.0)];
        assert_eq!(band_of(&training, 0.9), 5.0);
        assert_eq!(band_of(&training, 0.5), 1.0);
        assert_eq!(band_of(&[(1.0, 3.0)], 0.9), 0.0);
    }

    #[test]
    fn coverage_and_width_by_hand() {
        // Band 1. Window (4, 2): upper 3 < 4, not covered, width −1. (2, 2): 3 ≥ 2, +1.
        // (0, 1): 2 ≥ 0, +2. Coverage 2/3, width (−1 + 1 + 2)/3 = 2/3.
        let (coverage, width) = score(&[(4.0, 2.0), (2.0, 2.0), (0.0, 1.0)], 1.0);
        assert!((coverage - 2.0 / 3.0).abs() < 1e-12, "{coverage}");
        assert!((width - 2.0 / 3.0).abs() < 1e-12, "{width}");
        assert!(score(&[], 1.0).0.is_nan());
    }

    #[test]
    fn the_peak_ahead_reads_the_lead_after_the_origin() {
        // Fitted at minute 10: path[0] is minute 11. Origin 12, lead 2: minutes 13, 14 =
        // path[2], path[3] = 5, 1 → 5. Negative forecasts count as 0.
        let path = [9.0, 7.0, 5.0, 1.0, -3.0];
        assert_eq!(peak_ahead(&path, 10, 12, 2), Some(5.0));
        assert_eq!(peak_ahead(&path, 10, 14, 1), Some(0.0));
        // Past the path's end, or an origin before the fit: nothing.
        assert_eq!(peak_ahead(&path, 10, 13, 3), None);
        assert_eq!(peak_ahead(&path, 10, 9, 1), None);
    }
}
