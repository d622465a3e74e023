//! The profile forecaster's table, its out-of-sample replay, and the calibration's choice
//! between it and the blend (`band::calibrate`), by hand.

use super::*;
use crate::policy::band::calibrate;
use crate::spec::{BandByHour, Forecaster, ForecasterChoice, PolicySpec};

const T0: f64 = 1_700_006_400.0; // 2023-11-15T00:00:00Z
const UTC: chrono_tz::Tz = chrono_tz::UTC;

#[test]
fn the_table_is_the_peak_of_each_slot() {
    // (slot, value): slot 0 sees 3 then 5, slot 2 sees 1; slot 1 nothing, slot 9 is past 3.
    let seen = [(0, 3.0), (2, 1.0), (0, 5.0), (9, 7.0)];
    assert_eq!(slot_peaks(seen, 3), vec![Some(5.0), None, Some(1.0)]);
}

#[test]
fn a_slot_is_a_lead_wide_on_the_band_grid() {
    // (lead, band step, slots in a day) by hand: the lead rounded up to whole steps and to a
    // minute, then ⌊86 400 / width⌋.
    let rows = [
        (180.0, 60.0, 480),   // 3 min: 86 400 / 180
        (150.0, 60.0, 480),   // ⌈2.5⌉ = 3 steps: 180 s
        (120.0, 60.0, 720),   // 2 min
        (30.0, 60.0, 1440),   // shorter than a step: one step, 60 s (no finer than the grid)
        (15.0, 15.0, 1440),   // a 15 s step: no finer than a minute (the annotation's size)
        (45.0, 15.0, 1440),   // 45 s: a minute
        (75.0, 15.0, 1152),   // 5 steps, 75 s: the lead, above a minute
        (1000.0, 60.0, 84),   // ⌈16.7⌉ = 17 steps, 1020 s: ⌊84.7⌋
        (3600.0, 60.0, 24),   // an hour: hours
        (3600.0, 3600.0, 24), // an hour's grid
    ];
    for (lead, step, want) in rows {
        let p = PolicySpec {
            lead_time_s: lead,
            band_step_s: step,
            ..PolicySpec::default()
        };
        assert_eq!(slots(&p), want, "lead {lead}, step {step}");
    }
}

#[test]
fn a_window_takes_the_higher_of_the_slots_its_lead_touches() {
    // A table of 24 is hours: 15 at 09:00, 10:00 never seen, 5 elsewhere.
    let mut hours = vec![Some(5.0); 24];
    hours[9] = Some(15.0);
    hours[10] = None;
    // A table of 480 is 3-minute slots (minute of day / 3): 15 in slot 180 (09:00-09:03),
    // slot 181 (09:03-09:06) never seen, 7 in slot 0 (00:00-00:03), 5 elsewhere.
    let mut fine = vec![Some(5.0); 480];
    fine[180] = Some(15.0);
    fine[181] = None;
    fine[0] = Some(7.0);
    // (name, table, at hour, minute, forecast) by hand, lead 3 min: T0 is 00:00Z.
    let rows = [
        ("hours: inside 03:00", &hours, 3.0, 10.0, Some(5.0)),
        // 08:58 + 3 min ends in the 09:00 hour: max(5, 15).
        ("hours: reaches 09:00", &hours, 8.0, 58.0, Some(15.0)),
        ("hours: inside 09:00", &hours, 9.0, 30.0, Some(15.0)),
        // 09:59 + 3 min: hours 9 and 10, 10 never seen: 15.
        ("hours: into an unseen hour", &hours, 9.0, 59.0, Some(15.0)),
        ("hours: inside an unseen hour", &hours, 10.0, 30.0, None),
        // 08:58 is slot ⌊538 / 3⌋ = 179 (5), 09:01 slot 180 (15).
        ("slots: reaches 09:00", &fine, 8.0, 58.0, Some(15.0)),
        // 09:01 slot 180 (15), 09:04 slot 181 (unseen): 15.
        ("slots: into an unseen slot", &fine, 9.0, 1.0, Some(15.0)),
        // 09:04 slot 181 (unseen), 09:07 slot ⌊547 / 3⌋ = 182 (5).
        ("slots: out of an unseen slot", &fine, 9.0, 4.0, Some(5.0)),
        // 09:30 slots 190 and 191: 5, where the hour's table holds 15.
        ("slots: 09:30, past it", &fine, 9.0, 30.0, Some(5.0)),
        // 23:59 slot 479 (5); + 3 min is 00:02 the next day, slot 0 (7).
        ("slots: across midnight", &fine, 23.0, 59.0, Some(7.0)),
    ];
    for (name, table, h, m, want) in rows {
        let t = T0 + h * 3600.0 + m * 60.0;
        assert_eq!(peak_over(table, t, 180.0, &UTC), want, "{name}");
    }
}

