//! Simulator throughput in requests simulated per second: the prewarm policy (which calls
//! `decide()` every tick) and the reactive policy on the `bursty` scenario, one hour compressed
//! to six minutes. Run with `cargo bench --bench simulator`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

use prewarm::core::{HeadroomKind, PolicySpec, TargetSpec};
use prewarm::sim::engine::{
    self, Headroom, LaunchModel, LeadTime, Replicas, Request, RunConfig, WarmStart, World,
};
use prewarm::sim::model::{instance_type, Hpa, Model, Provisioner};
use prewarm::sim::scenario::{transform, Scenario, ScenarioKind};

fn config(headroom: Headroom) -> RunConfig {
    RunConfig {
        model: Model {
            prefill_tokens_per_s: 4000.0,
            decode_tokens_per_s: 40.0,
            slots_per_replica: 8,
            gpus_per_replica: 1,
            image_pull_s: 109.0,
            model_load_s: 30.0,
            prepull: true,
            hpa: Hpa {
                metrics_lag_s: 15.0,
                ..Hpa::kubernetes_defaults(0.7, 1, 1000)
            },
        },
        provisioner: Provisioner {
            instance: instance_type("g5.12xlarge").unwrap().clone(),
            node_launch_s: 41.0,
            batch_s: 1.0,
            batch_max_s: 10.0,
            empty_after_s: 600.0,
            disruption: Some(prewarm::sim::model::Disruption {
                underutilized: true,
                budget_nodes: 1,
            }),
            price_factor: 1.0,
        },
        replicas: Replicas::Hpa,
        headroom,
        warm: WarmStart {
            replicas: 8,
            rate: 8.0,
            service_s: 5.25,
            running: 42.0,
        },
        slo_wait_s: 10.0,
        step_s: 15.0,
        base_epoch: 1_700_000_000.0,
        launch: LaunchModel {
            p99_over_median: 2.0,
            ice_probability: 0.02,
            ice_retry_s: 15.0,
        },
        seed: 1,
        ingestion_lag_s: 30.0,
        burn_in_s: 0.0,
        score_from_s: 0.0,
        prelaunch: None,
        classes: None,
        lead_time: LeadTime::Configured,
        world: World::EXACT,
        stream_steps: None,
    }
}

fn bench(c: &mut Criterion) {
    let scenario = Scenario {
        kind: ScenarioKind::Bursty,
        seed: 1,
        rate_per_pod: 8.0 * 0.7 / 5.25,
        input_tokens: 1000,
        output_tokens: 200,
        days: 1,
    };
    let requests: Vec<Request> = transform(scenario.records(), 10.0, 1.0, 1)
        .map(|r| Request {
            arrival: r.t,
            service_s: r.input_tokens as f64 / 4000.0 + r.output_tokens as f64 / 40.0,
            prefill_s: r.input_tokens as f64 / 4000.0,
            client: r.client,
        })
        .collect();
    let target = TargetSpec::new(
        "bench",
        "gpu",
        HeadroomKind::Balloon {
            namespace: "prewarm".into(),
            name: "balloon".into(),
        },
        256,
    );
    let policies = [
        ("reactive", config(Headroom::None)),
        (
            "prewarm",
            config(Headroom::Prewarm {
                policy: PolicySpec::default(),
                target: Box::new(target),
            }),
        ),
    ];
    let mut group = c.benchmark_group("simulator");
    group.sample_size(10);
    group.throughput(Throughput::Elements(requests.len() as u64));
    for (name, cfg) in &policies {
        group.bench_function(*name, |b| {
            b.iter(|| black_box(engine::run(cfg, requests.iter().copied(), || {})))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
