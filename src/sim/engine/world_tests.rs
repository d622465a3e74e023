//! The rough world on tiny hand-built runs; expected values are worked out in the comments.

use super::launch::{draw_stream, Stream};
use super::tests::{config, step_to};
use super::*;

/// Three pods at t = 0 on g5.xlarge (one replica a node), a static fleet: Karpenter's batch
/// closes at 1 s and launches three nodes, Ready at 1 + 41 = 42; each node pulls from Ready
/// (pre-pull), each pod loads after its node's pull. Returns when each pod serves.
fn three_cold_pods(world: World) -> Vec<f64> {
    let mut cfg = config();
    cfg.model.image_pull_s = 100.0;
    cfg.model.model_load_s = 30.0;
    cfg.warm.replicas = 0;
    cfg.replicas = Replicas::Static(0);
    cfg.world = world;
    let mut sim = Sim::new(&cfg);
    sim.warm_start();
    let pods: Vec<usize> = (0..3).map(|_| sim.new_pod()).collect();
    sim.schedule();
    step_to(&mut sim, &[], 2.0);
    pods.iter()
        .map(|&p| match sim.pods[p].phase {
            Phase::Starting { serving_at, .. } => serving_at,
            other => panic!("pod {p} is {other:?}"),
        })
        .collect()
}

#[test]
fn the_rough_world_draws_each_nodes_pull_and_each_pods_load() {
    // Exact: every pod serves at 42 + 100 + 30 = 172.
    assert_eq!(three_cold_pods(World::EXACT), vec![172.0; 3]);
    // Rough (p99/median 2.5 for the pull, 2 for the load): node n pulls for the n-th draw of
    // the run's Pull stream and pod n loads for the n-th draw of its Load stream, each a
    // lognormal with sigma = ln(ratio) / 2.3263 around the median (the launch model's draw,
    // tested in launch.rs). Nodes 0-2 and pods 0-2 here: the warm start made none.
    let rough = World::ROUGH;
    let lognormal = |median: f64, ratio: f64, who, n| {
        let spread = LaunchModel {
            p99_over_median: ratio,
            ..LaunchModel::CONSTANT
        };
        spread.sample(median, &mut draw_stream(1, who, n))
    };
    let expected: Vec<f64> = (0..3)
        .map(|n| {
            42.0 + lognormal(100.0, rough.pull_p99_over_median, Stream::Pull, n)
                + lognormal(30.0, rough.load_p99_over_median, Stream::Load, n)
        })
        .collect();
    let got = three_cold_pods(rough);
    for (g, e) in got.iter().zip(&expected) {
        assert!(
            (g - e).abs() < 1e-9,
            "serving at {got:?}, expected {expected:?}"
        );
    }
    // The draws differ from pod to pod, and the same seed gives the same run.
    assert!(got[0] != got[1] && got[1] != got[2], "{got:?}");
    assert_eq!(three_cold_pods(rough), got);
}
