//! The output of a decision: what to do with one target's headroom, and why.
//! Plans are computed first and carried out by a separate executor (adapters::kube), like
//! Karpenter's disruption commands.

use serde::{Deserialize, Serialize};

use crate::spec::HeadroomState;

/// What the executor should do with the headroom object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Raise the spare replicas to `Plan::desired_spare`.
    ScaleUp,
    /// Lower the spare replicas to `Plan::desired_spare`.
    ScaleDown,
    /// Keep the object as it is (the state annotations may still be refreshed).
    None,
    /// Metrics are missing, stale or malformed: keep the current headroom and never scale down.
    FailStatic,
}

/// Why the plan is what it is; several may apply at once. Logged as strings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Reason {
    Forecast,
    MetricsMissing {
        detail: String,
    },
    Floor {
        min_spare: u32,
    },
    Ceiling {
        max_spare: u32,
    },
    GpuCap {
        gpu_cap: u32,
    },
    StepUpLimited {
        max_step_up: u32,
    },
    StepDownLimited {
        max_step_down: u32,
    },
    ScaleDownDelay {
        hold_spare: u32,
        until: f64,
    },
    Cooldown {
        until: f64,
    },
    PendingPods {
        count: u32,
    },
    ReplacementReserved {
        replicas: u32,
    },
    /// The queue triggered the fast path: provision the end of the HPA's ramp in one step.
    FastPath {
        in_system: f64,
        ready_slots: f64,
        replicas: u32,
    },
    /// A scheduled window (index in `schedules`) asks for at least `min_spare`.
    Scheduled {
        min_spare: u32,
        window: usize,
    },
    /// The spare for the HPA's next scale-out step raised the forecast's spare to `replicas`.
    NextStep {
        replicas: u32,
    },
    /// The seasonal forecast raises the horizon `replicas` above the trend-only forecast: that
    /// part of the spare passes the step-up limit (a recurring rise is known a lead time ahead).
    SeasonalRise {
        replicas: u32,
    },
    /// Sized with Erlang C instead of the HPA's units, and why.
    QueueSizing {
        why: String,
    },
}

/// The forecast numbers behind a plan, for the decision log line and EMF.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ForecastSummary {
    /// Observed arrival rate now (req/s).
    pub observed_rate: f64,
    /// EWMA level and damped trend (req/s, req/s per step).
    pub level: f64,
    pub trend: f64,
    /// Upper quantile of recent forecast error added to the forecast (req/s).
    pub error_quantile: f64,
    /// Highest forecast rate over the lead time, including the error quantile (req/s).
    pub rate_at_horizon: f64,
    /// Mean service time used for sizing (s).
    pub service_time_s: f64,
    /// Replicas needed now and at the horizon.
    pub replicas_now: u32,
    pub replicas_at_horizon: u32,
    /// The trend model's highest point forecast over the lead time (req/s).
    #[serde(default)]
    pub trend_peak: f64,
    /// The seasonal forecast over the lead time (req/s) and its weight in the blend.
    #[serde(default)]
    pub seasonal_peak: Option<f64>,
    #[serde(default)]
    pub seasonal_weight: f64,
    /// "lead_time" (calibrated) or "one_step" (fallback).
    #[serde(default)]
    pub band_source: String,
    /// Nominal quantile of the band and its achieved out-of-sample coverage (0..1).
    #[serde(default)]
    pub quantile: f64,
    #[serde(default)]
    pub coverage: Option<f64>,
    /// What the band was conditioned on (BAND_BY_HOUR's choice: "whole", "hour-of-day",
    /// "hour-of-week") and the out-of-sample coverage (0..1) of the local hour of day the lead
    /// time ends in, whose band was used.
    #[serde(default)]
    pub band_by: String,
    #[serde(default)]
    pub hour_coverage: Option<f64>,
    /// The forecaster that sized this tick ("blend": the trend with the seasons; "profile":
    /// the peak of the hour on the days before, as the calibration chose for the target) and
    /// the profile's forecast over the lead (req/s), when it did.
    #[serde(default)]
    pub forecaster: String,
    #[serde(default)]
    pub profile_peak: Option<f64>,
    /// "hpa" or "queue".
    #[serde(default)]
    pub sizing: String,
    /// Why the seasonal forecaster did not contribute (trend only), when it did not.
    #[serde(default)]
    pub trend_only: Option<String>,
    /// Why the band is the one-step fallback, when it is.
    #[serde(default)]
    pub one_step_band: Option<String>,
}

/// One target's decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub target: String,
    pub action: Action,
    pub current_spare: u32,
    pub desired_spare: u32,
    /// Whether the NodePool's consolidation should be frozen (Some(true)), restored
    /// (Some(false)), or left as it is (None).
    pub freeze_consolidation: Option<bool>,
    pub forecast: ForecastSummary,
    pub reasons: Vec<Reason>,
    /// The workload HPA's floor for `hpa.raiseMinReplicas`: the replicas at the horizon within
    /// the rails (`Rails::replica_floor`); None when failing static (the lease is held as is).
    #[serde(default)]
    pub hpa_floor: Option<u32>,
    /// The state to persist on the headroom object after the plan is carried out.
    pub next_state: HeadroomState,
}

impl Plan {
    /// Whether carrying out the plan changes the headroom object's size.
    pub fn changes_size(&self) -> bool {
        matches!(self.action, Action::ScaleUp | Action::ScaleDown)
            && self.desired_spare != self.current_spare
    }
}
