//! Engine tests on tiny hand-built runs; expected values are worked out in the comments.

use std::sync::Arc;

use super::*;
use crate::sim::model::{instance_type, Disruption, Hpa};
use crate::sim::stats::DAY_S;

pub(super) fn config() -> RunConfig {
    RunConfig {
        model: Model {
            prefill_tokens_per_s: 1000.0,
            decode_tokens_per_s: 10.0,
            slots_per_replica: 8,
            gpus_per_replica: 1,
            image_pull_s: 0.0,
            model_load_s: 0.0,
            prepull: true,
            hpa: Hpa::kubernetes_defaults(1.0, 1, 10),
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
        replicas: Replicas::Static(1),
        headroom: Headroom::None,
        warm: WarmStart {
            replicas: 1,
            rate: 2.0,
            service_s: 3.0,
            running: 6.0,
        },
        slo_wait_s: 10.0,
        step_s: 15.0,
        base_epoch: 1_000_000.0,
        launch: LaunchModel::CONSTANT,
        seed: 1,
        ingestion_lag_s: 0.0,
        burn_in_s: 0.0,
        score_from_s: 0.0,
        prelaunch: None,
        classes: None,
        lead_time: LeadTime::Configured,
        world: World::EXACT,
        stream_steps: None,
    }
}

/// Feeds `requests` and processes events in time order up to `until` (events at `until`
/// included), as `run` does, without finishing.
pub(super) fn step_to(sim: &mut Sim<'_>, requests: &[Request], until: f64) {
    if sim.events.is_empty() {
        sim.start_controllers();
    }
    let mut next = 0;
    loop {
        let arrival = requests
            .get(next)
            .map(|r| r.arrival)
            .filter(|&a| a <= until);
        let event = sim.events.peek().map(|e| e.t()).filter(|&t| t <= until);
        match (event, arrival) {
            (Some(t), a) if a.is_none_or(|a| t <= a) => {
                let e = sim.events.pop().expect("peeked");
                sim.now = e.t();
                sim.handle(e.kind);
            }
            (_, Some(a)) => {
                sim.now = sim.now.max(a);
                sim.on_arrival(requests[next]);
                next += 1;
            }
            _ => break,
        }
    }
    sim.now = until;
}

pub(super) fn req(arrival: f64, service_s: f64, prefill_s: f64) -> Request {
    Request {
        arrival,
        service_s,
        prefill_s,
        client: 0,
    }
}

pub(super) fn one_slot() -> RunConfig {
    let mut cfg = config();
    cfg.model.slots_per_replica = 1;
    cfg
}

#[test]
fn waits_delays_and_time_to_first_token_on_one_slot() {
    // One replica with one slot: A (0, 20 s) starts at once; B (5, 10 s) waits until 20 (15 s);
    // C (6, 5 s) waits until 30 (24 s). SLO wait 10 s: B and C are delayed.
    let cfg = one_slot();
    let r = run(
        &cfg,
        [req(0.0, 20.0, 1.0), req(5.0, 10.0, 2.0), req(6.0, 5.0, 0.5)].into_iter(),
        || {},
    );
    let s = &r.scored;
    assert_eq!((s.requests, s.delayed), (3, 2));
    // Nearest rank 2 of 3 is B's 15 s; the histogram answers its bucket's upper edge.
    let p50 = s.waits.quantile(0.5);
    assert!((15.0..=15.0 * 1.047).contains(&p50), "{p50}");
    assert_eq!(s.waits.max(), 24.0);
    // Time to first token: 0 + 1, 15 + 2, 24 + 0.5.
    assert_eq!(s.ttft.max(), 24.5);
    // One 1-GPU node from 0 to the last completion at 35, its replica busy all along.
    assert_eq!(r.end_s, 35.0);
    assert_eq!((s.gpu.total, s.gpu.busy), (35.0, 35.0));
    assert_eq!(s.waterfall.serving, 35.0);
}

#[test]
fn nothing_before_the_scoring_start_is_counted() {
    // Same run, scored from 5.5 s: only C counts, and the node's GPU-seconds from 5.5 on.
    let mut cfg = one_slot();
    cfg.burn_in_s = 5.5;
    cfg.score_from_s = 5.5;
    let r = run(
        &cfg,
        [req(0.0, 20.0, 1.0), req(5.0, 10.0, 2.0), req(6.0, 5.0, 0.5)].into_iter(),
        || {},
    );
    assert_eq!((r.scored.requests, r.scored.delayed), (1, 1));
    assert_eq!(r.scored.gpu.total, 35.0 - 5.5);
    assert_eq!(r.days[0].requests, 1);
}

/// One replica warm on a 1-GPU node; 64 requests of 1000 s arrive at t = 600 (8 slots each,
/// HPA target 100 %, 4 pods or 100 % per sync). Node launch 41 s, image pull 100 s, model load
/// 30 s: a lead time of 171 s.
fn single_step() -> (RunConfig, Vec<Request>) {
    let mut cfg = config();
    cfg.replicas = Replicas::Hpa;
    cfg.model.image_pull_s = 100.0;
    cfg.model.model_load_s = 30.0;
    cfg.warm.replicas = 1;
    let reqs = vec![req(600.0, 1000.0, 0.0); 64];
    (cfg, reqs)
}

#[test]
fn reactive_launches_after_the_hpa_creates_pods() {
    // The HPA syncs every 15 s; at 600 it runs before the arrivals (events first at equal
    // times). At 615 it sees 64 requests: 8 replicas wanted, +4 allowed (max(4 pods, 100 % of
    // 1)); at 630 +3 more (max(4, 100 % of 5) = 5, capped at 8). Karpenter batches 1 s.
    let (cfg, reqs) = single_step();
    let r = run(&cfg, reqs.into_iter(), || {});
    assert_eq!(
        r.node_demand_times,
        vec![615.0, 615.0, 615.0, 615.0, 630.0, 630.0, 630.0]
    );
    assert_eq!(r.launches[0], (616.0, 657.0));
    // Every new replica waited for its node, and requests queued while each loaded its model.
    assert_eq!((r.scored.cold_starts, r.scored.replica_cold_starts), (7, 7));
}

#[test]
fn replica_cold_starts_count_for_every_class_with_a_request_queued() {
    // The single step above, its 64 requests in two classes: the first 56 from client 0
    // (interactive), the last 8 from client 1 (batch). The warm replica's 8 slots take 8 of
    // client 0's at once; 48 of client 0's and then client 1's 8 queue (FIFO). The 7 new
    // replicas come up one by one, each taking 8 from the front: replicas 1-6 each find both
    // classes queued (6 x 8 = 48 of client 0's drained by them), replica 7 finds only client
    // 1's 8. Per class: interactive 6, batch 7; the total stays 7 (classes may add up to more).
    let (mut cfg, mut reqs) = single_step();
    cfg.classes = Some(Arc::new(vec![Class::Interactive, Class::Batch]));
    for r in &mut reqs[56..] {
        r.client = 1;
    }
    let r = run(&cfg, reqs.into_iter(), || {});
    assert_eq!(r.scored.replica_cold_starts, 7);
    let by_class: Vec<(u64, u64)> = r
        .scored
        .classes
        .iter()
        .map(|c| (c.requests, c.replica_cold_starts))
        .collect();
    assert_eq!(by_class, vec![(56, 6), (8, 7)]);
    // Without classes, no per-class figures at all.
    let (cfg, reqs) = single_step();
    assert!(run(&cfg, reqs.into_iter(), || {}).scored.classes.is_empty());
}

#[test]
fn cold_starts_are_counted_per_day_training_days_too() {
    // The single step of the test above binds its 7 pods to launching nodes at 616 (4) and
    // 631 (3) (Karpenter batches 1 s after the HPA's syncs at 615 and 630).
    // Burn-in until 620, scoring from day 1 (day 0 is a training day): the 4 bindings at 616
    // are in the burn-in, the 3 at 631 count on day 0 but not in the scored total.
    let (mut cfg, reqs) = single_step();
    cfg.burn_in_s = 620.0;
    cfg.score_from_s = DAY_S;
    let r = run(&cfg, reqs.into_iter(), || {});
    assert_eq!(r.days[0].cold_starts, 3);
    assert_eq!(r.scored.cold_starts, 0);
    // All 7 replicas finish loading after the burn-in (nodes Ready 657 and 672, then 100 s of
    // pull and 30 of load) with requests queued: 7 replica cold starts on day 0, none scored.
    assert_eq!(
        (r.days[0].replica_cold_starts, r.scored.replica_cold_starts),
        (7, 0)
    );
    // The same step one day later (600 + 86,400 is a sync time too: 86,400 = 5,760 x 15 s):
    // all 7 count on day 1 and in the scored total, none on day 0.
    let (mut cfg, reqs) = single_step();
    cfg.score_from_s = DAY_S;
    let reqs: Vec<Request> = reqs
        .into_iter()
        .map(|r| Request {
            arrival: r.arrival + DAY_S,
            ..r
        })
        .collect();
    let r = run(&cfg, reqs.into_iter(), || {});
    assert_eq!((r.days[0].cold_starts, r.days[1].cold_starts), (0, 7));
    assert_eq!(
        (r.days[0].replica_cold_starts, r.days[1].replica_cold_starts),
        (0, 7)
    );
    assert_eq!(r.scored.cold_starts, 7);
}

#[test]
fn clairvoyant_node_hints_launch_exactly_one_lead_time_early() {
    // From the reactive pass's demand times (615 x4, 630 x3) the node hints launch each node
    // 171 s earlier: at 444 (Ready 485) and 459 (Ready 500), and no other node. The pods then
    // find warm nodes with their images: no node cold start, but the model load remains.
    let (cfg, reqs) = single_step();
    let first = run(&cfg, reqs.clone().into_iter(), || {});
    let hints_cfg = RunConfig {
        prelaunch: Some(Arc::new(first.node_demand_times)),
        ..cfg
    };
    let r = run(&hints_cfg, reqs.into_iter(), || {});
    let mut expected = vec![(444.0, 485.0); 4];
    expected.extend([(459.0, 500.0); 3]);
    assert_eq!(r.launches, expected);
    assert_eq!((r.scored.cold_starts, r.scored.replica_cold_starts), (0, 7));
}

/// Two replicas warm on two 1-GPU nodes, 8 slots each, HPA target 8 in the system per pod:
/// 16 requests of 2000 s from t = 0 fill them (ratio 1), and `extra` more of 1000 s arrive at
/// 600, after the scrape at 600 (events first at equal times).
fn steady_then_more(extra: usize, lag: f64, tolerance: f64) -> RunResult {
    let mut cfg = config();
    cfg.replicas = Replicas::Hpa;
    cfg.warm.replicas = 2;
    cfg.model.hpa.metrics_lag_s = lag;
    cfg.model.hpa.tolerance = tolerance;
    let mut reqs = vec![req(0.0, 2000.0, 0.0); 16];
    reqs.extend(vec![req(600.0, 1000.0, 0.0); extra]);
    run(&cfg, reqs.into_iter(), || {})
}

#[test]
fn the_hpa_acts_on_the_scrape_its_metric_lag_lets_it_see() {
    // 4 more: the scrape at 615 sees 20 in the system over 2 serving pods, 10 per pod, ratio
    // 1.25: ceil(1.25 x 2) = 3 replicas. No lag: the sync at 615 reads it, the third pod finds no
    // room and Karpenter launches at 616 (batch 1 s), Ready at 657. A 15-s lag: the sync at 615
    // still reads the scrape at 600 (16, ratio 1: no change), the one at 630 reads 615's: launch
    // at 631, Ready at 672.
    let now = steady_then_more(4, 0.0, 0.1);
    assert_eq!(now.launches, vec![(616.0, 657.0)]);
    let lagged = steady_then_more(4, 15.0, 0.1);
    assert_eq!(lagged.launches, vec![(631.0, 672.0)]);
    assert_eq!(lagged.node_demand_times, vec![630.0]);
}

#[test]
fn the_hpa_keeps_its_replicas_within_the_tolerance() {
    // 1 more: 17 over 2 pods, 8.5 per pod, ratio 1.0625: within 10 % of the target, no change
    // and no node. Without a tolerance ceil(1.0625 x 2) = 3: a node launched at 616.
    assert_eq!(steady_then_more(1, 0.0, 0.1).launches, vec![]);
    assert_eq!(steady_then_more(1, 0.0, 0.0).launches, vec![(616.0, 657.0)]);
}

/// Karpenter with WhenEmptyOrUnderutilized and a budget of 1 on 4-GPU nodes, three replicas
/// (a static fleet) warm: two on node 0 and one on node 1, both Ready at 0 with no pod event
/// since. Image pull 100 s, model load 30 s.
fn two_part_full_nodes(underutilized: bool) -> RunConfig {
    let mut cfg = config();
    cfg.provisioner.instance = instance_type("g5.12xlarge").unwrap().clone();
    cfg.provisioner.disruption = Some(Disruption {
        underutilized,
        budget_nodes: 1,
    });
    cfg.replicas = Replicas::Static(3);
    cfg.model.image_pull_s = 100.0;
    cfg.model.model_load_s = 30.0;
    cfg
}

fn split_two_and_one(sim: &mut Sim<'_>) {
    sim.warm_start();
    // The warm start packs all three on node 0; move the third to a second warm node.
    let b = sim.launch_node(None);
    sim.pods[2].phase = Phase::Serving { node: b };
    sim.cluster.nodes[0].used -= 1;
    sim.cluster.nodes[b].used += 1;
}

#[test]
fn an_underutilised_node_is_repacked_after_consolidate_after_and_the_validation() {
    let cfg = two_part_full_nodes(true);
    let mut sim = Sim::new(&cfg);
    split_two_and_one(&mut sim);
    // Passes every 10 s from 0. At 600 both nodes are 600 s past their last pod event
    // (consolidateAfter 600 s); node 1's one pod fits in node 0's 2 free GPUs and node 0's two
    // in node 1's 3, and node 1 has fewer pods: the command is node 1. Validated 15 s later.
    step_to(&mut sim, &[], 614.0);
    assert!(sim.cluster.nodes[1].alive);
    step_to(&mut sim, &[], 615.0);
    // At 615 node 1 is deleted: its idle replica goes at once (node terminated), its
    // replacement binds to node 0 (image there since 0) and loads its model until 645.
    assert!(!sim.cluster.nodes[1].alive);
    assert_eq!(sim.cluster.nodes[0].used, 3);
    assert_eq!((sim.replica_count(), sim.serving_count()), (3, 2));
    step_to(&mut sim, &[], 645.0);
    assert_eq!(sim.serving_count(), 3);
    // Node 1 was paid for 615 s (4 GPUs): node 0 stays (its last pod event is now 615).
    let r = sim.finish();
    assert_eq!(r.scored.gpu.total, 4.0 * 645.0 + 4.0 * 615.0);
}

#[test]
fn when_empty_leaves_an_underutilised_node_alone() {
    let cfg = two_part_full_nodes(false);
    let mut sim = Sim::new(&cfg);
    split_two_and_one(&mut sim);
    step_to(&mut sim, &[], 1300.0);
    assert!(sim.cluster.nodes[0].alive && sim.cluster.nodes[1].alive);
}

#[test]
fn a_batch_stays_open_while_pods_keep_coming_up_to_its_maximum() {
    // One replica warm on a full 1-GPU node; new inference pods find no room. Three pods at
    // 100, 100.5 and 101: the batch closes 1 s after the last, at 102 (3 nodes launched then,
    // demanded at 100, the batch's start).
    let cfg = config();
    let mut sim = Sim::new(&cfg);
    sim.warm_start();
    for t in [100.0, 100.5, 101.0] {
        step_to(&mut sim, &[], t);
        sim.new_pod();
        sim.schedule();
    }
    step_to(&mut sim, &[], 200.0);
    assert_eq!(sim.result.launches, vec![(102.0, 143.0); 3]);
    assert_eq!(sim.result.node_demand_times, vec![100.0; 3]);
    // A pod every 0.5 s from 100 to 109.5 (20): the batch never idles 1 s, it closes at its
    // 10-s maximum, 110, with all 20.
    let mut sim = Sim::new(&cfg);
    sim.warm_start();
    for i in 0..20 {
        step_to(&mut sim, &[], 100.0 + 0.5 * f64::from(i));
        sim.new_pod();
        sim.schedule();
    }
    step_to(&mut sim, &[], 200.0);
    assert_eq!(sim.result.launches, vec![(110.0, 151.0); 20]);
}

/// The HPA (min 1, max 10, 8 slots, target 1.0: 8 in the system per pod) with one warm replica
/// and `headroom`, stepped with no requests to each time of `rows`; each row's replicas are the
/// inference pods it runs then (pending ones included).
fn hpa_replicas_at(headroom: Headroom, rows: &[(f64, u32)]) {
    let mut cfg = config();
    cfg.replicas = Replicas::Hpa;
    cfg.headroom = headroom;
    let mut sim = Sim::new(&cfg);
    sim.warm_start();
    for &(t, want) in rows {
        step_to(&mut sim, &[], t);
        assert_eq!(sim.replica_count(), want, "at {t}");
    }
}

#[test]
fn a_scheduled_floor_changes_at_the_hour_boundary_and_the_hpa_holds_it_from_that_sync() {
    // Floors by hour [0, 10, 0] (hour-of-day 0, 1, 2 from t = 0; the table repeats). Hour 0:
    // the user's minReplicas 1, no load: 1 replica. The sync at 3600 (every 15 s from 0) reads
    // minReplicas 10 and sets 10 at once: as horizontal.go's reconcileAutoscaler, fewer
    // replicas than minReplicas go to minReplicas without the rate policies (which would allow
    // max(1 + 4 pods, 200 % of 1) = 5; the metric path too clamps to minReplicas after them). The 9 new pods wait for nodes (Ready at 3642) and then
    // report 0 in the system: the metric asks for 0, the floor keeps 10 until 7199. At 7200
    // minReplicas is 1 again: the scale-down window's recommendations are the metric's (0, not
    // the floor), 100 % may go per 15 s, so the sync at 7200 sets 1. Hour 3 (10800) is slot 0
    // again of a 3-slot table: hour 4 (14400) is slot 1, 10 again.
    let floors = Arc::new(vec![0, 10, 0]);
    hpa_replicas_at(
        Headroom::ScheduledFloor { floors },
        &[
            (0.0, 1),
            (3599.0, 1),
            (3600.0, 10),
            (3700.0, 10),
            (7199.0, 10),
            (7200.0, 1),
            (14399.0, 1),
            (14400.0, 10),
        ],
    );
    // A floor above maxReplicas (10) is cut to it.
    hpa_replicas_at(
        Headroom::ScheduledFloor {
            floors: Arc::new(vec![25]),
        },
        &[(0.0, 10), (15.0, 10), (600.0, 10)],
    );
}

/// A prewarm-floor run's config (Kubernetes HPA min 1 max 10; SCALE_DOWN_DELAY_SECONDS 300, so
/// the floor's lease is 300 s) with a tick far away: the test drives the floor by hand.
pub(super) fn prewarm_floor_config() -> RunConfig {
    use crate::core::spec::ScaleDownDelay;
    use crate::core::{HeadroomKind, PolicySpec, TargetSpec};
    let mut cfg = config();
    cfg.replicas = Replicas::Hpa;
    let mut target = TargetSpec::new(
        "t",
        "gpu",
        HeadroomKind::Balloon {
            namespace: "prewarm".into(),
            name: "b".into(),
        },
        8,
    );
    target.hpa = Some(crate::core::spec::HpaRef {
        namespace: "inference".into(),
        name: "llm".into(),
        raise_min_replicas: true,
        in_system_metric: None,
    });
    cfg.headroom = Headroom::PrewarmFloor {
        policy: PolicySpec {
            scale_down_delay: ScaleDownDelay::Seconds(300.0),
            tick_s: 100_000.0,
            ..PolicySpec::default()
        },
        target: Box::new(target),
    };
    cfg
}

#[test]
fn prewarm_floor_raises_holds_and_gives_back_the_hpa_floor_as_the_tick_does() {
    use crate::core::{Action, Plan};
    let cfg = prewarm_floor_config();
    let Headroom::PrewarmFloor { policy, .. } = &cfg.headroom else {
        unreachable!()
    };
    let mut sim = Sim::new(&cfg);
    sim.warm_start();
    let plan = |action, hpa_floor| Plan {
        target: "t".into(),
        action,
        current_spare: 0,
        desired_spare: 0,
        freeze_consolidation: None,
        forecast: Default::default(),
        reasons: Vec::new(),
        hpa_floor,
        next_state: Default::default(),
    };
    // (now, the plan's action and floor, the HPA's minReplicas after; the user's is 1, max 10).
    let rows = [
        (0.0, Action::ScaleUp, Some(6), 6),    // raised; lease until 300
        (60.0, Action::None, Some(12), 10),    // at most maxReplicas; lease until 360
        (120.0, Action::FailStatic, None, 10), // fail static: held, lease still on
        (180.0, Action::FailStatic, Some(2), 10), // a failing tick's floor is not used
        (360.0, Action::FailStatic, None, 1),  // lease expired (360): given back
        (400.0, Action::ScaleDown, Some(3), 3), // raised again
        (460.0, Action::None, Some(1), 1),     // at the user's value: given back
        (520.0, Action::None, Some(0), 1),     // below it: nothing to give back
    ];
    for (now, action, floor, want) in rows {
        sim.now = now;
        sim.apply_hpa_floor(&plan(action, floor), policy);
        assert_eq!(sim.hpa_min_replicas(), want, "at {now}");
    }
    // Raised 6, 10, given back, 3, given back: five changes.
    assert_eq!(sim.result.headroom_changes, 5);
}

#[test]
fn a_floor_raised_by_prewarm_is_held_by_the_hpa_from_its_next_sync() {
    // One warm replica, no load. The floor goes to 6 at 100: the syncs at 0, 15, ..., 90 and
    // the one at 105 is the first to read it; it sets 6 at once (past the rate policies' 5).
    // Given back at 200, the next sync (210) scales down to the metric's 1 (0 in the system;
    // the scale-down window holds the metric's recommendations, not the floor).
    let cfg = prewarm_floor_config();
    let mut sim = Sim::new(&cfg);
    sim.warm_start();
    step_to(&mut sim, &[], 100.0);
    assert_eq!(sim.replica_count(), 1);
    sim.raised_min = Some(6);
    sim.raised_min_lease_until = 400.0;
    step_to(&mut sim, &[], 104.0);
    assert_eq!(sim.replica_count(), 1);
    step_to(&mut sim, &[], 105.0);
    assert_eq!(sim.replica_count(), 6);
    step_to(&mut sim, &[], 200.0);
    assert_eq!(sim.replica_count(), 6);
    sim.raised_min = None;
    step_to(&mut sim, &[], 209.0);
    assert_eq!(sim.replica_count(), 6);
    step_to(&mut sim, &[], 210.0);
    assert_eq!(sim.replica_count(), 1);
    assert_eq!(sim.balloon_count(), 0);

    // The raise needs no metric: with the metric never visible (a lag longer than the run),
    // the HPA changes nothing on its own, yet the sync at 105 sets the floor's 6
    // (reconcileAutoscaler's "below Spec.MinReplicas" path reads no metric). Given back, there
    // is no metric to scale down on: 6 stay.
    let mut cfg = prewarm_floor_config();
    cfg.model.hpa.metrics_lag_s = 1e6;
    let mut sim = Sim::new(&cfg);
    sim.warm_start();
    step_to(&mut sim, &[], 100.0);
    sim.raised_min = Some(6);
    sim.raised_min_lease_until = 400.0;
    for (t, want) in [(104.0, 1), (105.0, 6)] {
        step_to(&mut sim, &[], t);
        assert_eq!(sim.replica_count(), want, "at {t}");
    }
    sim.raised_min = None;
    step_to(&mut sim, &[], 600.0);
    assert_eq!(sim.replica_count(), 6);
}

#[test]
fn halving_the_hpa_target_doubles_the_replicas_on_a_steady_load() {
    // 26 requests of 10 000 s from t = 0 on 8-slot replicas, one replica warm: in the system
    // stays 26. Target 0.7 is 5.6 per pod: ceil(26 / 5.6) = ceil(4.64) = 5, held (5.2 per pod is
    // within 10 % of 5.6). Target 0.35 is 2.8 per pod: ceil(9.29) = 10 (2.6 per pod within 10 %).
    // Both reached by 600 (+4 per 15 s, nodes Ready 42 s after their sync).
    let replicas = |target: f64| {
        let mut cfg = config();
        cfg.replicas = Replicas::Hpa;
        cfg.model.hpa.target_utilization = target;
        let reqs = vec![req(0.0, 10_000.0, 0.0); 26];
        let mut sim = Sim::new(&cfg);
        sim.warm_start();
        step_to(&mut sim, &reqs, 600.0);
        (sim.replica_count(), sim.serving_count())
    };
    assert_eq!(replicas(0.7), (5, 5));
    assert_eq!(replicas(0.35), (10, 10));
}
