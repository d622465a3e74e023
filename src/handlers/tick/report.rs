//! What a tick did for one target and how it is told: the report (`prewarm tick --json`), the
//! decision log line and its EMF record.

use serde::{Deserialize, Serialize};

use crate::adapters::kube::headroom::annotations;
use crate::adapters::kube::lead_times::Learned;
use crate::core::lead::{Horizon, Phase};
use crate::core::policy::residual::TickVerdict;
use crate::core::{Plan, Reason};
use crate::error::Error;
use crate::telemetry::{EmfRecord, Unit};

/// What one tick did for one target (the `--json` output of `prewarm tick`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TargetReport {
    pub target: String,
    /// The tick's time (what the metric queries were evaluated at), RFC 3339: lets a reader
    /// tell which tick first saw a sample.
    #[serde(default)]
    pub at: Option<String>,
    pub dry_run: bool,
    pub plan: Option<Plan>,
    pub pending_pods: u32,
    pub serving_replicas: Option<u32>,
    /// Why the metrics were not usable, when they were not (the plan then fails static).
    pub metrics_problem: Option<String>,
    /// Headroom object: outcome and its size before and after.
    pub headroom: Option<String>,
    pub size_before: Option<u32>,
    pub size_after: Option<u32>,
    /// NodePool limits/budgets patch outcome.
    pub node_pool: Option<String>,
    /// The HPA floor (`hpa.raiseMinReplicas`): raised, renewed, restored, user_edit_kept,
    /// unchanged, or the error.
    #[serde(default)]
    pub hpa_floor: Option<String>,
    /// The residual's verdict on the newest sample (delayed past the SLO wait, and whether
    /// its rise over the lead exceeded the training rise): the UnforecastableShare metric.
    #[serde(default)]
    pub residual: Option<TickVerdict>,
    /// The lead time this tick looked ahead by: learned phase by phase, or LEAD_TIME_SECONDS
    /// and why (`handlers::tick::lead`).
    #[serde(default)]
    pub lead: Option<Horizon>,
    /// The pulls and loads this tick measured, for the book (not part of the report).
    #[serde(skip)]
    pub learned: Vec<Learned>,
    /// Set when this target was left alone on purpose (another invocation acted).
    pub skipped: Option<String>,
    pub error: Option<String>,
    pub error_kind: Option<String>,
    pub retryable: Option<bool>,
}

impl TargetReport {
    pub(super) fn new(target: &str, dry_run: bool) -> Self {
        TargetReport {
            target: target.to_string(),
            at: None,
            dry_run,
            plan: None,
            pending_pods: 0,
            serving_replicas: None,
            metrics_problem: None,
            headroom: None,
            size_before: None,
            size_after: None,
            node_pool: None,
            hpa_floor: None,
            residual: None,
            lead: None,
            learned: Vec::new(),
            skipped: None,
            error: None,
            error_kind: None,
            retryable: None,
        }
    }

    pub(super) fn failed(mut self, error: &Error) -> Self {
        self.error = Some(error.to_string());
        self.error_kind = Some(error.kind().to_string());
        self.retryable = Some(error.retryable());
        self
    }

    /// The action for logs: the plan's, or what kept the target from having one.
    pub fn action(&self) -> String {
        if self.error.is_some() {
            "error".into()
        } else if self.skipped.is_some() {
            "skipped".into()
        } else {
            self.plan
                .as_ref()
                .map(|p| {
                    serde_json::to_value(p.action)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                })
                .unwrap_or_default()
        }
    }

