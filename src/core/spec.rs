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
    /// SEASONS_SECONDS ("86400,604800"): season lengths of the seasonal forecast, comma-separated
    /// seconds (a day and a week); empty turns it off. A setting so a test can compress a "day".
    #[serde(default = "default_seasons")]
    pub seasons_s: Vec<f64>,
    /// TIME_ZONE ("UTC"): IANA zone of scheduled windows and per-hour bands (DST-safe).
    #[serde(default = "default_time_zone")]
    pub time_zone: String,
    /// FAST_PATH_RATIO (2): requests in the system over the fast-path window at or above this
    /// many times the ready slots trigger the fast path (Knative's panic threshold is 200 %).
    #[serde(default = "default_fast_ratio")]
    pub fast_path_ratio: f64,
    /// FAST_PATH_WINDOW_SECONDS (30): the short window the fast path averages demand over (two
    /// samples on the 15 s grid; Knative's 6 s panic window is below a metric store's step).
    #[serde(default = "default_fast_window")]
    pub fast_path_window_s: f64,
    /// BAND_HISTORY_SECONDS (86400): history the lead-time band is calibrated on (1 to 7 days).
    #[serde(default = "default_band_history")]
    pub band_history_s: f64,
    /// BAND_STEP_SECONDS (60): resolution of that history (coarser than the tick's: cost).
    #[serde(default = "default_band_step")]
    pub band_step_s: f64,
    /// BAND_BY_HOUR (false): one band per hour of day (in TIME_ZONE) instead of one overall.
    #[serde(default)]
    pub band_by_hour: bool,
    /// CALIBRATE_EVERY_SECONDS (3600): long-window statistics are recomputed at most this often
    /// and cached on the headroom object.
    #[serde(default = "default_calibrate_every")]
    pub calibrate_every_s: f64,
    /// DELAYED_REQUEST_COST and GPU_HOUR_COST (unset): when both are set, the band's quantile is
    /// derived from them (newsvendor) instead of ERROR_QUANTILE; see `band::cost_quantile`.
    #[serde(default)]
    pub delayed_request_cost: Option<f64>,
    #[serde(default)]
    pub gpu_hour_cost: Option<f64>,
}

fn default_seasons() -> Vec<f64> {
    vec![86_400.0, 604_800.0]
}
fn default_time_zone() -> String {
    "UTC".into()
}
fn default_fast_ratio() -> f64 {
    2.0
}
fn default_fast_window() -> f64 {
    30.0
}
fn default_band_history() -> f64 {
    86_400.0
}
fn default_band_step() -> f64 {
    60.0
}
fn default_calibrate_every() -> f64 {
    3_600.0
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
            seasons_s: default_seasons(),
            time_zone: default_time_zone(),
            fast_path_ratio: default_fast_ratio(),
            fast_path_window_s: default_fast_window(),
            band_history_s: default_band_history(),
            band_step_s: default_band_step(),
            band_by_hour: false,
            calibrate_every_s: default_calibrate_every(),
            delayed_request_cost: None,
            gpu_hour_cost: None,
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
        for season in &self.seasons_s {
            // At least two lead times, so "the same time one season back, one lead time ahead"
            // is in the past.
            check(
                "SEASONS_SECONDS",
                *season,
                2.0 * self.lead_time_s,
                31.0 * 86_400.0,
            )?;
        }
        parse_time_zone(&self.time_zone).map_err(|m| ("TIME_ZONE".to_string(), m))?;
        check("FAST_PATH_RATIO", self.fast_path_ratio, 1.0, 100.0)?;
        check(
            "FAST_PATH_WINDOW_SECONDS",
            self.fast_path_window_s,
            self.step_s,
            600.0,
        )?;
        check(
            "BAND_HISTORY_SECONDS",
            self.band_history_s,
            3_600.0,
            7.0 * 86_400.0,
        )?;
        check("BAND_STEP_SECONDS", self.band_step_s, self.step_s, 3_600.0)?;
        check(
            "CALIBRATE_EVERY_SECONDS",
            self.calibrate_every_s,
            60.0,
            86_400.0,
        )?;
        match (self.delayed_request_cost, self.gpu_hour_cost) {
            (None, None) => {}
            (Some(d), Some(g)) => {
                check("DELAYED_REQUEST_COST", d, 1e-9, 1e6)?;
                check("GPU_HOUR_COST", g, 1e-9, 1e6)?;
            }
            (Some(_), None) => {
                return Err((
                    "GPU_HOUR_COST".into(),
                    "must be set with DELAYED_REQUEST_COST".into(),
                ))
            }
            (None, Some(_)) => {
                return Err((
                    "DELAYED_REQUEST_COST".into(),
                    "must be set with GPU_HOUR_COST".into(),
                ))
            }
        }
        Ok(())
    }

    /// The configured zone (validated at start-up; UTC if it somehow does not parse).
    pub fn zone(&self) -> chrono_tz::Tz {
        parse_time_zone(&self.time_zone).unwrap_or(chrono_tz::UTC)
    }
}

