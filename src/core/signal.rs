//! What the metric sources observed for one target, as plain numbers.

use serde::{Deserialize, Serialize};

/// One point of a time series: `t` in Unix seconds, `v` the value.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub t: f64,
    pub v: f64,
}

impl Sample {
    pub fn new(t: f64, v: f64) -> Self {
        Sample { t, v }
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
}
