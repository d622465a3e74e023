//! Stage: the seasonal forecaster. Demand at the same clock time one season back (a day, a
//! week), scaled by how today compares with that day so far, is a forecast of the next lead
//! time that sees a recurring morning ramp or a nightly batch coming before any of it shows in
//! the short window the trend model reads.
//!
//! For each season with data: `scale = Σ today / Σ season` over the part of the observation
//! window both cover, and the forecast is `scale × max(season over (now, now + lead])`. Seasons
//! are averaged. It says why when it cannot forecast (the policy then uses the trend alone and
//! logs the reason).
//!
//! "The same clock time" is the wall clock of TIME_ZONE (`wall_clock_shift`): demand follows
//! people's clocks, so across a daylight-saving switch a day back is 23 or 25 hours and a week
//! back 167 or 169 hours, not a fixed 86 400 or 604 800 seconds.

use chrono::{LocalResult, TimeZone};

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

/// How far back "the same clock time one season back" lies from `now` (Unix seconds): for a
/// season of whole days, the same wall-clock time that many days earlier in `zone`; any other
/// season is its fixed length. A local time the earlier day does not have (skipped by a
/// switch to summer time) falls back to the fixed length; one it has twice (the hour repeated
/// in autumn) is the occurrence nearer the fixed length back.
pub fn wall_clock_shift(now: f64, period_s: f64, zone: &chrono_tz::Tz) -> f64 {
    const DAY_S: f64 = 86_400.0;
    let days = period_s / DAY_S;
    // UTC has no switch: the fixed length, exactly (the simulator runs in UTC).
    if *zone == chrono_tz::UTC || days < 1.0 || days.fract() != 0.0 || !now.is_finite() {
        return period_s;
    }
    let secs = now.floor() as i64;
    let fixed_then = secs - period_s as i64;
    let Some(local_now) = zone.timestamp_opt(secs, 0).single() else {
        return period_s;
    };
    let Some(local_then) = local_now
        .naive_local()
        .checked_sub_days(chrono::Days::new(days as u64))
    else {
        return period_s;
    };
    let then = match zone.from_local_datetime(&local_then) {
        LocalResult::Single(t) => t.timestamp(),
        LocalResult::Ambiguous(a, b) => {
            let (a, b) = (a.timestamp(), b.timestamp());
            if (a - fixed_then).abs() <= (b - fixed_then).abs() {
                a
            } else {
                b
            }
        }
        LocalResult::None => return period_s,
    };
    // Whole seconds (offsets differ by whole seconds): `now`'s fraction moves with it.
    (secs - then) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: f64 = 1_700_000_000.0;
    const DAY: f64 = 86_400.0;

    /// `values` on the 15 s grid, the first at `start`.
    fn grid(start: f64, values: &[f64]) -> Vec<Sample> {
        Sample::grid(start, 15.0, values)
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

    /// 2026's switches, worked out by hand. America/New_York: summer time from Sunday
    /// 2026-03-08 02:00 EST (07:00Z; March 1 is a Sunday, so the 2nd Sunday is the 8th) and back
    /// on Sunday 2026-11-01 02:00 EDT (06:00Z; the 1st Sunday of November). Europe/Berlin: from
    /// Sunday 2026-03-29 01:00Z (the last Sunday of March) to Sunday 2026-10-25 01:00Z (the last
    /// of October). 2026-01-01T00:00Z is 1_767_225_600 (20_454 days after 1970); a day of
    /// year d (0-based) starts d x 86_400 later.
    #[test]
    fn a_season_back_is_the_same_wall_clock_time_in_the_zone() {
        let ny = chrono_tz::America::New_York;
        let berlin = chrono_tz::Europe::Berlin;
        const WEEK: f64 = 7.0 * DAY;
        // 2026-03-08T00:00Z (day 66), 2026-03-09 (67), 2026-03-29 (87), 2026-10-25 (297),
        // 2026-11-01 (304), 2026-11-02 (305).
        const MAR_08: f64 = 1_772_928_000.0;
        const MAR_09: f64 = 1_773_014_400.0;
        const MAR_29: f64 = 1_774_742_400.0;
        const OCT_25: f64 = 1_792_886_400.0;
        const NOV_01: f64 = 1_793_491_200.0;
        const NOV_02: f64 = 1_793_577_600.0;
        const H: f64 = 3_600.0;
        // (name, zone, now, season, expected shift)
        let rows = [
            // Sun 03-08 12:00 EDT (16:00Z); a day back is Sat 12:00 EST (17:00Z): 23 h.
            ("NY spring, day", ny, MAR_08 + 16.0 * H, DAY, 23.0 * H),
            // A week back is Sun 03-01 12:00 EST (17:00Z): 7 x 24 - 1 = 167 h.
            ("NY spring, week", ny, MAR_08 + 16.0 * H, WEEK, 167.0 * H),
            // Mon 03-09 12:00 EDT: a day back is Sun 12:00 EDT (after 02:00): 24 h; a week
            // back Mon 03-02 12:00 EST: 167 h.
            ("NY day after, day", ny, MAR_09 + 16.0 * H, DAY, 24.0 * H),
            ("NY day after, week", ny, MAR_09 + 16.0 * H, WEEK, 167.0 * H),
            // Sun 03-08 01:30 EST (06:30Z), before the switch: Sat 01:30 EST, 24 h.
            ("NY before the switch", ny, MAR_08 + 6.5 * H, DAY, 24.0 * H),
            // Mon 03-09 02:30 EDT (06:30Z): Sun 02:30 was skipped: the fixed 24 h.
            ("NY skipped hour", ny, MAR_09 + 6.5 * H, DAY, 24.0 * H),
            // Sun 11-01 12:00 EST (17:00Z); Sat 10-31 12:00 EDT (16:00Z): 25 h; a week back
            // Sun 10-25 12:00 EDT (16:00Z): 169 h.
            ("NY autumn, day", ny, NOV_01 + 17.0 * H, DAY, 25.0 * H),
            ("NY autumn, week", ny, NOV_01 + 17.0 * H, WEEK, 169.0 * H),
            // Mon 11-02 01:30 EST (06:30Z): Sun 01:30 happened twice, at 05:30Z (EDT) and
            // 06:30Z (EST); the one 24 h back is the nearer: 24 h.
            ("NY repeated hour", ny, NOV_02 + 6.5 * H, DAY, 24.0 * H),
            // Sun 03-29 12:00 CEST (10:00Z); Sat 12:00 CET (11:00Z): 23 h.
            (
                "Berlin spring, day",
                berlin,
                MAR_29 + 10.0 * H,
                DAY,
                23.0 * H,
            ),
            (
                "Berlin spring, week",
                berlin,
                MAR_29 + 10.0 * H,
                WEEK,
                167.0 * H,
            ),
            // Sun 10-25 12:00 CET (11:00Z); Sat 12:00 CEST (10:00Z): 25 h; Sun 10-18 12:00
            // CEST (10:00Z): 169 h.
            (
                "Berlin autumn, day",
                berlin,
                OCT_25 + 11.0 * H,
                DAY,
                25.0 * H,
            ),
            (
                "Berlin autumn, week",
                berlin,
                OCT_25 + 11.0 * H,
                WEEK,
                169.0 * H,
            ),
            // A fraction of a second does not change the whole hours: still 23 h.
            (
                "fraction of a second",
                ny,
                MAR_08 + 16.0 * H + 0.5,
                DAY,
                23.0 * H,
            ),
            // UTC, and seasons that are not whole days, are fixed lengths.
            ("UTC", chrono_tz::UTC, MAR_08 + 16.0 * H, DAY, DAY),
            ("ten minutes", ny, MAR_08 + 7.0 * H + 300.0, 600.0, 600.0),
            ("half a day", ny, MAR_08 + 16.0 * H, 43_200.0, 43_200.0),
        ];
        for (name, zone, now, season, shift) in rows {
            assert_eq!(wall_clock_shift(now, season, &zone), shift, "{name}");
        }
    }
}
