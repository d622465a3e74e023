//! The policies with a knob, the grid each knob is swept over (at most 8 points), and how one
//! point is chosen: on the training days only.
//!
//! | policy       | knob                                   | grid                                     |
//! |--------------|----------------------------------------|------------------------------------------|
//! | static-peak  | replicas, x the training peak P         | 0.25, 0.35, 0.5, 0.75, 0.9, 1 ... 2     |
//! | buffer       | spare replicas N, x P                   | 0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5 |
//! | buffer-pct   | spare as % of serving replicas          | 0, 2, 5, 10, 20, 35, 50, 100             |
//! | prewarm      | ERROR_QUANTILE x release (see below)   | 0.5, 0.9, 0.99, 0.995, 0.998, 0.999, each slow and fast |
//! | scheduled-floor | factor on each hour's peak x slots   | 0.5, 0.75, 0.9, 1, 1.1, 1.25, 1.5, 2, hour-of-day (and -week) |
//! | hpa-target   | the HPA's target utilisation            | the user's, then 0.7 ... 0.2 below it    |
//! | prewarm-floor | ERROR_QUANTILE                         | as prewarm, slow release only            |
//!
//! scheduled-floor's table is learned from the training days before the last (`scheduled_peaks`,
//! `floor_fit_days`): per hour-of-day or hour-of-week slot the ideal packing's peak replicas in
//! that slot; the knob multiplies it (rounded up), and the slots and the factor are chosen on the
//! last training day, which the table never saw (`choice_days`): judged on the hours it was
//! fitted on, one sample per slot, every factor above 1 looks wasted. hpa-target's grid starts at
//! the user's `--hpa-target-utilization` (the plain HPA) and goes down through the fixed points
//! 0.7, 0.6, 0.5, 0.4, 0.35, 0.3, 0.25, 0.2 below it.
//!
//! prewarm's release of spare after a burst is swept with its quantile: `slow` is the Lambda's
//! defaults (SCALE_DOWN_DELAY_SECONDS 300, maxStepDown 1, COOLDOWN_SECONDS 60: one replica a
//! minute), `fast` holds the high-water mark one lead time (SCALE_DOWN_DELAY_SECONDS=lead: the
//! horizon each decision used, learned once learned, as the Lambda would) and then releases at
//! once (no step limit, no cooldown). Both are chosen like any knob: on the training days.
//!
//! P is the ideal packing's peak replicas over the training days (the whole trace without
//! `--train-days`). Replica counts (static replicas, the buffer's N, each hour's floor) are
//! rounded up to whole nodes and repeated values dropped: 34 replicas at 4 a node take 9 nodes,
//! the GPUs of 36, so 36 is the point that is run.

use std::ops::Range;

use super::setup::{PolicyName, Setup};
use super::stats::{DayStats, DAY_S};

/// Static fleets from a quarter of the peak: a fleet that lets requests wait within the SLO
/// chose the grid's lowest point at half of it.
const STATIC_FACTORS: [f64; 10] = [0.25, 0.35, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0];
const FLOOR_FACTORS: [f64; 8] = [0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0];
const BUFFER_FACTORS: [f64; 8] = [0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5];
const BUFFER_PERCENTS: [f64; 8] = [0.0, 2.0, 5.0, 10.0, 20.0, 35.0, 50.0, 100.0];
/// ERROR_QUANTILE: the quantile of the lead-time band, the one setting that trades delay for
/// spare when sizing is in the HPA's units (TARGET_WAIT_SECONDS only sizes the Erlang C
/// fallback, and moved the results by under 2 %).
/// Dense between 0.99 and 0.999, where the chosen point lands.
const PREWARM_QUANTILES: [f64; 6] = [0.5, 0.9, 0.99, 0.995, 0.998, 0.999];
/// Lower HPA targets than the user's, the headroom users set by hand (dense below 0.4, where
/// the chosen point lands).
const HPA_TARGETS: [f64; 8] = [0.7, 0.6, 0.5, 0.4, 0.35, 0.3, 0.25, 0.2];

/// How prewarm lets spare go after a burst (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Release {
    Slow,
    Fast,
}

