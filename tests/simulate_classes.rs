//! Client classes against numbers derived by hand: a two-client workload, classified on its
//! training part, served by one replica with one slot (the derivations are in the comments;
//! nothing here was computed by the simulator first).

use std::sync::Arc;

use prewarm::sim::classes::{Class, Classifier, Thresholds};
use prewarm::sim::engine::{self, Headroom, LaunchModel, Replicas, Request, RunConfig, WarmStart};
use prewarm::sim::model::{instance_type, Hpa, Model, Provisioner};
use prewarm::sim::report::{PolicyReport, RunContext};
use prewarm::sim::trace::TraceRecord;
use prewarm::sim::workload::merge::Merge;

/// Training ends (and scoring starts) here: two 600 s windows of training, one scored.
const TRAIN_END_S: f64 = 1200.0;

fn config(classes: Option<Arc<Vec<Class>>>) -> RunConfig {
    RunConfig {
        model: Model {
            prefill_tokens_per_s: 1000.0,
            decode_tokens_per_s: 10.0,
            slots_per_replica: 1,
            gpus_per_replica: 1,
            image_pull_s: 0.0,
            model_load_s: 0.0,
            prepull: true,
            hpa: Hpa::kubernetes_defaults(1.0, 1, 1),
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
            rate: 0.0,
            service_s: 1.0,
            running: 0.0,
        },
        slo_wait_s: 5.0,
        step_s: 15.0,
        base_epoch: 1_700_000_000.0,
        launch: LaunchModel::CONSTANT,
        seed: 1,
        ingestion_lag_s: 0.0,
        burn_in_s: 0.0,
        score_from_s: TRAIN_END_S,
        prelaunch: None,
        classes,
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
fn requests() -> Vec<Request> {
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

fn ctx() -> RunContext {
    RunContext {
        slo_wait_s: 5.0,
        slo_fraction: 0.001,
        score_from_s: TRAIN_END_S,
        train_days: None,
        bound_gpu_hours: 1.0,
        usd_per_gpu_hour: 1.006,
        scored_s: 600.0,
    }
}

#[test]
fn the_clumped_client_is_batch_and_its_waits_are_counted_apart() {
    let reqs = requests();
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
    let run = engine::run(&config(Some(classes)), reqs.clone().into_iter(), || {});
    assert_eq!((run.scored.requests, run.scored.delayed), (72, 7));
    let report = PolicyReport::from_run("static", String::new(), &run, &ctx());
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

    // No classes: the same totals, and no per-class figures that would claim a split.
    let run = engine::run(&config(None), reqs.into_iter(), || {});
    assert_eq!((run.scored.requests, run.scored.delayed), (72, 7));
    let report = PolicyReport::from_run("static", String::new(), &run, &ctx());
    assert!(report.classes.is_empty());
}
