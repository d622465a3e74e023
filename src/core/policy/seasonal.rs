//! Stage: the seasonal forecaster. Demand at the same clock time one season back (a day, a
//! week), scaled by how today compares with that day so far, is a forecast of the next lead
//! time that sees a recurring morning ramp or a nightly batch coming before any of it shows in
//! the short window the trend model reads.
//!
//! For each season with data: `scale = Σ today / Σ season` over the part of the observation
//! window both cover, and the forecast is `scale × max(season over (now, now + lead])`. Seasons
//! are averaged. It says why when it cannot forecast (the policy then uses the trend alone and
//! logs the reason).

use super::observation::{Sample, SeasonSeries};

/// Ratios beyond this are read as a broken history (a new deployment, a unit change), not as
/// a forecast: the season is skipped rather than multiplied into something absurd.
const MAX_SCALE: f64 = 20.0;

/// A season needs at least this share of the observation window's samples in common with
/// today to estimate the scale.
const MIN_OVERLAP: f64 = 0.5;

/// The seasonal forecast at the horizon, or why there is none.
#[derive(Clone, Debug, PartialEq)]
pub enum Seasonal {
    /// Highest rate expected over (now, now + lead], and the seasons that gave it.
    Forecast {
        peak: f64,
        seasons: Vec<f64>,
    },
    Unavailable {
        why: String,
    },
}

fn finite(series: &[Sample]) -> impl Iterator<Item = &Sample> {
    series.iter().filter(|s| s.t.is_finite() && s.v.is_finite())
}

/// One season's forecast; `today` is the observation window (oldest first).
pub fn season_peak(
    today: &[Sample],
    season: &SeasonSeries,
    now: f64,
    lead_s: f64,
    step_s: f64,
) -> Result<f64, String> {
    let name = season.period_s;
    let ahead: Vec<f64> = finite(&season.samples)
        .filter(|s| s.t > now && s.t <= now + lead_s + step_s / 2.0)
        .map(|s| s.v.max(0.0))
        .collect();
    if ahead.is_empty() {
        return Err(format!(
            "season {name} s: no history over the next lead time"
        ));
    }
    // Pair today's samples with the season's on the same (shifted) times, half a step apart
    // at most, or half the season's own spacing when it is coarser (CloudWatch keeps one-minute
    // data for old history).
    let past: Vec<&Sample> = finite(&season.samples).filter(|s| s.t <= now).collect();
    let spacing = match (past.first(), past.last()) {
        (Some(a), Some(b)) if past.len() > 1 => (b.t - a.t) / (past.len() - 1) as f64,
        _ => step_s,
    };
    let tolerance = step_s.max(spacing) / 2.0;
    let mut today_sum = 0.0;
    let mut season_sum = 0.0;
    let mut pairs = 0usize;
    let mut today_n = 0usize;
    for t in finite(today) {
        today_n += 1;
        if let Some(s) = past.iter().find(|s| (s.t - t.t).abs() <= tolerance) {
            today_sum += t.v.max(0.0);
            season_sum += s.v.max(0.0);
            pairs += 1;
        }
    }
    if today_n == 0 || (pairs as f64) < MIN_OVERLAP * today_n as f64 {
        return Err(format!(
            "season {name} s: {pairs} of {today_n} samples of today have history to compare"
        ));
    }
    let scale = if season_sum > 0.0 {
        today_sum / season_sum
    } else if today_sum == 0.0 {
        1.0
    } else {
        return Err(format!(
            "season {name} s: no demand then, some now: cannot scale"
        ));
    };
    if scale > MAX_SCALE {
        return Err(format!(
            "season {name} s: today is {scale:.1}x that day (above {MAX_SCALE}x)"
        ));
    }
    let peak = ahead.into_iter().fold(0.0, f64::max);
    Ok(scale * peak)
}

