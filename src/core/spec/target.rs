//! One managed target (`TargetSpec`, from the PREWARM_TARGETS JSON array) and the parts it
//! names: the inference server, the headroom object, the HPA, scheduled windows, query overrides.

use serde::{Deserialize, Serialize};

use super::parse_time_zone;

/// Which inference server exposes the metrics; selects the built-in queries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    #[default]
    Vllm,
    Triton,
    Tgi,
    Sglang,
    /// Triton with the TensorRT-LLM backend: its own queue gauges (Triton's pending count stays
    /// near 0, requests go straight to the backend's batcher).
    #[serde(rename = "triton-trtllm")]
    TritonTrtllm,
    /// TensorRT-LLM's OpenAI server (`trtllm-serve`, its `/prometheus/metrics`).
    #[serde(rename = "trtllm-serve")]
    TrtllmServe,
    /// NVIDIA Dynamo's HTTP frontend (`dynamo_frontend_*`).
    Dynamo,
    /// llm-d: vLLM's metrics of the decode pods only (prefill pods export them too).
    #[serde(rename = "llm-d")]
    LlmD,
}

/// The object whose size is the warm spare capacity of a target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum HeadroomKind {
    /// A Deployment of pause pods with a negative PriorityClass, one pod per spare replica.
    Balloon { namespace: String, name: String },
    /// A Karpenter CapacityBuffer (`autoscaling.x-k8s.io/v1beta1`), `spec.replicas`.
    CapacityBuffer { namespace: String, name: String },
    /// The NodePool's own static `spec.replicas` (alpha in Karpenter); counts nodes, not replicas.
    NodePoolReplicas,
}

/// The workload's `autoscaling/v2` HorizontalPodAutoscaler, read to size in its units.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HpaRef {
    pub namespace: String,
    pub name: String,
    /// Also raise the HPA's `minReplicas` ahead of forecast demand (warm replicas, not only warm
    /// nodes), restoring the user's value afterwards. On unless turned off: loaded replicas are
    /// what removes a cold start's model load, and the benchmark's cheapest way to the SLO.
    #[serde(default = "raise_by_default")]
    pub raise_min_replicas: bool,
    /// The name of the HPA metric that counts requests in the system (waiting + running, or
    /// running) per replica, when its name does not say so (see `adapters::kube::hpa`).
    #[serde(default)]
    pub in_system_metric: Option<String>,
}

fn raise_by_default() -> bool {
    true
}

/// A scheduled window: from each start the cron expression gives, for `duration_seconds`,
/// keep at least `min_spare` spare replicas (Ready at the start: prewarm acts one lead time
/// earlier). Anchors: KEDA's cron scaler and EC2 Auto Scaling scheduled actions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleWindow {
    /// Five-field cron (minute hour day-of-month month day-of-week), e.g. `0 9 * * 1-5`.
    pub cron: String,
    /// IANA zone of the cron expression; TIME_ZONE when absent.
    #[serde(default)]
    pub time_zone: Option<String>,
    pub duration_seconds: f64,
    pub min_spare: u32,
}

/// Per-target PromQL overrides; empty fields use the built-in query of the server kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueryOverrides {
    #[serde(default)]
    pub waiting: Option<String>,
    #[serde(default)]
    pub running: Option<String>,
    #[serde(default)]
    pub arrival_rate: Option<String>,
    #[serde(default)]
    pub service_time: Option<String>,
}

fn default_step_up() -> u32 {
    4
}
fn default_step_down() -> u32 {
    1
}
fn default_concurrency() -> u32 {
    8
}
fn default_gpus() -> u32 {
    1
}

