//! Pool tests: several deployments share nodes and balloons; the split with one target is
//! prewarm's own floor. Expected values are worked out in the comments.

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
fn with_one_target_the_split_is_prewarms_own_floor() {
    // One target: pooling saves nothing, so the split keeps every band in the floor (tier
    // Replicas) and the run is the prewarm-floor run, tick for tick.
    let mut cfg = prewarm_floor_config();
    let Headroom::PrewarmFloor { policy, .. } = &mut cfg.headroom else {
        unreachable!()
    };
    policy.tick_s = 60.0;
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
    let pool = run_pool(
        std::slice::from_ref(&cfg),
        true,
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
    let pool = run_pool(&[cfg.clone(), cfg], false, &[0, 1], reqs.into_iter(), || {});
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
            false,
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

#[test]
fn a_node_karpenter_deletes_has_every_models_pods_evicted() {
    // Two models, one static replica each, on 4-GPU nodes with consolidation of underutilised
    // nodes (budget 1). By hand: model 1's replica on node 0, model 0's on node 1. The first
    // deployment's disruption pass at 600 s (consolidateAfter past both nodes' Ready at 0)
    // picks node 0 (one pod each: the lower index), validated at 615: model 1's replica is
    // evicted, node 0 terminates, and the replacement lands on node 1's free GPUs. Without
    // the eviction node 0 would wait for a pod that never leaves.
    use super::super::pods::Phase;
    use crate::sim::model::Disruption;
    let mut cfg = config();
    cfg.provisioner.instance = instance_type("g5.12xlarge").unwrap().clone();
    cfg.provisioner.disruption = Some(Disruption {
        underutilized: true,
        budget_nodes: 1,
    });
    cfg.replicas = Replicas::Static(1);
    let cfgs = [cfg.clone(), cfg];
    let mut pool = Pool {
        sims: cfgs.iter().map(Sim::new).collect(),
        split: false,
        cluster: Cluster::default(),
        result: PoolResult::default(),
        rates: Default::default(),
        accrued_to: 0.0,
    };
    for m in 0..2 {
        pool.with(m, 0.0, |s| {
            s.warm_start();
            s.start_controllers();
        });
    }
    pool.with(0, 0.0, |s| {
        let b = s.launch_node(None);
        s.pods[0].phase = Phase::Serving { node: b };
        s.cluster.nodes[0].used -= 1;
        s.cluster.nodes[b].used += 1;
    });
    while let Some((m, t)) = pool.next_event() {
        if t > 700.0 {
            break;
        }
        pool.handle(m);
    }
    assert!(!pool.cluster.nodes[0].alive);
    assert!(pool.cluster.nodes[1].alive);
    assert_eq!(pool.cluster.nodes[1].used, 2);
    let on = |m: usize| -> Vec<Phase> {
        let s = &pool.sims[m];
        s.live_pods
            .iter()
            .map(|&p| s.pods[p].phase)
            .filter(|p| *p != Phase::Gone)
            .collect()
    };
    assert_eq!(on(0), vec![Phase::Serving { node: 1 }]);
    assert_eq!(on(1), vec![Phase::Serving { node: 1 }]);
}

#[test]
fn room_one_model_frees_takes_another_models_pending_pod_at_once() {
    // One 4-GPU node: model 0's three idle warm replicas and model 1's one. Model 1 gets 16
    // requests of 10 000 s at 0 (8 slots: 8 wait), so its HPA adds a pod that finds no room;
    // Karpenter's batch is held open 1000 s. Model 0's HPA drops to its minReplicas 1 once its
    // 300 s scale-down window has passed, freeing 2 GPUs: the pending pod takes one at once
    // (no node launched, no node cold start) instead of a node launched after the batch.
    let mut cfg = config();
    cfg.provisioner.instance = instance_type("g5.12xlarge").unwrap().clone();
    cfg.provisioner.batch_s = 1000.0;
    cfg.provisioner.batch_max_s = 1000.0;
    cfg.replicas = Replicas::Hpa;
    let mut first = cfg.clone();
    first.warm.replicas = 3;
    cfg.warm.replicas = 1;
    let reqs = vec![req(0.0, 10_000.0, 1); 16];
    let pool = run_pool(&[first, cfg], false, &[0, 1], reqs.into_iter(), || {});
    let launched: u64 = pool.models.iter().map(|r| r.scored.nodes_launched).sum();
    assert_eq!((pool.models[1].scored.cold_starts, launched), (0, 0));
    assert!(pool.models[1].peak_replicas >= 2);
}
