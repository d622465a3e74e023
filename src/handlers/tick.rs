//! The scheduled tick: every TICK_SECONDS, for every target at once, observe demand, read the
//! headroom object and NodePool, decide (pure core), and carry out the plan unless DRY_RUN.
//!
//! EventBridge fires at most once a minute, so one invocation runs several ticks, stopping
//! shortly before the minute ends (or the Lambda deadline). Each target runs in its own task:
//! an error, even a panic, on one target never stops the others. Every decision is one JSON log
//! line with flat fields (for Logs Insights) and one EMF record.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lambda_runtime::{service_fn, LambdaEvent};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::adapters::kube::headroom::{self, ApplyOutcome, HeadroomRead};
use crate::adapters::kube::nodepool::{self, NodePoolView};
use crate::adapters::kube::nodepool_limits::LimitsIntent;
use crate::adapters::kube::{annotations, hpa, hpa_floor, limits_room, pods, targets, ClientCache};
use crate::adapters::metrics::{self, MetricSource, Window};
use crate::config::Config;
use crate::core::policy::band;
use crate::core::policy::observation::SeasonSeries;
use crate::core::{self, HeadroomKind, Observation, Plan, Reason, TargetSpec};
use crate::error::{Error, Result};
use crate::telemetry::{EmfRecord, Unit};

/// Everything a tick needs, built once per execution environment.
pub struct TickDeps {
    pub config: Config,
    pub clients: ClientCache,
    pub metrics: Box<dyn MetricSource>,
    /// Sends resume-drain messages to INTERRUPTION_QUEUE_URL (the lease collection's handover).
    pub sqs: aws_sdk_sqs::Client,
}

impl TickDeps {
    /// Validates that the tick can run and builds the metric source and cluster client cache.
    pub async fn build(config: Config) -> Result<Self> {
        config.require_tick_ready()?;
        let source = config
            .metric_source
            .as_ref()
            .expect("require_tick_ready checked METRIC_SOURCE");
        let metrics = metrics::from_config(source).await?;
        let clients = ClientCache::new(config.require_cluster()?.clone());
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Ok(TickDeps {
            config,
            clients,
            metrics,
            sqs: aws_sdk_sqs::Client::new(&sdk),
        })
    }
}

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
    /// Set when this target was left alone on purpose (another invocation acted).
    pub skipped: Option<String>,
    pub error: Option<String>,
    pub error_kind: Option<String>,
    pub retryable: Option<bool>,
}

