//! The report room. This file: the per-policy figures of a comparison (what one row of the
//! report holds and how it is computed from a run); it changes when a figure is added or computed
//! differently. [`print`] lays them out as text.

pub mod print;

use serde::Serialize;

use super::classes::Class;
use super::engine::{ClassScored, LeadReport, RunResult};
use super::ideal::IdealResult;
use super::stats::{block_bootstrap95, interval95, DayStats, GpuSplit, Waterfall, DAY_S};
use crate::core::policy::residual::{Decomposition, KindCounts};

/// Resamples of the band coverage's block bootstrap.
const BOOTSTRAP_RESAMPLES: usize = 1000;

/// One row of the comparison: figures over the scored requests and time only.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PolicyReport {
    pub policy: String,
    /// E.g. the chosen knob and on which days it was chosen.
    pub detail: String,
    pub requests: u64,
    /// Fraction of requests whose queueing wait exceeded the SLO wait (absolute).
    pub delayed_fraction: f64,
    /// The same figure (kept under its former name for existing readers of the JSON).
    pub delayed_any_fraction: f64,
    pub p50_wait_s: f64,
    pub p99_wait_s: f64,
    pub max_wait_s: f64,
    /// Time to first token: wait plus prefill.
    pub p50_ttft_s: f64,
    pub p99_ttft_s: f64,
    pub gpu_hours: f64,
    /// GPU-hours by what the GPUs did (adds up to `gpu_hours`).
    pub gpu_hours_split: GpuSplit,
    pub idle_gpu_fraction: f64,
    /// GPU-hours by cause (they add up to `gpu_hours`).
    pub waterfall: Waterfall,
    /// Every waterfall part but serving, as a share of the GPU-hours: the idle share.
    pub idle_share: f64,
    pub cost_usd: f64,
    /// Node cold starts: inference pods that waited for a node launch or its image pull.
    pub cold_starts: u64,
    /// Replica cold starts: replicas that loaded their model while requests queued for them.
    pub replica_cold_starts: u64,
    pub nodes_launched: u64,
    /// GPU-hours divided by the true lower bound's (sim/bound.rs): regret, since the bound
    /// serves every request on arrival.
    pub gpu_hours_vs_bound: f64,
    /// GPU-hours divided by the SLO-wait bound's (sim/wait_bound.rs): the distance from the
    /// fewest GPU-hours any policy can spend without delaying a request past the SLO wait.
    pub gpu_hours_vs_slo_bound: f64,
    /// `cost_usd` per week of scored time (the instance's price, spot discount applied).
    pub usd_per_week: f64,
    /// Dollars per scored week above the true lower bound's.
    pub regret_usd_per_week: f64,
    pub meets_slo: bool,
    /// Per scored day (days from the start of the workload; the first and last may be partial).
    pub days: Vec<DayReport>,
    /// Totals over the training days (None without `--train-days`): what a knob is chosen on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub training: Option<TrainingTotals>,
    /// 95 % interval of the mean daily delayed fraction (two scored days or more).
    pub delayed_fraction_ci95: Option<(f64, f64)>,
    /// 95 % interval of the mean daily GPU-hours.
    pub gpu_hours_per_day_ci95: Option<(f64, f64)>,
    /// prewarm: share of scored decisions whose lead-time band (blended forecast plus band)
    /// covered the highest arrival rate seen within the next lead time, its nominal quantile,
    /// and a 95 % interval by the moving-block bootstrap (blocks of one hour of decisions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band_coverage: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band_nominal_quantile: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band_coverage_ci95: Option<(f64, f64)>,
    /// prewarm: share of those decisions the profile of the day sized (the forecaster the
    /// calibrations chose; the others the blend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_share: Option<f64>,
    /// The delayed requests decomposed (forecastable, lead miss, unforecastable at this lead)
    /// and the constant reserve that removes the unforecastable part (core::policy::residual);
    /// None for the packings, which delay nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub residual: Option<Decomposition>,
    /// The scored figures per client class (empty: the workload has one class, reported as the
    /// totals above).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassReport>,
    /// prewarm learning its lead time: the horizon of its last decision (each phase's learned
    /// quantile and samples, or why LEAD_TIME_SECONDS stood), when it was first learned, and how
    /// many decisions used the fallback.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lead_time: Option<LeadReport>,
}

