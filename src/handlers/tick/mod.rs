//! The scheduled tick: every TICK_SECONDS, for every target at once, observe demand, read the
//! headroom object and NodePool, decide (pure core), and carry out the plan unless DRY_RUN.
//! The drains' safety net (`reservations`) runs whatever the mode: DRY_RUN and PAUSED hold the tick's
//! own scaling, while the interruption function, which follows neither, keeps draining.
//!
//! EventBridge fires at most once a minute, so one invocation runs several ticks, stopping
//! shortly before the minute ends (or the Lambda deadline). Each target runs in its own task,
//! within TARGET_TIMEOUT_SECONDS: an error, a panic or a hang on one target never stops the
//! others. Every decision is one JSON log line with flat fields (for Logs Insights) and one EMF
//! record, written as soon as that target's tick ends.

pub mod deadline;
pub mod lead;
pub mod observe;
pub mod report;
pub mod reservations;
pub mod target;
pub mod warm_cache;

use std::sync::Arc;
use std::time::Duration;

use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::Value;

use crate::adapters::kube::{headroom::annotations, targets, ClientCache};
use crate::adapters::metrics::{self, MetricSource};
use crate::clock::{system_time, unix_now, unix_seconds};
use crate::config::Config;
use crate::error::{Error, Result};

pub use crate::core::policy::decide::floor_intent;
pub use report::{emf_record, log_decision, TargetReport};
pub use target::tick_target;

/// Everything a tick needs, built once per execution environment.
pub struct TickDeps {
    pub config: Config,
    pub clients: ClientCache,
    pub metrics: Box<dyn MetricSource>,
    /// Sends resume-drain messages to INTERRUPTION_QUEUE_URL (the reservation collection's handover).
    pub sqs: aws_sdk_sqs::Client,
    /// PAUSED: whether this execution environment's restore has succeeded (then it only
    /// observes; a new configuration is a new environment, so un-pausing and pausing again
    /// restores again).
    pub paused_restored: std::sync::atomic::AtomicBool,
    /// The band calibrations computed in this environment, per target: a dry run writes none
    /// to the headroom object, and a failed history read is backed off here.
    pub calibrations: warm_cache::Calibrations,
    /// The seasonal history read ahead in this environment, per target: a read covers the next
    /// hour's ticks (`core::policy::season_cache`).
    pub seasons: warm_cache::Seasons,
    /// The lead times learned, as of this environment's last tick (`lead`).
    pub lead_book: lead::Memory,
}

impl TickDeps {
    /// Validates that the tick can run and builds the metric source and cluster client cache.
    pub async fn build(config: Config) -> Result<Self> {
        config.require_tick_ready()?;
        let source = config
            .metric_source
            .as_ref()
            .expect("require_tick_ready checked METRIC_SOURCE");
        let metrics = metrics::from_config(source, &config.policy).await?;
        let clients = ClientCache::new(config.require_cluster()?.clone());
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Ok(TickDeps {
            config,
            clients,
            metrics,
            sqs: aws_sdk_sqs::Client::new(&sdk),
            paused_restored: std::sync::atomic::AtomicBool::new(false),
            calibrations: Default::default(),
            seasons: Default::default(),
            lead_book: Default::default(),
        })
    }
}

