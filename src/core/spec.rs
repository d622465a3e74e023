//! All settings of the decision model in one validated place (like Knative's autoscaler spec).
//! `PolicySpec` holds the function-wide settings, `TargetSpec` one managed model/NodePool.
//! Validation returns the name of the offending setting so start-up errors can name it.

use serde::{Deserialize, Serialize};

/// Function-wide decision settings. Field docs give the environment variable and default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicySpec {
    /// LEAD_TIME_SECONDS (180): node launch + image pull + model load; the forecast horizon.
    pub lead_time_s: f64,
    /// TICK_SECONDS (15): time between decisions.
    pub tick_s: f64,
    /// METRICS_WINDOW_SECONDS (900): history fetched every tick.
    pub window_s: f64,
    /// METRICS_STEP_SECONDS (15): resolution of that history.
    pub step_s: f64,
    /// ERROR_QUANTILE (0.9): upper quantile of recent forecast error added to the forecast.
    pub error_quantile: f64,
    /// TARGET_WAIT_SECONDS (2): mean queueing wait the sizing aims for.
    pub target_wait_s: f64,
    /// SCALE_DOWN_DELAY_SECONDS (300): hold the maximum desired headroom over this window.
    pub scale_down_delay_s: f64,
    /// COOLDOWN_SECONDS (60): minimum time between two changes of one target.
    pub cooldown_s: f64,
    /// STALE_AFTER_SECONDS (120): newest sample older than this means "metrics missing".
    pub stale_after_s: f64,
    /// EWMA smoothing factor of the level (0 < alpha <= 1).
    pub ewma_alpha: f64,
    /// Smoothing factor of the trend (0 < beta <= 1).
    pub trend_beta: f64,
    /// Damping of the trend per step (0 < phi <= 1); 1 is an undamped linear trend.
    pub trend_damping: f64,
}

impl Default for PolicySpec {
    fn default() -> Self {
        PolicySpec {
            lead_time_s: 180.0,
            tick_s: 15.0,
            window_s: 900.0,
            step_s: 15.0,
            error_quantile: 0.9,
            target_wait_s: 2.0,
            scale_down_delay_s: 300.0,
            cooldown_s: 60.0,
            stale_after_s: 120.0,
            ewma_alpha: 0.3,
            trend_beta: 0.2,
            trend_damping: 0.9,
        }
    }
}

/// Inclusive bounds of a setting, checked once at start-up.
fn check(name: &str, value: f64, lo: f64, hi: f64) -> Result<(), (String, String)> {
    if value.is_finite() && value >= lo && value <= hi {
        Ok(())
    } else {
        Err((
            name.to_string(),
            format!("must be between {lo} and {hi}, got {value}"),
        ))
    }
}

/// Static inclusive bounds of the policy's environment variables: `(variable, min, max)`.
/// template.yaml's parameters carry exactly these as MinValue/MaxValue, so a value CloudFormation
/// accepts never fails at Init (tests/template_bounds.rs holds the two equal).
pub const POLICY_BOUNDS: [(&str, f64, f64); 9] = [
    ("LEAD_TIME_SECONDS", 1.0, 3600.0),
    ("TICK_SECONDS", 1.0, 60.0),
    ("METRICS_STEP_SECONDS", 1.0, 300.0),
    ("METRICS_WINDOW_SECONDS", 60.0, 86_400.0),
    ("ERROR_QUANTILE", 0.5, 0.999),
    ("TARGET_WAIT_SECONDS", 0.01, 600.0),
    ("SCALE_DOWN_DELAY_SECONDS", 0.0, 86_400.0),
    ("COOLDOWN_SECONDS", 0.0, 3600.0),
    ("STALE_AFTER_SECONDS", 1.0, 3600.0),
];

impl PolicySpec {
    /// Validates ranges. The error is `(variable name, message)`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let values = [
            self.lead_time_s,
            self.tick_s,
            self.step_s,
            self.window_s,
            self.error_quantile,
            self.target_wait_s,
            self.scale_down_delay_s,
            self.cooldown_s,
            self.stale_after_s,
        ];
        for ((name, lo, hi), value) in POLICY_BOUNDS.iter().zip(values) {
            check(name, value, *lo, *hi)?;
        }
        // The one bound that depends on another setting (CloudFormation parameters cannot say
        // it): the forecast needs at least four samples of history.
        check(
            "METRICS_WINDOW_SECONDS",
            self.window_s,
            self.step_s * 4.0,
            86_400.0,
        )?;
        check("ewma_alpha", self.ewma_alpha, 0.001, 1.0)?;
        check("trend_beta", self.trend_beta, 0.0, 1.0)?;
        check("trend_damping", self.trend_damping, 0.0, 1.0)?;
        Ok(())
    }
}

/// Which inference server exposes the metrics; selects the built-in queries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    #[default]
    Vllm,
    Triton,
    Tgi,
    Sglang,
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
    /// Inference server kind (vllm, triton, tgi, sglang).
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
        }
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
        if self.max_step_up == 0 {
            return Err((field("maxStepUp"), "must be at least 1".into()));
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

/// What prewarm knows of a target's headroom object right now, read from the object itself
/// (its size and prewarm's annotations), so the Lambda keeps no state between invocations.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HeadroomState {
    /// Spare replicas the headroom object holds now.
    pub spare: u32,
    /// No change before this time (Unix seconds): the cooldown persisted as an annotation.
    pub cooldown_until: Option<f64>,
    /// The scale-down delay: the highest recent desired value and when it may be released.
    pub hold: Option<Hold>,
    /// Extra replicas requested by the interruption path as replacements for draining nodes;
    /// the tick never takes these back while the drain is on.
    pub replacement_reserved: u32,
    /// Whether prewarm has frozen the NodePool's consolidation budgets.
    pub consolidation_frozen: bool,
    /// When the last tick acted on this object (Unix seconds); guards overlapping invocations.
    pub last_tick: Option<f64>,
}

/// The high-water mark of desired spare capacity kept for the scale-down delay.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hold {
    pub spare: u32,
    pub until: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_gives_the_same_defaults_as_the_targets_json() {
        let parsed: TargetSpec = serde_json::from_str(
            r#"{"name":"t","nodePool":"gpu","maxSpare":4,"headroom":{"kind":"nodePoolReplicas"}}"#,
        )
        .unwrap();
        assert_eq!(
            TargetSpec::new("t", "gpu", HeadroomKind::NodePoolReplicas, 4),
            parsed
        );
    }
}