/// The mean of the seasons that can forecast; `Unavailable` lists why each could not.
pub fn seasonal_forecast(
    today: &[Sample],
    seasons: &[SeasonSeries],
    now: f64,
    lead_s: f64,
    step_s: f64,
) -> Seasonal {
    if seasons.is_empty() {
        return Seasonal::Unavailable {
            why: "no seasonal history".into(),
        };
    }
    let mut peaks = Vec::new();
    let mut used = Vec::new();
    let mut why = Vec::new();
    for season in seasons {
        match season_peak(today, season, now, lead_s, step_s) {
            Ok(p) => {
                peaks.push(p);
                used.push(season.period_s);
            }
            Err(e) => why.push(e),
        }
    }
    if peaks.is_empty() {
        Seasonal::Unavailable {
            why: why.join("; "),
        }
    } else {
        Seasonal::Forecast {
            peak: peaks.iter().sum::<f64>() / peaks.len() as f64,
            seasons: used,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: f64 = 1_700_000_000.0;
    const DAY: f64 = 86_400.0;

    /// `values` on the 15 s grid, the first at `start`.
    fn grid(start: f64, values: &[f64]) -> Vec<Sample> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| Sample::new(start + 15.0 * i as f64, *v))
            .collect()
    }

    /// Today: 4 samples ending at NOW. Season: the same 4 times plus 3 ahead (lead 45 s).
    fn season(values: &[f64]) -> SeasonSeries {
        SeasonSeries {
            period_s: DAY,
            samples: grid(NOW - 45.0, values),
        }
    }

    #[test]
    fn seasonal_table() {
        let today = grid(NOW - 45.0, &[4.0, 4.0, 4.0, 4.0]);
        let rows: Vec<(&str, Vec<SeasonSeries>, Result<f64, &str>)> = vec![
            // Yesterday 2 then a ramp to 10 ahead; today is twice yesterday: 2·10 = 20.
            (
                "scaled ramp",
                vec![season(&[2.0, 2.0, 2.0, 2.0, 4.0, 8.0, 10.0])],
                Ok(20.0),
            ),
            // Same level as yesterday: the peak ahead as it was, 6.
            (
                "same level",
                vec![season(&[4.0, 4.0, 4.0, 4.0, 6.0, 5.0, 4.0])],
                Ok(6.0),
            ),
            // Two seasons: 20 and 6 → mean 13.
            (
                "two seasons averaged",
                vec![
                    season(&[2.0, 2.0, 2.0, 2.0, 4.0, 8.0, 10.0]),
                    SeasonSeries {
                        period_s: 7.0 * DAY,
                        ..season(&[4.0, 4.0, 4.0, 4.0, 6.0, 5.0, 4.0])
                    },
                ],
                Ok(13.0),
            ),
            // Nothing ahead (history ends now): unavailable.
            (
                "no history ahead",
                vec![season(&[2.0, 2.0, 2.0, 2.0])],
                Err("no history over the next lead time"),
            ),
            // Only one of four samples of today has a counterpart: < 50 %.
            (
                "too little overlap",
                vec![SeasonSeries {
                    period_s: DAY,
                    samples: grid(NOW, &[4.0, 5.0, 6.0, 7.0]),
                }],
                Err("1 of 4 samples"),
            ),
            // Yesterday was idle, today is not: no ratio.
            (
                "idle then",
                vec![season(&[0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0])],
                Err("cannot scale"),
            ),
            // Today 4 vs yesterday 0.1: 40x is above the 20x limit.
            (
                "absurd scale",
                vec![season(&[0.1, 0.1, 0.1, 0.1, 1.0, 1.0, 1.0])],
                Err("above 20x"),
            ),
            ("no seasons", vec![], Err("no seasonal history")),
        ];
        for (name, seasons, want) in rows {
            let got = seasonal_forecast(&today, &seasons, NOW, 45.0, 15.0);
            match (got, want) {
                (Seasonal::Forecast { peak, .. }, Ok(w)) => {
                    assert!((peak - w).abs() < 1e-9, "{name}: {peak} != {w}")
                }
                (Seasonal::Unavailable { why }, Err(piece)) => {
                    assert!(why.contains(piece), "{name}: {why:?}")
                }
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn idle_then_and_now_forecasts_the_peak_ahead() {
        // 0 today and 0 then: scale 1, the peak ahead (3) is the forecast.
        let today = grid(NOW - 45.0, &[0.0; 4]);
        let got = seasonal_forecast(
            &today,
            &[season(&[0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0])],
            NOW,
            45.0,
            15.0,
        );
        assert_eq!(
            got,
            Seasonal::Forecast {
                peak: 3.0,
                seasons: vec![DAY]
            }
        );
    }
}
