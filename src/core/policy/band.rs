//! Stage: the band, an upper quantile of *lead-time-ahead* errors added to the forecast.
//!
//! What is measured is what the capacity must cover: the highest rate within the next lead
//! time, against the forecast made at the start of it. One-step errors (the trend model's own,
//! used as a fallback) describe the next 15 s and under-cover a 180 s horizon badly (46-54 % for
//! a nominal 90 % on the code trace; issue 10).
//!
//! Calibration replays the forecasters over BAND_HISTORY_SECONDS of history on the coarser
//! BAND_STEP_SECONDS grid (the trend model's smoothing constants are converted to that step),
//! once every CALIBRATE_EVERY_SECONDS, and the result is cached on the headroom object. It
//! also fits the weight of the seasonal forecaster in the blend (inverse mean squared error),
//! and reports the achieved coverage: the band fitted on the older two thirds of the history,
//! scored on the newest third (out of sample), to put next to the nominal quantile.
//!
//! It also chooses the target's forecaster (FORECASTER=auto): the blend, or the profile of the peak
//! of each lead-wide slot of the day on the days before (policy::profile). Each, with each
//! conditioning BAND_BY_HOUR allows, is fitted on the older two thirds and scored on the newest by
//! its mean upper band (point + band); the narrowest among those covering at least the blend's
//! whole-day band (or the nominal quantile, if lower) wins, the blend on a tie
//! (`band_slots::choose`). The tick and the simulator both reach it here.

use super::band_slots::{self, local_hour, slot};
use super::forecast::{forecast, upper_quantile};
use super::observation::{Sample, SeasonSeries};
use super::profile;
use super::seasonal::{seasonal_forecast, wall_clock_shift, Seasonal};
pub use crate::spec::Calibration;
use crate::spec::{BandSlots, Forecaster, ForecasterChoice, PolicySpec, TargetSpec};

/// Fewer lead-time windows than this give no band (the policy falls back and says so).
pub const MIN_WINDOWS: usize = 30;

impl Calibration {
    /// The band for a forecast made at `now`: the hour's band is that of the end of the lead
    /// time, when the capacity it sizes is in use (the calibration files each window there).
    pub fn band_at(&self, now: f64, zone: &chrono_tz::Tz) -> Option<f64> {
        let band = self.band?;
        let slots = BandSlots::of(self.by_hour.len());
        Some(match slots {
            BandSlots::Whole => band,
            _ => self.by_hour[slot(self.due(now), slots, zone)],
        })
    }

    /// The held-back coverage of the local hour whose band `band_at(now)` uses.
    pub fn hour_coverage_at(&self, now: f64, zone: &chrono_tz::Tz) -> Option<f64> {
        let hour = local_hour(self.due(now), zone);
        self.coverage_by_hour.get(hour).copied().flatten()
    }

    /// The profile forecaster's peak over the lead from `now`, when this calibration chose it
    /// and has a band (None otherwise, or for an hour the history never saw: the blend then).
    pub fn profile_peak(&self, now: f64, zone: &chrono_tz::Tz) -> Option<f64> {
        let chosen = self.forecaster == Forecaster::Profile && self.band.is_some();
        let lead = self.lead_time_s.unwrap_or(0.0);
        chosen
            .then(|| profile::peak_over(&self.profile, now, lead, zone))
            .flatten()
    }

    /// When the capacity a forecast made at `now` sizes is in use: the end of the lead time.
    fn due(&self, now: f64) -> f64 {
        now + self.lead_time_s.unwrap_or(0.0)
    }
}

/// Whether the cached calibration is missing or older than CALIBRATE_EVERY_SECONDS (or from
/// the future: a clock jump must not pin it forever), or fitted for another lead time.
pub fn due(cached: Option<&Calibration>, policy: &PolicySpec, now: f64) -> bool {
    cached.is_none_or(|c| {
        now - c.computed_at >= policy.calibrate_every_s
            || c.computed_at > now + policy.tick_s
            || c.lead_time_s
                .is_some_and(|l| (l - policy.lead_time_s).abs() >= 0.5)
    })
}

