//! The rough world's node scale-down on tiny hand-built runs: Cluster Autoscaler draining nodes
//! under half used, Karpenter deleting several underutilised nodes in one command. Expected
//! values are worked out in the comments.

use super::tests::{config, step_to};
use super::*;
use crate::sim::model::{instance_type, Disruption};

/// Replicas of a static fleet on 4-GPU g5.12xlarge nodes, `per_node[i]` on node i, every node
/// Ready at 0 with its image (no pod event since). Image pull 100 s, model load 30 s.
fn spread<'a>(cfg: &'a mut RunConfig, world: World, per_node: &[u32]) -> Sim<'a> {
    cfg.provisioner.instance = instance_type("g5.12xlarge").unwrap().clone();
    cfg.replicas = Replicas::Static(per_node.iter().sum());
    cfg.warm.replicas = per_node.iter().sum();
    cfg.model.image_pull_s = 100.0;
    cfg.model.model_load_s = 30.0;
    cfg.world = world;
    let mut sim = Sim::new(cfg);
    // The warm start packs the replicas onto node 0 (at most 4 here); move the others out.
    sim.warm_start();
    let mut pod = per_node[0] as usize;
    for &count in &per_node[1..] {
        let node = sim.launch_node(None);
        for _ in 0..count {
            sim.pods[pod].phase = Phase::Serving { node };
            sim.cluster.nodes[0].used -= 1;
            sim.cluster.nodes[node].used += 1;
            pod += 1;
        }
    }
    sim
}

fn alive(sim: &Sim<'_>) -> Vec<bool> {
    sim.cluster.nodes.iter().map(|n| n.alive).collect()
}

fn used(sim: &Sim<'_>) -> Vec<u32> {
    sim.cluster.nodes.iter().map(|n| n.used).collect()
}

#[test]
fn cluster_autoscaler_drains_a_node_under_half_used_after_the_unneeded_time() {
    struct Row {
        world: World,
        per_node: &'static [u32],
        /// A scale-up: a node launched at this time (Ready 41 s later, empty).
        launch_at: Option<f64>,
        /// (time, nodes alive then, GPUs used on each) after the events at that time.
        expect: &'static [(f64, &'static [bool], &'static [u32])],
    }
    let rows = [
        // Two nodes 1/4 used, room for both replicas on either. Cluster Autoscaler scans every
        // 10 s from 0: both are unneeded from 0 (1/4 < 0.5, the one pod fits on the other).
        // At 600 (scale-down-unneeded-time) the least used, then the oldest, node 0, is
        // drained: its idle replica is evicted (the node goes at once) and its replacement
        // binds to node 1, which is then 2/4 used: at the threshold, not under it, so kept.
        Row {
            world: World::ROUGH,
            per_node: &[1, 1],
            launch_at: None,
            expect: &[
                (599.0, &[true, true], &[1, 1]),
                (600.0, &[false, true], &[0, 2]),
                (1300.0, &[false, true], &[0, 2]),
            ],
        },
        // The exact world's Cluster Autoscaler removes empty nodes only: both stay.
        Row {
            world: World::EXACT,
            per_node: &[1, 1],
            launch_at: None,
            expect: &[(1300.0, &[true, true], &[1, 1])],
        },
        // 3/4 (75 %) and 1/4: node 1 is under half used and its pod fits in node 0's free GPU:
        // drained at 600, its replacement fills node 0 (4/4), which is never unneeded.
        Row {
            world: World::ROUGH,
            per_node: &[3, 1],
            launch_at: None,
            expect: &[
                (599.0, &[true, true], &[3, 1]),
                (600.0, &[true, false], &[4, 0]),
                (1300.0, &[true, false], &[4, 0]),
            ],
        },
        // Two nodes at exactly half: not under the threshold, neither goes.
        Row {
            world: World::ROUGH,
            per_node: &[2, 2],
            launch_at: None,
            expect: &[(1300.0, &[true, true], &[2, 2])],
        },
        // A scale-up at 300 (node 2, Ready at 341): scale-down-delay-after-add holds every
        // removal until 900. Nodes 0 and 1 have been unneeded since 0: at 900 node 0 is
        // drained (one non-empty node at a time), its replacement goes to node 1, the first
        // Ready node with room (2/4 after). Node 2 is empty and unneeded from the scan at
        // 350, removed at 950.
        Row {
            world: World::ROUGH,
            per_node: &[1, 1],
            launch_at: Some(300.0),
            expect: &[
                (899.0, &[true, true, true], &[1, 1, 0]),
                (900.0, &[false, true, true], &[0, 2, 0]),
                (949.0, &[false, true, true], &[0, 2, 0]),
                (950.0, &[false, true, false], &[0, 2, 0]),
            ],
        },
    ];
    for (i, row) in rows.iter().enumerate() {
        let mut cfg = config();
        let mut sim = spread(&mut cfg, row.world, row.per_node);
        if let Some(at) = row.launch_at {
            step_to(&mut sim, &[], at);
            sim.launch_node(Some(41.0));
        }
        for &(t, want_alive, want_used) in row.expect {
            step_to(&mut sim, &[], t);
            assert_eq!(
                (alive(&sim), used(&sim)),
                (want_alive.to_vec(), want_used.to_vec()),
                "row {i} at {t}"
            );
        }
    }
}

#[test]
fn karpenter_deletes_several_underutilised_nodes_in_one_command_within_its_budget() {
    // Four nodes 1/4 used, Karpenter WhenEmptyOrUnderutilized. At 600 every node is
    // consolidateAfter past its last pod event; by disruption cost (pods, then age) the
    // candidates are nodes 0, 1, 2, 3. Validated 15 s later, at 615.
    let at_615 = |world: World, budget_nodes: u32| {
        let mut cfg = config();
        cfg.provisioner.disruption = Some(Disruption {
            underutilized: true,
            budget_nodes,
        });
        let mut sim = spread(&mut cfg, world, &[1, 1, 1, 1]);
        step_to(&mut sim, &[], 615.0);
        (alive(&sim), used(&sim))
    };
    // Multi-node, budget 2: the longest prefix of at most 2 candidates whose pods fit on the
    // rest: nodes 0 and 1 (2 pods; nodes 2 and 3 have 6 free GPUs). Both go at 615 (idle
    // replicas); the replacements take node 2's free GPUs (the first Ready node with room).
    // Node 3 stays: the budget allows 2 nodes at once.
    assert_eq!(
        at_615(World::ROUGH, 2),
        (vec![false, false, true, true], vec![0, 0, 3, 1])
    );
    // One node per command (the exact world, or the shipped budget of 1): node 0 only, its
    // replacement on node 1.
    let single = (vec![false, true, true, true], vec![0, 2, 1, 1]);
    assert_eq!(at_615(World::EXACT, 2), single);
    assert_eq!(at_615(World::ROUGH, 1), single);
}
