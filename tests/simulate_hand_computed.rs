//! The simulator against numbers derived by hand from first principles (the derivations are in
//! the comments; nothing here was computed by the simulator first).

use std::sync::Arc;

use prewarm::sim::classes::{Class, Classifier, Thresholds};
use prewarm::sim::engine::{
    self, Headroom, LaunchModel, LeadTime, Replicas, Request, RunConfig, WarmStart, World,
};
use prewarm::sim::model::{instance_type, Hpa, Model, Provisioner};
use prewarm::sim::report::{PolicyReport, RunContext};
use prewarm::sim::trace::TraceRecord;
use prewarm::sim::workload::merge::Merge;

fn model(slots: u32, min_replicas: u32, load: f64, pull: f64) -> Model {
    Model {
        prefill_tokens_per_s: 1000.0,
        decode_tokens_per_s: 10.0,
        slots_per_replica: slots,
        gpus_per_replica: 1,
        image_pull_s: pull,
        model_load_s: load,
        prepull: true,
        hpa: Hpa::kubernetes_defaults(1.0, min_replicas, 10),
    }
}

fn one_gpu_nodes(launch: f64, batch: f64) -> Provisioner {
    Provisioner {
        instance: instance_type("g5.xlarge").unwrap().clone(),
        node_launch_s: launch,
        batch_s: batch,
        batch_max_s: 10.0,
        empty_after_s: 600.0,
        disruption: None,
        price_factor: 1.0,
    }
}