/// One managed target, from the PREWARM_TARGETS JSON array.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TargetSpec {
    /// Unique name; the `target` field of every log line and EMF dimension.
    pub name: String,
    /// The Karpenter NodePool whose nodes serve this target.
    pub node_pool: String,
    /// What holds the spare capacity.
    pub headroom: HeadroomKind,
    /// Inference server kind (vllm, triton, tgi, sglang, triton-trtllm, trtllm-serve, dynamo,
    /// llm-d).
    #[serde(default)]
    pub server: ServerKind,
    /// PromQL label matchers selecting the target's series, e.g. `model_name="llama-3-8b"`.
    #[serde(default)]
    pub selector: String,
    #[serde(default)]
    pub queries: QueryOverrides,
    /// Namespace and label selector of the inference pods (pending-pod signal, drain tiers).
    #[serde(default)]
    pub pod_namespace: Option<String>,
    #[serde(default)]
    pub pod_selector: Option<String>,
    /// GPUs one inference replica requests.
    #[serde(default = "default_gpus")]
    pub gpus_per_replica: u32,
    /// Requests one replica serves at once (continuous batching slots).
    #[serde(default = "default_concurrency")]
    pub replica_concurrency: u32,
    /// Floor and ceiling of spare replicas.
    #[serde(default)]
    pub min_spare: u32,
    pub max_spare: u32,
    /// Largest change of spare replicas in one tick, up and down.
    #[serde(default = "default_step_up")]
    pub max_step_up: u32,
    #[serde(default = "default_step_down")]
    pub max_step_down: u32,
    /// Never keep more GPUs than this for the target (in use + spare).
    #[serde(default)]
    pub gpu_cap: Option<u32>,
    /// Freeze Karpenter consolidation (budget nodes "0") while demand ramps.
    #[serde(default)]
    pub freeze_consolidation: bool,
    /// NodePool `spec.limits` to keep as a spend cap, e.g. {"nvidia.com/gpu": "64"}.
    #[serde(default)]
    pub limits: Option<std::collections::BTreeMap<String, String>>,
    /// The workload's HPA: size in the replicas it will want (see `hpa_sizing`).
    #[serde(default)]
    pub hpa: Option<HpaRef>,
    /// Scheduled windows of minimum spare.
    #[serde(default)]
    pub schedules: Vec<ScheduleWindow>,
    /// Spare replicas kept for the HPA's next scale-out step while demand may grow (see
    /// `next_step`); 0 turns it off. Needs a predictable `hpa`.
    #[serde(default)]
    pub next_step_spare: u32,
    /// The price of one request of this target that waits past the SLO (USD; overrides
    /// DELAYED_REQUEST_COST): with GPU_HOUR_COST it sets the band's quantile (`band::quantile`),
    /// so a model whose users pay for latency gets a higher one than a batch endpoint's.
    #[serde(default)]
    pub delayed_request_cost: Option<f64>,
}

impl TargetSpec {
    /// A target with every optional setting at the default that PREWARM_TARGETS JSON gets, for
    /// code and tests that build targets directly (change one field with `..TargetSpec::new(..)`).
    pub fn new(
        name: impl Into<String>,
        node_pool: impl Into<String>,
        headroom: HeadroomKind,
        max_spare: u32,
    ) -> Self {
        TargetSpec {
            name: name.into(),
            node_pool: node_pool.into(),
            headroom,
            server: ServerKind::default(),
            selector: String::new(),
            queries: QueryOverrides::default(),
            pod_namespace: None,
            pod_selector: None,
            gpus_per_replica: default_gpus(),
            replica_concurrency: default_concurrency(),
            min_spare: 0,
            max_spare,
            max_step_up: default_step_up(),
            max_step_down: default_step_down(),
            gpu_cap: None,
            freeze_consolidation: false,
            limits: None,
            hpa: None,
            schedules: Vec::new(),
            next_step_spare: 0,
            delayed_request_cost: None,
        }
    }

    /// The price of a delayed request the band's quantile is derived from: the target's own, else
    /// DELAYED_REQUEST_COST.
    pub fn delayed_request_cost(&self, policy: &super::PolicySpec) -> Option<f64> {
        self.delayed_request_cost.or(policy.delayed_request_cost)
    }

