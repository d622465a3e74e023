//! What a tick sees of one target: the metrics, the pods and the HPA, the seasonal history and
//! the band's calibration history, gathered into the policy's `Observation`.

use super::TickDeps;
use crate::adapters::kube::{hpa, pods};
use crate::adapters::metrics::Window;
use crate::core::policy::band;
use crate::core::policy::observation::SeasonSeries;
use crate::core::{self, Observation, TargetSpec};

/// Metrics first, then the pod counts and the HPA from Kubernetes. A failed source becomes the
/// observation's `problem`, so the policy fails static (holds, never scales down) and says why.
/// The seasonal history is optional: when it cannot be read the policy forecasts with the trend
/// alone and says so.
pub(super) async fn observe(
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
pub(super) async fn seasonal_history(
    deps: &TickDeps,
    target: &TargetSpec,
    now: f64,
) -> Vec<SeasonSeries> {
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
pub(super) async fn calibration_history(
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
