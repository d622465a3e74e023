//! Stage: the lead-time band conditioned on the clock, and the choice of conditioning per target.
//!
//! One band for the whole day makes a workload whose errors are large for ten minutes a day
//! (a cron burst, a morning ramp) pay that band all day. A band per hour of day (or of week) in
//! TIME_ZONE pays it only when it is due. An upper quantile of one hour's errors alone rests on
//! one hour of one-minute windows a day (about 60 of them), too few for the high quantiles the
//! band is fitted at (at 0.999 it is simply the hour's largest error, and the next day's
//! largest exceeds it about half the time), so the band is *normalized conformal*: each hour
//! has a scale, its mean absolute error plus the whole history's, and the quantile is taken
//! once over every window's error divided by its hour's scale; an hour's band is its scale times
//! that pooled quantile. The high quantile is estimated from the whole history, only the scale
//! from the hour. Adding the whole history's mean error to each hour's keeps an hour that was
//! quiet in the history from getting a zero band.
//!
//! Which conditioning a target uses is chosen at each calibration on its own history
//! (`choose`): each candidate is fitted on the older two thirds and scored on the newest third;
//! the narrowest on average wins among those whose coverage there is at least the whole-day
//! band's (or the nominal quantile, if lower). The calibration scores each forecaster with each
//! conditioning the same way, by its mean upper band (`band::calibrate`). A conditioning the held-back part cannot judge
//! (its hours were never in the fitted part) falls back to the whole-day band there, scores
//! exactly as it does, and loses the tie.

use chrono::{Datelike, TimeZone, Timelike};

use super::forecast::upper_quantile;
use crate::spec::BandSlots;

/// Fewer lead-time windows than this in an hour's bucket: that hour takes the whole-day band.
/// 30 is the minimum the whole-day band itself asks (`band::MIN_WINDOWS`): half an hour of
/// one-minute windows, below which an hour's mean error (its scale) rests on a few bursts.
pub const MIN_SLOT_WINDOWS: usize = 30;

/// The local hour of day of `t` in `zone` (0..24).
pub fn local_hour(t: f64, zone: &chrono_tz::Tz) -> usize {
    day_slot(t, 24, zone)
}

/// The slot of `t` among `n` equal slots of the local day in `zone` (by wall-clock time: a
/// daylight-saving day repeats or skips slots); 24 slots are the hours.
pub fn day_slot(t: f64, n: usize, zone: &chrono_tz::Tz) -> usize {
    zone.timestamp_opt(t.floor() as i64, 0)
        .single()
        .map_or(0, |d| d.num_seconds_from_midnight() as usize * n / 86_400)
}

/// The slot of `t`: 0 for the whole day, the local hour of day, or the local hour of the week
/// from Monday 00:00.
pub fn slot(t: f64, slots: BandSlots, zone: &chrono_tz::Tz) -> usize {
    match slots {
        BandSlots::Whole => 0,
        BandSlots::HourOfDay => local_hour(t, zone),
        BandSlots::HourOfWeek => zone
            .timestamp_opt(t.floor() as i64, 0)
            .single()
            .map_or(0, |d| {
                d.weekday().num_days_from_monday() as usize * 24 + d.hour() as usize
            }),
    }
}

