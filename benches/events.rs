//! Parsing one SQS batch of 10 interruption messages (events/sqs-mixed-batch.json) the way the
//! interruption handler does: the Lambda event into `SqsEvent`, then every record through
//! `prewarm::adapters::events::parse_record`; and one AWS Health event naming 2,000 instances
//! (issue 11, item 14). Run with `cargo bench --bench events`.

use aws_lambda_events::event::sqs::SqsEvent;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

use prewarm::adapters::events::{parse_body, parse_record};

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

    // One Health scheduled change naming 2,000 instances: the biggest single notice there is.
    let ids: Vec<String> = (0..2000).map(|i| format!("i-{i:017x}")).collect();
    let entities: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| serde_json::json!({"entityValue": id}))
        .collect();
    let body = serde_json::json!({
        "version": "0", "id": "h-2000", "detail-type": "AWS Health Event", "source": "aws.health",
        "account": "123456789012", "time": "2026-11-29T12:00:00Z", "region": "us-east-1",
        "resources": ids,
        "detail": {"service": "EC2", "eventTypeCategory": "scheduledChange",
                   "statusCode": "upcoming", "startTime": "Tue, 1 Dec 2026 09:00:00 GMT",
                   "affectedEntities": entities}
    })
    .to_string();
    let mut group = c.benchmark_group("events");
    group.throughput(Throughput::Elements(ids.len() as u64));
    group.bench_function("health_2000_instances", |b| {
        b.iter(|| black_box(parse_body(black_box(&body))))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