impl Release {
    pub const ALL: [Release; 2] = [Release::Slow, Release::Fast];

    /// The policy and target with this release: `Slow` leaves the settings as they are.
    pub fn apply(
        self,
        policy: crate::core::PolicySpec,
        target: crate::core::TargetSpec,
    ) -> (crate::core::PolicySpec, crate::core::TargetSpec) {
        match self {
            Release::Slow => (policy, target),
            Release::Fast => (
                crate::core::PolicySpec {
                    scale_down_delay: crate::core::spec::ScaleDownDelay::Lead,
                    cooldown_s: 0.0,
                    ..policy
                },
                crate::core::TargetSpec {
                    max_step_down: target.max_spare,
                    ..target
                },
            ),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Release::Slow => "slow",
            Release::Fast => "fast",
        }
    }
}

/// What the knob of `policy` sets (None: the policy has no knob).
pub fn knob_name(policy: PolicyName) -> Option<&'static str> {
    match policy {
        PolicyName::StaticPeak => Some("replicas"),
        PolicyName::Buffer => Some("spare replicas"),
        PolicyName::BufferPct => Some("spare % of serving replicas"),
        PolicyName::Prewarm | PolicyName::PrewarmFloor | PolicyName::PrewarmSplit => {
            Some("ERROR_QUANTILE")
        }
        PolicyName::ScheduledFloor => Some("factor on each hour's training peak"),
        PolicyName::HpaTarget => Some("HPA target utilisation"),
        _ => None,
    }
}

/// `replicas` rounded up to whole nodes of `per_node` replicas: a node's last GPUs are paid for
/// whether a replica uses them or not, so a fleet that leaves them empty costs what the full
/// node's fleet costs and serves less.
fn whole_nodes(replicas: f64, per_node: u32) -> f64 {
    let per_node = per_node.max(1) as f64;
    ((replicas - 1e-9) / per_node).ceil().max(0.0) * per_node + 0.0
}

/// The knob values swept for `policy`; `peak` is the training peak replicas, `per_node` the
/// replicas a node holds (replica counts are swept at whole nodes), `buffer_max` an optional cap
/// on the buffer's N, `hpa_target` the user's HPA target utilisation.
pub fn grid(
    policy: PolicyName,
    peak: u32,
    per_node: u32,
    buffer_max: Option<u32>,
    hpa_target: f64,
) -> Vec<f64> {
    let scaled = |factors: &[f64]| -> Vec<f64> {
        let mut v: Vec<f64> = factors
            .iter()
            .map(|f| whole_nodes(f * peak as f64, per_node))
            .collect();
        v.dedup();
        v
    };
    match policy {
        PolicyName::StaticPeak => scaled(&STATIC_FACTORS)
            .into_iter()
            .map(|v| v.max(per_node.max(1) as f64))
            .collect(),
        PolicyName::Buffer => {
            let mut v = scaled(&BUFFER_FACTORS);
            if let Some(max) = buffer_max {
                v.retain(|&n| n <= max as f64);
            }
            v
        }
        PolicyName::BufferPct => BUFFER_PERCENTS.to_vec(),
        PolicyName::Prewarm | PolicyName::PrewarmFloor | PolicyName::PrewarmSplit => {
            PREWARM_QUANTILES.to_vec()
        }
        PolicyName::ScheduledFloor => FLOOR_FACTORS.to_vec(),
        PolicyName::HpaTarget => std::iter::once(hpa_target)
            .chain(HPA_TARGETS.into_iter().filter(|&t| t < hpa_target - 1e-9))
            .collect(),
        _ => Vec::new(),
    }
}

/// The scheduled floor's slots: hours of the day or of the week, counted from t = 0. Part of its
/// knob: both are swept when the training days can judge both (`variants`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Slots {
    HourOfDay,
    HourOfWeek,
}

impl Slots {
    /// Slots in the table.
    pub fn count(self) -> usize {
        match self {
            Slots::HourOfDay => 24,
            Slots::HourOfWeek => 168,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Slots::HourOfDay => "hour-of-day",
            Slots::HourOfWeek => "hour-of-week",
        }
    }
}

