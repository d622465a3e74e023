//! What one simulation of a comparison is (`Job`) and the run configuration it gets: the
//! comparison's base (the cluster, the model, the warm start before the trace) with the job's
//! policy and knob applied. `compare` and the pool's comparison both build their runs here.

use std::sync::Arc;

use crate::core::PolicySpec;

use super::engine::{Headroom, Replicas, RunConfig, WarmStart};
use super::knob_grid;
use super::model::Model;
use super::setup::{PolicyName, Setup};

/// One simulation a comparison needs (in a pool, of each of its models).
#[derive(Clone, Copy, Debug)]
pub(super) enum Job {
    Reactive,
    ClusterAutoscaler,
    /// Needs the reactive run's node demand times.
    NodeHints,
    Point {
        policy: PolicyName,
        knob: f64,
        variant: knob_grid::Variant,
    },
}

/// The run configuration of `job` (the node hints' foresight passed separately); `floor_peaks`
/// gives the scheduled floor's table before its knob for its slots (knob_grid.rs `scheduled_peaks`).
pub(super) fn job_config(
    job: Job,
    base: &RunConfig,
    setup: &Setup,
    floor_peaks: &dyn Fn(knob_grid::Slots) -> Vec<u32>,
) -> RunConfig {
    let with_headroom = |headroom| RunConfig {
        headroom,
        ..base.clone()
    };
    match job {
        Job::Reactive | Job::NodeHints => base.clone(),
        Job::ClusterAutoscaler => RunConfig {
            provisioner: setup.cluster_autoscaler.clone(),
            ..base.clone()
        },
        Job::Point {
            policy,
            knob,
            variant,
        } => match policy {
            PolicyName::StaticPeak => RunConfig {
                replicas: Replicas::Static(knob as u32),
                ..base.clone()
            },
            PolicyName::Buffer => with_headroom(Headroom::Fixed(knob as u32)),
            PolicyName::BufferPct => with_headroom(Headroom::Percent {
                percent: knob,
                tick_s: setup.prewarm_policy.tick_s,
            }),
            PolicyName::Prewarm => {
                let (policy, target) = variant.release().apply(
                    PolicySpec {
                        error_quantile: knob,
                        ..setup.prewarm_policy.clone()
                    },
                    setup.prewarm_target.clone(),
                );
                with_headroom(Headroom::Prewarm {
                    policy,
                    target: Box::new(target),
                })
            }
            PolicyName::ScheduledFloor => with_headroom(Headroom::ScheduledFloor {
                floors: Arc::new(knob_grid::scheduled_floor(
                    &floor_peaks(variant.slots()),
                    knob,
                    setup.replicas_per_node(),
                )),
            }),
            PolicyName::HpaTarget => {
                // Only the target changes; the fleet before t = 0 was the one it keeps.
                let mut model = base.model.clone();
                model.hpa.target_utilization = knob;
                let warm = WarmStart {
                    replicas: model
                        .hpa
                        .raw_desired(base.warm.running.ceil() as u64, model.slots_per_replica),
                    ..base.warm
                };
                RunConfig {
                    model,
                    warm,
                    ..base.clone()
                }
            }
            // One model's split is its own floor (the pool splits: pool_bench.rs).
            PolicyName::PrewarmFloor | PolicyName::PrewarmSplit => {
                let (policy, mut target) = variant.release().apply(
                    PolicySpec {
                        error_quantile: knob,
                        ..setup.prewarm_policy.clone()
                    },
                    setup.prewarm_target.clone(),
                );
                if let Some(hpa) = &mut target.hpa {
                    hpa.raise_min_replicas = true;
                }
                with_headroom(Headroom::PrewarmFloor {
                    policy,
                    target: Box::new(target),
                })
            }
            _ => unreachable!("only policies with a knob have points"),
        },
    }
}

/// The steady state before t = 0 from the `count` requests of the first `span` seconds (their
/// service times add up to `service_sum`): the HPA's replicas for the work then running.
pub(super) fn warm_start(m: &Model, count: u64, service_sum: f64, span: f64) -> WarmStart {
    let running = service_sum / span;
    WarmStart {
        replicas: m
            .hpa
            .raw_desired(running.ceil() as u64, m.slots_per_replica),
        rate: count as f64 / span,
        service_s: if count > 0 {
            service_sum / count as f64
        } else {
            1.0
        },
        running,
    }
}

/// Every run's configuration before its policy: the HPA and Karpenter alone, from `warm`.
pub(super) fn base_config(
    setup: &Setup,
    warm: WarmStart,
    classes: Option<Arc<Vec<super::classes::Class>>>,
) -> RunConfig {
    RunConfig {
        model: setup.model.clone(),
        provisioner: setup.karpenter.clone(),
        replicas: Replicas::Hpa,
        headroom: Headroom::None,
        warm,
        slo_wait_s: setup.slo_wait_s,
        step_s: setup.prewarm_policy.step_s,
        base_epoch: setup.base_epoch,
        launch: setup.launch,
        seed: setup.seed,
        // The simulated store's lag is the prewarm policy's INGESTION_LAG_SECONDS (one value).
        ingestion_lag_s: setup.prewarm_policy.ingestion_lag_s,
        burn_in_s: setup.burn_in_s,
        score_from_s: knob_grid::score_from(setup.burn_in_s, setup.train_days),
        prelaunch: None,
        classes,
        lead_time: setup.prewarm_lead,
        world: setup.world,
    }
}
