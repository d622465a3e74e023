//! `decide()` for 20 targets: one tick of a function that manages 20 models.
//! Run with `cargo bench --bench decide`.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

use prewarm::core::{
    decide, HeadroomKind, HeadroomState, Observation, PolicySpec, Sample, TargetSpec,
};

fn target(i: usize) -> TargetSpec {
    TargetSpec {
        name: format!("model-{i}"),
        node_pool: "gpu".into(),
        headroom: HeadroomKind::Balloon {
            namespace: "prewarm".into(),
            name: format!("balloon-{i}"),
        },
        server: Default::default(),
        selector: format!("model_name=\"m{i}\""),
        queries: Default::default(),
        pod_namespace: None,
        pod_selector: None,
        gpus_per_replica: 1,
        replica_concurrency: 8,
        min_spare: 0,
        max_spare: 64,
        max_step_up: 4,
        max_step_down: 1,
        gpu_cap: Some(256),
        freeze_consolidation: true,
        limits: None,
        hpa: None,
        schedules: Vec::new(),
        next_step_spare: 0,
        delayed_request_cost: None,
    }
}

/// A 15-minute window at a 15 s step: a ramp with some noise, different per target.
fn observation(i: usize, now: f64, policy: &PolicySpec) -> Observation {
    let steps = (policy.window_s / policy.step_s) as usize;
    let series = |f: &dyn Fn(usize) -> f64| -> Vec<Sample> {
        (0..steps)
            .map(|k| Sample::new(now - (steps - 1 - k) as f64 * policy.step_s, f(k)))
            .collect()
    };
    let base = 2.0 + i as f64;
    Observation {
        arrival_rate: series(&|k| base + 0.05 * k as f64 + ((k * 7 + i) % 5) as f64 * 0.3),
        service_time_s: series(&|_| 5.0),
        waiting: series(&|k| (k % 3) as f64),
        running: series(&|k| base * 5.0 + k as f64 * 0.1),
        pending_pods: (i % 3) as u32,
        serving_replicas: Some(4 + i as u32 / 2),
        problem: None,
        ..Observation::default()
    }
}

fn bench(c: &mut Criterion) {
    let policy = PolicySpec::default();
    let now = 1_700_000_000.0;
    let targets: Vec<TargetSpec> = (0..20).map(target).collect();
    let observations: Vec<Observation> = (0..20).map(|i| observation(i, now, &policy)).collect();
    let states: Vec<HeadroomState> = (0..20)
        .map(|i| HeadroomState {
            spare: i as u32 % 4,
            ..Default::default()
        })
        .collect();
    c.bench_function("decide_20_targets", |b| {
        b.iter(|| {
            for i in 0..20 {
                black_box(decide(
                    black_box(&observations[i]),
                    &targets[i],
                    &policy,
                    &states[i],
                    now,
                ));
            }
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
