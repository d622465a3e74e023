//! Stage: the profile forecaster, the peak rate of the same slot of the local day on the days
//! before (what a scheduled floor learns from its training days), one of the forecasters the
//! calibration chooses between per target (`band::calibrate`).
//!
//! A slot is a lead time wide on the calibration's BAND_STEP_SECONDS grid (`slots`): a
//! lead-time window touches at most two, and a burst is held only a lead or two around its
//! time, not for a whole hour. The table's length says its width, so a table of 24 is hours.
//!
//! Slots of the day, not of the week: the calibration's history is at most
//! BAND_HISTORY_SECONDS (7 days) plus a season, so a slot of the week it holds back to score
//! a forecaster on was never seen before it; a profile of the week could not be judged out
//! of sample, and would only ever fall back.
//!
//! Replayed, a window's profile is that of the local days before the window's (`replay`), so
//! its errors are out of sample as the trend's are; the tick sizes with the profile of the
//! whole history at its last calibration (`fit`).

use chrono::TimeZone;

use super::band_slots::day_slot;
use super::observation::Sample;
use crate::spec::PolicySpec;

const DAY_S: f64 = 86_400.0;

/// The narrowest slot: the table is kept in the calibration annotation, and a minute's slots
/// (1,440, about 29 KB of JSON) stay well inside the 256 KiB an object's annotations may hold
/// (a 15 s lead on a 15 s grid would be 5,760 slots, about 115 KB).
const MIN_SLOT_S: f64 = 60.0;

/// Slots of the profile in a day: as many whole lead times, the lead rounded up to the
/// BAND_STEP_SECONDS grid the windows are replayed on and to at least a minute, as a day holds
/// (each slot at least a lead wide; at least one).
pub fn slots(policy: &PolicySpec) -> usize {
    let h = policy.band_step_s;
    let width = ((policy.lead_time_s / h).ceil().max(1.0) * h).max(MIN_SLOT_S);
    (DAY_S / width).floor().max(1.0) as usize
}

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

/// The profile of `samples`: the peak rate of each of `n` slots of the local day in `zone`.
pub fn fit(samples: &[Sample], n: usize, zone: &chrono_tz::Tz) -> Vec<Option<f64>> {
    slot_peaks(samples.iter().map(|s| (day_slot(s.t, n, zone), s.v)), n)
}

/// The profile's forecast of the peak over a lead time from `t`: the higher of the peaks of the
/// slots `t` and `t + lead_s` fall in (a slot is at least a lead wide); None when neither was
/// seen.
pub fn peak_over(
    profile: &[Option<f64>],
    t: f64,
    lead_s: f64,
    zone: &chrono_tz::Tz,
) -> Option<f64> {
    [t, t + lead_s]
        .iter()
        .filter_map(|&at| {
            profile
                .get(day_slot(at, profile.len(), zone))
                .copied()
                .flatten()
        })
        .reduce(f64::max)
}

/// The profile (`n` slots) forecast at each of `times` (ascending) from `samples` (ascending)
/// of the local days before that time's: out of sample, as the calibration scores it.
pub fn replay(
    samples: &[Sample],
    times: &[f64],
    lead_s: f64,
    n: usize,
    zone: &chrono_tz::Tz,
) -> Vec<Option<f64>> {
    let day = |t: f64| {
        zone.timestamp_opt(t.floor() as i64, 0)
            .single()
            .map(|d| d.date_naive())
    };
    let mut profile = vec![None; n];
    let mut next = 0;
    times
        .iter()
        .map(|&t| {
            let today = day(t);
            while let Some(s) = samples.get(next).filter(|s| day(s.t) < today) {
                raise(&mut profile, day_slot(s.t, n, zone), s.v);
                next += 1;
            }
            peak_over(&profile, t, lead_s, zone)
        })
        .collect()
}

#[cfg(test)]
#[path = "profile_tests.rs"]
mod tests;
