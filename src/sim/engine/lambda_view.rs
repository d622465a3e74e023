//! The Lambda's view: what the simulated prewarm sees before `crate::core::decide()`. The
//! windows come from the tick's own read plan and the `Observation` from its own assembly
//! (`crate::core::policy::observe`); this file only evaluates, for the windows the plan names,
//! what the built-in vLLM queries (src/adapters/metrics/queries.rs) return from what the
//! servers export, scraped every step (what Prometheus would answer), and what the Kubernetes
//! API would say of the pods and the HPA:
//!
//! - waiting, running: `sum(vllm:num_requests_waiting|running)`, the gauges at each scrape;
//! - arrival rate: `sum(rate(vllm:request_success_total[W]))` (completions, not arrivals) plus
//!   `clamp_min(sum(deriv(waiting[W])) + sum(deriv(running[W])), 0)`, W the policy's
//!   RATE_WINDOW_SECONDS (the tick's queries use the same, `queries::for_target`); `rate` is
//!   Prometheus' `extrapolatedRate` (`prometheus_rate`) over the counter's scrapes inside
//!   `(t - W, t]`: with regular scrapes and a full window the increase between the first and
//!   last scrape over their distance; near the trace's start, or after an idle stretch, it
//!   extrapolates by half a scrape and never past the counter's zero, as Prometheus does;
//!   `deriv` is the least-squares slope of the gauge scrapes inside the window;
//! - service time: `rate(e2e_request_latency_seconds_sum[2W]) / rate(..._count[2W])`, the mean
//!   end-to-end latency of the requests completed in the window, queueing included; no sample
//!   when none completed (0/0);
//! - pending pods: inference pods the scheduler calls Unschedulable: not bound to a Ready node
//!   (pods on a Ready node pulling images or loading the model are not counted);
//! - serving replicas: replicas Ready to serve.
//!
//! A scrape becomes visible `ingestion_lag_s` after it is taken. Samples start at t = 0: the
//! history before the trace is never made up (the burn-in keeps the first window out of the
//! scores). How the eyes align the plan's windows to the scrape grid, and where that differs
//! from the tick's reads, is written down in `crate::core::policy::observe`.

use crate::core::policy::observation::{HpaMetric, HpaStatus};
use crate::core::policy::observe::{
    self, PodCounts, ReadPlan, Reads, RecentSignals, SeasonHistory, Window,
};
use crate::core::policy::plan::ForecastSummary;
use crate::core::{Observation, PolicySpec, Sample, TargetSpec};
use crate::sim::stats::DAY_S;

use super::pods::Phase;
use super::{Replicas, Sim};

/// The answers of settled scrapes (`Sim::settled`), for one rate window: by scrape, None until
/// computed, then the query's answer (None: no sample).
#[derive(Debug)]
pub(super) struct RateMemo {
    window_s: f64,
    /// The arrival-rate query (`fresh_arrival_rate_at`).
    rates: Vec<Option<Option<f64>>>,
    /// The service-time query (`fresh_service_time_at`).
    service_times: Vec<Option<Option<f64>>>,
}

impl Default for RateMemo {
    fn default() -> Self {
        RateMemo {
            window_s: f64::NAN,
            rates: Vec::new(),
            service_times: Vec::new(),
        }
    }
}

