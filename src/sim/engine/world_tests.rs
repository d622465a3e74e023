//! The rough world on tiny hand-built runs; expected values are worked out in the comments.

use super::launch::{draw_stream, Stream};
use super::tests::{config, step_to};
use super::*;
use crate::core::{HeadroomKind, Sample};

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

#[test]
fn the_rough_store_shows_scrapes_late_and_a_lost_scrape_is_not_in_the_read() {
    // prewarm is told INGESTION_LAG_SECONDS 0; the store shows scrapes 30 s late and lost
    // scrape 17 (255 s). The servers exported 45·b completions in the interval ending at
    // scrape b, 1 request waiting at every scrape but 5 at the lost one, nothing running.
    // now = 300: the store shows scrapes up to (300 - 30) / 15 = 18, so a 60 s read ends at
    // 270 (scrapes 15..=18), not at 300 where prewarm's lag puts it.
    let mut cfg = config();
    cfg.world = World {
        extra_ingestion_lag_s: 30.0,
        ..World::EXACT
    };
    let mut sim = Sim::new(&cfg);
    sim.completions_at = (0..=40u32).map(|b| 45 * b).collect();
    sim.latency_sum_at = vec![0.0; 41];
    sim.waiting_at_boundary = vec![1; 41];
    sim.waiting_at_boundary[17] = 5;
    sim.running_at_boundary = vec![0; 41];
    sim.lost_scrapes = vec![false; 41];
    sim.lost_scrapes[17] = true;
    sim.now = 300.0;
    let policy = PolicySpec {
        window_s: 60.0,
        ingestion_lag_s: 0.0,
        ..PolicySpec::default()
    };
    let target = TargetSpec::new("t", "gpu", HeadroomKind::NodePoolReplicas, 8);
    let obs = sim.observation(&policy, &target);
    let at = |s: &[Sample]| -> Vec<f64> { s.iter().map(|x| x.t - cfg.base_epoch).collect() };
    let v = |s: &[Sample]| -> Vec<f64> { s.iter().map(|x| x.v).collect() };
    assert_eq!(at(&obs.waiting), vec![225.0, 240.0, 255.0, 270.0]);
    // The gauge at the lost scrape is the one before it (lookback): 1, not 5.
    assert_eq!(v(&obs.waiting), vec![1.0; 4]);
    // rate(completions[60s]) + clamped deriv(waiting): the deriv is 0 everywhere (the lost 5
    // is in no range). Scrapes 12..=15 and 13..=16 are whole: 45(3b - 3) / 45 = 42 and 45.
    // At 17 the range holds 14, 15, 16: increase 45(15 + 16) = 1395 over 30 s, extrapolated
    // 15 s to the range's start and 15 s to its end (both under 1.1 × 15): 1395 × 60 / 30 /
    // 60 = 46.5 (48 with the scrape). At 18: 15, 16, 18: 45(16 + 17 + 18) = 2295 over 45 s,
    // 15 s to the start: 2295 / 45 = 51, as if nothing was lost.
    let rates = v(&obs.arrival_rate);
    let want = [42.0, 45.0, 46.5, 51.0];
    assert!(
        rates.len() == 4 && rates.iter().zip(want).all(|(r, w)| (r - w).abs() < 1e-9),
        "arrival rate {rates:?}, want {want:?}"
    );
}

#[test]
fn a_request_takes_longer_the_fuller_its_replicas_batch() {
    // One warm replica with 8 slots, three requests of 10 s arriving at 1 s. Full batch 1.21×:
    // the a-th of the batch takes 10 × (1 + 0.21 (a - 1) / 7): 10, 10.3, 10.6, done at 11,
    // 11.3, 11.6; their end-to-end latencies count in the scrape at 15 s: 30.9 s. The exact
    // world: 30 s.
    let latency = |world: World| {
        let mut cfg = config();
        cfg.world = world;
        let mut sim = Sim::new(&cfg);
        sim.warm_start();
        let reqs = [1.0; 3].map(|arrival| Request {
            arrival,
            service_s: 10.0,
            prefill_s: 0.0,
            client: 0,
        });
        step_to(&mut sim, &reqs, 20.0);
        sim.latency_sum_at[1]
    };
    assert_eq!(latency(World::EXACT), 30.0);
    let rough = latency(World {
        full_batch_slowdown: 1.21,
        ..World::EXACT
    });
    assert!((rough - 30.9).abs() < 1e-9, "latency sum {rough}");
}

#[test]
fn the_rough_worlds_hpa_scales_on_the_batch_size_which_does_not_see_the_queue() {
    // One warm replica with 8 slots under an HPA at target 1.0 (8 per pod), no metrics lag.
    // Scrape 0 saw 8 running and 6 waiting. The exact world's HPA reads 14 per pod: ceil(14 /
    // 8) = 2 replicas. On the batch size it reads the 8 running: ratio 1, one replica stays.
    let replicas = |world: World| {
        let mut cfg = config();
        cfg.replicas = Replicas::Hpa;
        cfg.world = world;
        let mut sim = Sim::new(&cfg);
        sim.warm_start();
        sim.waiting_at_boundary = vec![6];
        sim.running_at_boundary = vec![8];
        sim.serving_at_boundary = vec![1];
        sim.on_hpa();
        sim.replica_count()
    };
    assert_eq!(replicas(World::EXACT), 2);
    let batch = World {
        hpa_on_batch_size: true,
        ..World::EXACT
    };
    assert_eq!(replicas(batch), 1);
}