impl TargetReport {
    fn new(target: &str, dry_run: bool) -> Self {
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
            skipped: None,
            error: None,
            error_kind: None,
            retryable: None,
        }
    }

    fn failed(mut self, error: &Error) -> Self {
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

pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Metrics first, then the pod counts and the HPA from Kubernetes. A failed source becomes the
/// observation's `problem`, so the policy fails static (holds, never scales down) and says why.
/// The seasonal history is optional: when it cannot be read the policy forecasts with the trend
/// alone and says so.
async fn observe(
    deps: &TickDeps,
    client: &kube::Client,
    target: &TargetSpec,
    now: f64,
) -> Observation {
    let policy = &deps.config.policy;
    let (metrics, pods, seasonal, hpa) = futures::join!(
        deps.metrics.observe(target, policy, now),
        pods::target_pods(client, target),
        seasonal_history(deps, target, now),
        async {
            match &target.hpa {
                Some(r) => Some(hpa::read_hpa_status(client, r).await),
                None => None,
            }
        }
    );
    let mut observation = match metrics {
        Ok(o) => o,
        Err(e) => Observation {
            problem: Some(e.to_string()),
            ..Observation::default()
        },
    };
    observation.seasonal = seasonal;
    match pods {
        Ok(Some(counts)) => {
            observation.pending_pods = counts.unschedulable;
            observation.serving_replicas = Some(counts.serving);
            observation.loading_replicas = Some(counts.loading);
        }
        Ok(None) => {}
        Err(e) => {
            let problem = format!("inference pods: {e}");
            observation.problem = Some(match observation.problem.take() {
                Some(p) => format!("{p}; {problem}"),
                None => problem,
            });
        }
    }
    match hpa {
        Some(Ok(status)) => observation.hpa = Some(status),
        // Without the HPA the policy sizes with Erlang C and logs "HPA not read"; the error
        // itself goes to the log here.
        Some(Err(e)) => tracing::warn!(target = %target.name, error = %e, "HPA not read"),
        None => {}
    }
    observation
}

/// The arrival rate at the same clock times one season back, over the observation window and
/// the next lead time, shifted into today's frame.
async fn seasonal_history(deps: &TickDeps, target: &TargetSpec, now: f64) -> Vec<SeasonSeries> {
    let policy = &deps.config.policy;
    let today = Window {
        start: now - policy.window_s,
        end: now + policy.lead_time_s,
        step: policy.step_s,
    };
    let reads = policy.seasons_s.iter().map(|&period_s| async move {
        match deps
            .metrics
            .arrival_history(target, today.shifted_back(period_s))
            .await
        {
            Ok(samples) => Some(SeasonSeries {
                period_s,
                samples: samples
                    .into_iter()
                    .map(|s| core::Sample::new(s.t + period_s, s.v))
                    .collect(),
            }),
            Err(e) => {
                tracing::warn!(target = %target.name, season_s = period_s, error = %e,
                    "seasonal history not read");
                None
            }
        }
    });
    futures::future::join_all(reads)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// The long history the band is calibrated on, fetched only when the cached calibration is
/// due (at most every CALIBRATE_EVERY_SECONDS): BAND_HISTORY_SECONDS plus the shortest season,
/// so the seasonal forecaster can be replayed over the whole band history.
async fn calibration_history(
    deps: &TickDeps,
    target: &TargetSpec,
    cached: Option<&band::Calibration>,
    now: f64,
) -> Vec<core::Sample> {
    let policy = &deps.config.policy;
    if !band::due(cached, policy, now) {
        return Vec::new();
    }
    let back = band::history_seconds(policy);
    let window = Window {
        start: now - back,
        end: now,
        step: policy.band_step_s,
    };
    match deps.metrics.arrival_history(target, window).await {
        Ok(samples) => samples,
        Err(e) => {
            tracing::warn!(target = %target.name, error = %e, "band history not read");
            Vec::new()
        }
    }
}

/// The NodePool's consolidation change this tick: freeze/restore as planned when the target
/// opts in; otherwise only ever undo a freeze that is still on (the option was turned off).
pub fn freeze_intent(target: &TargetSpec, plan: &Plan, pool: &NodePoolView) -> Option<bool> {
    if target.freeze_consolidation {
        plan.freeze_consolidation
    } else if pool.consolidation_frozen() {
        Some(false)
    } else {
        None
    }
}

/// One target, one tick. Never panics on bad input; errors end up in the report.
pub async fn tick_target(
    deps: &TickDeps,
    client: &kube::Client,
    target: &TargetSpec,
    now: f64,
    dry_run: bool,
) -> TargetReport {
    let report = TargetReport {
        at: Some(annotations::format_time(now)),
        ..TargetReport::new(&target.name, dry_run)
    };
    let (pool, read, observation) = futures::join!(
        nodepool::read_node_pool(client, &target.node_pool),
        headroom::read_headroom(client, target),
        observe(deps, client, target, now)
    );
    let mut report = TargetReport {
        pending_pods: observation.pending_pods,
        serving_replicas: observation.serving_replicas,
        metrics_problem: observation.problem.clone(),
        ..report
    };
    // Without both objects nothing is written: the error names the missing one.
    let pool = match pool {
        Ok(p) => p,
        Err(e) => return report.failed(&e),
    };
    let read: HeadroomRead = match read {
        Ok(r) => r,
        Err(e) => return report.failed(&e),
    };
    report.size_before = Some(read.parsed.size);
    let policy = &deps.config.policy;
    if annotations::acted_recently(read.state().last_tick, now, policy.tick_s) {
        report.skipped = Some(format!(
            "another invocation acted on {} at {}",
            read.object.display,
            annotations::format_time(read.state().last_tick.unwrap_or_default())
        ));
        return report;
    }
    let mut state = read.state().clone();
    state.consolidation_frozen = pool.consolidation_frozen();
    let observation = Observation {
        calibration_history: calibration_history(deps, target, state.calibration.as_ref(), now)
            .await,
        ..observation
    };
    let plan = core::decide(&observation, target, policy, &state, now);
    report.plan = Some(plan.clone());

    let outcome = match headroom::apply_plan(client, &read, &plan, now, dry_run).await {
        Ok(o) => o,
        Err(e) => return report.failed(&e),
    };
    report.size_after = Some(match outcome {
        ApplyOutcome::Written { after, .. } | ApplyOutcome::DryRun { after, .. } => after,
        ApplyOutcome::Unchanged | ApplyOutcome::Conflict => read.parsed.size,
    });
    report.headroom = Some(outcome.as_str().into());
    if outcome == ApplyOutcome::Conflict {
        report.skipped = Some(format!(
            "{} changed since it was read (409): left to the next tick",
            read.object.display
        ));
        return report;
    }

    // A static NodePool that is also the headroom object has a new resourceVersion now.
    let pool = if matches!(target.headroom, HeadroomKind::NodePoolReplicas)
        && matches!(outcome, ApplyOutcome::Written { .. })
    {
        match nodepool::read_node_pool(client, &target.node_pool).await {
            Ok(p) => p,
            Err(e) => return report.failed(&e),
        }
    } else {
        pool
    };
    let freeze = freeze_intent(target, &plan, &pool);
    let limits = limits_intent(client, target, now).await;
    match nodepool::apply_node_pool(client, &pool, &limits, freeze, dry_run).await {
        Ok(o) => report.node_pool = Some(o.as_str().into()),
        Err(e) => return report.failed(&e),
    }
    if let Some(r) = target.hpa.as_ref() {
        // A target whose raiseMinReplicas was turned off gets a raise still on its HPA given
        // back (nothing is written when there is none): no lease is left to outlive the option.
        let intent = if r.raise_min_replicas {
            floor_intent(&plan)
        } else {
            hpa_floor::FloorIntent::Restore
        };
        let lease_s = policy.scale_down_delay_s.max(120.0);
        let outcome = match hpa_floor::apply_floor(client, r, intent, now, lease_s, dry_run).await {
            Ok(outcome) => outcome.to_string(),
            Err(e) => format!("error: {e}"),
        };
        if r.raise_min_replicas || outcome != "unchanged" {
            report.hpa_floor = Some(outcome);
        }
    }
    report
}

/// The NodePool's limits this tick: the target's cap (or the user's own limits) with room for
/// the replacements of the pool's draining nodes (`adapters::kube::limits_room`). When the nodes
/// cannot be read the limits are left as they are: a room in use is never taken away on missing
/// data, and a cap change waits for the next tick.
async fn limits_intent(client: &kube::Client, target: &TargetSpec, now: f64) -> LimitsIntent {
    match limits_room::pool_nodes(client, &target.node_pool).await {
        Ok(nodes) => LimitsIntent::Room {
            cap: target.limits.clone(),
            nodes,
            now,
        },
        Err(e) => {
            tracing::warn!(target = %target.name, error = %e,
                "nodes of the NodePool not read: its limits are left as they are this tick");
            LimitsIntent::Leave
        }
    }
}

/// The HPA floor this tick: the replicas forecast for the horizon, or hold as is when failing
/// static (never lowered on missing data; the lease is renewed).
pub fn floor_intent(plan: &Plan) -> hpa_floor::FloorIntent {
    match plan.action {
        core::Action::FailStatic => hpa_floor::FloorIntent::Hold,
        _ => hpa_floor::FloorIntent::AtLeast(plan.forecast.replicas_at_horizon),
    }
}

/// Runs one tick over every target concurrently, each in its own task.
pub async fn tick_once(deps: &Arc<TickDeps>, now: f64, dry_run: bool) -> Vec<TargetReport> {
    let client = match deps.clients.get().await {
        Ok(c) => c,
        Err(e) => {
            if deps.config.targets_configmap.is_some() {
                targets::report_refused(&deps.config.emf_namespace, "targets", &e);
            }
            return deps
                .config
                .targets
                .iter()
                .map(|t| TargetReport::new(&t.name, dry_run).failed(&e))
                .collect();
        }
    };
    // PREWARM_TARGETS, or the targets ConfigMap read afresh: a target that cannot be read runs
    // no tick (its error is logged and counted), the others run.
    let Some(targets) = targets::current_or_report(
        deps.config.targets_configmap.as_ref(),
        &deps.config.targets,
        &client,
        &deps.config.emf_namespace,
    )
    .await
    else {
        return Vec::new();
    };
    if !dry_run {
        collect_drain_leases(deps, &client, &targets, now).await;
    }
    let tasks: Vec<_> = targets
        .iter()
        .cloned()
        .map(|target| {
            let deps = Arc::clone(deps);
            let client = client.clone();
            tokio::spawn(async move { tick_target(&deps, &client, &target, now, dry_run).await })
        })
        .collect();
    let mut reports = Vec::with_capacity(tasks.len());
    for (task, target) in futures::future::join_all(tasks)
        .await
        .into_iter()
        .zip(&targets)
    {
        reports.push(task.unwrap_or_else(|join_error| {
            let e = Error::Kube {
                operation: "tick".into(),
                object: format!("target {}", target.name),
                message: format!("the tick of this target failed: {join_error}"),
                retryable: true,
            };
            TargetReport::new(&target.name, dry_run).failed(&e)
        }));
    }
    for report in &reports {
        log_decision(report);
        emf_record(report).emit(&deps.config.emf_namespace);
    }
    reports
}

/// Releases replacement leases nobody holds and hands drains whose owner went silent, survivors
/// and expired cordon-prewarm drains to the interruption function as resume-drain messages
/// (`adapters::kube::drain::collect`), before the targets read their headroom. Only logged: a
/// failure here never stops the tick.
async fn collect_drain_leases(
    deps: &Arc<TickDeps>,
    client: &kube::Client,
    targets: &[TargetSpec],
    now: f64,
) {
    use crate::adapters::kube::drain::collect;
    let Some(queue_url) = deps.config.interruption.queue_url.as_deref() else {
        // require_tick_ready refuses to start without it; kept total for tests that build deps.
        tracing::warn!(
            event = "drain_lease",
            "INTERRUPTION_QUEUE_URL unset: drain leases not collected"
        );
        return;
    };
    let handover = collect::Handover {
        sqs: &deps.sqs,
        queue_url,
    };
    let settings = crate::handlers::interruption::drain_settings(&deps.config);
    match collect::collect(client, &handover, targets, &settings, now).await {
        Ok(items) => {
            for c in items {
                match &c.outcome {
                    Ok(done) => tracing::info!(event = "drain_lease", instance = %c.instance,
                        node = c.node.as_deref().unwrap_or(""), verdict = ?c.verdict, outcome = %done,
                        "drain lease collected"),
                    Err(e) => tracing::warn!(event = "drain_lease", instance = %c.instance,
                        node = c.node.as_deref().unwrap_or(""), verdict = ?c.verdict, error = %e,
                        "drain lease collection failed; next tick"),
                }
            }
        }
        Err(e) => {
            tracing::warn!(event = "drain_lease", error = %e, "could not collect drain leases")
        }
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
    let sizing = forecast.map_or("", |f| f.sizing.as_str());
    let seasonal = forecast.and_then(|f| f.seasonal_peak);
    let seasonal_weight = forecast.map_or(f64::NAN, |f| f.seasonal_weight);
    let trend_only = forecast.and_then(|f| f.trend_only.as_deref()).unwrap_or("");
    let one_step_band = forecast
        .and_then(|f| f.one_step_band.as_deref())
        .unwrap_or("");
    let desired = r.plan.as_ref().map(|p| p.desired_spare);
    let current = r.plan.as_ref().map(|p| p.current_spare);
    let action = r.action();
    let reason = r.reason();
    let headroom = r.headroom.as_deref().unwrap_or("");
    let node_pool = r.node_pool.as_deref().unwrap_or("");
    let hpa_floor = r.hpa_floor.as_deref().unwrap_or("");
    let at = r.at.as_deref().unwrap_or("");
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
            dry_run = r.dry_run,
            "decision"
        );
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
        let fast = p
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::FastPath { .. }));
        record = record.metric("FastPath", if fast { 1.0 } else { 0.0 }, Unit::Count);
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

/// When the ticks of an invocation that starts at `start` run (Unix seconds): every `tick_s`
/// while the tick starts before the minute's end minus half a tick (the next scheduled
/// invocation takes over there) and `budget_s` of work still fits before `deadline`. The first
/// tick always runs.
pub fn tick_times(start: f64, tick_s: f64, deadline: f64, budget_s: f64) -> Vec<f64> {
    let minute_end = start + 60.0;
    let mut times = vec![start];
    let mut k = 1.0;
    loop {
        let t = start + k * tick_s;
        if t >= minute_end - tick_s / 2.0 || t + budget_s > deadline {
            break;
        }
        times.push(t);
        k += 1.0;
    }
    times
}

/// Time one tick may take at most, kept free before the Lambda deadline.
fn tick_budget(tick_s: f64) -> f64 {
    tick_s.min(10.0)
}

async fn sleep_until(t: f64) {
    let wait = t - unix_now();
    if wait > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(wait)).await;
    }
}