/// A policy's scored figures for the requests of one client class.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassReport {
    pub class: Class,
    pub requests: u64,
    pub delayed_fraction: f64,
    pub p99_wait_s: f64,
    pub max_wait_s: f64,
    /// Replicas that loaded their model while a request of this class queued for them.
    pub replica_cold_starts: u64,
    pub meets_slo: bool,
    /// This class's delayed requests by kind (the policy's residual split by class).
    pub residual: Option<KindCounts>,
}

impl ClassReport {
    fn of(class: Class, s: &ClassScored, slo_fraction: f64) -> Self {
        let delayed_fraction = s.delayed as f64 / s.requests.max(1) as f64;
        ClassReport {
            class,
            requests: s.requests,
            delayed_fraction,
            p99_wait_s: s.waits.quantile(0.99),
            max_wait_s: s.waits.max(),
            replica_cold_starts: s.replica_cold_starts,
            meets_slo: delayed_fraction <= slo_fraction,
            residual: None,
        }
    }
}

/// One scored day of a policy.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DayReport {
    pub day: usize,
    pub requests: u64,
    pub delayed_fraction: f64,
    pub gpu_hours: f64,
    pub cold_starts: u64,
}

/// A run's figures over its training days (the days before `--train-days`, burn-in left out).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TrainingTotals {
    pub requests: u64,
    pub delayed_fraction: f64,
    pub gpu_hours: f64,
    /// Node cold starts on the training days.
    pub cold_starts: u64,
    /// Replica cold starts (requests queued while it loaded) on the training days.
    pub replica_cold_starts: u64,
}

impl TrainingTotals {
    /// The totals over the first `train_days` days of `run` (None when there are none).
    pub fn of(run: &RunResult, train_days: Option<u32>) -> Option<Self> {
        train_days.map(|d| Self::over(&run.days, Some(d)))
    }

    /// The totals over the first `train_days` of `days` (None: every day).
    pub fn over(days: &[DayStats], train_days: Option<u32>) -> Self {
        let t = super::knob_grid::training_totals(days, train_days);
        TrainingTotals {
            requests: t.requests,
            delayed_fraction: t.delayed_fraction(),
            gpu_hours: t.gpu_seconds / 3600.0,
            cold_starts: t.cold_starts,
            replica_cold_starts: t.replica_cold_starts,
        }
    }
}

/// What every row is measured against.
#[derive(Clone, Copy, Debug)]
pub struct RunContext {
    pub slo_wait_s: f64,
    pub slo_fraction: f64,
    pub score_from_s: f64,
    /// Days the knobs are chosen on (None: no training days).
    pub train_days: Option<u32>,
    /// The true lower bound's GPU-hours over the scored time.
    pub bound_gpu_hours: f64,
    /// The SLO-wait bound's GPU-hours over the scored time.
    pub slo_bound_gpu_hours: f64,
    pub usd_per_gpu_hour: f64,
    /// Seconds of scored time (for the per-week figures).
    pub scored_s: f64,
    /// The lead time the residual is decomposed at (LEAD_TIME_SECONDS of the comparison).
    pub lead_time_s: f64,
}

impl RunContext {
    /// Scales a scored total to one week.
    fn per_week(&self, total: f64) -> f64 {
        if self.scored_s > 0.0 {
            total * 7.0 * DAY_S / self.scored_s
        } else {
            0.0
        }
    }

    /// The dollar figures of a row spending `gpu_hours`: per scored week, and above the bound.
    fn dollars(&self, gpu_hours: f64) -> (f64, f64) {
        let week = self.per_week(gpu_hours * self.usd_per_gpu_hour);
        let regret = self.per_week((gpu_hours - self.bound_gpu_hours) * self.usd_per_gpu_hour);
        (week, regret)
    }
}

