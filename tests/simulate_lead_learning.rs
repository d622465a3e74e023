//! A wrong LEAD_TIME_SECONDS corrected by learning: the simulated prewarm, told 60 s where a cold
//! start takes 41 + 109 + 30 = 180 s, learns the true lead from the run's own node boots, pulls
//! and loads, and delays fewer requests than the same run that keeps the wrong value.
//!
//! The run: a ramp of arrivals (one request every 1/rate seconds, each 5 s of service), an HPA
//! aiming at 8 slots x 0.7 per replica, g5.xlarge nodes (one replica each) launched in exactly
//! 41 s, prewarm holding balloons from a trend forecast over its lead time. A longer lead holds
//! warm nodes further ahead of the ramp, so fewer replicas wait for a node.

use prewarm::core::{HeadroomKind, PolicySpec, TargetSpec};
use prewarm::sim::engine::{
    self, Headroom, LaunchModel, LeadTime, Replicas, Request, RunConfig, RunResult, WarmStart,
    World,
};
use prewarm::sim::model::{instance_type, Hpa, Model, Provisioner};

const SERVICE_S: f64 = 5.0;
/// The second ramp's start, where the scores start: 10 min + the first ramp (30 min) + its
/// hold (10 min) + 40 min at 1 req/s.
const RAMP_FROM_S: f64 = 600.0 + 1800.0 + 600.0 + 2400.0;

fn config(hint_s: f64, lead_time: LeadTime) -> RunConfig {
    let target = TargetSpec {
        // The per-replica load the HPA aims for (8 x 0.7 = 5.6): prewarm sizes as it will.
        replica_concurrency: 5,
        ..TargetSpec::new(
            "llm",
            "gpu",
            HeadroomKind::Balloon {
                namespace: "prewarm".into(),
                name: "b".into(),
            },
            64,
        )
    };
    RunConfig {
        model: Model {
            prefill_tokens_per_s: 1000.0,
            decode_tokens_per_s: 10.0,
            slots_per_replica: 8,
            gpus_per_replica: 1,
            image_pull_s: 109.0,
            model_load_s: 30.0,
            prepull: true,
            hpa: Hpa::kubernetes_defaults(0.7, 1, 200),
        },
        provisioner: Provisioner {
            instance: instance_type("g5.xlarge").unwrap().clone(),
            node_launch_s: 41.0,
            batch_s: 1.0,
            batch_max_s: 10.0,
            empty_after_s: 600.0,
            disruption: None,
            price_factor: 1.0,
        },
        replicas: Replicas::Hpa,
        headroom: Headroom::Prewarm {
            policy: PolicySpec {
                lead_time_s: hint_s,
                seasons_s: Vec::new(),
                ingestion_lag_s: 0.0,
                ..PolicySpec::default()
            },
            target: Box::new(target),
        },
        warm: WarmStart {
            replicas: 1,
            rate: 1.0,
            service_s: SERVICE_S,
            running: SERVICE_S,
        },
        slo_wait_s: 10.0,
        step_s: 15.0,
        base_epoch: 1_700_006_400.0,
        launch: LaunchModel::CONSTANT,
        seed: 1,
        ingestion_lag_s: 0.0,
        burn_in_s: 0.0,
        score_from_s: RAMP_FROM_S,
        prelaunch: None,
        classes: None,
        lead_time,
        world: World::EXACT,
        stream_steps: None,
    }
}

/// Arrivals at `rate(t)` req/s, one every 1/rate seconds, until `end_s`.
fn ramp(rate: impl Fn(f64) -> f64, end_s: f64) -> Vec<Request> {
    let mut out = Vec::new();
    let mut t = 0.0;
    while t < end_s {
        out.push(Request {
            arrival: t,
            service_s: SERVICE_S,
            prefill_s: 0.0,
            client: 0,
        });
        t += 1.0 / rate(t);
    }
    out
}

fn run(hint_s: f64, lead_time: LeadTime, requests: &[Request]) -> RunResult {
    engine::run(&config(hint_s, lead_time), requests.iter().copied(), || {})
}

#[test]
fn a_wrong_lead_time_is_corrected_by_learning() {
    // Two ramps from 1 to 61 req/s over 30 min, each held 10 min: the first from 10 min (the
    // HPA adds replicas on new nodes: every phase gets its samples), the second 40 min after the
    // first ends (its nodes consolidated, its replicas scaled down), scored alone: it comes
    // after the lead time is learned. Told 60 s, prewarm warms nodes a third of a cold start
    // ahead of the ramp and replicas wait for nodes; learned (or told) 180 s, they do not.
    let (first, second) = (600.0, RAMP_FROM_S);
    let up = |t: f64, from: f64| 60.0 * ((t - from) / 1800.0).clamp(0.0, 1.0);
    let rate = |t: f64| {
        let first = if t < first + 2400.0 {
            up(t, first)
        } else {
            0.0
        };
        1.0 + first + up(t, second)
    };
    let requests = ramp(rate, second + 2400.0);
    let learned = run(60.0, LeadTime::Learned { quantile: 0.9 }, &requests);
    let wrong = run(60.0, LeadTime::Configured, &requests);
    let right = run(180.0, LeadTime::Configured, &requests);
    let lead = learned.lead.expect("prewarm learns");
    let last = lead.last.as_ref().expect("decisions");
    // 41 + 109 + 30 = 180 s: a whole number of 15 s steps.
    assert_eq!(last.fallback.as_deref(), None);
    assert_eq!(last.seconds, 180.0);
    assert_eq!(lead.learned_range_s, Some((180.0, 180.0)));
    // Learned during the first ramp, on the fallback before.
    assert!(lead.learned_from_s.unwrap() < RAMP_FROM_S, "{lead:?}");
    assert!(lead.fallback_decisions > 0);
    assert!(wrong.lead.is_none());
    // Measured: 1184 requests delayed told 60 s, none learned or told 180 s.
    assert!(
        wrong.scored.delayed > 0,
        "the wrong lead delays: {}",
        wrong.scored.delayed
    );
    assert!(
        learned.scored.delayed < wrong.scored.delayed,
        "learned {} vs wrong {}",
        learned.scored.delayed,
        wrong.scored.delayed
    );
    assert!(
        learned.scored.delayed <= right.scored.delayed,
        "learned {} vs told the truth {}",
        learned.scored.delayed,
        right.scored.delayed
    );
}