/// An IANA zone name such as `Europe/Berlin`.
pub fn parse_time_zone(name: &str) -> Result<chrono_tz::Tz, String> {
    name.trim()
        .parse::<chrono_tz::Tz>()
        .map_err(|_| format!("{name:?} is not an IANA time zone name (e.g. Europe/Berlin)"))
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

/// The workload's `autoscaling/v2` HorizontalPodAutoscaler, read to size in its units.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HpaRef {
    pub namespace: String,
    pub name: String,
    /// Opt-in: also raise the HPA's `minReplicas` ahead of forecast demand (warm replicas, not
    /// only warm nodes), restoring the user's value afterwards.
    #[serde(default)]
    pub raise_min_replicas: bool,
    /// The name of the HPA metric that counts requests in the system (waiting + running, or
    /// running) per replica, when its name does not say so (see `adapters::kube::hpa`).
    #[serde(default)]
    pub in_system_metric: Option<String>,
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
        if let Some(hpa) = &self.hpa {
            if hpa.name.trim().is_empty() || hpa.namespace.trim().is_empty() {
                return Err((field("hpa"), "namespace and name must not be empty".into()));
            }
        }
        for (i, w) in self.schedules.iter().enumerate() {
            let at = |f: &str| field(&format!("schedules[{i}].{f}"));
            super::schedule::parse_cron(&w.cron).map_err(|m| (at("cron"), m))?;
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
    /// The long-window statistics (lead-time band, blend weights), recomputed at most every
    /// CALIBRATE_EVERY_SECONDS and cached on the object (`prewarm.io/calibration`).
    #[serde(default)]
    pub calibration: Option<super::band::Calibration>,
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

    /// Every bound of `PolicySpec::validate`, at and just beyond each end, on the defaults
    /// (lead 180 s, step 15 s). Bounds written from the documented ranges, not from the code.
    #[test]
    fn policy_bounds_table() {
        type Set = fn(&mut PolicySpec, f64);
        let rows: Vec<(&str, f64, f64, Set)> = vec![
            ("LEAD_TIME_SECONDS", 1.0, 3600.0, |p, v| p.lead_time_s = v),
            ("TICK_SECONDS", 1.0, 60.0, |p, v| p.tick_s = v),
            ("METRICS_STEP_SECONDS", 1.0, 300.0, |p, v| {
                // Keep the window and the fast-path window valid for every step tried.
                p.window_s = 4.0 * 301.0;
                p.fast_path_window_s = 301.0;
                p.band_step_s = 301.0;
                p.step_s = v
            }),
            ("METRICS_WINDOW_SECONDS", 60.0, 86_400.0, |p, v| {
                p.window_s = v
            }),
            ("ERROR_QUANTILE", 0.5, 0.999, |p, v| p.error_quantile = v),
            ("TARGET_WAIT_SECONDS", 0.01, 600.0, |p, v| {
                p.target_wait_s = v
            }),
            ("SCALE_DOWN_DELAY_SECONDS", 0.0, 86_400.0, |p, v| {
                p.scale_down_delay_s = v
            }),
            ("COOLDOWN_SECONDS", 0.0, 3600.0, |p, v| p.cooldown_s = v),
            ("STALE_AFTER_SECONDS", 1.0, 3600.0, |p, v| {
                p.stale_after_s = v
            }),
            ("ewma_alpha", 0.001, 1.0, |p, v| p.ewma_alpha = v),
            ("trend_beta", 0.0, 1.0, |p, v| p.trend_beta = v),
            ("trend_damping", 0.0, 1.0, |p, v| p.trend_damping = v),
            // Two lead times (360 s) to 31 days.
            ("SEASONS_SECONDS", 360.0, 2_678_400.0, |p, v| {
                p.seasons_s = vec![v]
            }),
            ("FAST_PATH_RATIO", 1.0, 100.0, |p, v| p.fast_path_ratio = v),
            // One step (15 s) to 10 minutes.
            ("FAST_PATH_WINDOW_SECONDS", 15.0, 600.0, |p, v| {
                p.fast_path_window_s = v
            }),
            ("BAND_HISTORY_SECONDS", 3600.0, 604_800.0, |p, v| {
                p.band_history_s = v
            }),
            ("BAND_STEP_SECONDS", 15.0, 3600.0, |p, v| p.band_step_s = v),
            ("CALIBRATE_EVERY_SECONDS", 60.0, 86_400.0, |p, v| {
                p.calibrate_every_s = v
            }),
            ("DELAYED_REQUEST_COST", 1e-9, 1e6, |p, v| {
                p.gpu_hour_cost = Some(1.0);
                p.delayed_request_cost = Some(v)
            }),
            ("GPU_HOUR_COST", 1e-9, 1e6, |p, v| {
                p.delayed_request_cost = Some(1.0);
                p.gpu_hour_cost = Some(v)
            }),
        ];
        assert_eq!(PolicySpec::default().validate(), Ok(()));
        for (name, lo, hi, set) in rows {
            let with = |v: f64| {
                let mut p = PolicySpec::default();
                set(&mut p, v);
                p.validate()
            };
            let below = if lo == 0.0 { -1e-9 } else { lo * (1.0 - 1e-9) };
            assert_eq!(with(lo), Ok(()), "{name} at its lower bound {lo}");
            assert_eq!(with(hi), Ok(()), "{name} at its upper bound {hi}");
            for bad in [below, hi * (1.0 + 1e-9), f64::NAN, f64::INFINITY] {
                let err = with(bad).expect_err(name);
                assert_eq!(err.0, name, "{name} = {bad}: {err:?}");
            }
        }
    }

    #[test]
    fn policy_settings_that_are_not_ranges() {
        let bad_zone = PolicySpec {
            time_zone: "Mars/Olympus".into(),
            ..PolicySpec::default()
        };
        assert_eq!(bad_zone.validate().unwrap_err().0, "TIME_ZONE");
        let berlin = PolicySpec {
            time_zone: "Europe/Berlin".into(),
            ..PolicySpec::default()
        };
        assert_eq!(berlin.validate(), Ok(()));
        let one_cost = PolicySpec {
            delayed_request_cost: Some(1.0),
            ..PolicySpec::default()
        };
        assert_eq!(one_cost.validate().unwrap_err().0, "GPU_HOUR_COST");
        let no_seasons = PolicySpec {
            seasons_s: vec![],
            ..PolicySpec::default()
        };
        assert_eq!(no_seasons.validate(), Ok(()));
    }

    #[test]
    fn target_validation_table() {
        let base = || TargetSpec::new("t", "gpu", HeadroomKind::NodePoolReplicas, 4);
        let hpa_ref = || HpaRef {
            namespace: "ml".into(),
            name: "llm".into(),
            raise_min_replicas: false,
            in_system_metric: None,
        };
        let window = |cron: &str, zone: Option<&str>, d: f64, spare: u32| ScheduleWindow {
            cron: cron.into(),
            time_zone: zone.map(str::to_string),
            duration_seconds: d,
            min_spare: spare,
        };
        let rows: Vec<(&str, TargetSpec, Option<&str>)> = vec![
            ("defaults", base(), None),
            (
                "next step at maxSpare",
                TargetSpec {
                    next_step_spare: 4,
                    hpa: Some(hpa_ref()),
                    ..base()
                },
                None,
            ),
            (
                "next step above maxSpare",
                TargetSpec {
                    next_step_spare: 5,
                    hpa: Some(hpa_ref()),
                    ..base()
                },
                Some("PREWARM_TARGETS[t].nextStepSpare"),
            ),
            (
                "next step without an HPA",
                TargetSpec {
                    next_step_spare: 1,
                    ..base()
                },
                Some("PREWARM_TARGETS[t].nextStepSpare"),
            ),
            (
                "empty node pool",
                TargetSpec {
                    node_pool: " ".into(),
                    ..base()
                },
                Some("PREWARM_TARGETS[t].nodePool"),
            ),
            (
                "0 GPUs",
                TargetSpec {
                    gpus_per_replica: 0,
                    ..base()
                },
                Some("PREWARM_TARGETS[t].gpusPerReplica"),
            ),
            (
                "65 GPUs",
                TargetSpec {
                    gpus_per_replica: 65,
                    ..base()
                },
                Some("PREWARM_TARGETS[t].gpusPerReplica"),
            ),
            (
                "64 GPUs",
                TargetSpec {
                    gpus_per_replica: 64,
                    gpu_cap: Some(64),
                    ..base()
                },
                None,
            ),
            (
                "concurrency 0",
                TargetSpec {
                    replica_concurrency: 0,
                    ..base()
                },
                Some("PREWARM_TARGETS[t].replicaConcurrency"),
            ),
            (
                "concurrency 4097",
                TargetSpec {
                    replica_concurrency: 4097,
                    ..base()
                },
                Some("PREWARM_TARGETS[t].replicaConcurrency"),
            ),
            (
                "min above max",
                TargetSpec {
                    min_spare: 5,
                    ..base()
                },
                Some("PREWARM_TARGETS[t].minSpare"),
            ),
            (
                "min equal max",
                TargetSpec {
                    min_spare: 4,
                    ..base()
                },
                None,
            ),
            (
                "step up 0",
                TargetSpec {
                    max_step_up: 0,
                    ..base()
                },
                Some("PREWARM_TARGETS[t].maxStepUp"),
            ),
            (
                "cap below a replica",
                TargetSpec {
                    gpus_per_replica: 2,
                    gpu_cap: Some(1),
                    ..base()
                },
                Some("PREWARM_TARGETS[t].gpuCap"),
            ),
            (
                "HPA without name",
                TargetSpec {
                    hpa: Some(HpaRef {
                        namespace: "ml".into(),
                        name: "".into(),
                        raise_min_replicas: false,
                        in_system_metric: None,
                    }),
                    ..base()
                },
                Some("PREWARM_TARGETS[t].hpa"),
            ),
            (
                "bad cron",
                TargetSpec {
                    schedules: vec![window("0 25 * * *", None, 60.0, 1)],
                    ..base()
                },
                Some("PREWARM_TARGETS[t].schedules[0].cron"),
            ),
            (
                "bad zone",
                TargetSpec {
                    schedules: vec![window("0 9 * * *", Some("Nowhere"), 60.0, 1)],
                    ..base()
                },
                Some("PREWARM_TARGETS[t].schedules[0].timeZone"),
            ),
            (
                "zero duration",
                TargetSpec {
                    schedules: vec![window("0 9 * * *", None, 0.0, 1)],
                    ..base()
                },
                Some("PREWARM_TARGETS[t].schedules[0].durationSeconds"),
            ),
            (
                "window above maxSpare",
                TargetSpec {
                    schedules: vec![window("0 9 * * *", None, 60.0, 5)],
                    ..base()
                },
                Some("PREWARM_TARGETS[t].schedules[0].minSpare"),
            ),
            (
                "good window",
                TargetSpec {
                    schedules: vec![window("0 9 * * 1-5", Some("Europe/Berlin"), 3600.0, 4)],
                    ..base()
                },
                None,
            ),
        ];
        for (name, target, want) in rows {
            let got = target.validate().err().map(|e| e.0);
            assert_eq!(got.as_deref(), want, "{name}");
        }
    }

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
        let step: TargetSpec = serde_json::from_str(
            r#"{"name":"t","nodePool":"gpu","maxSpare":4,"headroom":{"kind":"nodePoolReplicas"},"nextStepSpare":1}"#,
        )
        .unwrap();
        assert_eq!(step.next_step_spare, 1);
    }
}
