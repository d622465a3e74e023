//! What the metric sources observed for one target, as plain numbers.

use serde::{Deserialize, Serialize};

/// One point of a time series: `t` in Unix seconds, `v` the value.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub t: f64,
    pub v: f64,
}

/// The largest magnitude a metric sample may have. Rates, queue lengths and latencies of a
/// model's servers are many orders below it; a value past it is garbage (a counter reset read
/// as a rate, a unit error, an overflow) that would size without bound, so the metric sources
/// drop it at parse time, as they drop NaN and infinities: a gap, which the policy treats as
/// missing data.
pub const MAX_SAMPLE_MAGNITUDE: f64 = 1e12;

impl Sample {
    pub fn new(t: f64, v: f64) -> Self {
        Sample { t, v }
    }

    /// The tests' series: `values` every `step_s` seconds, the first at `start`.
    #[cfg(test)]
    pub(crate) fn grid(start: f64, step_s: f64, values: &[f64]) -> Vec<Sample> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| Sample::new(start + step_s * i as f64, *v))
            .collect()
    }

    /// A finite time and a finite value within `MAX_SAMPLE_MAGNITUDE`.
    pub fn is_plausible(&self) -> bool {
        self.t.is_finite() && self.v.is_finite() && self.v.abs() <= MAX_SAMPLE_MAGNITUDE
    }
}

/// Everything the policy needs to know about one target's demand. Series are oldest first, on
/// the step grid of `PolicySpec::step_s`. Empty series mean the source had no data.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// Request arrival rate (requests per second).
    pub arrival_rate: Vec<Sample>,
    /// Mean time a request occupies one concurrency slot (seconds), recent.
    pub service_time_s: Vec<Sample>,
    /// Requests waiting in the servers' queues.
    pub waiting: Vec<Sample>,
    /// Requests being served.
    pub running: Vec<Sample>,
    /// Inference pods of the target that are Pending and unschedulable now.
    pub pending_pods: u32,
    /// Inference replicas serving now, when the pod selector is configured.
    pub serving_replicas: Option<u32>,
    /// Why the observation is incomplete, if a source failed (the policy then fails static).
    pub problem: Option<String>,
    /// Inference pods scheduled on a node but not Ready yet (image pull, model load).
    #[serde(default)]
    pub loading_replicas: Option<u32>,
    /// The workload's HPA as read from the API, when the target names one.
    #[serde(default)]
    pub hpa: Option<HpaStatus>,
    /// The arrival rate one season back (a day, a week), each sample's time moved forward by
    /// the season so it lines up with today: covers `[now - window, now + lead time]`.
    #[serde(default)]
    pub seasonal: Vec<SeasonSeries>,
    /// Long arrival-rate history (BAND_HISTORY_SECONDS plus the longest season, on the
    /// BAND_STEP_SECONDS grid), fetched only when the cached calibration is due; empty otherwise.
    #[serde(default)]
    pub calibration_history: Vec<Sample>,
}

/// One season's history of the arrival rate, shifted into today's frame.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SeasonSeries {
    pub period_s: f64,
    pub samples: Vec<Sample>,
}

/// What the workload's HorizontalPodAutoscaler says about itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HpaStatus {
    pub min_replicas: u32,
    pub max_replicas: u32,
    pub current_replicas: u32,
    pub desired_replicas: u32,
    pub metric: HpaMetric,
}

/// The HPA's metric, as far as prewarm can predict it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum HpaMetric {
    /// A per-replica average target on requests in the system (waiting + running, or running
    /// alone): predictable from arrival rate × service time (Little's law).
    InSystemPerReplica { target_average: f64 },
    /// Anything else (CPU, memory, DCGM utilisation, a waiting-only queue): the reason, logged
    /// when the policy falls back to queue sizing.
    Unpredictable { why: String },
}