    /// Settings this target needs from the policy: a `delayedRequestCost` means nothing without
    /// GPU_HOUR_COST, and a setting that silently does nothing is a configuration error.
    pub fn validate_with(&self, policy: &super::PolicySpec) -> Result<(), (String, String)> {
        if self.delayed_request_cost.is_some() && policy.gpu_hour_cost.is_none() {
            return Err((
                "GPU_HOUR_COST".into(),
                format!(
                    "must be set: target {:?} sets delayedRequestCost, which is weighed against it",
                    self.name
                ),
            ));
        }
        Ok(())
    }

    /// Validates one target; the error is `(field path, message)`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let field = |f: &str| format!("PREWARM_TARGETS[{}].{f}", self.name);
        if self.name.trim().is_empty() {
            return Err(("PREWARM_TARGETS[].name".into(), "must not be empty".into()));
        }
        if self.node_pool.trim().is_empty() {
            return Err((field("nodePool"), "must not be empty".into()));
        }
        if self.gpus_per_replica == 0 || self.gpus_per_replica > 64 {
            return Err((field("gpusPerReplica"), "must be between 1 and 64".into()));
        }
        if self.replica_concurrency == 0 || self.replica_concurrency > 4096 {
            return Err((
                field("replicaConcurrency"),
                "must be between 1 and 4096".into(),
            ));
        }
        if self.min_spare > self.max_spare {
            return Err((
                field("minSpare"),
                format!("{} is above maxSpare {}", self.min_spare, self.max_spare),
            ));
        }
        if self.next_step_spare > self.max_spare {
            return Err((
                field("nextStepSpare"),
                format!(
                    "{} is above maxSpare {}",
                    self.next_step_spare, self.max_spare
                ),
            ));
        }
        if self.next_step_spare > 0 && self.hpa.is_none() {
            // The step is the HPA's next scale-out: without an HPA it would never act, and a
            // setting that silently does nothing is a configuration error.
            return Err((
                field("nextStepSpare"),
                "needs `hpa` (the spare is kept for the HPA's next scale-out)".into(),
            ));
        }
        if self.max_step_up == 0 {
            return Err((field("maxStepUp"), "must be at least 1".into()));
        }
        if let Some(cost) = self.delayed_request_cost {
            if !(1e-9..=1e6).contains(&cost) {
                return Err((
                    field("delayedRequestCost"),
                    format!("{cost} is outside 1e-9 to 1e6 (USD per delayed request)"),
                ));
            }
        }
        if let Some(hpa) = &self.hpa {
            if hpa.name.trim().is_empty() || hpa.namespace.trim().is_empty() {
                return Err((field("hpa"), "namespace and name must not be empty".into()));
            }
        }
        for (i, w) in self.schedules.iter().enumerate() {
            let at = |f: &str| field(&format!("schedules[{i}].{f}"));
            super::parse_cron(&w.cron).map_err(|m| (at("cron"), m))?;
            if let Some(zone) = &w.time_zone {
                parse_time_zone(zone).map_err(|m| (at("timeZone"), m))?;
            }
            if w.min_spare > self.max_spare {
                return Err((
                    at("minSpare"),
                    format!("{} is above maxSpare {}", w.min_spare, self.max_spare),
                ));
            }
            if !(w.duration_seconds.is_finite()
                && w.duration_seconds > 0.0
                && w.duration_seconds <= 7.0 * 86_400.0)
            {
                return Err((
                    at("durationSeconds"),
                    format!("must be in (0, 604800], got {}", w.duration_seconds),
                ));
            }
        }
        if let Some(cap) = self.gpu_cap {
            if cap < self.gpus_per_replica {
                return Err((
                    field("gpuCap"),
                    format!(
                        "{cap} is below one replica ({} GPUs)",
                        self.gpus_per_replica
                    ),
                ));
            }
        }
        Ok(())
    }
}