/// The invocation's deadline in Unix seconds. A deadline that has passed before the first tick
/// means the runtime gave none (emulators may leave it at 0): then only the minute bounds ticks.
fn invocation_deadline(context: &lambda_runtime::Context, start: f64) -> f64 {
    let deadline = context
        .deadline()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    if deadline > start {
        deadline
    } else {
        f64::INFINITY
    }
}

/// One invocation: the ticks of this minute. Returns a short summary as the function's result.
pub async fn handle(deps: Arc<TickDeps>, context: &lambda_runtime::Context) -> Value {
    let start = unix_now();
    let deadline = invocation_deadline(context, start);
    let tick_s = deps.config.policy.tick_s;
    let dry_run = deps.config.dry_run;
    let mut summary = Vec::new();
    for t in tick_times(start, tick_s, deadline, tick_budget(tick_s)) {
        sleep_until(t).await;
        let reports = tick_once(&deps, unix_now(), dry_run).await;
        summary.push(serde_json::json!({
            "at": annotations::format_time(t),
            "targets": reports.iter().map(|r| serde_json::json!({
                "target": r.target,
                "action": r.action(),
                "desired": r.plan.as_ref().map(|p| p.desired_spare),
                "sizeAfter": r.size_after,
                "error": r.error,
            })).collect::<Vec<_>>(),
        }));
    }
    serde_json::json!({
        "ticks": summary,
        "dryRun": dry_run,
        // How long the runtime gave this invocation: explains a short tick count.
        "deadlineSeconds": deadline.is_finite().then_some(deadline - start),
    })
}

