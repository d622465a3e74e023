//! Stage: the profile forecaster, the peak rate of the same local hour of day on the days before
//! (what a scheduled floor learns from its training days), one of the forecasters the
//! calibration chooses between per target (`band::calibrate`).
//!
//! Hours of the day, not of the week: the calibration's history is at most
//! BAND_HISTORY_SECONDS (7 days) plus a season, so an hour of the week it holds back to score
//! a forecaster on was never seen before it; an hour-of-week profile could not be judged out
//! of sample, and would only ever fall back.
//!
//! Replayed, a window's profile is that of the local days before the window's (`replay`), so
//! its errors are out of sample as the trend's are; the tick sizes with the profile of the
//! whole history at its last calibration (`fit`).

use chrono::TimeZone;

use super::band_slots::local_hour;
use super::observation::Sample;

/// Slots of the profile: the local hours of a day.
pub const HOURS: usize = 24;

/// Raises `peaks[slot]` to `v` (a slot past the table is ignored).
fn raise<T: PartialOrd + Copy>(peaks: &mut [Option<T>], slot: usize, v: T) {
    if let Some(p) = peaks.get_mut(slot) {
        if p.is_none_or(|p| v > p) {
            *p = Some(v);
        }
    }
}

/// The highest value seen in each of `n` slots (None: a slot never seen): the profile's table,
/// and the simulator's scheduled floor's.
pub fn slot_peaks<T: PartialOrd + Copy>(
    seen: impl IntoIterator<Item = (usize, T)>,
    n: usize,
) -> Vec<Option<T>> {
    let mut peaks = vec![None; n];
    for (slot, v) in seen {
        raise(&mut peaks, slot, v);
    }
    peaks
}

/// The profile of `samples`: the peak rate of each local hour of day in `zone`.
pub fn fit(samples: &[Sample], zone: &chrono_tz::Tz) -> Vec<Option<f64>> {
    slot_peaks(samples.iter().map(|s| (local_hour(s.t, zone), s.v)), HOURS)
}

/// The profile's forecast of the peak over a lead time from `t`: the higher of the peaks of the
/// hours `t` and `t + lead_s` fall in (a lead is shorter than an hour); None when neither was
/// seen.
pub fn peak_over(
    profile: &[Option<f64>],
    t: f64,
    lead_s: f64,
    zone: &chrono_tz::Tz,
) -> Option<f64> {
    [t, t + lead_s]
        .iter()
        .filter_map(|&at| profile.get(local_hour(at, zone)).copied().flatten())
        .reduce(f64::max)
}

/// The profile's forecast at each of `times` (ascending) from `samples` (ascending) of the local
/// days before that time's: out of sample, as the calibration scores it.
pub fn replay(
    samples: &[Sample],
    times: &[f64],
    lead_s: f64,
    zone: &chrono_tz::Tz,
) -> Vec<Option<f64>> {
    let day = |t: f64| {
        zone.timestamp_opt(t.floor() as i64, 0)
            .single()
            .map(|d| d.date_naive())
    };
    let mut profile = vec![None; HOURS];
    let mut next = 0;
    times
        .iter()
        .map(|&t| {
            let today = day(t);
            while let Some(s) = samples.get(next).filter(|s| day(s.t) < today) {
                raise(&mut profile, local_hour(s.t, zone), s.v);
                next += 1;
            }
            peak_over(&profile, t, lead_s, zone)
        })
        .collect()
}

#[cfg(test)]
#[path = "profile_tests.rs"]
mod tests;
