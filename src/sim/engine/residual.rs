//! What the residual decomposition (core::policy::residual) reads from a run: per step of the
//! metric grid, the requests that arrived and those delayed (at their arrival), the highest
//! upper forecast prewarm sized with, and the loaded replicas serving at the step's scrape.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use super::Sim;
use crate::core::policy::residual::{self, Decomposition, Series, Setting};
use crate::sim::classes::Class;

/// The residual's inputs of one run, per step of `step_s` from t = 0.
#[derive(Clone, Debug, Default)]
pub struct ResidualSeries {
    pub step_s: f64,
    pub base_epoch: f64,
    /// The request stream's own steps: its arrivals and no-wait peak.
    pub stream: Arc<StreamSteps>,
    /// Requests arriving in each step that waited longer than the SLO wait.
    pub delayed: Vec<u64>,
    /// The same per client class (indexed by `Class as usize`), with `RunConfig::classes`:
    /// what `Decomposition::tally` splits by class.
    pub delayed_by_class: Vec<Vec<u64>>,
    /// prewarm: the highest `rate_at_horizon` of the decisions made during each step.
    pub upper: Vec<Option<f64>>,
    /// Loaded replicas serving at each step's scrape.
    pub capacity: Vec<u32>,
    pub slots_per_replica: u32,
    pub gpus_per_replica: u32,
    /// Steps before `burn_in_s` are nothing; `burn_in_s..score_from_s` trains, the rest scores.
    pub burn_in_s: f64,
    pub score_from_s: f64,
}

/// What the residual reads of the request stream alone, per step of `step_s` from t = 0: no
/// policy changes it, so every run over one stream can share one (`RunConfig::stream_steps`).
#[derive(Clone, Debug, Default)]
pub struct StreamSteps {
    step_s: f64,
    /// Requests arriving in each step (every request, burn-in included).
    pub arrivals: Vec<u64>,
    /// The most requests that would have been in a slot at once in each step had every request
    /// started on arrival: over the slots of a replica, the loaded replicas the step needed to
    /// delay nobody.
    pub peak_on_arrival: Vec<u64>,
    /// The end times (as bits of positive f64s, which order as the numbers do) of the requests
    /// in a slot in that no-wait schedule.
    on_arrival_ends: BinaryHeap<Reverse<u64>>,
}

impl StreamSteps {
    pub fn new(step_s: f64) -> Self {
        StreamSteps {
            step_s,
            ..Self::default()
        }
    }

    /// A request arrived (requests come in arrival order).
    pub fn observe(&mut self, arrival: f64, service_s: f64) {
        let k = step_of(arrival, self.step_s);
        *bump(&mut self.arrivals, k) += 1;
        let ends = &mut self.on_arrival_ends;
        while ends
            .peek()
            .is_some_and(|Reverse(end)| f64::from_bits(*end) <= arrival)
        {
            ends.pop();
        }
        ends.push(Reverse((arrival + service_s.max(0.0)).max(0.0).to_bits()));
        let in_slots = ends.len() as u64;
        let peak = bump(&mut self.peak_on_arrival, k);
        *peak = (*peak).max(in_slots);
    }
}

/// The step of `step_s` that `t` falls in.
fn step_of(t: f64, step_s: f64) -> usize {
    (t / step_s).floor().max(0.0) as usize
}

fn bump<T: Clone + Default>(v: &mut Vec<T>, i: usize) -> &mut T {
    if v.len() <= i {
        v.resize(i + 1, T::default());
    }
    &mut v[i]
}

impl ResidualSeries {
    /// The decomposition of this run at a lead time of `lead_time_s`, the reserve priced at
    /// `usd_per_gpu_hour`. Demand is the arrival rate of each step (arrivals / step).
    pub fn decompose(&self, lead_time_s: f64, usd_per_gpu_hour: f64) -> Decomposition {
        let stream = &*self.stream;
        let n = stream.arrivals.len().max(self.capacity.len());
        let pad = |v: &[u64]| -> Vec<u64> {
            let mut out = v.to_vec();
            out.resize(n, 0);
            out
        };
        let demand: Vec<f64> = pad(&stream.arrivals)
            .into_iter()
            .map(|a| a as f64 / self.step_s)
            .collect();
        let delayed = pad(&self.delayed);
        let mut upper = self.upper.clone();
        upper.resize(n, None);
        // A step past the last scrape keeps the last capacity seen.
        let last = self.capacity.last().copied().unwrap_or(0);
        let capacity: Vec<f64> = (0..n)
            .map(|k| f64::from(self.capacity.get(k).copied().unwrap_or(last)))
            .collect();
        let slots = f64::from(self.slots_per_replica.max(1));
        let need: Vec<f64> = pad(&stream.peak_on_arrival)
            .into_iter()
            .map(|p| p as f64 / slots)
            .collect();
        let train_from = (self.burn_in_s / self.step_s).ceil() as usize;
        let score_from = (self.score_from_s / self.step_s).ceil() as usize;
        let series = Series {
            start_s: self.base_epoch,
            step_s: self.step_s,
            demand: &demand,
            upper: &upper,
            capacity: &capacity,
            need: &need,
            delayed: &delayed,
        };
        residual::decompose(
            &series,
            &Setting {
                lead_steps: Setting::lead_steps(lead_time_s, self.step_s),
                training: train_from..score_from.max(train_from),
                scored: score_from..n,
                gpus_per_replica: f64::from(self.gpus_per_replica),
                usd_per_gpu_hour,
            },
        )
    }
}

impl Sim<'_> {
    /// The metric step `t` falls in.
    fn step_of(&self, t: f64) -> usize {
        step_of(t, self.cfg.step_s)
    }

    /// A request arrived: counted in the stream's steps unless the run was given them.
    pub(super) fn residual_arrival(&mut self, arrival: f64, service_s: f64) {
        if let Some(stream) = &mut self.stream_steps {
            stream.observe(arrival, service_s);
        }
    }

    pub(super) fn residual_delayed(&mut self, arrival: f64, class: Option<Class>) {
        let k = self.step_of(arrival);
        let r = &mut self.result.residual;
        *bump(&mut r.delayed, k) += 1;
        if let Some(c) = class {
            *bump(bump(&mut r.delayed_by_class, c as usize), k) += 1;
        }
    }

    pub(super) fn residual_upper(&mut self, rate_at_horizon: f64) {
        if !rate_at_horizon.is_finite() {
            return;
        }
        let k = self.step_of(self.now);
        let slot = bump(&mut self.result.residual.upper, k);
        *slot = Some(slot.map_or(rate_at_horizon, |u: f64| u.max(rate_at_horizon)));
    }

    /// The run's settings and the serving replicas of every scrape, once the run is over.
    pub(super) fn residual_finish(&mut self) {
        let cfg = self.cfg;
        let capacity = self.serving_at_boundary.clone();
        let r = &mut self.result.residual;
        r.step_s = cfg.step_s;
        r.base_epoch = cfg.base_epoch;
        r.slots_per_replica = cfg.model.slots_per_replica;
        r.gpus_per_replica = cfg.model.gpus_per_replica;
        r.burn_in_s = cfg.burn_in_s;
        r.score_from_s = cfg.score_from_s;
        r.capacity = capacity;
        r.stream = match (&cfg.stream_steps, self.stream_steps.take()) {
            (Some(given), _) => Arc::clone(given),
            (None, counted) => Arc::new(counted.unwrap_or_default()),
        };
    }
}