    /// One readable reason line: the plan's reasons, or the error / skip cause.
    pub fn reason(&self) -> String {
        if let Some(e) = &self.error {
            return e.clone();
        }
        if let Some(s) = &self.skipped {
            return s.clone();
        }
        self.plan
            .as_ref()
            .map(|p| {
                p.reasons
                    .iter()
                    .map(reason_text)
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default()
    }
}

/// A reason as `name` or `name(detail)`, for log lines and the table.
pub fn reason_text(reason: &Reason) -> String {
    match reason {
        Reason::Forecast => "forecast".into(),
        Reason::MetricsMissing { detail } => format!("metrics_missing({detail})"),
        Reason::Floor { min_spare } => format!("floor({min_spare})"),
        Reason::Ceiling { max_spare } => format!("ceiling({max_spare})"),
        Reason::GpuCap { gpu_cap } => format!("gpu_cap({gpu_cap})"),
        Reason::StepUpLimited { max_step_up } => format!("step_up_limited({max_step_up})"),
        Reason::StepDownLimited { max_step_down } => {
            format!("step_down_limited({max_step_down})")
        }
        Reason::ScaleDownDelay { hold_spare, until } => format!(
            "scale_down_delay({hold_spare} until {})",
            annotations::format_time(*until)
        ),
        Reason::Cooldown { until } => {
            format!("cooldown(until {})", annotations::format_time(*until))
        }
        Reason::PendingPods { count } => format!("pending_pods({count})"),
        Reason::ReplacementReserved { replicas } => format!("replacement_reserved({replicas})"),
        Reason::FastPath {
            in_system,
            ready_slots,
            replicas,
        } => format!("fast_path({in_system:.1} in system vs {ready_slots:.0} ready slots: {replicas} replicas)"),
        Reason::Scheduled { min_spare, window } => {
            format!("scheduled(window {window}: min {min_spare})")
        }
        Reason::NextStep { replicas } => format!("next_step({replicas})"),
        Reason::SeasonalRise { replicas } => {
            format!("seasonal_rise({replicas} replicas above the trend: past the step limit)")
        }
        Reason::QueueSizing { why } => format!("queue_sizing({why})"),
    }
}

/// The decision log line: flat fields so Logs Insights can filter and aggregate them.
pub fn log_decision(r: &TargetReport) {
    let forecast = r.plan.as_ref().map(|p| &p.forecast);
    let observed_rate = forecast.map_or(f64::NAN, |f| f.observed_rate);
    let rate_at_horizon = forecast.map_or(f64::NAN, |f| f.rate_at_horizon);
    let quantile = forecast.map_or(f64::NAN, |f| f.error_quantile);
    let nominal = forecast.map_or(f64::NAN, |f| f.quantile);
    let coverage = forecast.and_then(|f| f.coverage);
    let band_source = forecast.map_or("", |f| f.band_source.as_str());
    let band_by = forecast.map_or("", |f| f.band_by.as_str());
    let hour_coverage = forecast.and_then(|f| f.hour_coverage);
    let forecaster = forecast.map_or("", |f| f.forecaster.as_str());
    let profile_peak = forecast.and_then(|f| f.profile_peak);
    let sizing = forecast.map_or("", |f| f.sizing.as_str());
    let seasonal = forecast.and_then(|f| f.seasonal_peak);
    let seasonal_weight = forecast.map_or(f64::NAN, |f| f.seasonal_weight);
    let trend_only = forecast.and_then(|f| f.trend_only.as_deref()).unwrap_or("");
    let one_step_band = forecast
        .and_then(|f| f.one_step_band.as_deref())
        .unwrap_or("");
    let desired = r.plan.as_ref().map(|p| p.desired_spare);
    let current = r.plan.as_ref().map(|p| p.current_spare);
    let floor_replicas = r.plan.as_ref().and_then(|p| p.hpa_floor);
    let action = r.action();
    let reason = r.reason();
    let headroom = r.headroom.as_deref().unwrap_or("");
    let node_pool = r.node_pool.as_deref().unwrap_or("");
    let hpa_floor = r.hpa_floor.as_deref().unwrap_or("");
    let at = r.at.as_deref().unwrap_or("");
    let lead_time_s = r.lead.as_ref().map(|h| h.seconds);
    let lead_fallback = r
        .lead
        .as_ref()
        .and_then(|h| h.fallback.as_deref())
        .unwrap_or("");
    if r.error.is_some() {
        tracing::error!(
            event = "decision",
            target = %r.target,
            at,
            action = %action,
            reason = %reason,
            error_kind = r.error_kind.as_deref().unwrap_or(""),
            retryable = r.retryable.unwrap_or(false),
            dry_run = r.dry_run,
            "decision"
        );
    } else {
        tracing::info!(
            event = "decision",
            target = %r.target,
            at,
            observed = observed_rate,
            forecast = rate_at_horizon,
            quantile,
            nominal_quantile = nominal,
            coverage,
            band_source,
            band_by,
            hour_coverage,
            forecaster,
            profile_peak,
            sizing,
            seasonal,
            seasonal_weight,
            trend_only,
            one_step_band,
            desired,
            current,
            size_before = r.size_before,
            size_after = r.size_after,
            pending_pods = r.pending_pods,
            serving_replicas = r.serving_replicas,
            action = %action,
            reason = %reason,
            headroom = headroom,
            node_pool = node_pool,
            hpa_floor = hpa_floor,
            floor_replicas,
            lead_time_s,
            lead_fallback,
            dry_run = r.dry_run,
            "decision"
        );
    }
}

/// The EMF metric of a learned phase's upper quantile.
fn phase_metric(phase: Phase) -> &'static str {
    match phase {
        Phase::NodeBoot => "LeadNodeBootSeconds",
        Phase::ImagePull => "LeadImagePullSeconds",
        Phase::ModelLoad => "LeadModelLoadSeconds",
    }
}

/// The EMF metrics of one decision (dimension Target).
pub fn emf_record(r: &TargetReport) -> EmfRecord {
    let mut record = EmfRecord::new().dimension("Target", &r.target);
    if let Some(p) = &r.plan {
        let acted = matches!(r.headroom.as_deref(), Some("written")) && p.changes_size();
        record = record
            .metric("Forecast", p.forecast.rate_at_horizon, Unit::None)
            .metric("Observed", p.forecast.observed_rate, Unit::None)
            .metric("Headroom", p.current_spare as f64, Unit::Count)
            .metric("Desired", p.desired_spare as f64, Unit::Count)
            .metric("Actions", if acted { 1.0 } else { 0.0 }, Unit::Count);
        // Whether the band is honest: achieved out-of-sample coverage next to the nominal
        // quantile (percent), published when the calibration measured it.
        if let Some(c) = p.forecast.coverage {
            record = record
                .metric("BandCoverage", 100.0 * c, Unit::Percent)
                .metric("BandNominal", 100.0 * p.forecast.quantile, Unit::Percent);
        }
        // The same at this local hour (its Average by hour over a day: coverage per hour).
        if let Some(c) = p.forecast.hour_coverage {
            record = record.metric("BandCoverageHour", 100.0 * c, Unit::Percent);
        }
        // Which forecaster sized the tick: 1 the hour's profile, 0 the blend (its Average is
        // the share of ticks the profile sized).
        let profile = if p.forecast.forecaster == "profile" {
            1.0
        } else {
            0.0
        };
        record = record.metric("ForecasterProfile", profile, Unit::Count);
        let fast = p
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::FastPath { .. }));
        record = record.metric("FastPath", if fast { 1.0 } else { 0.0 }, Unit::Count);
    }
    // The horizon decided with, whether it was learned, and each phase learned.
    if let Some(h) = &r.lead {
        record = record
            .metric("LeadTimeSeconds", h.seconds, Unit::Seconds)
            .metric(
                "LeadTimeLearned",
                if h.learned() { 1.0 } else { 0.0 },
                Unit::Count,
            );
        for p in &h.phases {
            if let Some(seconds) = p.seconds {
                record = record.metric(phase_metric(p.phase), seconds, Unit::Seconds);
            }
        }
    }
    // Published on delayed ticks only, 100 when unforecastable at the lead and 0 when not:
    // its Average over an hour is the unforecastable share of that hour's delayed ticks.
    if let Some(v) = r.residual.filter(|v| v.delayed) {
        let share = if v.unforecastable { 100.0 } else { 0.0 };
        record = record.metric("UnforecastableShare", share, Unit::Percent);
    }
    record
        .metric(
            "Errors",
            if r.error.is_some() { 1.0 } else { 0.0 },
            Unit::Count,
        )
        // Also without the Target dimension: the series HandledErrorsAlarm watches.
        .total("Errors")
}

