//! Parsing one SQS batch of 10 interruption messages (events/sqs-mixed-batch.json) the way the
//! interruption handler does: the Lambda event into `SqsEvent`, then every record through
//! `prewarm::adapters::events::parse_record`. Run with `cargo bench --bench events`.

use aws_lambda_events::event::sqs::SqsEvent;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

use prewarm::adapters::events::parse_record;

fn bench(c: &mut Criterion) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/events/sqs-mixed-batch.json");
    let text = std::fs::read_to_string(path).expect("events/sqs-mixed-batch.json");
    let records = serde_json::from_str::<SqsEvent>(&text)
        .expect("an SQS event")
        .records
        .len();
    let mut group = c.benchmark_group("events");
    group.throughput(Throughput::Elements(records as u64));
    group.bench_function("sqs_mixed_batch", |b| {
        b.iter(|| {
            let event: SqsEvent = serde_json::from_str(black_box(&text)).expect("an SQS event");
            let parsed: Vec<_> = event.records.iter().map(parse_record).collect();
            black_box(parsed)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