/// The band of each slot (`slots.count()` values) for errors `(t, actual − forecast)` at
/// quantile `q` (see the module docs).
pub fn bands(errors: &[(f64, f64)], q: f64, slots: BandSlots, zone: &chrono_tz::Tz) -> Vec<f64> {
    let mut all: Vec<f64> = errors.iter().map(|e| e.1).collect();
    let whole = upper_quantile(&mut all, q).max(0.0);
    let n = slots.count();
    let mean_all = errors.iter().map(|e| e.1.abs()).sum::<f64>() / errors.len().max(1) as f64;
    if n == 1 || mean_all <= 0.0 {
        return vec![whole; n];
    }
    let mut count = vec![0usize; n];
    let mut sum = vec![0.0; n];
    let at: Vec<usize> = errors.iter().map(|e| slot(e.0, slots, zone)).collect();
    for (e, &s) in errors.iter().zip(&at) {
        count[s] += 1;
        sum[s] += e.1.abs();
    }
    let scale: Vec<f64> = (0..n)
        .map(|s| sum[s] / count[s].max(1) as f64 + mean_all)
        .collect();
    let own = |s: usize| count[s] >= MIN_SLOT_WINDOWS;
    let mut scores: Vec<f64> = errors
        .iter()
        .zip(&at)
        .filter(|(_, &s)| own(s))
        .map(|(e, &s)| e.1 / scale[s])
        .collect();
    if scores.is_empty() {
        return vec![whole; n];
    }
    let pooled = upper_quantile(&mut scores, q);
    (0..n)
        .map(|s| {
            if own(s) {
                (scale[s] * pooled).max(0.0)
            } else {
                whole
            }
        })
        .collect()
}

/// One conditioning fitted on the older part of the history, scored on the newest.
#[derive(Clone, Debug, PartialEq)]
pub struct Scored {
    pub slots: BandSlots,
    /// Share of the held-back windows whose error the band covered.
    pub coverage: f64,
    /// The mean band over the held-back windows (req/s): what the conditioning costs (the
    /// calibration adds its forecaster's mean point: the mean upper band).
    pub width: f64,
    /// The bands fitted on the older part (one per slot).
    pub bands: Vec<f64>,
}

/// `slots` fitted on `fit` and scored on `test` (both `(t, error)`; None without test windows).
pub fn score(
    fit: &[(f64, f64)],
    test: &[(f64, f64)],
    q: f64,
    slots: BandSlots,
    zone: &chrono_tz::Tz,
) -> Option<Scored> {
    if test.is_empty() {
        return None;
    }
    let bands = bands(fit, q, slots, zone);
    let band = |t: f64| bands[slot(t, slots, zone)];
    let covered = test.iter().filter(|(t, e)| *e <= band(*t)).count();
    let width = test.iter().map(|(t, _)| band(*t)).sum::<f64>();
    let n = test.len() as f64;
    Some(Scored {
        slots,
        coverage: covered as f64 / n,
        width: width / n,
        bands,
    })
}