/// How far back the calibration history reaches: BAND_HISTORY_SECONDS plus the shortest season,
/// the observation window and the lead time, so the seasonal forecaster can be replayed over the
/// whole band history (the tick handler fetches this much; the simulator's eyes read as much).
pub fn history_seconds(policy: &PolicySpec) -> f64 {
    let season = policy
        .seasons_s
        .iter()
        .copied()
        .reduce(f64::min)
        .unwrap_or(0.0);
    policy.band_history_s + season + policy.window_s + policy.lead_time_s
}

/// The quantile to fit: ERROR_QUANTILE, or with GPU_HOUR_COST and a price of a delayed request
/// (the target's `delayedRequestCost`, else DELAYED_REQUEST_COST) the newsvendor's critical ratio. A replica short for a lead time L delays about
/// `concurrency / service_time × L` requests (cost of under-provisioning u); a replica too
/// many costs `gpus × GPU_HOUR_COST × L / 3600` (o). L cancels: q = u / (u + o), kept in the
/// range ERROR_QUANTILE accepts.
pub fn quantile(policy: &PolicySpec, target: &TargetSpec, service_time_s: f64) -> f64 {
    match (target.delayed_request_cost(policy), policy.gpu_hour_cost) {
        (Some(delay), Some(gpu_hour)) if service_time_s > 0.0 => {
            let under = delay * f64::from(target.replica_concurrency.max(1)) / service_time_s;
            let over = f64::from(target.gpus_per_replica.max(1)) * gpu_hour / 3600.0;
            (under / (under + over)).clamp(0.5, 0.999)
        }
        _ => policy.error_quantile,
    }
}

/// The trend model's constants for a coarser step: the same smoothing per second.
fn coarse_policy(policy: &PolicySpec) -> PolicySpec {
    let k = policy.band_step_s / policy.step_s;
    PolicySpec {
        step_s: policy.band_step_s,
        ewma_alpha: 1.0 - (1.0 - policy.ewma_alpha).powf(k),
        trend_beta: 1.0 - (1.0 - policy.trend_beta).powf(k),
        trend_damping: policy.trend_damping.powf(k),
        ..policy.clone()
    }
}

/// One replayed lead-time window: made at `t`, the highest rate over the next lead time
/// (`actual`), the trend model's and the season's forecasts of it.
pub struct Window {
    pub t: f64,
    pub actual: f64,
    pub trend: f64,
    pub seasonal: Option<f64>,
}

impl Window {
    /// The blend the tick sizes with: `weight` on the season, the trend alone without one.
    pub fn point(&self, weight: f64) -> f64 {
        match self.seasonal {
            Some(s) => (1.0 - weight) * self.trend + weight * s,
            None => self.trend,
        }
    }
}

/// `history` on the BAND_STEP_SECONDS grid from its oldest kept sample (that sample's time
/// and the grid; None without a usable sample). Kept: finite samples not stamped after `now`
/// (plus one step; the calibration is computed at `now`, so a later one is bogus) and no older
/// than the history the calibration asks for (`history_seconds`, plus two steps) before the
/// newest: one bogus timestamp cannot stretch the grid, and its allocation, past what the
/// configuration reads (a sample stamped at 0 would otherwise span 56 years of minutes).
fn on_grid(history: &[Sample], policy: &PolicySpec, now: f64) -> Option<(f64, Vec<Option<f64>>)> {
    let h = policy.band_step_s;
    let plausible = |s: &&Sample| s.t.is_finite() && s.v.is_finite() && s.t <= now + h;
    let newest = history
        .iter()
        .filter(plausible)
        .map(|s| s.t)
        .reduce(f64::max)?;
    let oldest = newest - history_seconds(policy) - 2.0 * h;
    let usable: Vec<&Sample> = history
        .iter()
        .filter(plausible)
        .filter(|s| s.t >= oldest)
        .collect();
    let first = usable.iter().map(|s| s.t).reduce(f64::min)?;
    let n = ((newest - first) / h).round() as usize + 1;
    let mut grid: Vec<Option<f64>> = vec![None; n];
    for s in &usable {
        let i = ((s.t - first) / h).round() as usize;
        if i < n {
            grid[i] = Some(s.v.max(0.0));
        }
    }
    Some((first, grid))
}

