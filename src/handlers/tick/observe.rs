//! What a tick sees of one target: the reads the core's read plan names
//! (`core::policy::observe`), issued against the metric source and Kubernetes, and handed to the
//! core's assembly, the same one the simulator's eyes use.

use super::TickDeps;
use crate::adapters::kube::{hpa, pods};
use crate::core::policy::band;
use crate::core::policy::calibration_cache::{CalibrationCache, ReadOutcome};
use crate::core::policy::observation::HpaStatus;
use crate::core::policy::observe::{self, Reads, SeasonHistory, SeasonRead};
use crate::core::policy::season_cache::{frame_of, SeasonSource};
use crate::core::{self, Observation, PolicySpec, TargetSpec};
use k8s_openapi::api::core::v1::Pod;

/// Metrics, the pod counts, the seasonal history and the HPA, read at once, for the tick's
/// `policy` (its lead time the learned horizon). A failed metric or pod read becomes the
/// observation's `problem` (the policy fails static and says why); a season or an HPA that
/// cannot be read is logged here and left out. The calibration history is added by the caller
/// once the cached calibration has been read (`calibration_history`). The pods listed are
/// returned too: the lead times learn from them.
pub(super) async fn observe(
    deps: &TickDeps,
    client: &kube::Client,
    target: &TargetSpec,
    policy: &PolicySpec,
    now: f64,
) -> (Observation, Option<Vec<Pod>>) {
    let plan = observe::plan(policy, now);
    let (signals, pods, seasons, hpa) = futures::join!(
        deps.metrics.observe(target, plan.recent),
        pods::target_pods(client, target),
        seasonal_history(deps, target, &plan.seasons, now),
        hpa_status(client, target),
    );
    let counts = pods
        .as_ref()
        .map(|p| p.as_deref().map(pods::count))
        .map_err(|e| e.to_string());
    let observation = observe::assemble(Reads {
        signals: signals.map_err(|e| e.to_string()),
        pods: counts,
        hpa,
        seasons,
        calibration_history: Vec::new(),
    });
    (observation, pods.ok().flatten())
}

/// The target's HPA, when it names one. Without it the policy sizes with Erlang C and logs
/// "HPA not read"; the error itself goes to the log here.
async fn hpa_status(client: &kube::Client, target: &TargetSpec) -> Option<HpaStatus> {
    match hpa::read_hpa_status(client, target.hpa.as_ref()?).await {
        Ok(status) => Some(status),
        Err(e) => {
            tracing::warn!(target = %target.name, error = %e, "HPA not read");
            None
        }
    }
}

/// The arrival rate at the same clock times one season back, per season of the plan: taken
/// from what an earlier tick of this environment read ahead, or read (reaching ahead) and kept
/// (`core::policy::season_cache`). A season that cannot be read is logged and left out: the
/// policy forecasts with the trend alone.
async fn seasonal_history(
    deps: &TickDeps,
    target: &TargetSpec,
    seasons: &[SeasonRead],
    now: f64,
) -> Vec<SeasonHistory> {
    let complete_until = now - deps.config.policy.ingestion_lag_s;
    let held = deps.seasons.get(&target.name);
    let reads = seasons.iter().map(|season| {
        let source = held.lookup(season, complete_until);
        async move {
            let window = match source {
                SeasonSource::Held(history) => return (season, None, Some(history)),
                SeasonSource::Read(window) => window,
            };
            match deps.metrics.arrival_history(target, window).await {
                Ok(samples) => {
                    let history = frame_of(season, &samples);
                    (season, Some((window, samples)), Some(history))
                }
                Err(e) => {
                    tracing::warn!(target = %target.name, season_s = season.period_s, error = %e,
                        "seasonal history not read");
                    (season, None, None)
                }
            }
        }
    });
    let results = futures::future::join_all(reads).await;
    let mut kept = held;
    let mut histories = Vec::new();
    for (season, read, history) in results {
        if let Some((window, samples)) = read {
            kept.keep(season, window, samples);
        }
        histories.extend(history);
    }
    deps.seasons.put(&target.name, kept);
    histories
}

/// The long history the band is calibrated on, read only when the calibration is due and no
/// failed read is being backed off (`CalibrationCache::read_now`: the fresher of the headroom
/// object's cached calibration and this environment's). The tick reads it after the headroom
/// object and adds it to the observation; the outcome goes back into the cache.
pub(super) async fn calibration_history(
    deps: &TickDeps,
    target: &TargetSpec,
    cache: &CalibrationCache,
    on_object: Option<&band::Calibration>,
    policy: &PolicySpec,
    now: f64,
) -> (Vec<core::Sample>, ReadOutcome) {
    let Some(window) = cache.read_now(policy, on_object, now) else {
        return (Vec::new(), ReadOutcome::NotRead);
    };
    match deps.metrics.arrival_history(target, window).await {
        Ok(samples) if !samples.is_empty() => (samples, ReadOutcome::Read),
        Ok(_) => {
            tracing::warn!(target = %target.name, failures = cache.failures + 1,
                "band history empty: read again after a back-off");
            (Vec::new(), ReadOutcome::Failed)
        }
        Err(e) => {
            tracing::warn!(target = %target.name, failures = cache.failures + 1, error = %e,
                "band history not read: read again after a back-off");
            (Vec::new(), ReadOutcome::Failed)
        }
    }
}