#[cfg(test)]
mod tests {
    use super::super::target::tests::plan;
    use super::*;
    use crate::core;
    use serde_json::Value;

    #[test]
    fn reasons_read_as_one_line() {
        let mut r = TargetReport::new("llama", false);
        let mut p = plan(None);
        p.action = core::Action::FailStatic;
        p.reasons = vec![
            Reason::MetricsMissing {
                detail: "prometheus down".into(),
            },
            Reason::Cooldown {
                until: 1_795_953_660.0,
            },
        ];
        r.plan = Some(p);
        assert_eq!(r.action(), "fail_static");
        assert_eq!(
            r.reason(),
            "metrics_missing(prometheus down); cooldown(until 2026-11-29T12:01:00.000Z)"
        );
        let failed = r.failed(&Error::NotFound {
            kind: "NodePool".into(),
            name: "gpu".into(),
        });
        assert_eq!(failed.action(), "error");
        assert_eq!(failed.reason(), "NodePool gpu not found");
    }

    /// UnforecastableShare: 100 on an unforecastable delayed tick, 0 on a forecastable one,
    /// absent on a tick without delay or without a verdict (so an hour's Average is the share
    /// of its delayed ticks).
    #[test]
    fn emf_publishes_the_unforecastable_share_on_delayed_ticks_only() {
        let verdict = |delayed, unforecastable| {
            Some(TickVerdict {
                delayed,
                unforecastable,
            })
        };
        for (residual, want) in [
            (verdict(true, true), Some(100.0)),
            (verdict(true, false), Some(0.0)),
            (verdict(false, false), None),
            (None, None),
        ] {
            let r = TargetReport {
                residual,
                ..TargetReport::new("llama", false)
            };
            let line: Value = serde_json::from_str(&emf_record(&r).render("Prewarm", 0)).unwrap();
            assert_eq!(line["UnforecastableShare"].as_f64(), want, "{residual:?}");
        }
    }