impl Sim<'_> {
    /// Counts a completion (and its end-to-end latency) in the first scrape at or after `done`.
    pub(super) fn record_completion(&mut self, done: f64, latency_s: f64) {
        let b = (done / self.cfg.step_s - 1e-9).ceil().max(0.0) as usize;
        if self.completions_at.len() <= b {
            self.completions_at.resize(b + 1, 0);
            self.latency_sum_at.resize(b + 1, 0.0);
        }
        self.completions_at[b] += 1;
        self.latency_sum_at[b] += latency_s;
    }

    /// Inference pods not yet bound to a Ready node.
    fn unschedulable_pods(&self) -> u32 {
        let on_launching_node = self
            .live_pods
            .iter()
            .filter(|&&p| match self.pods[p].phase {
                Phase::Starting { node, .. } => self.cluster.nodes[node].ready_at > self.now,
                _ => false,
            })
            .count() as u32;
        self.pending_inference + on_launching_node
    }

    /// The newest scrape a query can see now (the ingestion lag), as a scrape index.
    fn newest_visible_scrape(&self) -> i64 {
        self.newest_visible_at(self.now)
    }

    /// The newest scrape a query can see at `t` (trace time), as a scrape index.
    /// The store's lag is `ingestion_lag_s` (what prewarm is told), and more in the rough world.
    fn newest_visible_at(&self, t: f64) -> i64 {
        let lag = self.cfg.ingestion_lag_s + self.cfg.world.extra_ingestion_lag_s;
        ((t - lag) / self.cfg.step_s + 1e-9).floor() as i64
    }

    /// The gauges an instant query at scrape `b` returns (a lost scrape's: world.rs).
    fn gauges_at(&self, b: usize) -> (f64, f64) {
        let b = self.stored_scrape(b);
        (
            *self.waiting_at_boundary.get(b).unwrap_or(&0) as f64,
            *self.running_at_boundary.get(b).unwrap_or(&0) as f64,
        )
    }

    /// The scrapes a range `(t - range_s, t]` ending at scrape `b` holds (Prometheus' ranges
    /// are open at the start), from the first scrape of the trace on; None before it.
    fn scrapes_in_range(&self, b: i64, range_s: f64) -> Option<(usize, usize)> {
        if b < 0 {
            return None;
        }
        let first = ((b as f64 - range_s / self.cfg.step_s + 1e-9).floor() as i64 + 1).max(0);
        Some((first as usize, b as usize))
    }

    /// PromQL `rate()` of an exported counter over `range_s` at scrape `b`: its value at each
    /// scrape in the range is what it counted since the trace started (`per_scrape` gives the
    /// counts of each scrape interval), extrapolated as Prometheus does (`prometheus_rate`).
    /// The counter's value at the range's first scrape matters only when it is small (the
    /// zero-point limit), so it is summed back only until it is large enough not to.
    fn counter_rate(&self, b: i64, range_s: f64, per_scrape: impl Fn(usize) -> f64) -> Option<f64> {
        let (first, last) = self.scrapes_in_range(b, range_s)?;
        if first >= last {
            return None;
        }
        let step = self.cfg.step_s;
        let increase: f64 = (first + 1..=last).map(&per_scrape).sum();
        let sampled = (last - first) as f64 * step;
        // The zero-point limit binds only while the counter at the first scrape is below
        // increase × range / sampled interval (the start gap is shorter than the range).
        let enough = increase * range_s / sampled;
        let mut at_first = 0.0;
        for k in (0..=first).rev() {
            at_first += per_scrape(k);
            if at_first >= enough {
                break;
            }
        }
        let mut counter = at_first;
        let points: Vec<(f64, f64)> = std::iter::once((first, at_first))
            .chain((first + 1..=last).map(|k| {
                counter += per_scrape(k);
                (k, counter)
            }))
            // The range holds only the scrapes the store kept (world.rs).
            .filter(|&(k, _)| self.kept(k))
            .map(|(k, v)| (k as f64 * step, v))
            .collect();
        prometheus_rate(&points, last as f64 * step, range_s)
    }

    /// The arrival-rate query evaluated at scrape `b` (`fresh_arrival_rate_at`), remembered once
    /// settled.
    fn arrival_rate_at(&self, b: i64, rate_window_s: f64) -> Option<f64> {
        self.settled(
            b,
            rate_window_s,
            |m| &mut m.rates,
            || self.fresh_arrival_rate_at(b, rate_window_s),
        )
    }

    /// The service-time query evaluated at scrape `b` (`fresh_service_time_at`), remembered once
    /// settled.
    fn service_time_at(&self, b: i64, rate_window_s: f64) -> Option<f64> {
        self.settled(
            b,
            rate_window_s,
            |m| &mut m.service_times,
            || self.fresh_service_time_at(b, rate_window_s),
        )
    }

    /// A query's answer at scrape `b` (`fresh`), remembered in `memo` once its scrapes can no
    /// longer change: every tick reads its season frames and recent window again, slid by one
    /// tick, so most of what it asks was computed at an earlier tick.
    fn settled(
        &self,
        b: i64,
        rate_window_s: f64,
        memo: impl Fn(&mut RateMemo) -> &mut Vec<Option<Option<f64>>>,
        fresh: impl Fn() -> Option<f64>,
    ) -> Option<f64> {
        // A scrape's gauges are set when it is taken and its completions counted when they start
        // (ahead of it), so scrape b and those before are final once scrape b + 2 is taken.
        let settled = b >= 0 && (b as usize) + 2 < self.waiting_at_boundary.len();
        if !settled {
            return fresh();
        }
        let b = b as usize;
        let mut all = self.settled_answers.borrow_mut();
        if all.window_s != rate_window_s {
            *all = RateMemo {
                window_s: rate_window_s,
                ..RateMemo::default()
            };
        }
        let known = memo(&mut all);
        if let Some(Some(answer)) = known.get(b) {
            return *answer;
        }
        let answer = fresh();
        if known.len() <= b {
            known.resize(b + 1, None);
        }
        known[b] = Some(answer);
        answer
    }

    /// The arrival-rate query evaluated at scrape `b`: completions `rate[W]` plus the clamped
    /// `deriv` of waiting + running, W = `rate_window_s` (RATE_WINDOW_SECONDS). None when the
    /// window holds fewer than two scrapes.
    fn fresh_arrival_rate_at(&self, b: i64, rate_window_s: f64) -> Option<f64> {
        let step = self.cfg.step_s;
        let rate = self.counter_rate(b, rate_window_s, |k| {
            f64::from(*self.completions_at.get(k).unwrap_or(&0))
        })?;
        let (first, bu) = self.scrapes_in_range(b, rate_window_s)?;
        let points: Vec<(f64, f64)> = (first..=bu)
            .filter(|&k| self.kept(k))
            .map(|k| {
                let (w, r) = self.gauges_at(k);
                (k as f64 * step, w + r)
            })
            .collect();
        Some(rate + slope(&points).max(0.0))
    }

    /// The service-time query evaluated at scrape `b`: `rate(sum[2W]) / rate(count[2W])` of the
    /// end-to-end latency; None when nothing completed (0/0).
    fn fresh_service_time_at(&self, b: i64, rate_window_s: f64) -> Option<f64> {
        let latency_window = 2.0 * rate_window_s;
        let count = self.counter_rate(b, latency_window, |k| {
            f64::from(*self.completions_at.get(k).unwrap_or(&0))
        });
        let sum = self.counter_rate(b, latency_window, |k| {
            *self.latency_sum_at.get(k).unwrap_or(&0.0)
        });
        match (sum, count) {
            (Some(sum), Some(count)) if count > 0.0 => Some(sum / count),
            _ => None,
        }
    }

    /// The arrival-rate samples of the scrapes `from..=to` (those a query can see), each at
    /// its scrape time.
    fn arrival_samples(&self, from: i64, to: i64, every: i64, rate_window_s: f64) -> Vec<Sample> {
        let (step, base) = (self.cfg.step_s, self.cfg.base_epoch);
        let to = to.min(self.newest_visible_scrape());
        let mut out = Vec::with_capacity(((to - from.max(0)) / every.max(1) + 1).max(0) as usize);
        let mut b = from.max(0);
        while b <= to {
            if let Some(v) = self.arrival_rate_at(b, rate_window_s) {
                out.push(Sample::new(base + b as f64 * step, v));
            }
            b += every.max(1);
        }
        out
    }

    /// The plan's seasons as the arrival-rate query returns them: the season frame snapped
    /// inward to the scrape grid, one season back in whole scrapes, to be moved forward by as
    /// many. A season longer than the history gives an empty series, as an empty query does.
    fn season_histories(&self, plan: &ReadPlan, rate_window_s: f64) -> Vec<SeasonHistory> {
        let step = self.cfg.step_s;
        let frame = &plan.season_frame;
        let start = (frame.start / step - 1e-9).ceil() as i64;
        let end = (frame.end / step + 1e-9).floor() as i64;
        plan.seasons
            .iter()
            .map(|season| {
                let back = (season.shift_s / step).round() as i64;
                SeasonHistory {
                    period_s: season.period_s,
                    shift_s: back as f64 * step,
                    samples: self.arrival_samples(start - back, end - back, 1, rate_window_s),
                }
            })
            .collect()
    }

    /// What the tick's `calibration_history` reads when the cached calibration is due: the
    /// plan's calibration window as whole band steps (`round(band step / scrape)` scrapes each)
    /// counted back from the newest visible scrape. Empty when the cached calibration is still
    /// fresh. `now` is Unix time, as the cache is stamped.
    fn calibration_history(&self, policy: &PolicySpec, now: f64) -> Vec<Sample> {
        let cached = self.headroom_state.calibration.as_ref();
        let Some(window) = observe::calibration_window(policy, cached, now) else {
            return Vec::new();
        };
        let step = self.cfg.step_s;
        let every = (window.step / step).round().max(1.0) as i64;
        let newest = self.newest_visible_scrape();
        let count = ((window.end - window.start) / (every as f64 * step)).floor() as i64;
        self.arrival_samples(newest - count * every, newest, every, policy.rate_window_s)
    }

    /// The workload's HPA as `read_hpa_status` returns it: the replica controller's range, its
    /// replicas, and its metric (requests in the system per replica, target slots x
    /// utilisation). None when the target names no HPA or the fleet is static.
    fn hpa_status(&self, target: &TargetSpec) -> Option<HpaStatus> {
        if target.hpa.is_none() || self.cfg.replicas != Replicas::Hpa {
            return None;
        }
        let hpa = &self.cfg.model.hpa;
        let current = self.replica_count();
        Some(HpaStatus {
            min_replicas: hpa.min_replicas,
            max_replicas: hpa.max_replicas,
            current_replicas: current,
            desired_replicas: self.hpa_window.back().map_or(current, |&(_, d)| d),
            metric: HpaMetric::InSystemPerReplica {
                target_average: f64::from(self.slots()) * hpa.target_utilization,
            },
        })
    }

    /// Inference pods bound to a Ready node and not serving yet (image pull, model load).
    fn loading_replicas(&self) -> u32 {
        self.live_pods
            .iter()
            .filter(|&&p| match self.pods[p].phase {
                Phase::Starting { node, .. } => {
                    self.cluster.nodes[node].ready_at <= self.now && !self.pods[p].draining
                }
                _ => false,
            })
            .count() as u32
    }

    /// The recent signals as the built-in queries return them for `window`: one point per
    /// scrape, `round(length / scrape)` scrapes up to the newest one at or before its end that
    /// is visible now. The window ends INGESTION_LAG_SECONDS before now (the plan); with the
    /// policy's lag equal to the simulated one (the simulator's runs) that is the newest
    /// visible scrape.
    fn recent_signals(&self, window: &Window, rate_window_s: f64) -> RecentSignals {
        let step = self.cfg.step_s;
        let base = self.cfg.base_epoch;
        let steps = ((window.end - window.start) / step).round().max(1.0) as i64;
        let newest = ((window.end / step + 1e-9).floor() as i64).min(self.newest_visible_scrape());
        let scrapes = (newest - steps + 1).max(0)..=newest;
        // Sized up front: the tick asks for these every time.
        let n = scrapes.clone().count();
        let mut signals = RecentSignals {
            arrival_rate: Vec::with_capacity(n),
            service_time_s: Vec::with_capacity(n),
            waiting: Vec::with_capacity(n),
            running: Vec::with_capacity(n),
        };
        for b in scrapes {
            let t = base + b as f64 * step;
            let bu = b as usize;
            let (waiting, running) = self.gauges_at(bu);
            signals.waiting.push(Sample::new(t, waiting));
            signals.running.push(Sample::new(t, running));
            if let Some(rate) = self.arrival_rate_at(b, rate_window_s) {
                signals.arrival_rate.push(Sample::new(t, rate));
            }
            if let Some(service_s) = self.service_time_at(b, rate_window_s) {
                signals.service_time_s.push(Sample::new(t, service_s));
            }
        }
        signals
    }

    /// What one tick of the Lambda observes now for `target`: the tick's read plan evaluated
    /// over the scrapes, the pods and the HPA, assembled as the tick assembles its reads. In
    /// UTC (the simulator's zone) the plan does not depend on where time starts, so the eyes ask
    /// it on the trace's clock
    /// (scrape b at b · step); the calibration's due check takes Unix time.
    pub(super) fn observation(&self, policy: &PolicySpec, target: &TargetSpec) -> Observation {
        let plan = observe::plan(policy, self.now);
        observe::assemble(Reads {
            signals: Ok(self.recent_signals(&plan.recent, policy.rate_window_s)),
            pods: Ok(Some(PodCounts {
                unschedulable: self.unschedulable_pods(),
                serving: self.serving_count(),
                loading: self.loading_replicas(),
            })),
            hpa: self.hpa_status(target),
            seasons: self.season_histories(&plan, policy.rate_window_s),
            calibration_history: self.calibration_history(policy, self.cfg.base_epoch + self.now),
        })
    }
}

