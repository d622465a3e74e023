//! The simulator against numbers derived by hand from first principles (the derivations are in
//! the comments; nothing here was computed by the simulator first).

use prewarm::sim::engine::{self, Headroom, LaunchModel, Replicas, Request, RunConfig, WarmStart};
use prewarm::sim::model::{instance_type, Hpa, Model, Provisioner};
use prewarm::sim::report::{PolicyReport, RunContext};

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
        usd_per_gpu_hour: 1.006,
        scored_s: 7.0 * 86_400.0,
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

    // The clairvoyant oracle of the same case knows the pod went pending at 15 and launches
    // its node one lead time (41 + 109 + 30 = 180 s) earlier: at 0 (clamped), Ready at 41,
    // images at 150. The pod created at 15 binds to it at once and waits for the images and the
    // model: serving at 180, wait 179 s, end 182; the node is paid from 0 to 182.
    assert_eq!(r.node_demand_times, vec![15.0]);
    cfg.prelaunch = Some(std::sync::Arc::new(r.node_demand_times.clone()));
    let oracle = engine::run(&cfg, request.into_iter(), || {});
    assert_eq!(oracle.launches, vec![(0.0, 41.0)]);
    assert_eq!(oracle.scored.waits.max(), 179.0);
    assert_eq!(oracle.scored.gpu.total, 182.0);

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