/// Constant launches, no ingestion lag, nothing left out of the scores.
fn exact() -> RunConfig {
    RunConfig {
        model: model(1, 1, 0.0, 0.0),
        provisioner: one_gpu_nodes(41.0, 1.0),
        replicas: Replicas::Static(1),
        headroom: Headroom::None,
        warm: warm(1),
        slo_wait_s: 10.0,
        step_s: 15.0,
        base_epoch: 1_700_000_000.0,
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

fn req(arrival: f64, service_s: f64) -> Request {
    Request {
        arrival,
        service_s,
        prefill_s: 0.0,
        client: 0,
    }
}

fn ctx(slo_wait_s: f64, bound_gpu_hours: f64) -> RunContext {
    RunContext {
        slo_wait_s,
        slo_fraction: 0.001,
        score_from_s: 0.0,
        train_days: None,
        bound_gpu_hours,
        // The SLO-wait bound at 80 % of the no-wait one.
        slo_bound_gpu_hours: bound_gpu_hours * 0.8,
        usd_per_gpu_hour: 1.006,
        scored_s: 7.0 * 86_400.0,
        lead_time_s: 180.0,
    }
}

fn warm(replicas: u32) -> WarmStart {
    WarmStart {
        replicas,
        rate: 0.0,
        service_s: 2.0,
        running: 0.0,
    }
}

#[test]
fn ten_requests_one_replica_fixed_service_time() {
    // One replica with one slot serves 10 requests arriving at t = 0, 1, ..., 9, each taking
    // 2 s. Request i starts when request i-1 ends: start_i = 2i, so its wait is 2i - i = i s.
    // The last one ends at 2*9 + 2 = 20 s; the one 1-GPU node is paid from 0 to 20 s and is
    // busy all that time.
    let cfg = RunConfig {
        model: model(1, 1, 0.0, 0.0),
        provisioner: one_gpu_nodes(41.0, 1.0),
        replicas: Replicas::Static(1),
        headroom: Headroom::None,
        warm: warm(1),
        slo_wait_s: 3.5,
        step_s: 15.0,
        base_epoch: 1_700_000_000.0,
        ..exact()
    };
    let requests = (0..10).map(|i| req(i as f64, 2.0));
    let r = engine::run(&cfg, requests, || {});
    assert_eq!(r.requests, 10);
    assert_eq!(r.scored.waits.max(), 9.0);
    assert_eq!(r.end_s, 20.0);
    assert_eq!(r.scored.gpu.total, 20.0);
    assert_eq!(r.scored.gpu.busy, 20.0);
    // Waits 4..9 exceed 3.5 s: six requests.
    assert_eq!(r.scored.delayed, 6);
    assert_eq!(r.scored.cold_starts, 0);

    // Nearest-rank percentiles of 0..9: p50 is the 5th value (4 s), p99 the 10th (9 s); the
    // histogram answers the upper edge of the value's bucket (at most 4.7 % above).
    let report = PolicyReport::from_run("static", String::new(), &r, &ctx(3.5, 20.0 / 3600.0));
    assert_eq!(report.delayed_fraction, 0.6);
    assert!((4.0..=4.0 * 1.047).contains(&report.p50_wait_s));
    assert_eq!(report.p99_wait_s, 9.0);
    assert_eq!(report.gpu_hours, 20.0 / 3600.0);
    assert_eq!(report.idle_gpu_fraction, 0.0);
    assert_eq!(report.gpu_hours_vs_bound, 1.0);
    // g5.xlarge at $1.006/h for 20 s.
    assert!((report.cost_usd - 1.006 * 20.0 / 3600.0).abs() < 1e-12);
    // A week scored: the week's dollars are the cost; nothing above the bound.
    assert!((report.usd_per_week - report.cost_usd).abs() < 1e-12);
    assert_eq!(report.regret_usd_per_week, 0.0);
    // One day scored, a bound of 10 GPU-seconds: 7 x $0.00559 a week, half of it regret.
    let day = RunContext {
        scored_s: 86_400.0,
        ..ctx(3.5, 10.0 / 3600.0)
    };
    let report = PolicyReport::from_run("static", String::new(), &r, &day);
    assert_eq!(report.gpu_hours_vs_bound, 2.0);
    // 20 GPU-seconds against an SLO-wait bound of 8: 2.5x.
    assert!((report.gpu_hours_vs_slo_bound - 2.5).abs() < 1e-12);
    assert!((report.usd_per_week - 7.0 * 1.006 * 20.0 / 3600.0).abs() < 1e-12);
    assert!((report.regret_usd_per_week - 7.0 * 1.006 * 10.0 / 3600.0).abs() < 1e-12);
}

#[test]
fn a_cold_start_waits_for_sync_batch_launch_pull_and_load() {
    // No replica at first (minReplicas 0). One 2 s request arrives at t = 1 and queues.
    // t = 15: the HPA's sync sees 1 request in the system, wants 1 replica, creates a pod.
    // t = 16: Karpenter's 1 s batch ends; it launches a node, Ready at 16 + 41 = 57.
    // The pre-pull ends at 57 + 109 = 166, the model is loaded at 166 + 30 = 196: the request
    // starts at 196 (wait 195 s) and ends at 198, which ends the run. The node is paid from 16
    // to 198: 182 GPU-seconds, of which 2 busy.
    let mut cfg = RunConfig {
        model: model(1, 0, 30.0, 109.0),
        provisioner: one_gpu_nodes(41.0, 1.0),
        replicas: Replicas::Hpa,
        headroom: Headroom::None,
        warm: warm(0),
        slo_wait_s: 10.0,
        step_s: 15.0,
        base_epoch: 1_700_000_000.0,
        ..exact()
    };
    let request = [req(1.0, 2.0)];
    let r = engine::run(&cfg, request.into_iter(), || {});
    assert_eq!(r.scored.waits.max(), 195.0);
    assert_eq!(r.scored.cold_starts, 1);
    assert_eq!(r.nodes_launched, 1);
    assert_eq!(r.end_s, 198.0);
    assert_eq!(r.scored.gpu.total, 182.0);
    assert_eq!(r.scored.gpu.busy, 2.0);

    // The clairvoyant node hints of the same case knows the pod went pending at 15 and launches
    // its node one lead time (41 + 109 + 30 = 180 s) earlier: at 0 (clamped), Ready at 41,
    // images at 150. The pod created at 15 binds to it at once and waits for the images and the
    // model: serving at 180, wait 179 s, end 182; the node is paid from 0 to 182.
    assert_eq!(r.node_demand_times, vec![15.0]);
    cfg.prelaunch = Some(Arc::new(r.node_demand_times.clone()));
    let hints = engine::run(&cfg, request.into_iter(), || {});
    assert_eq!(hints.launches, vec![(0.0, 41.0)]);
    assert_eq!(hints.scored.waits.max(), 179.0);
    assert_eq!(hints.scored.gpu.total, 182.0);

    let report = PolicyReport::from_run("reactive", String::new(), &r, &ctx(10.0, 182.0 / 3600.0));
    assert_eq!(report.delayed_fraction, 1.0);
    assert!(!report.meets_slo);
    assert!((report.gpu_hours_vs_bound - 1.0).abs() < 1e-12);
}

#[test]
fn a_warm_balloon_is_preempted_instead_of_launching_a_node() {
    // Same request, but one balloon keeps a warm 1-GPU node. The pod created at t = 15
    // preempts the balloon and only loads the model: serving at 45, wait 44 s. The preempted
    // balloon is pending again, so Karpenter launches a node for it at 16 (the run ends at 47
    // with both nodes alive: 47 s for the warm node + 31 s for the new one).
    let cfg = RunConfig {
        model: model(1, 0, 30.0, 109.0),
        provisioner: one_gpu_nodes(41.0, 1.0),
        replicas: Replicas::Hpa,
        headroom: Headroom::Fixed(1),
        warm: warm(0),
        slo_wait_s: 10.0,
        step_s: 15.0,
        base_epoch: 1_700_000_000.0,
        ..exact()
    };
    let request = [req(1.0, 2.0)];
    let r = engine::run(&cfg, request.into_iter(), || {});
    assert_eq!(r.scored.waits.max(), 44.0);
    assert_eq!(r.scored.cold_starts, 0);
    assert_eq!(r.nodes_launched, 2);
    assert_eq!(r.scored.gpu.total, 47.0 + 31.0);
}

// Client classes: a two-client workload, classified on its training part, served by one
// replica with one slot.

/// Training ends (and scoring starts) here: two 600 s windows of training, one scored.
const TRAIN_END_S: f64 = 1200.0;

/// One replica with one slot, SLO wait 5 s, scored from the end of training.
fn two_clients(classes: Option<Arc<Vec<Class>>>) -> RunConfig {
    RunConfig {
        slo_wait_s: 5.0,
        score_from_s: TRAIN_END_S,
        classes,
        ..exact()
    }
}

fn at(times: Vec<f64>) -> std::vec::IntoIter<TraceRecord> {
    times
        .into_iter()
        .map(|t| TraceRecord {
            t,
            input_tokens: 0,
            output_tokens: 0,
            client: 0,
        })
        .collect::<Vec<_>>()
        .into_iter()
}

/// Client 0 (A): one request every 10 s at 5, 15, ..., 1795 (180 requests). Client 1 (B): a
/// clump of 12 requests at the same instant at 300, 900 and 1500 (36). Merged, so each request
/// carries its stream's index as its client; every request takes its slot for 1 s.
fn two_client_requests() -> Vec<Request> {
    let a = at((0..180).map(|k| 5.0 + 10.0 * k as f64).collect());
    let b = at([300.0, 900.0, 1500.0]
        .iter()
        .flat_map(|&t| [t; 12])
        .collect());
    Merge::new(vec![a, b])
        .map(|r| Request {
            arrival: r.t,
            service_s: 1.0,
            prefill_s: 0.0,
            client: r.client,
        })
        .collect()
}

fn scored_window() -> RunContext {
    RunContext {
        slo_wait_s: 5.0,
        slo_fraction: 0.001,
        score_from_s: TRAIN_END_S,
        train_days: None,
        bound_gpu_hours: 1.0,
        slo_bound_gpu_hours: 1.0,
        usd_per_gpu_hour: 1.006,
        scored_s: 600.0,
        lead_time_s: 180.0,
    }
}

#[test]
fn the_clumped_client_is_batch_and_its_waits_are_counted_apart() {
    let reqs = two_client_requests();
    assert_eq!(reqs.len(), 216);
    // Classified on the training part only (before 1,200 s): windows [0, 600) and [600, 1200).
    // A: 60 requests per window, 59 gaps of exactly 10 s: cv 0 in each, weighted cv 0; at most
    // one request in a second, rate 60 / 600 = 0.1 req/s floored at 1: clump 1. Interactive.
    // B: 12 requests per window at one instant: every gap 0, so no cv; 12 in one second, rate
    // 12 / 600 floored at 1: clump 12. With clump threshold 10: batch; with 12: not above it,
    // interactive.
    let classify = |batch_clump: f64| {
        let mut c = Classifier::new(2, TRAIN_END_S);
        for r in &reqs {
            c.observe(r.client, r.arrival);
        }
        c.finish(&Thresholds {
            batch_cv: 4.0,
            batch_clump,
        })
    };
    let stats = classify(10.0);
    let a = &stats[0];
    let b = &stats[1];
    assert_eq!(
        (a.requests, a.cv, a.clump, a.class),
        (120, Some(0.0), 1.0, Class::Interactive)
    );
    assert_eq!(
        (b.requests, b.cv, b.clump, b.class),
        (24, None, 12.0, Class::Batch)
    );
    assert_eq!(classify(12.0)[1].class, Class::Interactive);

    // Scored from 1,200 s: A's 60 requests 1205..1795 and B's clump of 12 at 1500. One slot:
    // B's 12 start at 1500, 1501, ..., 1511 (waits 0..11 s); A's request at 1505 queues behind
    // them and starts at 1512 (wait 7 s); A's others find the slot free (wait 0; A's request
    // at 1495 ends at 1496). SLO wait 5 s: B's waits 6..11 are delayed (6 of 12), and A's one
    // 7 s wait (1 of 60). Total 7 of 72.
    let classes = Arc::new(stats.iter().map(|s| s.class).collect::<Vec<_>>());
    let run = engine::run(&two_clients(Some(classes)), reqs.clone().into_iter(), || {});
    assert_eq!((run.scored.requests, run.scored.delayed), (72, 7));
    let report = PolicyReport::from_run("static", String::new(), &run, &scored_window());
    assert_eq!(report.delayed_fraction, 7.0 / 72.0);
    // Nearest-rank p99 of 72 waits is the 72nd, 11 s (the histogram's answer is capped at the
    // maximum); of A's 60 the 60th, 7 s; of B's 12 the 12th, 11 s.
    assert_eq!(report.p99_wait_s, 11.0);
    let per_class: Vec<(Class, u64, f64, f64, u64)> = report
        .classes
        .iter()
        .map(|c| {
            (
                c.class,
                c.requests,
                c.delayed_fraction,
                c.p99_wait_s,
                c.replica_cold_starts,
            )
        })
        .collect();
    assert_eq!(
        per_class,
        vec![
            (Class::Interactive, 60, 1.0 / 60.0, 7.0, 0),
            (Class::Batch, 12, 0.5, 11.0, 0),
        ]
    );
    // Both miss a 0.1 % SLO.
    assert!(report.classes.iter().all(|c| !c.meets_slo));
    // The residual splits by class the same way: A's 1 and B's 6 delayed, every one of them in
    // the scored window, and each kind's two class counts add up to the whole's.
    let whole = report.residual.as_ref().unwrap();
    let parts: Vec<_> = report.classes.iter().map(|c| c.residual.unwrap()).collect();
    assert_eq!((parts[0].delayed(), parts[1].delayed()), (1, 6));
    assert_eq!(
        (
            parts[0].forecastable + parts[1].forecastable,
            parts[0].lead_miss + parts[1].lead_miss,
            parts[0].unforecastable + parts[1].unforecastable
        ),
        (whole.forecastable, whole.lead_miss, whole.unforecastable)
    );

    // No classes: the same totals, and no per-class figures that would claim a split.
    let run = engine::run(&two_clients(None), reqs.into_iter(), || {});
    assert_eq!((run.scored.requests, run.scored.delayed), (72, 7));
    let report = PolicyReport::from_run("static", String::new(), &run, &scored_window());
    assert!(report.classes.is_empty());
}