impl Sim<'_> {
    /// Remembers, for a scored decision made with the lead-time band, the upper forecast it
    /// was asked to cover (the forecaster's point plus band) from its newest visible scrape on, over the
    /// lead time it decided with (learned ones change from decision to decision).
    pub(super) fn record_band(&mut self, f: &ForecastSummary, lead_time_s: f64) {
        if f.band_source != "lead_time" || self.now < self.cfg.score_from_s {
            return;
        }
        let seasonal = f.seasonal_peak.unwrap_or(f.trend_peak);
        let w = f.seasonal_weight;
        let blend = (1.0 - w) * f.trend_peak + w * seasonal;
        let upper = f.profile_peak.unwrap_or(blend) + f.error_quantile;
        let by_profile = f.profile_peak.is_some();
        self.band_checks
            .push((self.newest_visible_scrape(), upper, lead_time_s, by_profile));
        self.result.band.nominal = f.quantile;
    }

    /// Per day, how many recorded bands covered the highest arrival rate the eyes saw within
    /// the next lead time (what `band::calibrate` calls the actual).
    pub(super) fn score_bands(&mut self, policy: &PolicySpec) {
        let step = self.cfg.step_s;
        let last = self.waiting_at_boundary.len() as i64 - 1;
        for &(b, upper, lead_time_s, by_profile) in &std::mem::take(&mut self.band_checks) {
            let lead = (lead_time_s / step).ceil().max(1.0) as i64;
            if b + lead > last {
                continue;
            }
            let actual = (b + 1..=b + lead)
                .filter_map(|k| self.arrival_rate_at(k, policy.rate_window_s))
                .fold(f64::NEG_INFINITY, f64::max);
            if !actual.is_finite() {
                continue;
            }
            let day = (b as f64 * step / DAY_S).floor() as usize;
            let days = &mut self.result.band.days;
            if days.len() <= day {
                days.resize(day + 1, (0, 0));
            }
            days[day].1 += 1;
            let covered = actual <= upper;
            if covered {
                days[day].0 += 1;
            }
            self.result.band.hits.push(covered);
            self.result.band.by_profile += u64::from(by_profile);
        }
    }
}