/// The shortest season the grid spans, and every window from the first full observation window
/// to the last with a whole lead time after it.
fn replay_grid(
    first_t: f64,
    grid: &[Option<f64>],
    policy: &PolicySpec,
) -> (Option<f64>, Vec<Window>) {
    let h = policy.band_step_s;
    let zone = policy.zone();
    let n = grid.len();
    let at = |i: usize| first_t + h * i as f64;
    let lead = (policy.lead_time_s / h).ceil().max(1.0) as usize;
    let w = ((policy.window_s / h).round() as usize).max(2);
    let span = h * n as f64;
    let season = policy
        .seasons_s
        .iter()
        .copied()
        .filter(|p| *p + policy.window_s + policy.lead_time_s < span)
        .reduce(f64::min);
    // The season back from a window's time, in whole steps: the same wall-clock time in
    // TIME_ZONE, as the tick reads it (23 or 25 h back across a daylight-saving switch).
    let steps_back =
        |i: usize| season.map(|p| (wall_clock_shift(at(i), p, &zone) / h).round() as usize);
    let coarse = coarse_policy(policy);
    let samples = |from: usize, to: usize, shift: f64| -> Vec<Sample> {
        (from..=to)
            .filter_map(|j| grid[j].map(|v| Sample::new(at(j) + shift, v)))
            .collect()
    };

    let mut windows = Vec::new();
    for i in w..n.saturating_sub(lead) {
        let ahead: Vec<f64> = grid[i + 1..=i + lead].iter().flatten().copied().collect();
        if ahead.is_empty() {
            continue;
        }
        let today = samples(i + 1 - w, i, 0.0);
        let Some(trend) = forecast(&today, &coarse) else {
            continue;
        };
        let seasonal = steps_back(i).filter(|d| i >= d + w).and_then(|d| {
            let series = SeasonSeries {
                period_s: d as f64 * h,
                samples: samples(i + 1 - w - d, i + lead - d, d as f64 * h),
            };
            match seasonal_forecast(&today, &[series], at(i), policy.lead_time_s, h) {
                Seasonal::Forecast { peak, .. } => Some(peak),
                Seasonal::Unavailable { .. } => None,
            }
        });
        windows.push(Window {
            t: at(i),
            actual: ahead.into_iter().fold(0.0, f64::max),
            trend: trend.point_over_horizon,
            seasonal,
        });
    }
    (season, windows)
}

/// One forecaster's errors `(end of the lead, actual − point)` on the windows it forecast, the
/// fitted (older) part and the held-back one, and its mean point forecast held back.
struct Candidate {
    forecaster: Forecaster,
    fit: Vec<(f64, f64)>,
    test: Vec<(f64, f64)>,
    mean_point: f64,
}

impl Candidate {
    fn new(
        forecaster: Forecaster,
        windows: &[Window],
        points: &[Option<f64>],
        split: usize,
        policy: &PolicySpec,
    ) -> Self {
        // Each error is filed at the end of its lead time: a burst at 09:00 is missed by the
        // forecasts made a lead before it, and belongs to the 09:00 hour's band, not the 08:00's.
        let errors = |from: usize, to: usize| -> Vec<(f64, f64)> {
            (from..to)
                .filter_map(|i| {
                    let w = &windows[i];
                    points[i].map(|p| (w.t + policy.lead_time_s, w.actual - p))
                })
                .collect()
        };
        let held: Vec<f64> = points[split..windows.len()]
            .iter()
            .flatten()
            .copied()
            .collect();
        Candidate {
            forecaster,
            fit: errors(0, split),
            test: errors(split, windows.len()),
            mean_point: held.iter().sum::<f64>() / held.len().max(1) as f64,
        }
    }
}