impl PolicyReport {
    pub fn from_run(policy: &str, detail: String, run: &RunResult, ctx: &RunContext) -> Self {
        let s = &run.scored;
        let requests = s.requests.max(1) as f64;
        let delayed_fraction = s.delayed as f64 / requests;
        let split = s.gpu.hours();
        let waterfall = s.waterfall.scaled(1.0 / 3600.0);
        let gpu_hours = split.total;
        let first_day = (ctx.score_from_s / DAY_S).floor() as usize;
        let days: Vec<DayReport> = run
            .days
            .iter()
            .enumerate()
            .skip(first_day)
            .filter(|(_, d)| d.requests > 0)
            .map(|(day, d)| DayReport {
                day,
                requests: d.requests,
                delayed_fraction: d.delayed_fraction(),
                gpu_hours: d.gpu_seconds / 3600.0,
                cold_starts: d.cold_starts,
            })
            .collect();
        let daily = |f: fn(&DayReport) -> f64| -> Vec<f64> { days.iter().map(f).collect() };
        let residual = run
            .residual
            .decompose(ctx.lead_time_s, ctx.usd_per_gpu_hour);
        PolicyReport {
            policy: policy.to_string(),
            detail,
            requests: s.requests,
            delayed_fraction,
            delayed_any_fraction: delayed_fraction,
            p50_wait_s: s.waits.quantile(0.50),
            p99_wait_s: s.waits.quantile(0.99),
            max_wait_s: s.waits.max(),
            p50_ttft_s: s.ttft.quantile(0.50),
            p99_ttft_s: s.ttft.quantile(0.99),
            gpu_hours,
            gpu_hours_split: split,
            idle_gpu_fraction: idle(split.busy, split.total),
            idle_share: waterfall.idle_share(),
            waterfall,
            cost_usd: gpu_hours * ctx.usd_per_gpu_hour,
            cold_starts: s.cold_starts,
            replica_cold_starts: s.replica_cold_starts,
            nodes_launched: s.nodes_launched,
            gpu_hours_vs_bound: ratio(gpu_hours, ctx.bound_gpu_hours),
            gpu_hours_vs_slo_bound: ratio(gpu_hours, ctx.slo_bound_gpu_hours),
            usd_per_week: ctx.dollars(gpu_hours).0,
            regret_usd_per_week: ctx.dollars(gpu_hours).1,
            meets_slo: delayed_fraction <= ctx.slo_fraction,
            // A share is never negative: the interval is cut at 0.
            delayed_fraction_ci95: interval95(&daily(|d| d.delayed_fraction))
                .map(|(lo, hi)| (lo.max(0.0), hi)),
            gpu_hours_per_day_ci95: interval95(&daily(|d| d.gpu_hours)),
            days,
            training: TrainingTotals::of(run, ctx.train_days),
            band_coverage: None,
            band_nominal_quantile: None,
            band_coverage_ci95: None,
            profile_share: None,
            classes: Class::ALL
                .iter()
                .zip(&s.classes)
                .map(|(&c, s)| ClassReport {
                    residual: Some(
                        residual.tally(
                            run.residual
                                .delayed_by_class
                                .get(c as usize)
                                .map_or(&[][..], Vec::as_slice),
                        ),
                    ),
                    ..ClassReport::of(c, s, ctx.slo_fraction)
                })
                .collect(),
            residual: Some(residual),
            lead_time: run.lead.clone(),
        }
        .with_band(run)
    }

    fn with_band(mut self, run: &RunResult) -> Self {
        let b = &run.band;
        let (covered, total) = b
            .days
            .iter()
            .fold((0u64, 0u64), |acc, d| (acc.0 + d.0, acc.1 + d.1));
        if total > 0 {
            self.band_coverage = Some(covered as f64 / total as f64);
            self.band_nominal_quantile = Some(b.nominal);
            self.profile_share = Some(b.by_profile as f64 / total as f64);
            // Moving-block bootstrap over the scored decisions in time order, blocks of one
            // hour of decisions: long enough to hold the dependence of neighbouring decisions
            // (their lead times overlap; a burst is missed by every decision before it), short
            // enough for dozens of blocks over a few scored days.
            let block = (3600.0 / b.tick_s.max(1.0)).round() as usize;
            self.band_coverage_ci95 = block_bootstrap95(&b.hits, block, BOOTSTRAP_RESAMPLES);
        }
        self
    }

