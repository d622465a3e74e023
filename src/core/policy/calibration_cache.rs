//! When a tick reads the band's calibration history: what one warm execution environment
//! remembers of a target's calibration between ticks, and the back-off after a read that gave
//! nothing to calibrate on. Changes when the rule for re-reading that multi-day history changes.
//!
//! The acting tick caches the calibration on the headroom object (`prewarm.io/calibration`), but
//! a dry run writes nothing, so without a memory of its own it would find the object's cache due
//! at every tick and re-read days of history each time. The environment keeps the newest
//! calibration it computed, per target, and the tick decides with the fresher of the two; the
//! refresh age is the same CALIBRATE_EVERY_SECONDS either way. A read that fails (or returns no
//! samples) leaves the calibration due, so it would be repeated every tick: instead the next
//! attempt waits one tick, then two, four, ... at most CALIBRATE_EVERY_SECONDS, and a read
//! that succeeds resets the wait.

use super::band::{self, Calibration};
use super::observe::{calibration_window, Window};
use crate::spec::PolicySpec;

/// One target's calibration memory in a warm execution environment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CalibrationCache {
    /// The newest calibration computed here (under DRY_RUN it is kept nowhere else).
    pub calibration: Option<Calibration>,
    /// Reads in a row that gave nothing to calibrate on, since the last one that did.
    pub failures: u32,
    /// After a failure, no new read before this time (Unix seconds).
    pub retry_at: Option<f64>,
}

/// How the tick's history read went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadOutcome {
    /// Not read: the calibration was fresh, or a failure is being backed off.
    #[default]
    NotRead,
    /// Read, with samples to calibrate on.
    Read,
    /// The read failed, or returned no samples.
    Failed,
}

impl CalibrationCache {
    /// The calibration to decide with: the newer of the headroom object's and this cache's.
    pub fn freshest(&self, on_object: Option<&Calibration>) -> Option<Calibration> {
        newer(on_object, self.calibration.as_ref())
    }

    /// The history window to read at `now`, or None: the freshest calibration is younger than
    /// CALIBRATE_EVERY_SECONDS (`band::due`), or an earlier failure's back-off has not ended.
    pub fn read_now(
        &self,
        policy: &PolicySpec,
        on_object: Option<&Calibration>,
        now: f64,
    ) -> Option<Window> {
        let freshest = self.freshest(on_object);
        if !band::due(freshest.as_ref(), policy, now) {
            return None;
        }
        // A retry time beyond the longest back-off is from a clock that jumped: ignored.
        let waiting = self
            .retry_at
            .is_some_and(|at| now < at && at - now <= policy.calibrate_every_s);
        if waiting {
            return None;
        }
        calibration_window(policy, freshest.as_ref(), now)
    }

    /// The cache after a tick at `now`: `outcome` of its history read and the calibration the
    /// decision carries on (`Plan::next_state.calibration`).
    pub fn after_tick(
        &self,
        policy: &PolicySpec,
        outcome: ReadOutcome,
        decided: Option<&Calibration>,
        now: f64,
    ) -> CalibrationCache {
        let calibration = newer(decided, self.calibration.as_ref());
        let (failures, retry_at) = match outcome {
            ReadOutcome::NotRead => (self.failures, self.retry_at),
            ReadOutcome::Read => (0, None),
            ReadOutcome::Failed => {
                let failures = self.failures.saturating_add(1);
                (failures, Some(now + back_off_s(policy, failures)))
            }
        };
        CalibrationCache {
            calibration,
            failures,
            retry_at,
        }
    }
}

/// The later computed of two calibrations (`first` on a tie).
fn newer(first: Option<&Calibration>, second: Option<&Calibration>) -> Option<Calibration> {
    match (first, second) {
        (Some(f), Some(s)) if s.computed_at > f.computed_at => Some(s.clone()),
        (Some(f), _) => Some(f.clone()),
        (None, s) => s.cloned(),
    }
}