/// What is swept with a policy's knob besides its value: prewarm's release, the scheduled
/// floor's slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Release(Release),
    Slots(Slots),
}

impl Variant {
    /// prewarm's release (`Slow`, the settings as they are, for a variant that is not one).
    pub fn release(self) -> Release {
        match self {
            Variant::Release(r) => r,
            Variant::Slots(_) => Release::Slow,
        }
    }

    /// The scheduled floor's slots (`HourOfDay` for a variant that is not one).
    pub fn slots(self) -> Slots {
        match self {
            Variant::Slots(s) => s,
            Variant::Release(_) => Slots::HourOfDay,
        }
    }
}

/// The variants swept with `policy`'s knob: the two releases of prewarm's spare (prewarm, and
/// prewarm-split's share of a pool's); the scheduled floor's hour-of-day slots, and
/// hour-of-week ones too when its table is fitted on at least 7 days (`floor_fit_days`; the
/// whole `end_s` without training days): fitted on fewer, the day it is chosen on is a weekday
/// the table never saw. One (`Slow`, no change) for every other policy, prewarm-floor among
/// them: it holds no spare, and a falling floor is not slowed (`Rails::replica_floor`), so
/// its fast points only repeated its slow ones.
pub fn variants(policy: PolicyName, train_days: Option<u32>, end_s: f64) -> Vec<Variant> {
    match policy {
        PolicyName::Prewarm | PolicyName::PrewarmSplit => {
            Release::ALL.map(Variant::Release).to_vec()
        }
        PolicyName::ScheduledFloor => {
            let fit_s = floor_fit_days(train_days).map_or(end_s, |d| d as f64 * DAY_S);
            let week = fit_s >= 7.0 * DAY_S - 1e-6;
            [Slots::HourOfDay, Slots::HourOfWeek][..1 + week as usize]
                .iter()
                .map(|&s| Variant::Slots(s))
                .collect()
        }
        _ => vec![Variant::Release(Release::Slow)],
    }
}

/// The days the scheduled floor's table is fitted on: the training days before the last, whose
/// day then chooses the variant and factor out of sample (`choice_days`). One training day is
/// fitted and chosen on itself; without training days the whole trace is, in hindsight.
pub fn floor_fit_days(train_days: Option<u32>) -> Option<u32> {
    train_days.map(|d| if d >= 2 { d - 1 } else { d })
}

/// The days (indices of a run's days) a knob is chosen on: the training days (every day
/// without them); the scheduled floor's, the training days its table was not fitted on.
pub fn choice_days(policy: PolicyName, train_days: Option<u32>) -> Range<usize> {
    let until = train_days.map_or(usize::MAX, |d| d as usize);
    match (policy, floor_fit_days(train_days)) {
        (PolicyName::ScheduledFloor, Some(fit)) if (fit as usize) < until => fit as usize..until,
        _ => 0..until,
    }
}

/// The scheduled floor's table before its knob: for each slot (hour from t = 0 modulo
/// `slots.count()`), the most replicas the ideal packing needed in that slot over the first
/// `fit_days` days (the whole trace without). A slot those hours never reached is 0 (the
/// user's minReplicas).
pub fn scheduled_peaks(peak_by_hour: &[u32], fit_days: Option<u32>, slots: Slots) -> Vec<u32> {
    let hours = fit_days.map_or(peak_by_hour.len(), |d| d as usize * 24);
    let n = slots.count();
    let seen = peak_by_hour.iter().take(hours).enumerate();
    crate::core::policy::profile::slot_peaks(seen.map(|(h, &p)| (h % n, p)), n)
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect()
}

/// The scheduled floor for knob `factor`: each slot's peak times the factor, rounded up to whole
/// nodes of `per_node` replicas.
pub fn scheduled_floor(peaks: &[u32], factor: f64, per_node: u32) -> Vec<u32> {
    peaks
        .iter()
        .map(|&p| whole_nodes(factor * p as f64, per_node) as u32)
        .collect()
}

