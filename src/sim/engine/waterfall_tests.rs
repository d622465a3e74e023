//! The waterfall's parts, one hand-worked engine test each on two 1-slot replicas and one
//! 4-GPU node: the expected GPU-seconds are worked out in the comments.

use super::tests::{one_slot, req};
use super::*;
use crate::sim::model::instance_type;

/// Two 1-slot replicas on one 4-GPU node (g5.12xlarge), nothing else.
fn two_replicas_one_node() -> RunConfig {
    let mut cfg = one_slot();
    cfg.provisioner.instance = instance_type("g5.12xlarge").unwrap().clone();
    cfg
}

#[test]
fn waterfall_serving_headroom_loading_and_empty() {
    // One replica warm (the HPA wants 1), model load 30 s. A (0, 100 s) takes its slot, B (1,
    // 100 s) waits. The sample at 15 sees 2 in the system on 1 replica: the HPA at 15 sets 2
    // (it wants 2 from then on: the 300 s scale-down window keeps 2 after A ends). The new
    // replica binds to the node's free GPU at 15, loads until 45, serves B 45..145.
    // Node: 4 GPUs x 145 s = 580.
    // serving: A 100 + B 100 = 200. loading: 15..45 = 30. target headroom: the first replica
    // idle 100..145 = 45 (both replicas wanted). empty: 3 GPUs x 15 + 2 GPUs x 130 = 305.
    let mut cfg = two_replicas_one_node();
    cfg.replicas = Replicas::Hpa;
    cfg.model.model_load_s = 30.0;
    let r = run(
        &cfg,
        [req(0.0, 100.0, 0.0), req(1.0, 100.0, 0.0)].into_iter(),
        || {},
    );
    let w = r.scored.waterfall;
    assert_eq!(r.scored.gpu.total, 580.0);
    assert_eq!(
        (w.serving, w.loading, w.target_headroom),
        (200.0, 30.0, 45.0)
    );
    assert_eq!((w.empty, w.warm_excess, w.draining), (305.0, 0.0, 0.0));
    assert_eq!((w.node_boot, w.balloons), (0.0, 0.0));
    assert_eq!(w.sum(), r.scored.gpu.total);
}

#[test]
fn waterfall_warm_excess_balloons_and_node_boot() {
    // A static fleet of 2 and one balloon on the warm 4-GPU node; A (0, 100 s) on one replica.
    // An HPA at the user's target (1 request per 1-slot replica) would want 1: its warm start
    // for the 1 request running before t = 0, and every sync sees at most 1 in the system. The node hints launch a node for a demand at 60: at
    // 60 - 41 (launch, no pull, no load) = 19, Ready at 60, nothing ever placed on it. The run
    // ends at A's completion, 100.
    // Nodes: 4 x 100 + 4 x (100 - 19) = 724.
    // serving 100; warm excess: the other replica, 100; balloons 1 x 100; empty: warm node's
    // fourth GPU 100 + the hinted node Ready 60..100, 4 x 40 = 260; node boot 4 x 41 = 164.
    let mut cfg = two_replicas_one_node();
    cfg.replicas = Replicas::Static(2);
    cfg.warm.running = 1.0;
    cfg.headroom = Headroom::Fixed(1);
    cfg.prelaunch = Some(Arc::new(vec![60.0]));
    let r = run(&cfg, [req(0.0, 100.0, 0.0)].into_iter(), || {});
    let w = r.scored.waterfall;
    assert_eq!(r.scored.gpu.total, 724.0);
    assert_eq!(
        (w.serving, w.warm_excess, w.balloons),
        (100.0, 100.0, 100.0)
    );
    assert_eq!((w.empty, w.node_boot), (260.0, 164.0));
    assert_eq!((w.target_headroom, w.draining, w.loading), (0.0, 0.0, 0.0));
    assert_eq!(w.sum(), r.scored.gpu.total);
}

#[test]
fn waterfall_draining() {
    // Two warm 2-slot replicas (1 GPU each, half a GPU per slot) on one 4-GPU node, HPA target
    // 2 requests per replica, scale-down window 300 s. A (0.5, 1000 s) and B (0.75, 5 s) take
    // the replica on top of the free list, C (1, 999.5 s) the other: from 5.75 each holds one
    // request to 1000.5, the run's end. Every sync from 15 on reads 2 in the system on 2
    // replicas (wants 1); the warm start's 2 leaves the window at 300, when the HPA (and what
    // it wants) drops to 1: one replica drains its request to 1000.5.
    // Node: 4 x 1000.5 = 4002. serving: (1000 + 5 + 999.5) slot-s x 0.5 = 1002.25.
    // target headroom to 300: 2 x 0.5 + 1.5 x 0.25 + 1 x 0.25 + 0.5 x 4.75 + 1 x 294.25 =
    // 298.25; from 300 the kept replica's idle slot, 0.5 x 700.5 = 350.25: 648.5.
    // draining: the drained replica's idle slot, 0.5 x 700.5 = 350.25. empty: 2 x 1000.5 = 2001.
    let mut cfg = two_replicas_one_node();
    cfg.model.slots_per_replica = 2;
    cfg.replicas = Replicas::Hpa;
    cfg.warm.replicas = 2;
    let r = run(
        &cfg,
        [
            req(0.5, 1000.0, 0.0),
            req(0.75, 5.0, 0.0),
            req(1.0, 999.5, 0.0),
        ]
        .into_iter(),
        || {},
    );
    let w = r.scored.waterfall;
    assert_eq!(r.scored.gpu.total, 4002.0);
    assert_eq!((w.serving, w.target_headroom), (1002.25, 648.5));
    assert_eq!((w.draining, w.empty), (350.25, 2001.0));
    assert_eq!(
        (w.warm_excess, w.loading, w.node_boot, w.balloons),
        (0.0, 0.0, 0.0, 0.0)
    );
}