/// The wait after the `failures`-th failed read in a row: one tick, doubled with each further
/// failure, at most CALIBRATE_EVERY_SECONDS (the age at which a good calibration is re-read).
pub fn back_off_s(policy: &PolicySpec, failures: u32) -> f64 {
    let doublings = failures.saturating_sub(1).min(30);
    (policy.tick_s * f64::from(1u32 << doublings)).min(policy.calibrate_every_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: f64 = 1_795_953_600.0; // 2026-11-29T12:00:00Z

    /// Defaults: TICK_SECONDS 15, CALIBRATE_EVERY_SECONDS 3600.
    fn policy() -> PolicySpec {
        PolicySpec::default()
    }

    fn calibration(computed_at: f64) -> Calibration {
        Calibration {
            computed_at,
            quantile: 0.9,
            band: Some(1.0),
            seasonal_weight: 0.5,
            windows: 30,
            ..Calibration::default()
        }
    }

    fn cache(at: Option<f64>, failures: u32, retry_at: Option<f64>) -> CalibrationCache {
        CalibrationCache {
            calibration: at.map(calibration),
            failures,
            retry_at,
        }
    }

    #[test]
    fn the_history_is_read_only_when_the_freshest_calibration_is_due_and_no_back_off_runs() {
        // (name, on the object: computed at, the cache, whether the tick reads)
        let cases: &[(&str, Option<f64>, CalibrationCache, bool)] = &[
            ("nothing anywhere: read", None, cache(None, 0, None), true),
            // Acting: the object's calibration is 10 min old, under the hour.
            (
                "object fresh",
                Some(NOW - 600.0),
                cache(None, 0, None),
                false,
            ),
            // Dry run: the object's is a day old, the cache's 10 min: not read.
            (
                "dry run: cache fresh, object stale",
                Some(NOW - 86_400.0),
                cache(Some(NOW - 600.0), 0, None),
                false,
            ),
            (
                "dry run: cache fresh, no object",
                None,
                cache(Some(NOW - 600.0), 0, None),
                false,
            ),
            // 3600 s old is due (age >= CALIBRATE_EVERY_SECONDS).
            (
                "both an hour old",
                Some(NOW - 3600.0),
                cache(Some(NOW - 3600.0), 0, None),
                true,
            ),
            // Two failures: retry at NOW + 10 s, not yet.
            ("backing off", None, cache(None, 2, Some(NOW + 10.0)), false),
            // The back-off ended at NOW exactly: read.
            ("back-off over", None, cache(None, 2, Some(NOW)), true),
            // A retry time 2 h ahead is beyond the longest back-off (1 h): a clock jump, read.
            (
                "retry beyond the cap",
                None,
                cache(None, 9, Some(NOW + 7200.0)),
                true,
            ),
        ];
        for (name, on_object, cache, reads) in cases {
            let object = on_object.map(calibration);
            let window = cache.read_now(&policy(), object.as_ref(), NOW);
            assert_eq!(window.is_some(), *reads, "{name}");
        }
    }

    #[test]
    fn a_failed_read_backs_off_doubling_from_one_tick_up_to_the_refresh_age() {
        // 15 s ticks: 15, 30, 60, ..., 15 x 2^8 = 3840 > 3600, so the 9th failure waits 3600.
        let cases = [
            (1, 15.0),
            (2, 30.0),
            (3, 60.0),
            (4, 120.0),
            (8, 1920.0),
            (9, 3600.0),
            (40, 3600.0),
        ];
        for (failures, wait) in cases {
            assert_eq!(back_off_s(&policy(), failures), wait, "{failures} failures");
        }
    }

    #[test]
    fn the_cache_keeps_the_newest_calibration_and_counts_failures_until_a_read_works() {
        let p = policy();
        // (name, before, outcome, decided computed at, expected after)
        let cases: &[(
            &str,
            CalibrationCache,
            ReadOutcome,
            Option<f64>,
            CalibrationCache,
        )] = &[
            // A dry run's fresh calibration is remembered and the failures reset.
            (
                "read",
                cache(None, 3, Some(NOW)),
                ReadOutcome::Read,
                Some(NOW),
                cache(Some(NOW), 0, None),
            ),
            // First failure: one tick, 15 s.
            (
                "first failure",
                cache(None, 0, None),
                ReadOutcome::Failed,
                None,
                cache(None, 1, Some(NOW + 15.0)),
            ),
            // Third in a row: 60 s; the old calibration stays.
            (
                "third failure",
                cache(Some(NOW - 7200.0), 2, Some(NOW)),
                ReadOutcome::Failed,
                Some(NOW - 7200.0),
                cache(Some(NOW - 7200.0), 3, Some(NOW + 60.0)),
            ),
            // Not read while backing off: unchanged.
            (
                "waiting",
                cache(None, 2, Some(NOW + 10.0)),
                ReadOutcome::NotRead,
                None,
                cache(None, 2, Some(NOW + 10.0)),
            ),
            // The object carried an older one than the cache: the cache's stays.
            (
                "older decided",
                cache(Some(NOW - 60.0), 0, None),
                ReadOutcome::NotRead,
                Some(NOW - 3000.0),
                cache(Some(NOW - 60.0), 0, None),
            ),
        ];
        for (name, before, outcome, decided, after) in cases {
            let decided = decided.map(calibration);
            assert_eq!(
                before.after_tick(&p, *outcome, decided.as_ref(), NOW),
                *after,
                "{name}"
            );
        }
    }
}