/// Requests, delayed requests, GPU-seconds and node cold starts over the days before
/// `train_days` (all days when None), i.e. what a knob may be chosen on.
pub fn training_totals(days: &[DayStats], train_days: Option<u32>) -> DayStats {
    totals(days, 0..train_days.map_or(usize::MAX, |d| d as usize))
}

/// The days of `on` (clipped to those there are) added up.
fn totals(days: &[DayStats], on: Range<usize>) -> DayStats {
    let until = on.end.min(days.len());
    let mut total = DayStats::default();
    days[on.start.min(until)..until]
        .iter()
        .for_each(|d| total.add(d));
    total
}

/// The index of the point to report: the fewest training GPU-seconds among the points whose
/// training delayed fraction meets `slo_fraction`; if none does, the smallest delayed fraction
/// (then the fewest GPU-seconds). Only the days of `on` (`choice_days`) are looked at.
pub fn choose(points: &[&[DayStats]], on: Range<usize>, slo_fraction: f64) -> usize {
    let totals: Vec<DayStats> = points.iter().map(|days| totals(days, on.clone())).collect();
    let meeting = totals
        .iter()
        .enumerate()
        .filter(|(_, t)| t.delayed_fraction() <= slo_fraction)
        .min_by(|a, b| a.1.gpu_seconds.total_cmp(&b.1.gpu_seconds));
    if let Some((i, _)) = meeting {
        return i;
    }
    totals
        .iter()
        .enumerate()
        .min_by(|a, b| {
            a.1.delayed_fraction()
                .total_cmp(&b.1.delayed_fraction())
                .then(a.1.gpu_seconds.total_cmp(&b.1.gpu_seconds))
        })
        .map_or(0, |(i, _)| i)
}

/// The index of the point with the least training cost: each delayed request at
/// `delayed_request_usd` plus each GPU-hour at `gpu_hour_usd` (the fewest GPU-seconds on a tie).
/// The newsvendor's choice made on the training days themselves (`on`), with no SLO to meet.
pub fn choose_by_cost(
    points: &[&[DayStats]],
    on: Range<usize>,
    delayed_request_usd: f64,
    gpu_hour_usd: f64,
) -> usize {
    let cost = |t: &DayStats| {
        t.delayed as f64 * delayed_request_usd + t.gpu_seconds / 3600.0 * gpu_hour_usd
    };
    points
        .iter()
        .map(|days| totals(days, on.clone()))
        .enumerate()
        .min_by(|a, b| {
            cost(&a.1)
                .total_cmp(&cost(&b.1))
                .then(a.1.gpu_seconds.total_cmp(&b.1.gpu_seconds))
        })
        .map_or(0, |(i, _)| i)
}

/// The index of the point a comparison reports for `policy` among `points` (each a run's days):
/// on its `choice_days`, the least cost with a price of a delayed request, else `choose`
/// against the SLO.
pub fn chosen(policy: PolicyName, points: &[&[DayStats]], setup: &Setup) -> usize {
    let on = choice_days(policy, setup.train_days);
    match setup.delayed_request_cost {
        Some(usd) => choose_by_cost(points, on, usd, setup.usd_per_gpu_hour()),
        None => choose(points, on, setup.slo_fraction),
    }
}