#[test]
fn the_replay_sees_only_the_days_before() {
    // 5 at 01:00 on day 0, 9 at 01:00 on day 1 (each one sample).
    let samples = [
        Sample::new(T0 + 3600.0, 5.0),
        Sample::new(T0 + 86_400.0 + 3600.0, 9.0),
    ];
    // (window at, forecast) by hand, lead 60 s, 24 slots (hours): day 0 has no day before;
    // day 1 at 01:30 sees day 0's 5 (not its own 9); day 2 sees the higher, 9; day 2 at 02:30
    // an unseen hour.
    let times = [
        T0 + 5400.0,
        T0 + 86_400.0 + 5400.0,
        T0 + 2.0 * 86_400.0 + 5400.0,
        T0 + 2.0 * 86_400.0 + 9000.0,
    ];
    assert_eq!(
        replay(&samples, &times, 60.0, 24, &UTC),
        vec![None, Some(5.0), Some(9.0), None]
    );
}

/// band's tests' grid and trend model (one-minute grid, lead 2 steps, window 4 steps, the trend
/// "last value + last change per step", its forecast over the lead max(y + c, y + 2c), never
/// below 0, no seasons: the blend is the trend alone), `days` of band history, one band all day,
/// FORECASTER=auto.
fn policy(days: f64) -> PolicySpec {
    PolicySpec {
        band_history_s: days * 86_400.0,
        band_by_hour: BandByHour::Off,
        forecaster: ForecasterChoice::Auto,
        ..crate::policy::band::tests::policy()
    }
}

/// `minutes` one-minute samples from T0 (00:00Z): 5 req/s, 15 from 09:00 to 09:09 every day.
fn daily_burst(minutes: usize) -> Vec<Sample> {
    (0..minutes)
        .map(|i| {
            let burst = (540..550).contains(&(i % 1440));
            Sample::new(T0 + 60.0 * i as f64, if burst { 15.0 } else { 5.0 })
        })
        .collect()
}