/// Fits the band (and the seasonal weight) on `history` (oldest first, on the
/// BAND_STEP_SECONDS grid; gaps allowed). The shortest season in SEASONS_SECONDS that the
/// history spans is the one replayed, each window's season back at the same wall-clock time.
pub fn calibrate(history: &[Sample], policy: &PolicySpec, q: f64, now: f64) -> Calibration {
    let h = policy.band_step_s;
    let zone = policy.zone();
    let mut out = Calibration {
        computed_at: now,
        quantile: q,
        lead_time_s: Some(policy.lead_time_s),
        ..Calibration::default()
    };
    let Some((first_t, grid)) = on_grid(history, policy, now) else {
        out.note = Some("no history".into());
        return out;
    };
    let n = grid.len();
    let lead = (policy.lead_time_s / h).ceil().max(1.0) as usize;
    // The residual's training rise over the same history and lead (a gap is no rise).
    let values: Vec<f64> = grid.iter().map(|v| v.unwrap_or(f64::NAN)).collect();
    out.rise = super::residual::training_rise(&values, lead, &(0..n));
    let (season, windows) = replay_grid(first_t, &grid, policy);
    out.windows = windows.len() as u32;
    if windows.len() < MIN_WINDOWS {
        out.note = Some(format!(
            "{} lead-time windows in the history, {MIN_WINDOWS} needed",
            windows.len()
        ));
        return out;
    }
    let split = windows.len() * 2 / 3;
    let fit = &windows[..split];

    // Inverse-MSE weight of the seasonal forecast, on the fitting part only.
    let both: Vec<&Window> = fit.iter().filter(|w| w.seasonal.is_some()).collect();
    if both.len() >= MIN_WINDOWS {
        let mse = |f: &dyn Fn(&Window) -> f64| {
            both.iter().map(|w| (w.actual - f(w)).powi(2)).sum::<f64>() / both.len() as f64
        };
        let trend_mse = mse(&|w| w.trend);
        let seasonal_mse = mse(&|w| w.seasonal.unwrap_or(w.trend));
        out.seasonal_weight = if trend_mse + seasonal_mse > 0.0 {
            trend_mse / (trend_mse + seasonal_mse)
        } else {
            0.5
        };
    } else if season.is_some() {
        out.note = Some("too little seasonal history to weigh: trend only".into());
    } else {
        out.note = Some("history shorter than a season: trend only".into());
    }
    let weight = out.seasonal_weight;
    // The forecasters to choose between, each with its point forecast of every window (None
    // where it has none). The profile is replayed from the days before each window; without a
    // day before enough of the fitted windows it cannot be judged, and the blend stays.
    let blend: Vec<Option<f64>> = windows.iter().map(|w| Some(w.point(weight))).collect();
    let samples: Vec<Sample> = (0..n)
        .filter_map(|j| grid[j].map(|v| Sample::new(first_t + h * j as f64, v)))
        .collect();
    let times: Vec<f64> = windows.iter().map(|w| w.t).collect();
    let mut candidates = vec![Candidate::new(
        Forecaster::Blend,
        &windows,
        &blend,
        split,
        policy,
    )];
    let profile_slots = profile::slots(policy);
    if policy.forecaster == ForecasterChoice::Auto {
        let replayed = profile::replay(&samples, &times, policy.lead_time_s, profile_slots, &zone);
        if replayed[..split].iter().flatten().count() >= MIN_WINDOWS {
            let c = Candidate::new(Forecaster::Profile, &windows, &replayed, split, policy);
            candidates.push(c);
        } else {
            let why = "no day before enough of the fitted windows to judge the profile: blend";
            out.note = Some(out.note.map_or(why.into(), |n| format!("{n}; {why}")));
        }
    }
    // Each forecaster with each conditioning BAND_BY_HOUR allows, fitted on the older part and
    // scored on the newest: its mean upper band there (point + band) is what it costs. The
    // blend with the first conditioning comes first: today's forecaster wins ties.
    let mut scored: Vec<(usize, band_slots::Scored)> = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        for &slots in policy.band_by_hour.candidates() {
            if let Some(mut s) = band_slots::score(&c.fit, &c.test, q, slots, &zone) {
                s.width += c.mean_point;
                scored.push((i, s));
            }
        }
    }
    let only: Vec<band_slots::Scored> = scored.iter().map(|s| s.1.clone()).collect();
    let chosen = scored.get(band_slots::choose(&only, q));
    let (picked, slots) = chosen.map_or((0, BandSlots::Whole), |(i, c)| (*i, c.slots));
    let picked = &candidates[picked];
    out.forecaster = picked.forecaster;
    if let Some((_, c)) = chosen {
        out.coverage = Some(c.coverage);
        out.coverage_by_hour = (0..24)
            .map(|h| {
                let hour: Vec<&(f64, f64)> = picked
                    .test
                    .iter()
                    .filter(|(t, _)| local_hour(*t, &zone) == h)
                    .collect();
                let covered = hour
                    .iter()
                    .filter(|(t, e)| *e <= c.bands[slot(*t, slots, &zone)])
                    .count();
                (!hour.is_empty()).then(|| covered as f64 / hour.len() as f64)
            })
            .collect();
    }
    let all_errors: Vec<(f64, f64)> = picked.fit.iter().chain(&picked.test).copied().collect();
    let mut all: Vec<f64> = all_errors.iter().map(|e| e.1).collect();
    out.band = Some(upper_quantile(&mut all, q).max(0.0));
    if slots != BandSlots::Whole {
        out.by_hour = band_slots::bands(&all_errors, q, slots, &zone);
    }
    if out.forecaster == Forecaster::Profile {
        out.profile = profile::fit(&samples, profile_slots, &zone);
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::spec::HeadroomKind;

    const T0: f64 = 1_700_006_400.0; // a multiple of 3600 s (2023-11-15T00:00:00Z)

    pub(crate) fn policy() -> PolicySpec {
        // One-minute grid, lead 2 steps, window 4 steps, α = β = φ = 1 at that step (converted
        // constants: 1 − 0^k = 1 and 1^k = 1), so the trend model is "last value + last change
        // per step" and the hand arithmetic stays short.
        PolicySpec {
            step_s: 60.0,
            band_step_s: 60.0,
            lead_time_s: 120.0,
            window_s: 240.0,
            ewma_alpha: 1.0,
            trend_beta: 1.0,
            trend_damping: 1.0,
            seasons_s: vec![],
            ..PolicySpec::default()
        }
    }

    fn grid(values: &[f64]) -> Vec<Sample> {
        Sample::grid(T0, 60.0, values)
    }

    #[test]
    fn a_bogus_timestamp_cannot_stretch_the_grid() {
        // 100 good minutes from T0; the calibration runs at the newest, T0 + 99 min.
        let now = T0 + 99.0 * 60.0;
        let clean = grid(&[5.0; 100]);
        // The grid the configuration reads: history_seconds = 86 400 (BAND_HISTORY_SECONDS)
        // + 240 (window) + 120 (lead) = 86 760 s; 100 samples span 99 minutes, all of it kept.
        let sized =
            |history: &[Sample]| on_grid(history, &policy(), now).map(|(t, g)| (t, g.len()));
        assert_eq!(sized(&clean), Some((T0, 100)));
        // (name, a bogus sample) - each left out, so the grid is the clean one: T0, 100 points.
        // Kept, the first spans (T0 - 0) / 60 ≈ 28.3 M minutes, the second 16.7 M (≈ 270 MB).
        for (name, bogus) in [
            ("stamped at 0", Sample::new(0.0, 5.0)),
            ("stamped 31 years ahead", Sample::new(now + 1e9, 5.0)),
            ("NaN time", Sample::new(f64::NAN, 5.0)),
        ] {
            let mut history = clean.clone();
            history.push(bogus);
            assert_eq!(sized(&history), Some((T0, 100)), "{name}");
            let c = calibrate(&history, &policy(), 0.9, now);
            assert_eq!(c, calibrate(&clean, &policy(), 0.9, now), "{name}");
        }
        // Only bogus samples: no history at all.
        assert_eq!(sized(&[Sample::new(now + 1e9, 5.0)]), None);
    }

    #[test]
    fn flat_history_has_zero_band_and_full_coverage() {
        let c = calibrate(&grid(&[5.0; 100]), &policy(), 0.9, T0 + 6000.0);
        // Windows i = 4..98: 94 of them, every error 0.
        assert_eq!(c.windows, 94);
        assert_eq!(c.band, Some(0.0));
        assert_eq!(c.coverage, Some(1.0));
        assert_eq!(c.seasonal_weight, 0.0);
    }

    #[test]
    fn a_spike_every_ten_minutes_sets_the_band() {
        // 5 everywhere except 15 at every index ≡ 0 (mod 10). At origin i the trend model
        // forecasts y_i + 2·(y_i − y_{i−1}); the peak of the next two steps is 15 when i+1 or
        // i+2 is a spike. Origins i ≡ 8, 9 (mod 10) see a spike ahead from a flat 5: error 10.
        // Origins i ≡ 0 (spike now): forecast 15 + 2·10 = 35, peak 5: error −30.
        // Origins i ≡ 1: forecast 5 + 2·(−10) = −15 → 0 (never negative), peak 5: error 5.
        // Others: error 0. Per 10 origins: two 10s, one 5, six 0s, one −30 → the 0.9
        // quantile (nearest rank) is 10 and 8 of 10 windows are at or below a band of... 10:
        // all of them. A band of 10 covers every window.
        let values: Vec<f64> = (0..200)
            .map(|i| if i % 10 == 0 { 15.0 } else { 5.0 })
            .collect();
        // Calibrated at the newest sample (a later one would be in the future).
        let now = T0 + 60.0 * 199.0;
        let c = calibrate(&grid(&values), &policy(), 0.9, now);
        assert_eq!(c.band, Some(10.0));
        assert_eq!(c.coverage, Some(1.0));
        // The residual's training rise over two steps: 5 → 15, 10 req/s.
        assert_eq!(c.rise, Some(10.0));
        // At the 0.75 quantile the rank falls among the zeros and fives: 5 (three of ten
        // windows above 0 … ⌈0.75·n⌉ lands on the 5s).
        let c = calibrate(&grid(&values), &policy(), 0.75, now);
        assert_eq!(c.band, Some(5.0));
    }

    #[test]
    fn too_short_a_history_says_so() {
        let c = calibrate(&grid(&[5.0; 20]), &policy(), 0.9, T0 + 60.0 * 19.0);
        assert_eq!(c.band, None);
        assert!(c.note.unwrap().contains("30 needed"));
        let c = calibrate(&[], &policy(), 0.9, T0);
        assert_eq!(c.note.as_deref(), Some("no history"));
    }

    #[test]
    fn a_daily_pattern_gets_weight_on_the_season() {
        // A compressed "day" of 20 minutes: a ramp 0→19 then flat 0, repeated 6 times. The
        // trend model misses every ramp start and every drop; the season repeats exactly, so
        // its error is 0 (scale 1 on identical days) and its inverse-MSE weight is 1.
        let values: Vec<f64> = (0..120).map(|i| f64::from((i % 20) as u8)).collect();
        let policy = PolicySpec {
            seasons_s: vec![1200.0],
            ..policy()
        };
        let c = calibrate(&grid(&values), &policy, 0.9, T0 + 60.0 * 119.0);
        assert!(c.seasonal_weight > 0.99, "{c:?}");
        assert_eq!(c.band, Some(0.0), "{c:?}");
    }

    /// The cost quantile is the critical ratio, with a target's own delay price before the
    /// global one.
    #[test]
    fn cost_quantile_is_the_critical_ratio() {
        let gpu_only = PolicySpec {
            gpu_hour_cost: Some(3.6),
            ..PolicySpec::default()
        };
        let base = TargetSpec {
            replica_concurrency: 8,
            ..TargetSpec::new("t", "gpu", HeadroomKind::NodePoolReplicas, 4)
        };
        // (what, the target's price, the global price, the quantile by hand: u = price · 8 / 2,
        // o = 3.6 / 3600 = 0.001)
        let rows = [
            ("neither: ERROR_QUANTILE", None, None, 0.9),
            ("the global only", None, Some(0.01), 0.04 / 0.041),
            ("the target only", Some(0.001), None, 0.004 / 0.005),
            ("both: the target's", Some(0.001), Some(0.01), 0.004 / 0.005),
        ];
        for (what, own, global, want) in rows {
            let target = TargetSpec {
                delayed_request_cost: own,
                ..base.clone()
            };
            let policy = PolicySpec {
                delayed_request_cost: global,
                ..gpu_only.clone()
            };
            let q = quantile(&policy, &target, 2.0);
            assert!((q - want).abs() < 1e-12, "{what}: {q} vs {want}");
        }
        // Cheap delays: clamped at 0.5.
        let cheap = PolicySpec {
            delayed_request_cost: Some(1e-9),
            ..gpu_only
        };
        assert_eq!(quantile(&cheap, &base, 2.0), 0.5);
        // Without costs: ERROR_QUANTILE.
        assert_eq!(quantile(&PolicySpec::default(), &base, 2.0), 0.9);
    }

    #[test]
    fn the_history_reaches_one_band_history_past_the_shortest_season() {
        // 86 400 + the day (not the week) + 900 window + 180 lead.
        let p = PolicySpec::default();
        assert_eq!(history_seconds(&p), 86_400.0 + 86_400.0 + 900.0 + 180.0);
        // Seasons off: the band history, the window and the lead time.
        let p = PolicySpec {
            seasons_s: Vec::new(),
            ..PolicySpec::default()
        };
        assert_eq!(history_seconds(&p), 86_400.0 + 900.0 + 180.0);
    }

    /// A calibration computed at T0, fitted for `lead` (None: written before it was recorded).
    fn fitted(lead: Option<f64>) -> Calibration {
        Calibration {
            computed_at: T0,
            quantile: 0.9,
            band: Some(1.0),
            windows: 40,
            lead_time_s: lead,
            ..Calibration::default()
        }
    }

    #[test]
    fn due_hourly_and_on_clock_jumps() {
        let p = PolicySpec::default();
        let c = fitted(None);
        assert!(due(None, &p, T0));
        assert!(!due(Some(&c), &p, T0 + 3599.0));
        assert!(due(Some(&c), &p, T0 + 3600.0));
        assert!(due(Some(&c), &p, T0 - 100.0));
    }

    /// A band fitted for one lead time is due as soon as the horizon is another (a learned lead
    /// that moved); one written before the lead was recorded keeps its hourly refresh.
    #[test]
    fn due_when_fitted_for_another_lead() {
        let at = |lead_time_s: f64| PolicySpec {
            lead_time_s,
            ..PolicySpec::default()
        };
        let cases = [
            (Some(180.0), 180.0, false),
            (Some(180.0), 195.0, true),
            (Some(195.0), 180.0, true),
            (None, 195.0, false),
        ];
        for (fitted_for, horizon, want) in cases {
            let got = due(Some(&fitted(fitted_for)), &at(horizon), T0 + 60.0);
            assert_eq!(got, want, "fitted for {fitted_for:?}, horizon {horizon}");
        }
        // What `calibrate` fits is stamped with the lead it used.
        assert_eq!(calibrate(&[], &at(195.0), 0.9, T0).lead_time_s, Some(195.0));
    }

    #[test]
    fn hourly_bands_follow_the_local_hour() {
        let c = Calibration {
            by_hour: (0..24).map(f64::from).collect(),
            ..fitted(None)
        };
        // T0 is 00:00 UTC = 01:00 in Berlin (CET, UTC+1 in November).
        let berlin: chrono_tz::Tz = "Europe/Berlin".parse().unwrap();
        assert_eq!(c.band_at(T0, &chrono_tz::UTC), Some(0.0));
        assert_eq!(c.band_at(T0, &berlin), Some(1.0));
        assert_eq!(c.band_at(T0 + 5.5 * 3600.0, &berlin), Some(6.0));
    }

    /// A burst at 09:00 every day chooses a band per hour of day (BAND_BY_HOUR's default).
    /// Two days of minutes from T0 (00:00Z), 5 req/s, except 15 at 09:00, 09:10 … 09:50 of
    /// day 1 and 14 on day 2. With the trend model of `policy()` (last value + last change
    /// per step, lead 2), a forecast made 1 or 2 minutes before a spike errs by +10 (day 2:
    /// +9), one made at a spike by −30 (−27), one made a minute after by +5; every other by 0.
    /// Each error is filed at the end of its lead (origin + 2 min), so all of them fall in
    /// the 09:00 hour: 60 windows a day, |errors| 12·10 + 6·5 + 6·30 = 330 on day 1 and
    /// 12·9 + 6·5 + 6·27 = 300 on day 2. Windows: origins 4 … 2877, 2874 of them; the
    /// newest third (958, from day 2 08:00, filed 08:02 on) is held back.
    /// At q 0.999 the whole-day band is the 3rd largest of 2874 errors (rank 2872): 10, all
    /// day. Per hour: mean |error| over all windows m = 630 / 2874; the 09:00 hour's scale
    /// 630 / 120 + m, every other hour's m (its own errors are 0). The pooled quantile is the
    /// 3rd largest score, 10 / scale₉, so the 09:00 band is 10 and every other hour's is
    /// m · 10 / scale₉ ≈ 0.40. Held back, both cover every window (day 2's errors ≤ 9 ≤ 10),
    /// and the hourly bands are narrower on average: hour of day is chosen. (Hour of week:
    /// day 2's hours were never fitted, so it falls back to the whole day's band there and
    /// ties with it.)
    #[test]
    fn a_daily_burst_gets_its_own_hour() {
        let values: Vec<f64> = (0..2880)
            .map(|i| {
                let (day, minute) = (i / 1440, i % 1440);
                let spike = (540..600).contains(&minute) && minute % 10 == 0;
                match (spike, day) {
                    (false, _) => 5.0,
                    (true, 0) => 15.0,
                    (true, _) => 14.0,
                }
            })
            .collect();
        // The blend's hourly band: under `auto` the profile, which forecasts day 1's spikes
        // from day 0's, is chosen here instead with a band of 0 (profile_tests covers that).
        let policy = PolicySpec {
            band_history_s: 2.0 * 86_400.0,
            forecaster: ForecasterChoice::Blend,
            ..policy()
        };
        let c = calibrate(&grid(&values), &policy, 0.999, T0 + 60.0 * 2879.0);
        assert_eq!(c.windows, 2874);
        assert_eq!(c.band, Some(10.0));
        assert_eq!(c.by_hour.len(), 24, "{c:?}");
        let m = 630.0 / 2874.0;
        let scale = 630.0 / 120.0 + m;
        assert!((c.by_hour[9] - 10.0).abs() < 1e-9, "{:?}", c.by_hour);
        assert!(
            (c.by_hour[3] - m * 10.0 / scale).abs() < 1e-9,
            "{:?}",
            c.by_hour
        );
        assert_eq!(c.coverage, Some(1.0));
        // Coverage per hour: only the hours of the held-back part (08:00 … 23:59 of day 2).
        let mut hours = vec![None; 8];
        hours.extend([Some(1.0); 16]);
        assert_eq!(c.coverage_by_hour, hours);
        // Asked at 08:58 on day 3, the band is the 09:00 hour's: the lead ends at 09:00.
        let at = T0 + 2.0 * 86_400.0 + 8.0 * 3600.0 + 58.0 * 60.0;
        assert_eq!(c.band_at(at, &chrono_tz::UTC), Some(c.by_hour[9]));
        // BAND_BY_HOUR=off: one band all day.
        let off = PolicySpec {
            band_by_hour: crate::spec::BandByHour::Off,
            ..policy
        };
        let c = calibrate(&grid(&values), &off, 0.999, T0 + 60.0 * 2879.0);
        assert_eq!((c.band, c.by_hour.len()), (Some(10.0), 0));
    }

    /// The replay reads a season back at the same wall-clock time, as the tick does. Three
    /// days in America/New_York across the 2026 switch to summer time (Sunday 03-08 02:00 EST
    /// = 07:00Z): from Saturday 03-07 00:00 EST (05:00Z; 2026-03-08T00:00Z is 1_772_928_000,
    /// so T = 1_772_928_000 - 19 h = 1_772_859_600) for 71 h, 1 req/s except 10 req/s for five
    /// minutes from 12:00 local every day: Saturday 17:00Z (T + 12 h), Sunday 16:00Z (T + 35 h,
    /// summer time), Monday 16:00Z (T + 59 h). A day back at the same wall-clock time every
    /// replayed window of today equals its season exactly (scale 1, peak = what came), so the
    /// seasonal forecaster's error is 0 on every window and its weight
    /// `MSE_trend / (MSE_trend + 0)` is exactly 1 (the trend misses the spikes: MSE_trend > 0).
    /// A fixed 24 h would put Sunday's noon against Saturday's 11:00 EST (no spike): weight < 1.
    #[test]
    fn the_replay_reads_a_season_back_at_the_same_wall_clock_time() {
        const T: f64 = 1_772_859_600.0;
        let spikes = [12 * 60, 35 * 60, 59 * 60];
        let values: Vec<f64> = (0..71 * 60)
            .map(|m| {
                if spikes.iter().any(|s| (*s..*s + 5).contains(&m)) {
                    10.0
                } else {
                    1.0
                }
            })
            .collect();
        let history = Sample::grid(T, 60.0, &values);
        let policy = PolicySpec {
            seasons_s: vec![86_400.0],
            band_history_s: 2.0 * 86_400.0,
            time_zone: "America/New_York".into(),
            ..policy()
        };
        let now = T + 60.0 * (71.0 * 60.0 - 1.0);
        let c = calibrate(&history, &policy, 0.9, now);
        assert_eq!(c.seasonal_weight, 1.0, "{c:?}");
    }
}
