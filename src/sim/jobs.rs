//! What one simulation of a comparison is (`Job`) and the run configuration it gets: the
//! comparison's base (the cluster, the model, the warm start before the trace) with the job's
//! policy and knob applied, and the warm start and ideal packing each first pass learns.
//! `compare` builds its runs here, of one model or of each of a pool's.

use std::sync::Arc;

use crate::core::PolicySpec;

use super::engine::{Headroom, Replicas, Request, RunConfig, WarmStart};
use super::ideal::{self, IdealResult};
use super::knob_grid;
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

impl Job {
    /// The policy the run is of, and its knob (0 for the policies without one).
    pub(super) fn policy_knob(self) -> (PolicyName, f64) {
        match self {
            Job::Reactive => (PolicyName::Reactive, 0.0),
            Job::ClusterAutoscaler => (PolicyName::ClusterAutoscaler, 0.0),
            Job::NodeHints => (PolicyName::NodeHints, 0.0),
            Job::Point { policy, knob, .. } => (policy, knob),
        }
    }
}

/// The runs of a comparison of `policies`, each with a knob over `variants_of` it on the
/// training `peak`. Reactive first (the node hints read its node demand), the node hints last.
/// prewarm's points next: its decide() every tick makes them the longest runs, and started early
/// they do not leave one worker running alone at the end. A policy's points keep their order.
pub(super) fn list(
    policies: &[PolicyName],
    setup: &Setup,
    peak: u32,
    variants_of: &dyn Fn(PolicyName) -> Vec<knob_grid::Variant>,
) -> Vec<Job> {
    let points_of = |&policy: &PolicyName| points(policy, setup, peak, variants_of(policy));
    let decides = |p: &&PolicyName| matches!(p, PolicyName::Prewarm | PolicyName::PrewarmFloor);
    let mut jobs = vec![Job::Reactive];
    jobs.extend(policies.iter().filter(decides).flat_map(points_of));
    if policies.contains(&PolicyName::ClusterAutoscaler) {
        jobs.push(Job::ClusterAutoscaler);
    }
    jobs.extend(policies.iter().filter(|p| !decides(p)).flat_map(points_of));
    if policies.contains(&PolicyName::NodeHints) {
        jobs.push(Job::NodeHints);
    }
    jobs
}

/// The runs of `policy`'s knob: each of `variants` (knob_grid.rs) at every point of the knob's
/// grid on `peak`, the training peak replicas, in that order.
fn points(
    policy: PolicyName,
    setup: &Setup,
    peak: u32,
    variants: Vec<knob_grid::Variant>,
) -> impl Iterator<Item = Job> + '_ {
    variants.into_iter().flat_map(move |variant| {
        knob_grid::grid(
            policy,
            peak,
            setup.replicas_per_node(),
            setup.buffer_max,
            setup.model.hpa.target_utilization,
        )
        .into_iter()
        .map(move |knob| Job::Point {
            policy,
            knob,
            variant,
        })
    })
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

/// The steady state before t = 0 (the HPA's replicas for the work running in the first
/// `WARM_WINDOW_S`) and the ideal packing of one deployment's `requests`, scored from `from_s`:
/// what every comparison, of one model or of a pool's each, learns in its first pass.
pub(super) fn warm_and_ideal(
    requests: impl Iterator<Item = Request>,
    setup: &Setup,
    from_s: f64,
) -> (IdealResult, WarmStart) {
    const WARM_WINDOW_S: f64 = 300.0;
    let step_s = setup.prewarm_policy.step_s;
    let mut count = 0u64;
    let mut service_sum = 0.0;
    let mut last = 0.0f64;
    let requests = requests.inspect(|r| {
        if r.arrival < WARM_WINDOW_S {
            count += 1;
            service_sum += r.service_s;
            last = last.max(r.arrival);
        }
    });
    let m = &setup.model;
    let packing = ideal::run(
        requests,
        from_s,
        m.slots_per_replica,
        m.gpus_per_replica,
        setup.karpenter.instance.gpus,
        step_s,
        setup.bound_setups(),
    );
    // A trace shorter than the window: the work over the span it has.
    let span = if packing.end_s < WARM_WINDOW_S {
        last.max(step_s)
    } else {
        WARM_WINDOW_S
    };
    let running = service_sum / span;
    let warm = WarmStart {
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
    };
    (packing, warm)
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
        stream_steps: None,
    }
}
