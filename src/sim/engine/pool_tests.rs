//! Pool tests: one deployment in a pool is the one-model engine exactly; several share nodes
//! and balloons. Expected values are worked out in the comments.

use super::super::tests::{config, prewarm_floor_config};
use super::super::*;
use super::*;
use crate::sim::model::instance_type;

fn req(arrival: f64, service_s: f64, client: u32) -> Request {
    Request {
        arrival,
        service_s,
        prefill_s: 0.0,
        client,
    }
}

/// The one-model engine's single step (tests.rs): one warm replica, 64 requests of 1000 s at
/// 600 s, a 100 s image pull and a 30 s model load; here from `client`.
fn single_step(client: u32) -> (RunConfig, Vec<Request>) {
    let mut cfg = config();
    cfg.replicas = Replicas::Hpa;
    cfg.model.image_pull_s = 100.0;
    cfg.model.model_load_s = 30.0;
    cfg.warm.replicas = 1;
    (cfg, vec![req(600.0, 1000.0, client); 64])
}

/// The figures two runs must share to be the same run.
fn figures(r: &RunResult) -> (u64, u64, u64, u64, u64, f64, f64) {
    let s = &r.scored;
    (
        s.requests,
        s.delayed,
        s.cold_starts,
        s.replica_cold_starts,
        s.nodes_launched,
        s.gpu.total,
        s.waits.max(),
    )
}

#[test]
fn one_deployment_in_a_pool_is_the_one_model_engine() {
    let (cfg, reqs) = single_step(0);
    let alone = run(&cfg, reqs.iter().copied(), || {});
    let pool = run_pool(
        std::slice::from_ref(&cfg),
        &PoolHeadroom::PerModel,
        &[0],
        reqs.iter().copied(),
        || {},
    );
    assert_eq!(figures(&pool.models[0]), figures(&alone));
    assert_eq!(pool.models[0].node_demand_times, alone.node_demand_times);
}

#[test]
fn with_one_target_the_split_is_prewarms_own_floor() {
    // One target: pooling saves nothing, so the split keeps every band in the floor (tier
    // Replicas) and the run is the prewarm-floor run, tick for tick.
    let mut cfg = prewarm_floor_config();
    let Headroom::PrewarmFloor { policy, target } = &mut cfg.headroom else {
        unreachable!()
    };
    policy.tick_s = 60.0;
    let (policy, target) = (policy.clone(), (**target).clone());
    cfg.model.image_pull_s = 100.0;
    cfg.model.model_load_s = 30.0;
    // A ramp: 1 request a second of 20 s, then 3 a second from 1200 s, to 2400 s.
    let reqs: Vec<Request> = (0..2400)
        .flat_map(|s| {
            let n = if s < 1200 { 1 } else { 3 };
            (0..n).map(move |i| req(s as f64 + i as f64 / 3.0, 20.0, 0))
        })
        .collect();
    let alone = run(&cfg, reqs.iter().copied(), || {});
    let split = PoolHeadroom::Split {
        policy,
        targets: vec![target],
        correlation: 0.0,
    };
    let pool = run_pool(
        std::slice::from_ref(&cfg),
        &split,
        &[0],
        reqs.iter().copied(),
        || {},
    );
    let m = &pool.models[0];
    assert!(alone.decisions > 30, "{}", alone.decisions);
    assert_eq!(
        (m.decisions, m.headroom_changes),
        (alone.decisions, alone.headroom_changes)
    );
    assert_eq!(figures(m), figures(&alone));
    assert_eq!((pool.split_chosen, pool.warm_nodes_sum), (0, 0));
}

#[test]
fn replicas_of_two_models_share_one_node() {
    // One static replica of each model, 1 GPU each, on 4-GPU nodes: the warm start packs both
    // on one node. One request of 100 s each at 0: the run ends at 100, one node of 4 GPUs for
    // 100 s = 400 GPU-seconds (two independent runs would count two nodes, 800).
    let mut cfg = config();
    cfg.provisioner.instance = instance_type("g5.12xlarge").unwrap().clone();
    cfg.replicas = Replicas::Static(1);
    let reqs = [req(0.0, 100.0, 0), req(0.0, 100.0, 1)];
    let pool = run_pool(
        &[cfg.clone(), cfg],
        &PoolHeadroom::PerModel,
        &[0, 1],
        reqs.into_iter(),
        || {},
    );
    assert_eq!(pool.gpu_seconds(), 400.0);
    let served: Vec<u64> = pool.models.iter().map(|r| r.scored.requests).collect();
    assert_eq!(served, vec![1, 1]);
}

#[test]
fn a_balloon_of_the_pool_serves_whichever_model_bursts() {
    // Two models on 1-GPU nodes, one warm replica each; three balloons (the pool's, set on the
    // first deployment) on three warm nodes. The single step hits the second model only. Its
    // HPA adds 4 pods at 615 and 3 at 630 (tests.rs, reactive_launches_after_the_hpa_creates_pods):
    // 3 of the first 4 preempt the balloons on Ready nodes with the image (no node wait); the 4th
    // and the 3 at 630 wait for launched nodes: 4 node cold starts instead of 7 without balloons.
    let (cfg, reqs) = single_step(1);
    let cold = |buffer: Headroom| {
        let first = RunConfig {
            headroom: buffer,
            ..cfg.clone()
        };
        let pool = run_pool(
            &[first, cfg.clone()],
            &PoolHeadroom::PerModel,
            &[0, 1],
            reqs.iter().copied(),
            || {},
        );
        (
            pool.models[0].scored.cold_starts,
            pool.models[1].scored.cold_starts,
        )
    };
    assert_eq!(cold(Headroom::None), (0, 7));
    assert_eq!(cold(Headroom::Fixed(3)), (0, 4));
}