/// Three days of `daily_burst`: 4320 minutes, windows at origins 4 … 4317 (4314), the older
/// two thirds (2876: origins 4 … 2879, days 0 and 1) fitted, origins 2880 … 4317 (day 2,
/// minutes 0 … 1437, 1438 windows) held back.
///
/// The trend, per day: origins 538 and 539 (5 flat, the burst ahead) forecast 5 for 15: +10;
/// 540 (15 after 5) forecasts 35 for 15: −20; 541 … 549 forecast 15 (sums: 9 × 15); 549 errs
/// −10 (the burst is over); 550 (5 after 15) forecasts 0 for 5: +5; every other 5 for 5: 0.
/// Held back, its forecasts sum to 1438 × 5 + 30 + 9 × 10 − 5 = 7305.
///
/// The profile (the days before), 720 slots of 2 minutes (the lead): day 0 has none; from day
/// 1 on 15 in slots 270 … 274 (minutes 540 … 549), 5 elsewhere. A window at minute i forecasts
/// the higher of slots ⌊i / 2⌋ and ⌊(i + 2) / 2⌋: 15 for origins 538 … 549 (12 of them), 5
/// elsewhere. Errors: 0 for origins 538 … 548 (the burst came), −10 for 549, 0 elsewhere:
/// never above 0, so its band is 0 and it covers every held-back window. Held back, its mean
/// upper band is (1438 × 5 + 12 × 10) / 1438 = 7310 / 1438 ≈ 5.083. (Hour slots held 15 for
/// origins 538 … 599, 62 of them: 7810 / 1438 ≈ 5.43.)
///
/// At q 0.999 the trend's band on the fitted part is the ⌈0.999 × 2876⌉ = 2874th of 2876
/// errors ascending, whose top six are 5, 5, 10, 10, 10, 10: 10. Its mean upper band held back
/// is 7305 / 1438 + 10 ≈ 15.08, covering every window. Both cover all: the profile, narrower,
/// wins.
///
/// At q 0.9 the trend's band is 0 (nine errors in ten are 0 or less) and it misses only the 3
/// positive errors held back (origins 538, 539, 550): coverage 1435 / 1438 ≈ 0.998, at least
/// the nominal 0.9 the profile is held to (the lower of 0.9 and the blend's own). Its mean
/// upper band 7305 / 1438 ≈ 5.080 is narrower than the profile's 7310 / 1438 ≈ 5.083 (by the
/// profile's 5 req/s more on net over the burst's lead): the blend wins.
#[test]
fn the_forecaster_is_the_narrowest_upper_band_held_back() {
    // (name, minutes of daily_burst, q, forecaster chosen)
    let rows = [
        (
            "daily burst, q 0.999: profile",
            4320,
            0.999,
            Forecaster::Profile,
        ),
        ("daily burst, q 0.9: blend", 4320, 0.9, Forecaster::Blend),
        // 2160 minutes: windows at origins 4 … 2157 (2154), the fitted ones 4 … 1439, all on
        // day 0, which has no day before: the profile cannot be fitted, the blend stays.
        (
            "a day and a half: no day before the fitted windows",
            2160,
            0.999,
            Forecaster::Blend,
        ),
    ];
    for (name, minutes, q, want) in rows {
        let now = T0 + 60.0 * (minutes - 1) as f64;
        let c = calibrate(&daily_burst(minutes), &policy(3.0), q, now);
        assert_eq!(c.forecaster, want, "{name}: {c:?}");
    }
    // 5 flat for three days: both forecast 5 with a band of 0 and cover every window, the
    // same width: a tie, the blend's.
    let flat: Vec<Sample> = (0..4320)
        .map(|i| Sample::new(T0 + 60.0 * f64::from(i), 5.0))
        .collect();
    let c = calibrate(&flat, &policy(3.0), 0.999, T0 + 60.0 * 4319.0);
    assert_eq!(c.forecaster, Forecaster::Blend, "a tie: {c:?}");
}

/// The chosen profile's calibration: its band over every window it forecast (days 1 and 2,
/// every error ≤ 0): 0; its table over the whole history, 720 slots of 2 minutes: 15 in slots
/// 270 … 274 (09:00 … 09:09), 5 in every other.
#[test]
fn a_chosen_profile_keeps_its_table_and_band() {
    let c = calibrate(&daily_burst(4320), &policy(3.0), 0.999, T0 + 60.0 * 4319.0);
    assert_eq!(
        (c.forecaster, c.band, c.coverage),
        (Forecaster::Profile, Some(0.0), Some(1.0))
    );
    let mut table = vec![Some(5.0); 720];
    table[270..275].fill(Some(15.0));
    assert_eq!(c.profile, table);
    // (tick on day 3 at minute, forecast): 08:58 (slot 269) + the lead (120 s) is 09:00 (slot
    // 270): 15; 09:20 (slots 280, 281): 5, in the hour that held 15 all through.
    for (minute, want) in [(538.0, Some(15.0)), (560.0, Some(5.0))] {
        let t = T0 + 3.0 * 86_400.0 + minute * 60.0;
        assert_eq!(c.profile_peak(t, &UTC), want, "minute {minute}");
    }
    // Too short a history: the blend, and the note says why.
    let c = calibrate(&daily_burst(2160), &policy(3.0), 0.999, T0 + 60.0 * 2159.0);
    assert!(c.profile.is_empty(), "{c:?}");
    assert!(
        c.note.unwrap_or_default().contains("profile"),
        "the note says why"
    );
}