/// Where scoring starts: after the burn-in, and after the training days.
pub fn score_from(burn_in_s: f64, train_days: Option<u32>) -> f64 {
    burn_in_s.max(train_days.map_or(0.0, |d| d as f64 * DAY_S))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(requests: u64, delayed: u64, gpu_seconds: f64) -> DayStats {
        DayStats {
            requests,
            delayed,
            gpu_seconds,
            ..DayStats::default()
        }
    }

    #[test]
    fn a_scored_day_never_chooses_the_knob() {
        // Two training days, then scored days. On the training days knob 0 meets a 1 % SLO
        // (5 / 1000 delayed) with fewer GPU-seconds than knob 1; on the scored day knob 0 fails
        // badly. Whatever the scored day holds, knob 0 is chosen.
        for scored in [day(1000, 900, 1.0), day(1000, 0, 1e9), day(0, 0, 0.0)] {
            let a = [day(500, 2, 100.0), day(500, 3, 100.0), scored];
            let b = [day(500, 0, 300.0), day(500, 0, 300.0), day(1000, 0, 10.0)];
            assert_eq!(
                choose(
                    &[&a, &b],
                    choice_days(PolicyName::StaticPeak, Some(2)),
                    0.01
                ),
                0,
                "{scored:?}"
            );
        }
        // Scored on the same days (no --train-days): the third day counts and knob 1 wins.
        let a = [day(500, 2, 100.0), day(500, 3, 100.0), day(1000, 900, 1.0)];
        let b = [day(500, 0, 300.0), day(500, 0, 300.0), day(1000, 0, 10.0)];
        assert_eq!(
            choose(&[&a, &b], choice_days(PolicyName::StaticPeak, None), 0.01),
            1
        );
    }

    #[test]
    fn training_totals_add_up_the_training_days_cold_starts_too() {
        // Days 0 and 1 train (3 + 4 node cold starts, 1 + 2 replica cold starts, 10 + 20 GPU-s);
        // day 2 (100 and 50) is scored.
        let with = |cold_starts, replica_cold_starts, gpu_seconds| DayStats {
            cold_starts,
            replica_cold_starts,
            ..day(10, 1, gpu_seconds)
        };
        let days = [with(3, 1, 10.0), with(4, 2, 20.0), with(100, 50, 1e6)];
        let t = training_totals(&days, Some(2));
        assert_eq!((t.requests, t.delayed, t.cold_starts), (20, 2, 7));
        assert_eq!(t.replica_cold_starts, 3);
        assert_eq!(t.gpu_seconds, 30.0);
        assert_eq!(training_totals(&days, None).cold_starts, 107);
        assert_eq!(training_totals(&days, None).replica_cold_starts, 53);
    }

    #[test]
    fn the_cost_choice_weighs_delays_against_gpu_hours_on_training_days_only() {
        // Point a: 100 delayed, 10 GPU-h on the training day; b: 0 delayed, 30 GPU-h. The scored
        // day (b far better) never counts. At $1 per GPU-hour: a costs 100·p + 10, b costs 30.
        let a = [day(1000, 100, 36_000.0), day(1000, 100, 36_000.0)];
        let b = [day(1000, 0, 108_000.0), day(1000, 0, 1.0)];
        // (price of a delayed request, the point chosen): 0.1 → a 20 < 30; 0.3 → a 40 > 30.
        for (usd, want) in [(0.1, 0), (0.3, 1), (0.2, 0)] {
            assert_eq!(choose_by_cost(&[&a, &b], 0..1, usd, 1.0), want, "at ${usd}");
        }
    }

    #[test]
    fn without_a_point_meeting_the_slo_the_least_delay_wins() {
        let a = [day(100, 50, 1.0)];
        let b = [day(100, 10, 5.0)];
        assert_eq!(choose(&[&a, &b], 0..usize::MAX, 0.001), 1);
    }

    #[test]
    fn grids_scale_with_the_training_peak() {
        // P = 40: N = ceil(40 x factor) = 0, 1, 1, 2, 4, 8, 14, 20 -> 1 repeated once.
        assert_eq!(
            grid(PolicyName::Buffer, 40, 1, None, 0.7),
            vec![0.0, 1.0, 2.0, 4.0, 8.0, 14.0, 20.0]
        );
        assert_eq!(
            grid(PolicyName::Buffer, 40, 1, Some(5), 0.7),
            vec![0.0, 1.0, 2.0, 4.0]
        );
        // Static from 0.25 P, below the half a peak where its chosen point sat on the edge.
        assert_eq!(
            grid(PolicyName::StaticPeak, 40, 1, None, 0.7),
            vec![10.0, 14.0, 20.0, 30.0, 36.0, 40.0, 44.0, 50.0, 60.0, 80.0]
        );
        assert!(grid(PolicyName::Reactive, 40, 1, None, 0.7).is_empty());
        assert_eq!(score_from(1800.0, Some(7)), 7.0 * DAY_S);
    }

    #[test]
    fn replica_grids_are_whole_nodes() {
        // Four replicas a node (8 GPUs, 2 a replica), P = 34: a fleet of 34 takes 9 nodes, the
        // GPUs of 36 replicas, so 36 is what is run. Static 17, 26, 31, 34, 38, 43, 51, 68 up to
        // a multiple of 4: 20, 28, 32, 36, 40, 44, 52, 68; 0.25 and 0.35 P (9, 12) give 12.
        assert_eq!(
            grid(PolicyName::StaticPeak, 34, 4, None, 0.7),
            vec![12.0, 20.0, 28.0, 32.0, 36.0, 40.0, 44.0, 52.0, 68.0]
        );
        // Buffer 0, 1, 1, 2, 4, 7, 12, 17 -> 0, 4, 4, 4, 4, 8, 12, 20 -> repeats dropped; a cap
        // of 9 keeps 0, 4, 8.
        assert_eq!(
            grid(PolicyName::Buffer, 34, 4, None, 0.7),
            vec![0.0, 4.0, 8.0, 12.0, 20.0]
        );
        assert_eq!(
            grid(PolicyName::Buffer, 34, 4, Some(9), 0.7),
            vec![0.0, 4.0, 8.0]
        );
        // The floor: 5 x 1.5 = 7.5 -> 8 (two nodes); 1 x 1.5 -> 4 (one node); 0 stays 0.
        assert_eq!(scheduled_floor(&[5, 1, 0], 1.5, 4), vec![8, 4, 0]);
        assert_eq!(score_from(1800.0, None), 1800.0);
    }

    #[test]
    fn the_hpa_target_grid_starts_at_the_users_target_and_goes_down() {
        let g = |t| grid(PolicyName::HpaTarget, 40, 1, None, t);
        assert_eq!(g(0.7), vec![0.7, 0.6, 0.5, 0.4, 0.35, 0.3, 0.25, 0.2]);
        assert_eq!(g(0.9), vec![0.9, 0.7, 0.6, 0.5, 0.4, 0.35, 0.3, 0.25, 0.2]);
        assert_eq!(g(0.55), vec![0.55, 0.5, 0.4, 0.35, 0.3, 0.25, 0.2]);
        assert_eq!(g(0.2), vec![0.2]);
        assert_eq!(
            grid(PolicyName::ScheduledFloor, 40, 1, None, 0.7),
            vec![0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0]
        );
        // The quantiles between 0.99 and 0.999, where the chosen point sat on an edge.
        assert_eq!(
            grid(PolicyName::PrewarmFloor, 40, 1, None, 0.7),
            vec![0.5, 0.9, 0.99, 0.995, 0.998, 0.999]
        );
        // prewarm-floor holds no spare to release: its slow release only.
        assert_eq!(
            variants(PolicyName::PrewarmFloor, None, DAY_S),
            vec![Variant::Release(Release::Slow)]
        );
    }

    /// Requests of one second, `n` at once at `at` seconds (the ideal packing needs `n`
    /// one-slot replicas in that hour).
    fn burst(at: f64, n: usize) -> Vec<crate::sim::engine::Request> {
        (0..n)
            .map(|_| crate::sim::engine::Request {
                arrival: at,
                service_s: 1.0,
                prefill_s: 0.0,
                client: 0,
            })
            .collect()
    }

    #[test]
    fn the_scheduled_floor_is_learned_from_the_training_days_only() {
        const H: f64 = 3600.0;
        // Three training days of 4 days: the table is fitted on days 0 and 1 (day 2 chooses its
        // factor). Day 0 needs 2 replicas at 09:xx, day 1 needs 5 at 09:xx and 1 at 14:xx.
        // Hour-of-day slots: slot 9 = max(2, 5) = 5, slot 14 = 1, every other 0. Day 2 (held
        // out) has 40 at 09:xx, or 7 at 03:xx, or nothing: the table never moves.
        let training = [
            burst(9.0 * H + 60.0, 2),
            burst(DAY_S + 9.0 * H + 60.0, 5),
            burst(DAY_S + 14.0 * H, 1),
        ]
        .concat();
        let table = |scored: Vec<crate::sim::engine::Request>| {
            let reqs = [training.clone(), scored, burst(4.0 * DAY_S - 10.0, 1)].concat();
            let ideal =
                crate::sim::ideal::run(reqs.into_iter(), 0.0, 1, 1, 1, 60.0, Default::default());
            let fit = floor_fit_days(Some(3));
            scheduled_peaks(&ideal.peak_replicas_by_hour, fit, Slots::HourOfDay)
        };
        let mut want = vec![0; 24];
        want[9] = 5;
        want[14] = 1;
        for scored in [
            burst(2.0 * DAY_S + 9.0 * H + 60.0, 40),
            burst(2.0 * DAY_S + 3.0 * H, 7),
            Vec::new(),
        ] {
            assert_eq!(table(scored), want);
        }
        // Scored on the same days (no --train-days): day 2's 40 at 09:xx counts.
        let reqs = [training.clone(), burst(2.0 * DAY_S + 9.0 * H + 60.0, 40)].concat();
        let ideal =
            crate::sim::ideal::run(reqs.into_iter(), 0.0, 1, 1, 1, 60.0, Default::default());
        assert_eq!(
            scheduled_peaks(&ideal.peak_replicas_by_hour, None, Slots::HourOfDay)[9],
            40
        );
        // Hour-of-week, 168 slots, fitted on 7 days; hour 24 + 9 is slot 33.
        let mut by_hour = vec![0; 8 * 24];
        by_hour[24 + 9] = 3;
        by_hour[7 * 24 + 9] = 50; // day 7, not fitted on
        let week = scheduled_peaks(&by_hour, Some(7), Slots::HourOfWeek);
        assert_eq!((week.len(), week[33], week[9]), (168, 3, 0));
        // The knob: x 1.5 rounded up, 0 stays 0.
        assert_eq!(scheduled_floor(&[5, 1, 0], 1.5, 1), vec![8, 2, 0]);
        assert_eq!(scheduled_floor(&[4, 1, 0], 0.5, 1), vec![2, 1, 0]);
    }

    #[test]
    fn the_floor_table_is_fitted_on_the_training_days_before_the_last() {
        // Nine days; day d needs PEAKS[d] replicas at 09:xx, day 1 also 1 at 14:xx.
        const PEAKS: [u32; 9] = [2, 5, 3, 4, 1, 6, 2, 7, 40];
        let mut by_hour = vec![0; 9 * 24];
        for (d, &p) in PEAKS.iter().enumerate() {
            by_hour[d * 24 + 9] = p;
        }
        by_hour[24 + 14] = 1;
        // (training days, slots, the (slot, peak) pairs the table holds), worked by hand:
        type Row = (Option<u32>, Slots, &'static [(usize, u32)]);
        let rows: [Row; 6] = [
            // 3 training days: fitted on days 0-1, max(2, 5) = 5; day 2's 3 is not in it.
            (Some(3), Slots::HourOfDay, &[(9, 5), (14, 1), (3, 0)]),
            // 2 training days: fitted on day 0 alone.
            (Some(2), Slots::HourOfDay, &[(9, 2), (14, 0)]),
            // 1 training day: fitted (and chosen) on it.
            (Some(1), Slots::HourOfDay, &[(9, 2), (14, 0)]),
            // No training days: the whole trace, in hindsight (day 8's 40).
            (None, Slots::HourOfDay, &[(9, 40), (14, 1)]),
            // 8 training days: fitted on days 0-6, max(2, 5, 3, 4, 1, 6, 2) = 6; day 7's 7 is not.
            (Some(8), Slots::HourOfDay, &[(9, 6), (14, 1)]),
            // The same by hour of the week: day d's 09:xx is slot 24 d + 9; day 7 would be slot 9.
            (
                Some(8),
                Slots::HourOfWeek,
                &[(9, 2), (33, 5), (38, 1), (57, 3), (153, 2), (14, 0)],
            ),
        ];
        for (train, slots, want) in rows {
            let table = scheduled_peaks(&by_hour, floor_fit_days(train), slots);
            assert_eq!(table.len(), slots.count());
            for &(slot, peak) in want {
                assert_eq!(table[slot], peak, "{train:?} {slots:?} slot {slot}");
            }
        }
    }

    #[test]
    fn the_floor_is_chosen_on_the_training_day_its_table_never_saw() {
        use PolicyName::{ScheduledFloor, StaticPeak};
        // (policy, training days, the days the knob is chosen on):
        let rows = [
            (ScheduledFloor, Some(3), 2..3),
            (ScheduledFloor, Some(8), 7..8),
            (ScheduledFloor, Some(1), 0..1), // one day: fitted and chosen on it
            (ScheduledFloor, None, 0..usize::MAX),
            (StaticPeak, Some(3), 0..3),
            (StaticPeak, None, 0..usize::MAX),
        ];
        for (policy, train, want) in rows {
            assert_eq!(choice_days(policy, train), want, "{policy:?} {train:?}");
        }
        // Factor 1 (a) delays nothing on days 0-1, which its table was fitted on, and 15 of 1000
        // on day 2; factor 1.25 (b) delays nothing for 150 GPU-s a day. At a 1 % SLO, on all
        // three days a delays 15 / 3000 = 0.5 % and wins on GPU-s; on day 2 alone it delays
        // 1.5 % and b wins. Day 3 (scored) never counts.
        let a = [
            day(1000, 0, 100.0),
            day(1000, 0, 100.0),
            day(1000, 15, 100.0),
        ];
        let b = [
            day(1000, 0, 150.0),
            day(1000, 0, 150.0),
            day(1000, 0, 150.0),
        ];
        let (a, b) = (
            [&a[..], &[day(1000, 0, 1.0)]].concat(),
            [&b[..], &[day(1000, 900, 1.0)]].concat(),
        );
        assert_eq!(choose(&[&a, &b], choice_days(StaticPeak, Some(3)), 0.01), 0);
        assert_eq!(
            choose(&[&a, &b], choice_days(ScheduledFloor, Some(3)), 0.01),
            1
        );
        assert_eq!(
            choose_by_cost(
                &[&a, &b],
                choice_days(ScheduledFloor, Some(3)),
                10.0,
                3600.0
            ),
            1
        );
    }

    #[test]
    fn hour_of_week_is_offered_when_its_table_has_seen_the_day_it_is_chosen_on() {
        use Slots::{HourOfDay as D, HourOfWeek as W};
        let slots = |train, days: f64| -> Vec<Slots> {
            variants(PolicyName::ScheduledFloor, train, days * DAY_S)
                .into_iter()
                .map(Variant::slots)
                .collect()
        };
        // 8 training days: fitted on 7, chosen on day 7 (the weekday of day 0).
        assert_eq!(slots(Some(8), 14.0), vec![D, W]);
        // 7: fitted on 6, chosen on the one weekday the table never saw.
        assert_eq!(slots(Some(7), 14.0), vec![D]);
        assert_eq!(slots(Some(2), 7.0), vec![D]);
        // In hindsight on the whole trace: a week of it offers both.
        assert_eq!(slots(None, 7.0), vec![D, W]);
        assert_eq!(slots(None, 3.0), vec![D]);
    }

    #[test]
    fn fast_release_holds_one_lead_time_then_lets_go_at_once() {
        use crate::core::{HeadroomKind, PolicySpec, TargetSpec};
        let policy = PolicySpec {
            lead_time_s: 90.0,
            ..PolicySpec::default()
        };
        let target = TargetSpec::new("t", "gpu", HeadroomKind::NodePoolReplicas, 40);
        let (p, t) = Release::Slow.apply(policy.clone(), target.clone());
        assert_eq!((p, t), (policy.clone(), target.clone()));
        let (p, t) = Release::Fast.apply(policy, target);
        assert_eq!(
            (p.scale_down_delay, p.cooldown_s),
            (crate::core::spec::ScaleDownDelay::Lead, 0.0)
        );
        assert_eq!(t.max_step_down, 40);
        assert_eq!(variants(PolicyName::Prewarm, None, DAY_S).len(), 2);
        assert_eq!(
            variants(PolicyName::Buffer, None, DAY_S),
            vec![Variant::Release(Release::Slow)]
        );
    }
}