/// Runs one tick over every target concurrently, each in its own task.
pub async fn tick_once(deps: &Arc<TickDeps>, now: f64, dry_run: bool) -> Vec<TargetReport> {
    let client = match deps.clients.get(system_time(now)).await {
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
    let targets = targets::without_pool_conflicts(targets, &deps.config.emf_namespace);
    let targets =
        targets::without_policy_gaps(targets, &deps.config.policy, &deps.config.emf_namespace);
    // Not held by DRY_RUN or PAUSED: it cleans up after the interruption function's drains,
    // which run in either mode, and hands it the drains only it can finish.
    reservations::collect_reservations(deps, &client, &targets, now).await;
    let leads = lead::start(deps, &client, &targets, now)
        .await
        .map(Arc::new);
    let limit_s = deps.config.policy.target_timeout_s;
    let tasks: Vec<_> = targets
        .iter()
        .cloned()
        .map(|target| {
            let deps = Arc::clone(deps);
            let client = client.clone();
            let leads = leads.clone();
            tokio::spawn(async move {
                let at = Some(annotations::format_time(now));
                let tick = tick_target(&deps, &client, &target, leads.as_deref(), now, dry_run);
                let report = deadline::within(limit_s, &target.name, dry_run, at, tick).await;
                // Logged now, not after the slowest target: a decision made is never lost to
                // a tick that the Lambda's timeout ends.
                log_decision(&report);
                emf_record(&report).emit(&deps.config.emf_namespace);
                report
            })
        })
        .collect();
    let mut reports = Vec::with_capacity(tasks.len());
    for (task, target) in futures::future::join_all(tasks)
        .await
        .into_iter()
        .zip(&targets)
    {
        reports.push(task.unwrap_or_else(|join_error| {
            let e = Error::kube(
                "tick",
                format!("target {}", target.name),
                format!("the tick of this target failed: {join_error}"),
                true,
            );
            // The task panicked before it could log: told here.
            let report = TargetReport::new(&target.name, dry_run).failed(&e);
            log_decision(&report);
            emf_record(&report).emit(&deps.config.emf_namespace);
            report
        }));
    }
    if let Some(leads) = leads {
        let learned: Vec<_> = reports.iter().flat_map(|r| r.learned.clone()).collect();
        let leads = Arc::unwrap_or_clone(leads);
        lead::finish(deps, &client, leads, &learned, now, dry_run).await;
    }
    reports
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

/// Time one tick may take at most, kept free before the Lambda deadline: its targets run at
/// once, each within TARGET_TIMEOUT_SECONDS.
fn tick_budget(config: &Config) -> f64 {
    config.policy.target_timeout_s
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
    let deadline = unix_seconds(context.deadline());
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
    if deps.config.paused {
        pause(&deps, start).await;
    }
    // Paused: only observe, as under DRY_RUN.
    let dry_run = deps.config.dry_run || deps.config.paused;
    let mut summary = Vec::new();
    let budget = tick_budget(&deps.config);
    for (k, t) in tick_times(start, tick_s, deadline, budget)
        .into_iter()
        .enumerate()
    {
        sleep_until(t).await;
        let now = unix_now();
        // The plan assumed every tick on time; one that overran leaves less.
        if k > 0 && !deadline::fits_before(now, budget, deadline) {
            tracing::warn!(
                planned = %annotations::format_time(t),
                remaining_s = deadline - now,
                budget_s = budget,
                "no tick started: too little time left before the invocation's deadline"
            );
            break;
        }
        let reports = tick_once(&deps, now, dry_run).await;
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

/// PAUSED: restore what prewarm changed, until one restore has gone through in this execution
/// environment (an idempotent restore finds nothing the next time, but listing the cluster
/// every minute would be a waste). Nodes are reported, never written: drains keep running under
/// PAUSED and un-drain their nodes themselves.
async fn pause(deps: &TickDeps, now: f64) {
    use std::sync::atomic::Ordering;
    if deps.paused_restored.load(Ordering::Relaxed) {
        return;
    }
    let client = match deps.clients.get(system_time(now)).await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(event = "restore", why = "paused", error = %e, "not restored: no Kubernetes client");
            return;
        }
    };
    let summary = crate::handlers::restore::restore_everything(
        &client,
        &deps.config,
        now,
        crate::handlers::restore::Scope::KeepDrains,
        false,
    )
    .await;
    crate::handlers::restore::log_summary(&summary, "paused");
    if summary.errors.is_empty() {
        deps.paused_restored.store(true, Ordering::Relaxed);
    }
}

/// A scheduled invocation Lambda delivered too late (throttled behind reserved concurrency or
/// the account's limit): no tick, one warning, and a result that says why.
fn skip_late(payload: &Value, lateness_s: f64) -> Value {
    let scheduled = payload
        .get("time")
        .and_then(Value::as_str)
        .unwrap_or_default();
    tracing::warn!(
        event = "tick_skipped",
        scheduled,
        late_s = lateness_s,
        "no tick: this scheduled invocation arrived {lateness_s:.0} s after its time (over {} s); the next minute's runs",
        deadline::LATEST_SCHEDULED_START_S
    );
    serde_json::json!({
        "ticks": [],
        "skipped": format!(
            "the scheduled event of {scheduled} arrived {lateness_s:.0} s late (over {} s)",
            deadline::LATEST_SCHEDULED_START_S
        ),
    })
}

/// Lambda mode: build the clients once, then serve scheduled events, and the stack's
/// `Custom::PrewarmRestore` requests (`handlers::custom_resource`).
pub async fn serve(config: Result<Config>) -> Result<()> {
    // Boxed: the runtime's future type is deep enough to overflow the compiler's layout limit.
    // A function that cannot start still answers the stack's custom resource (a Create fails
    // with the reason, a Delete goes through); scheduled invocations fail with it.
    let deps: std::result::Result<Arc<TickDeps>, String> = match config {
        Ok(config) => Box::pin(TickDeps::build(config))
            .await
            .map(Arc::new)
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = &deps {
        tracing::error!(error = %e, "the tick cannot start: only the stack's custom resource is served");
    }
    Box::pin(lambda_runtime::run(service_fn(
        move |event: LambdaEvent<Value>| {
            let deps = deps.clone();
            async move {
                if let Some(request) = crate::adapters::cfn_response::request_of(&event.payload) {
                    let answered = crate::handlers::custom_resource::handle(
                        deps.as_deref()
                            .map(|d| (&d.clients, &d.config))
                            .map_err(String::as_str),
                        &event.payload,
                        request,
                        unix_now(),
                    )
                    .await;
                    return answered.map_err(lambda_runtime::Error::from);
                }
                let lateness = deadline::scheduled_lateness(&event.payload, unix_now());
                if deadline::too_late(lateness) {
                    return Ok(skip_late(&event.payload, lateness.unwrap_or_default()));
                }
                let deps = deps.map_err(lambda_runtime::Error::from)?;
                Ok::<Value, lambda_runtime::Error>(Box::pin(handle(deps, &event.context)).await)
            }
        },
    )))
    .await
    .map_err(|e| Error::aws("lambda", "runtime", e, false))
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
            // The default TARGET_TIMEOUT_SECONDS: 10 s of budget.
            let got: Vec<f64> = tick_times(start, *tick_s, *deadline, 10.0)
                .into_iter()
                .map(|t| t - start)
                .collect();
            assert_eq!(got, *offsets, "tick {tick_s} deadline {deadline}");
        }
    }
}