    /// The horizon decided with and each learned phase, or the setting with LeadTimeLearned 0.
    #[test]
    fn emf_publishes_the_lead_time_and_its_learned_phases() {
        use crate::core::lead::PhaseLead;
        let phase = |phase, seconds| PhaseLead {
            phase,
            scope: "llama".into(),
            samples: 3,
            seconds,
        };
        let learned = Horizon {
            seconds: 60.0,
            phases: vec![
                phase(Phase::NodeBoot, Some(32.0)),
                phase(Phase::ImagePull, Some(2.0)),
                phase(Phase::ModelLoad, Some(22.0)),
            ],
            fallback: None,
        };
        let fallback = Horizon {
            seconds: 180.0,
            phases: vec![
                phase(Phase::NodeBoot, Some(32.0)),
                phase(Phase::ModelLoad, None),
            ],
            fallback: Some("model-load in llama has 1 of 3 samples".into()),
        };
        let line = |lead| -> Value {
            let r = TargetReport {
                lead,
                ..TargetReport::new("llama", false)
            };
            serde_json::from_str(&emf_record(&r).render("Prewarm", 0)).unwrap()
        };
        let got = line(Some(learned));
        assert_eq!(got["LeadTimeSeconds"], 60.0);
        assert_eq!(got["LeadTimeLearned"], 1.0);
        assert_eq!(got["LeadNodeBootSeconds"], 32.0);
        assert_eq!(got["LeadImagePullSeconds"], 2.0);
        assert_eq!(got["LeadModelLoadSeconds"], 22.0);
        let got = line(Some(fallback));
        assert_eq!(got["LeadTimeSeconds"], 180.0);
        assert_eq!(got["LeadTimeLearned"], 0.0);
        assert_eq!(got["LeadNodeBootSeconds"], 32.0);
        assert!(got.get("LeadModelLoadSeconds").is_none());
        assert!(line(None).get("LeadTimeSeconds").is_none());
    }

    /// ForecasterProfile: 1 when the hour's profile sized the tick, 0 for the blend, absent
    /// without a plan.
    #[test]
    fn emf_says_which_forecaster_sized_the_tick() {
        let line = |forecaster: Option<&str>| -> Value {
            let plan = forecaster.map(|f| {
                let mut p = plan(None);
                p.forecast.forecaster = f.into();
                p
            });
            let r = TargetReport {
                plan,
                ..TargetReport::new("llama", false)
            };
            serde_json::from_str(&emf_record(&r).render("Prewarm", 0)).unwrap()
        };
        assert_eq!(line(Some("profile"))["ForecasterProfile"], 1.0);
        assert_eq!(line(Some("blend"))["ForecasterProfile"], 0.0);
        assert!(line(None).get("ForecasterProfile").is_none());
    }

    #[test]
    fn emf_counts_an_error_and_no_action_for_a_failed_target() {
        let failed = TargetReport::new("llama", false).failed(&Error::NotFound {
            kind: "NodePool".into(),
            name: "gpu".into(),
        });
        let line: Value = serde_json::from_str(&emf_record(&failed).render("Prewarm", 0)).unwrap();
        assert_eq!(line["Errors"], 1.0);
        assert_eq!(line["Target"], "llama");
        assert!(line.get("Actions").is_none());
        // The alarm's series: Errors once more, without the Target dimension.
        assert_eq!(
            line["_aws"]["CloudWatchMetrics"][1]["Dimensions"],
            serde_json::json!([[]])
        );
        assert_eq!(
            line["_aws"]["CloudWatchMetrics"][1]["Metrics"][0]["Name"],
            "Errors"
        );
    }
}