/// How honest prewarm's lead-time band was: per day, (covered, decisions), and every scored
/// decision's outcome in time order (for the block bootstrap of the coverage's interval).
#[derive(Clone, Debug, Default)]
pub struct BandCoverage {
    pub nominal: f64,
    pub days: Vec<(u64, u64)>,
    pub hits: Vec<bool>,
    /// Scored decisions the hour's profile sized (the others: the blend).
    pub by_profile: u64,
    /// Seconds between two decisions (TICK_SECONDS).
    pub tick_s: f64,
}

/// PromQL `rate()` of a counter as Prometheus computes it (`extrapolatedRate` in
/// prometheus/promql/functions.go): the points `(t, value)` inside the range
/// `(range_end - range_s, range_end]`, oldest first. The increase between the first and last
/// point (a fall is a counter reset: the value before it is added) is extrapolated to the
/// range's edges: all the way to an edge when the gap to it is under 1.1 × the average
/// interval between the points, else by half an interval; at the start never past the time
/// the counter would have been zero. Divided by the range. None with fewer than two points.
pub(crate) fn prometheus_rate(points: &[(f64, f64)], range_end: f64, range_s: f64) -> Option<f64> {
    let (&(first_t, first_v), &(last_t, last_v)) = (points.first()?, points.last()?);
    let sampled = last_t - first_t;
    if points.len() < 2 || sampled <= 0.0 {
        return None;
    }
    let mut increase = last_v - first_v;
    for pair in points.windows(2) {
        if pair[1].1 < pair[0].1 {
            increase += pair[0].1;
        }
    }
    let average = sampled / (points.len() - 1) as f64;
    let threshold = 1.1 * average;
    let mut to_start = first_t - (range_end - range_s);
    let mut to_end = range_end - last_t;
    if to_start >= threshold {
        to_start = average / 2.0;
    }
    if increase > 0.0 && first_v >= 0.0 {
        to_start = to_start.min(sampled * first_v / increase);
    }
    if to_end >= threshold {
        to_end = average / 2.0;
    }
    Some(increase * (sampled + to_start + to_end) / sampled / range_s)
}