    /// The ideal packing: capacity that appears the instant it is needed, setups free.
    pub fn from_ideal(ideal: &IdealResult, ctx: &RunContext) -> Self {
        Self::packing(
            "ideal",
            "perfect packing, no queue, capacity without setup",
            ideal.gpu_seconds,
            ideal.busy_gpu_seconds,
            ideal,
            ctx,
        )
    }

    /// The true lower bound: the ideal packing plus the setups a clairvoyant still pays.
    pub fn from_lower_bound(ideal: &IdealResult, ctx: &RunContext) -> Self {
        Self::packing(
            "lower-bound",
            "clairvoyant loaded replicas on nodes started one setup ahead, no queue",
            ideal.lower_bound_gpu_seconds,
            ideal.busy_gpu_seconds,
            ideal,
            ctx,
        )
    }

    /// The true lower bound when each request may wait up to the SLO's wait. Its serving part
    /// is the requests' work alone: waiting packs them tighter than the ideal's replicas.
    pub fn from_slo_bound(ideal: &IdealResult, ctx: &RunContext) -> Self {
        let mut row = Self::packing(
            "slo-bound",
            &format!(
                "as lower-bound, each request may wait up to {:.0}s",
                ctx.slo_wait_s
            ),
            ideal.slo_bound_gpu_seconds,
            ideal.work_gpu_seconds,
            ideal,
            ctx,
        );
        row.max_wait_s = ctx.slo_wait_s;
        row
    }

    /// A bound's row: `gpu_seconds` in all, `busy_gpu_seconds` of them serving.
    fn packing(
        policy: &str,
        detail: &str,
        gpu_seconds: f64,
        busy_gpu_seconds: f64,
        ideal: &IdealResult,
        ctx: &RunContext,
    ) -> Self {
        let gpu_hours = gpu_seconds / 3600.0;
        let busy = busy_gpu_seconds / 3600.0;
        let (usd_per_week, regret_usd_per_week) = ctx.dollars(gpu_hours);
        PolicyReport {
            policy: policy.into(),
            detail: detail.into(),
            requests: ideal.scored_requests,
            delayed_fraction: 0.0,
            delayed_any_fraction: 0.0,
            p50_wait_s: 0.0,
            p99_wait_s: 0.0,
            max_wait_s: 0.0,
            p50_ttft_s: 0.0,
            p99_ttft_s: 0.0,
            gpu_hours,
            gpu_hours_split: GpuSplit {
                total: gpu_hours,
                busy,
            },
            idle_gpu_fraction: idle(busy_gpu_seconds, gpu_seconds),
            idle_share: idle(busy_gpu_seconds, gpu_seconds),
            // The packing is a bound, not a run: its serving is the ideal's, the rest unused.
            waterfall: Waterfall {
                serving: busy,
                empty: gpu_hours - busy,
                ..Waterfall::default()
            },
            cost_usd: gpu_hours * ctx.usd_per_gpu_hour,
            cold_starts: 0,
            replica_cold_starts: 0,
            nodes_launched: 0,
            gpu_hours_vs_bound: ratio(gpu_hours, ctx.bound_gpu_hours),
            gpu_hours_vs_slo_bound: ratio(gpu_hours, ctx.slo_bound_gpu_hours),
            usd_per_week,
            regret_usd_per_week,
            meets_slo: true,
            days: Vec::new(),
            training: None,
            delayed_fraction_ci95: None,
            gpu_hours_per_day_ci95: None,
            band_coverage: None,
            band_nominal_quantile: None,
            band_coverage_ci95: None,
            profile_share: None,
            residual: None,
            classes: Vec::new(),
            lead_time: None,
        }
    }
}

fn idle(busy: f64, total: f64) -> f64 {
    if total > 0.0 {
        (1.0 - busy / total).max(0.0)
    } else {
        0.0
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}