/// The index of the candidate to use: the narrowest (the first on a tie) of those whose
/// held-back coverage is at least the first candidate's (today's forecaster with the whole-day
/// band, when BAND_BY_HOUR offers it), or the nominal `q` when that covers more than asked (no
/// candidate is held to more than asked).
pub fn choose(scored: &[Scored], q: f64) -> usize {
    let need = scored.first().map_or(0.0, |w| w.coverage.min(q));
    let mut best: Option<usize> = None;
    for (i, s) in scored.iter().enumerate() {
        if s.coverage + 1e-12 < need {
            continue;
        }
        if best.is_none_or(|b| s.width < scored[b].width - 1e-9) {
            best = Some(i);
        }
    }
    best.unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2023-11-13T00:00:00Z, a Monday.
    const MONDAY: f64 = 1_699_833_600.0;
    const UTC: chrono_tz::Tz = chrono_tz::UTC;

    /// `n` windows one minute apart from `hour` (UTC) of the first day, each with `error`.
    fn windows(hour: f64, n: usize, error: f64) -> Vec<(f64, f64)> {
        (0..n)
            .map(|i| (MONDAY + hour * 3600.0 + 60.0 * i as f64, error))
            .collect()
    }

    #[test]
    fn slots_are_local_hours_of_the_day_and_of_the_week() {
        let berlin: chrono_tz::Tz = "Europe/Berlin".parse().unwrap();
        // (name, t, slots, zone, slot)
        let rows = [
            ("whole", MONDAY + 5.0 * 3600.0, BandSlots::Whole, UTC, 0),
            (
                "Monday 05:00Z",
                MONDAY + 5.0 * 3600.0,
                BandSlots::HourOfDay,
                UTC,
                5,
            ),
            // 23:30Z Monday is 00:30 Tuesday in Berlin (CET, UTC+1 in November).
            (
                "Berlin's next day",
                MONDAY + 23.5 * 3600.0,
                BandSlots::HourOfDay,
                berlin,
                0,
            ),
            (
                "Monday 05:00Z of the week",
                MONDAY + 5.0 * 3600.0,
                BandSlots::HourOfWeek,
                UTC,
                5,
            ),
            // Wednesday 09:00Z: 2 days x 24 + 9.
            (
                "Wednesday 09:00Z",
                MONDAY + 57.0 * 3600.0,
                BandSlots::HourOfWeek,
                UTC,
                57,
            ),
            (
                "Berlin's Tuesday 00:30",
                MONDAY + 23.5 * 3600.0,
                BandSlots::HourOfWeek,
                berlin,
                24,
            ),
            // Sunday 23:00Z: 6 x 24 + 23, the last slot.
            (
                "Sunday 23:00Z",
                MONDAY + 167.0 * 3600.0,
                BandSlots::HourOfWeek,
                UTC,
                167,
            ),
        ];
        for (name, t, slots, zone, want) in rows {
            assert_eq!(slot(t, slots, &zone), want, "{name}");
        }
    }

    /// Hour 0: 40 windows of error 2 (mean 2); hour 1: 30 of error 0 and 10 of error 12 (mean
    /// 120 / 40 = 3); hour 2: 10 windows of error 25, under the 30 an hour needs. All 90: mean
    /// |error| (80 + 120 + 250) / 90 = 5. Scales: hour 0 2 + 5 = 7, hour 1 3 + 5 = 8.
    /// Scores (hours 0 and 1 only): 30 × 0, 40 × 2/7, 10 × 12/8 = 1.5; the 0.9 quantile
    /// (nearest rank ⌈0.9 · 80⌉ = 72, ascending) is 1.5. Bands: hour 0 7 × 1.5 = 10.5, hour 1
    /// 8 × 1.5 = 12. The whole-day band: of the 90 errors ascending (30 × 0, 40 × 2, 10 × 12,
    /// 10 × 25) rank ⌈0.9 · 90⌉ = 81 is 25: hour 2 and every hour without windows take it.
    #[test]
    fn an_hours_band_is_its_scale_times_the_pooled_quantile() {
        let mut errors = windows(0.0, 40, 2.0);
        errors.extend(windows(1.0, 30, 0.0));
        errors.extend(windows(1.5, 10, 12.0));
        errors.extend(windows(2.0, 10, 25.0));
        let by_day = bands(&errors, 0.9, BandSlots::HourOfDay, &UTC);
        assert_eq!(by_day.len(), 24);
        assert_eq!(by_day[0], 10.5);
        assert_eq!(by_day[1], 12.0);
        assert_eq!(by_day[2], 25.0);
        assert_eq!(by_day[3..], [25.0; 21]);
        // The week's slots are the same hours on Monday; the other 165 take the whole-day band.
        let by_week = bands(&errors, 0.9, BandSlots::HourOfWeek, &UTC);
        assert_eq!((by_week.len(), by_week[0], by_week[1]), (168, 10.5, 12.0));
        assert_eq!(by_week[24 + 1], 25.0);
        assert_eq!(bands(&errors, 0.9, BandSlots::Whole, &UTC), vec![25.0]);
        // Every error 0: every band 0, no division by a zero scale.
        assert_eq!(
            bands(&windows(0.0, 40, 0.0), 0.9, BandSlots::HourOfDay, &UTC),
            vec![0.0; 24]
        );
    }

    /// The held-back part by hand, at q 0.9. Fitted: hour 0 40 windows of error 1, hour 1 40
    /// of error 9 (mean 5; scales 6 and 14; scores 40 × 1/6 and 40 × 9/14, rank 72 of 80 is
    /// 9/14; bands 6 × 9/14 = 27/7 ≈ 3.86 and 14 × 9/14 = 9). Whole day: rank 72 of 80 is 9.
    /// Held back: 10 windows at hour 0 with error 1 and 10 at hour 1 with error 9: both
    /// conditionings cover all 20; the whole day's mean band 9, the hour's (27/7 + 9) / 2.
    #[test]
    fn scoring_fits_on_the_old_part_and_measures_the_new() {
        let mut fit = windows(0.0, 40, 1.0);
        fit.extend(windows(1.0, 40, 9.0));
        let mut test: Vec<(f64, f64)> = windows(24.0, 10, 1.0);
        test.extend(windows(25.0, 10, 9.0));
        let whole = score(&fit, &test, 0.9, BandSlots::Whole, &UTC).unwrap();
        assert_eq!((whole.coverage, whole.width), (1.0, 9.0));
        let hour = score(&fit, &test, 0.9, BandSlots::HourOfDay, &UTC).unwrap();
        assert_eq!(hour.coverage, 1.0);
        assert!(
            (hour.width - (27.0 / 7.0 + 9.0) / 2.0).abs() < 1e-12,
            "{hour:?}"
        );
        // The week's hours of Tuesday were never fitted: the whole-day band there, the same
        // score as the whole day's.
        let week = score(&fit, &test, 0.9, BandSlots::HourOfWeek, &UTC).unwrap();
        assert_eq!((week.coverage, week.width), (1.0, 9.0));
        assert_eq!(choose(&[whole, hour, week], 0.9), 1);
        assert_eq!(score(&fit, &[], 0.9, BandSlots::Whole, &UTC), None);
    }

    #[test]
    fn the_narrowest_conditioning_that_keeps_the_coverage_wins() {
        let s = |slots, coverage, width| Scored {
            slots,
            coverage,
            width,
            bands: Vec::new(),
        };
        let (w, d, k) = (
            BandSlots::Whole,
            BandSlots::HourOfDay,
            BandSlots::HourOfWeek,
        );
        // (name, candidates, q, chosen index)
        let rows = [
            // The hour's band is narrower and covers as much: chosen.
            (
                "narrower, same coverage",
                vec![s(w, 0.95, 10.0), s(d, 0.95, 6.0)],
                0.9,
                1,
            ),
            // Narrower but covers less than the whole day's 0.95 and less than q: refused.
            (
                "narrower, loses coverage",
                vec![s(w, 0.95, 10.0), s(d, 0.85, 6.0)],
                0.9,
                0,
            ),
            // The whole day over-covers (0.99 > q 0.9): 0.92 ≥ q is enough.
            (
                "over-covering whole day",
                vec![s(w, 0.99, 10.0), s(d, 0.92, 6.0)],
                0.9,
                1,
            ),
            // A tie (a conditioning the held-back part could not judge): the whole day.
            (
                "tie",
                vec![s(w, 0.95, 10.0), s(d, 0.95, 10.0), s(k, 0.95, 10.0)],
                0.9,
                0,
            ),
            // The narrowest of the three that qualify.
            (
                "week narrowest",
                vec![s(w, 0.95, 10.0), s(d, 0.95, 8.0), s(k, 0.96, 7.0)],
                0.9,
                2,
            ),
            // The whole day below q itself: the others need only its coverage.
            (
                "whole below q",
                vec![s(w, 0.80, 10.0), s(d, 0.80, 9.0)],
                0.9,
                1,
            ),
            // One candidate (BAND_BY_HOUR=day): it, whatever its coverage.
            ("only one", vec![s(d, 0.5, 9.0)], 0.9, 0),
        ];
        for (name, scored, q, want) in rows {
            assert_eq!(choose(&scored, q), want, "{name}");
        }
    }
}