/// Least-squares slope of the points (PromQL `deriv`).
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let cov: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let var: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if var > 0.0 {
        cov / var
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::super::pods::{Phase, Pod};
    use super::super::tests::{config, step_to};
    use super::super::{Replicas, Request, Sim};
    use crate::core::policy::band::Calibration;
    use crate::core::policy::observation::{HpaMetric, HpaStatus, SeasonSeries};
    use crate::core::policy::observe;
    use crate::core::spec::HpaRef;
    use crate::core::{HeadroomKind, PolicySpec, Sample, TargetSpec};

    fn target() -> TargetSpec {
        TargetSpec::new("t", "gpu", HeadroomKind::NodePoolReplicas, 8)
    }

    impl Sim<'_> {
        /// What the observation's `seasonal` holds: the plan's seasons as the eyes read them,
        /// moved into today's frame by the shared assembly.
        fn seasonal(&self, policy: &PolicySpec) -> Vec<SeasonSeries> {
            let plan = observe::plan(policy, self.now);
            let histories = self.season_histories(&plan, policy.rate_window_s);
            histories.into_iter().map(observe::season_series).collect()
        }
    }

    fn with_hpa() -> TargetSpec {
        TargetSpec {
            hpa: Some(HpaRef {
                namespace: "n".into(),
                name: "llm".into(),
                raise_min_replicas: false,
                in_system_metric: None,
            }),
            ..target()
        }
    }

    /// The tests' run whose metric store shows a sample `lag` seconds after its scrape.
    fn lagged(lag: f64) -> super::super::RunConfig {
        super::super::RunConfig {
            ingestion_lag_s: lag,
            ..config()
        }
    }

    /// A sim at `now` whose servers exported 45·b completions in the scrape interval ending at scrape b
    /// (b = 1..=40) and empty queues: the arrival-rate query at scrape b >= 6 is the
    /// completions of the last three intervals over 45 s, 45·(3b - 3) / 45 = 3(b - 1). Before,
    /// Prometheus' extrapolation stops at the counter's zero (see
    /// `the_eyes_rate_is_prometheus_rate_on_the_exported_counter`): 2.25, 4.5, 7.5, 11.25 at
    /// b = 2..=5.
    fn exported(cfg: &super::super::RunConfig, now: f64) -> Sim<'_> {
        let mut sim = Sim::new(cfg);
        sim.now = now;
        sim.completions_at = (0..=40u32).map(|b| 45 * b).collect();
        sim.latency_sum_at = vec![0.0; 41];
        sim.waiting_at_boundary = vec![0; 41];
        sim.running_at_boundary = vec![0; 41];
        sim
    }

    fn relative(samples: &[Sample], base: f64) -> Vec<(f64, f64)> {
        samples.iter().map(|s| (s.t - base, s.v)).collect()
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    #[test]
    fn the_observation_is_what_the_queries_return_after_the_ingestion_lag() {
        // One replica with 8 slots. A arrives at 1 for 10 s (done 11), B at 2 for 20 s (done
        // 22), C at 16 for 100 s. Scrapes every 15 s; at t = 61 with a 30 s lag the newest
        // visible scrape is t = 30, and a 60 s window holds the scrapes at 0, 15 and 30.
        let mut cfg = config();
        cfg.ingestion_lag_s = 30.0;
        let mut sim = Sim::new(&cfg);
        sim.warm_start();
        let reqs = [(1.0, 10.0), (2.0, 20.0), (16.0, 100.0)].map(|(arrival, service_s)| Request {
            arrival,
            service_s,
            prefill_s: 0.0,
            client: 0,
        });
        step_to(&mut sim, &reqs, 61.0);
        let policy = PolicySpec {
            window_s: 60.0,
            ..PolicySpec::default()
        };
        let obs = sim.observation(&policy, &target());
        let base = cfg.base_epoch;
        let at = |s: &[crate::core::Sample]| -> Vec<f64> { s.iter().map(|x| x.t - base).collect() };
        let v = |s: &[crate::core::Sample]| -> Vec<f64> { s.iter().map(|x| x.v).collect() };
        // Gauges at 0, 15, 30: running 0, then B and C... at 15 only B (A done, C not yet).
        assert_eq!(at(&obs.running), vec![0.0, 15.0, 30.0]);
        assert_eq!(v(&obs.running), vec![0.0, 1.0, 1.0]);
        assert_eq!(v(&obs.waiting), vec![0.0, 0.0, 0.0]);
        // Arrival rate at 15: the counter 0, 1 at 0 and 15 s, the range (-45, 15] starts 45 s
        // before the first scrape (more than 1.1 scrapes: half a scrape), and the counter was
        // 0 at 0 s, so no extrapolation before it: 1 × 15 / 15 / 60 s; plus deriv of (0, 1)
        // over 15 s. At 30: 2 × 30 / 30 / 60, plus the least-squares slope of (0, 1, 1) =
        // 15 / 450.
        assert_eq!(at(&obs.arrival_rate), vec![15.0, 30.0]);
        assert!(close(
            &v(&obs.arrival_rate),
            &[1.0 / 60.0 + 1.0 / 15.0, 2.0 / 60.0 + 1.0 / 30.0]
        ));
        // Mean end-to-end latency of what completed: A's 10 s, then A and B's (10 + 20) / 2.
        assert_eq!(v(&obs.service_time_s), vec![10.0, 15.0]);
        assert_eq!(obs.serving_replicas, Some(1));
        assert_eq!(obs.pending_pods, 0);
    }

    #[test]
    fn prometheus_rate_by_hand() {
        // (name, counter points (t, value), range end, range, Prometheus' rate by hand). The
        // range is (end - range, end]; avg = sampled interval / (points - 1); extrapolate to
        // an edge when the gap is under 1.1 avg, else avg / 2; at the start never past
        // sampled × first / increase (the counter's zero).
        type Row = (&'static str, Vec<(f64, f64)>, f64, f64, Option<f64>);
        let rows: [Row; 7] = [
            (
                // increase 30 over 45 s; gap to start 15 < 16.5: to 60 s; zero 45·10/30 = 15.
                "regular scrapes filling the range: 30 × 60 / 45 / 60",
                vec![(15.0, 10.0), (30.0, 20.0), (45.0, 30.0), (60.0, 40.0)],
                60.0,
                60.0,
                Some(30.0 * 60.0 / 45.0 / 60.0),
            ),
            (
                // gap to start 30 >= 16.5: half a scrape, 7.5; zero 30·100/20 = 150 (no limit).
                "a series starting inside the range: 20 × 37.5 / 30 / 60",
                vec![(30.0, 100.0), (45.0, 110.0), (60.0, 120.0)],
                60.0,
                60.0,
                Some(20.0 * 37.5 / 30.0 / 60.0),
            ),
            (
                // The ingested samples stop 35 s before the range's end (>= 16.5: 7.5 s), start
                // 10 s after its start (to it): 10 × 32.5 / 15 / 60 = 0.36, 0.54 × the true
                // 0.67/s: what a read ending at `now` behind the ingestion lag returns.
                "the newest scrapes not ingested yet: 10 × 32.5 / 15 / 60",
                vec![(10.0, 50.0), (25.0, 60.0)],
                60.0,
                60.0,
                Some(10.0 * 32.5 / 15.0 / 60.0),
            ),
            (
                // gap to start 15, but the counter was 0 at 45·2/30 = 3 s before the first.
                "the counter's zero limits the start: 30 × 48 / 45 / 60",
                vec![(15.0, 2.0), (30.0, 12.0), (45.0, 22.0), (60.0, 32.0)],
                60.0,
                60.0,
                Some(30.0 * 48.0 / 45.0 / 60.0),
            ),
            (
                // 20 -> 5 is a reset: increase 15 - 10 + 20 = 25; zero 45·10/25 = 18 > 15.
                "a counter reset: 25 × 60 / 45 / 60",
                vec![(15.0, 10.0), (30.0, 20.0), (45.0, 5.0), (60.0, 15.0)],
                60.0,
                60.0,
                Some(25.0 * 60.0 / 45.0 / 60.0),
            ),
            (
                "a flat counter: 0",
                vec![(15.0, 7.0), (30.0, 7.0)],
                30.0,
                30.0,
                Some(0.0),
            ),
            ("one point: no rate", vec![(60.0, 40.0)], 60.0, 60.0, None),
        ];
        for (name, points, end, range, want) in rows {
            let got = super::prometheus_rate(&points, end, range);
            match (got, want) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-12, "{name}: {g} vs {w}"),
                _ => assert_eq!(got, want, "{name}"),
            }
        }
    }

    /// The same synthetic counters through a real Prometheus engine: `promtool test rules`
    /// (the stack's Prometheus, 2.42) evaluates `rate(c[1m])` at 60 s over values scraped
    /// every 15 s from 0 s; its answers must be `prometheus_rate` of the same points. No
    /// series has a sample at the range's start (0 s), where Prometheus 2 (closed ranges) and
    /// 3 (open at the start) differ. Run: cargo test --lib prometheus_rate_is_what -- --ignored
    #[test]
    #[ignore = "needs promtool on PATH (Prometheus 2.42, as on the stack)"]
    fn prometheus_rate_is_what_a_real_prometheus_returns() {
        // (series, promtool values from 0 s every 15 s: `_` is no sample).
        let rows = [
            ("regular", "_ 10 20 30 40"),
            ("starts_inside", "_ _ 100 110 120"),
            ("zero_point", "_ 2 12 22 32"),
            ("not_ingested_yet", "_ 50 60 _ _"),
            ("reset", "_ 10 20 5 15"),
            ("flat", "_ 7 7 7 7"),
        ];
        let mut yaml = String::from(
            "rule_files: []\nevaluation_interval: 15s\ntests:\n  - interval: 15s\n    input_series:\n",
        );
        for (name, values) in rows {
            yaml += &format!("      - series: '{name}'\n        values: '{values}'\n");
        }
        yaml += "    promql_expr_test:\n";
        for (name, _) in rows {
            // A value no rate here has: promtool then prints what it got.
            yaml += &format!(
                "      - expr: rate({name}[1m])\n        eval_time: 60s\n        exp_samples: [{{labels: '{{}}', value: -1}}]\n"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rate.yml");
        std::fs::write(&file, yaml).unwrap();
        let out = std::process::Command::new("promtool")
            .args(["test", "rules"])
            .arg(&file)
            .output()
            .expect("promtool on PATH");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        // "got: {} 6.666666666666666E-01" once per expression, in order.
        let got: Vec<f64> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("got: {}"))
            .map(|v| v.trim().parse().unwrap())
            .collect();
        assert_eq!(got.len(), rows.len(), "{text}");
        for ((name, values), real) in rows.iter().zip(got) {
            let points: Vec<(f64, f64)> = values
                .split_whitespace()
                .enumerate()
                .filter_map(|(k, v)| v.parse().ok().map(|v| (15.0 * k as f64, v)))
                .collect();
            let eyes = super::prometheus_rate(&points, 60.0, 60.0).unwrap();
            assert!(
                (eyes - real).abs() < 1e-12,
                "{name}: eyes {eyes}, Prometheus {real}"
            );
        }
    }

    #[test]
    fn the_eyes_rate_is_prometheus_rate_on_the_exported_counter() {
        // `exported`: the completions counter at scrape k is 45·k(k + 1)/2 (0 at 0 s). The
        // eyes' arrival rate (no queue: no deriv term) at scrape b is Prometheus' rate of the
        // counter's scrapes in (15b - 60, 15b], computed by hand: b = 2, points 0, 45, 135 at
        // 0, 15, 30: gap 30 s >= 16.5 -> 7.5, but the counter was 0 at the first: 135 × 30 /
        // 30 / 60 = 2.25; b = 3: 270 × 45 / 45 / 60 = 4.5; b = 4, points 45 .. 450 at 15 .. 60:
        // zero 45·45/405 = 5 < 15: 405 × 50 / 45 / 60 = 7.5; b = 5: zero 45·135/540 = 11.25:
        // 540 × 56.25 / 45 / 60 = 11.25; from b = 6 on (zero 18 > 15) the full window:
        // 3(b - 1).
        let cfg = lagged(0.0);
        let sim = exported(&cfg, 0.0);
        let counter = |k: usize| 45.0 * (k * (k + 1) / 2) as f64;
        for (b, by_hand) in [
            (2, 2.25),
            (3, 4.5),
            (4, 7.5),
            (5, 11.25),
            (6, 15.0),
            (20, 57.0),
        ] {
            let eyes = sim.arrival_rate_at(b, 60.0).unwrap();
            assert!(
                (eyes - by_hand).abs() < 1e-9,
                "scrape {b}: {eyes} vs {by_hand}"
            );
            // The same through the formula on the counter's values.
            let first = (b as usize).saturating_sub(3);
            let points: Vec<(f64, f64)> = (first..=b as usize)
                .map(|k| (15.0 * k as f64, counter(k)))
                .collect();
            let formula = super::prometheus_rate(&points, 15.0 * b as f64, 60.0).unwrap();
            assert!((eyes - formula).abs() < 1e-9, "scrape {b}");
        }
        assert_eq!(sim.arrival_rate_at(0, 60.0), None);
        assert_eq!(sim.arrival_rate_at(-1, 60.0), None);
    }

    #[test]
    fn the_eyes_rate_window_is_the_policys() {
        // `exported`: 45·b completions in the scrape interval ending at scrape b, no queue. At
        // now = 300 s (scrape 20): a 60 s window holds 4 scrapes (the intervals 18..=20),
        // 45·57 / 45 s = 57; a 120 s window 8 scrapes (14..=20): 45·119 / 105 s = 51; a 240 s
        // window 16 scrapes (6..=20): 45·195 / 225 s = 39.
        let cfg = lagged(0.0);
        let sim = exported(&cfg, 300.0);
        for (rate_window_s, want) in [(60.0, 57.0), (120.0, 51.0), (240.0, 39.0)] {
            let policy = PolicySpec {
                window_s: 60.0,
                rate_window_s,
                ingestion_lag_s: 0.0,
                ..PolicySpec::default()
            };
            let obs = sim.observation(&policy, &target());
            let newest = obs.arrival_rate.last().unwrap();
            assert_eq!(newest.t - cfg.base_epoch, 300.0, "{rate_window_s}");
            assert!(
                (newest.v - want).abs() < 1e-9,
                "{rate_window_s}: {}",
                newest.v
            );
        }
    }

    #[test]
    fn the_recent_read_ends_at_the_policys_lag_and_sees_only_what_the_store_shows() {
        // (simulated store lag, INGESTION_LAG_SECONDS, newest recent scrape, s). `exported`,
        // now = 300 s, scrapes every 15 s: the read ends at 300 - policy lag, and holds no
        // scrape the store does not show yet (300 - store lag).
        let rows = [
            ("no lag", 0.0, 0.0, 300.0),
            (
                "one value, as the simulator's runs set it",
                30.0,
                30.0,
                270.0,
            ),
            ("the policy lags, the store does not", 0.0, 30.0, 270.0),
            ("the store lags, the policy does not", 30.0, 0.0, 270.0),
            ("a lag off the scrape grid", 0.0, 20.0, 270.0),
        ];
        for (name, store_lag, policy_lag, want) in rows {
            let cfg = lagged(store_lag);
            let sim = exported(&cfg, 300.0);
            let policy = PolicySpec {
                window_s: 60.0,
                ingestion_lag_s: policy_lag,
                ..PolicySpec::default()
            };
            let obs = sim.observation(&policy, &target());
            let newest = |s: &[Sample]| s.last().map(|x| x.t - cfg.base_epoch);
            assert_eq!(newest(&obs.arrival_rate), Some(want), "{name}");
            assert_eq!(newest(&obs.waiting), Some(want), "{name}");
            // Four scrapes of a 60 s window: the newest and the three before it.
            assert_eq!(obs.waiting.len(), 4, "{name}");
        }
    }

    #[test]
    fn seasons_are_the_rate_one_season_back_shifted_into_today() {
        // now = 150 s (scrape 10), window 60, lead 30: the query's range in today's frame is
        // scrapes 6..=12 (90 s to 180 s). One season of 60 s back is scrapes 2..=8, each
        // stamped 60 s later: values 4.5, 6, 9, 12, 15, 18, 21 (see `exported`).
        let cfg = lagged(0.0);
        let sim = exported(&cfg, 150.0);
        let policy = PolicySpec {
            window_s: 60.0,
            lead_time_s: 30.0,
            seasons_s: vec![60.0, 30.0],
            ..PolicySpec::default()
        };
        let seasons = sim.seasonal(&policy);
        let base = cfg.base_epoch;
        assert_eq!(seasons[0].period_s, 60.0);
        assert_eq!(
            relative(&seasons[0].samples, base),
            vec![
                (90.0, 2.25),
                (105.0, 4.5),
                (120.0, 7.5),
                (135.0, 11.25),
                (150.0, 15.0),
                (165.0, 18.0),
                (180.0, 21.0)
            ]
        );
        // 30 s back: scrapes 4..=10 stamped 30 s later: 7.5, 11.25, 15, ..., 27.
        assert_eq!(
            relative(&seasons[1].samples, base),
            vec![
                (90.0, 7.5),
                (105.0, 11.25),
                (120.0, 15.0),
                (135.0, 18.0),
                (150.0, 21.0),
                (165.0, 24.0),
                (180.0, 27.0)
            ]
        );
        // With a 30 s ingestion lag the newest scrape a query sees is 8 (120 s): the 30 s
        // season's scrapes 9 and 10 are not there yet; the 60 s season's all are.
        let cfg = lagged(30.0);
        let sim = exported(&cfg, 150.0);
        let seasons = sim.seasonal(&policy);
        assert_eq!(seasons[0].samples.len(), 7);
        assert_eq!(
            relative(&seasons[1].samples, base),
            vec![
                (90.0, 7.5),
                (105.0, 11.25),
                (120.0, 15.0),
                (135.0, 18.0),
                (150.0, 21.0)
            ]
        );
        // A season longer than the history: an empty series (as an empty query returns).
        let long = PolicySpec {
            seasons_s: vec![86_400.0],
            ..policy
        };
        assert!(sim.seasonal(&long)[0].samples.is_empty());
    }

    #[test]
    fn the_band_history_is_read_only_when_the_calibration_is_due() {
        // Band step 30 s (every 2nd scrape), history 120 s + shortest season 60 s + window
        // 60 s + lead 30 s = 270 s = 9 band steps back from the newest scrape (30 at now =
        // 450 s): scrapes 12, 14, ..., 30, values 3(b - 1) = 33, 39, ..., 87.
        let cfg = lagged(0.0);
        let mut sim = exported(&cfg, 450.0);
        let policy = PolicySpec {
            window_s: 60.0,
            lead_time_s: 30.0,
            seasons_s: vec![60.0, 600.0],
            band_step_s: 30.0,
            band_history_s: 120.0,
            calibrate_every_s: 3600.0,
            ..PolicySpec::default()
        };
        let now = cfg.base_epoch + 450.0;
        let history = sim.calibration_history(&policy, now);
        let want: Vec<(f64, f64)> = (0..10)
            .map(|k| {
                let b = 12 + 2 * k;
                (15.0 * b as f64, 3.0 * (b - 1) as f64)
            })
            .collect();
        assert_eq!(relative(&history, cfg.base_epoch), want);
        // Calibrated 10 minutes ago (due every hour): nothing is fetched.
        sim.headroom_state.calibration = Some(Calibration {
            computed_at: now - 600.0,
            quantile: 0.9,
            band: Some(1.0),
            windows: 30,
            ..Calibration::default()
        });
        assert!(sim.calibration_history(&policy, now).is_empty());
        // An hour old: due again.
        sim.headroom_state.calibration.as_mut().unwrap().computed_at = now - 3600.0;
        assert_eq!(sim.calibration_history(&policy, now).len(), 10);
    }

    #[test]
    fn the_hpa_and_loading_replicas_are_what_the_api_would_say() {
        // HPA fleet, one warm replica (config's HPA: 1..=10 replicas, 8 slots at 100 %).
        let mut cfg = config();
        cfg.replicas = Replicas::Hpa;
        let mut sim = Sim::new(&cfg);
        sim.warm_start();
        let policy = PolicySpec::default();
        let want = HpaStatus {
            min_replicas: 1,
            max_replicas: 10,
            current_replicas: 1,
            desired_replicas: 1,
            metric: HpaMetric::InSystemPerReplica {
                target_average: 8.0,
            },
        };
        assert_eq!(sim.hpa_status(&with_hpa()), Some(want));
        // A target that names no HPA reads none.
        assert_eq!(sim.observation(&policy, &target()).hpa, None);
        // Loading: a pod bound to a Ready node and not serving yet; a pod on a node still
        // launching is Unschedulable (pending), not loading.
        let ready = sim.launch_node(None);
        let launching = sim.launch_node(Some(100.0));
        for node in [ready, launching] {
            sim.pods.push(Pod::new(Phase::Starting {
                node,
                serving_at: 200.0,
            }));
            sim.live_pods.push(sim.pods.len() - 1);
        }
        let obs = sim.observation(&policy, &with_hpa());
        assert_eq!(obs.loading_replicas, Some(1));
        assert_eq!(obs.pending_pods, 1);
        assert_eq!(obs.serving_replicas, Some(1));
        assert_eq!(obs.hpa.map(|h| h.current_replicas), Some(3));
        // A static fleet has no HPA.
        let mut cfg = config();
        cfg.replicas = Replicas::Static(2);
        let sim = Sim::new(&cfg);
        assert_eq!(sim.hpa_status(&with_hpa()), None);
    }
}