/// Lambda mode: build the clients once, then serve scheduled events.
pub async fn serve(config: Config) -> Result<()> {
    // Boxed: the runtime's future type is deep enough to overflow the compiler's layout limit.
    let deps = Arc::new(Box::pin(TickDeps::build(config)).await?);
    Box::pin(lambda_runtime::run(service_fn(
        move |event: LambdaEvent<Value>| {
            let deps = Arc::clone(&deps);
            async move {
                Ok::<Value, lambda_runtime::Error>(Box::pin(handle(deps, &event.context)).await)
            }
        },
    )))
    .await
    .map_err(|e| Error::Aws {
        service: "lambda".into(),
        operation: "runtime".into(),
        message: e.to_string(),
        retryable: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_fill_the_minute_and_respect_the_deadline() {
        let start = 1_000.0;
        let cases: &[(f64, f64, &[f64])] = &[
            // Default 15 s ticks with a 90 s timeout: four ticks, the next invocation does 60.
            (15.0, start + 90.0, &[0.0, 15.0, 30.0, 45.0]),
            (20.0, start + 90.0, &[0.0, 20.0, 40.0]),
            (60.0, start + 90.0, &[0.0]),
            (25.0, start + 90.0, &[0.0, 25.0]),
            // A 39 s deadline leaves room for ticks at 0 and 15 (15 + 10 <= 39), not 30 (40 > 39).
            (15.0, start + 39.0, &[0.0, 15.0]),
            (15.0, start + 40.0, &[0.0, 15.0, 30.0]),
            // A deadline already too close still gets its one tick.
            (15.0, start + 2.0, &[0.0]),
        ];
        for (tick_s, deadline, offsets) in cases {
            let got: Vec<f64> = tick_times(start, *tick_s, *deadline, tick_budget(*tick_s))
                .into_iter()
                .map(|t| t - start)
                .collect();
            assert_eq!(got, *offsets, "tick {tick_s} deadline {deadline}");
        }
    }

    fn target(freeze: bool) -> TargetSpec {
        serde_json::from_value(serde_json::json!({
            "name": "llama", "nodePool": "gpu", "maxSpare": 8, "freezeConsolidation": freeze,
            "headroom": {"kind": "balloon", "namespace": "prewarm", "name": "balloon-gpu"}
        }))
        .unwrap()
    }

    fn plan(freeze: Option<bool>) -> Plan {
        Plan {
            target: "llama".into(),
            action: core::Action::None,
            current_spare: 0,
            desired_spare: 0,
            freeze_consolidation: freeze,
            forecast: Default::default(),
            reasons: vec![],
            next_state: Default::default(),
        }
    }

    fn pool(frozen: bool) -> NodePoolView {
        NodePoolView {
            name: "gpu".into(),
            resource_version: "1".into(),
            annotations: if frozen {
                [(nodepool::SAVED_BUDGETS.to_string(), "[]".to_string())].into()
            } else {
                Default::default()
            },
            spec: Value::Null,
        }
    }

    #[test]
    fn consolidation_is_frozen_only_for_targets_that_opt_in_and_always_restorable() {
        let cases = [
            (true, Some(true), false, Some(true)),
            (true, Some(false), true, Some(false)),
            (true, None, true, None),
            (false, Some(true), false, None),
            (false, None, true, Some(false)),
            (false, None, false, None),
        ];
        for (opt_in, planned, frozen, expected) in cases {
            assert_eq!(
                freeze_intent(&target(opt_in), &plan(planned), &pool(frozen)),
                expected,
                "opt_in={opt_in} planned={planned:?} frozen={frozen}"
            );
        }
    }

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
