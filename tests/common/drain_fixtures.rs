//! Fixtures of the drain's stack tests (`interruption_stack`, `interruption_faults_stack`):
//! kwok nodes and pods, the handler as the Lambda's RBAC user, moto SQS queues pumped as the
//! Lambda poller does, and what a fault case ends in. Each binary uses its own subset.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::SqsMessage;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use prewarm::adapters::events::parse_record;
use prewarm::adapters::kube::drain::replacement::placeholder_selector;
use prewarm::config::{ClusterAccess, Config};
use prewarm::handlers::interruption::{Continuation, Interruption, RecordOutcome};
use serde_json::json;

pub const NS: &str = "prewarm-h6-stack";

pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: source tests/stack/.run/env"))
}

pub async fn admin() -> kube::Client {
    prewarm::adapters::kube::client(&ClusterAccess::Kubeconfig {
        path: env("KUBECONFIG"),
    })
    .await
    .unwrap()
}

pub async fn handler(extra: &[(&str, &str)]) -> Interruption {
    let mut vars: HashMap<String, String> = HashMap::new();
    vars.insert("KUBECONFIG".into(), env("PREWARM_LAMBDA_KUBECONFIG"));
    // 2 s between checks: a delivery within 1 s of the last step is a duplicate (collapsed), so
    // the loops below wait CHECK_GAP between steps.
    vars.insert("RECHECK_SECONDS".into(), "2".into());
    for (k, v) in extra {
        vars.insert(k.to_string(), v.to_string());
    }
    let config = Config::from_lookup(|k| vars.get(k).cloned()).unwrap();
    Interruption::from_config(&config).await.unwrap()
}

pub fn unique(prefix: &str) -> String {
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}{:012x}", n & 0xffff_ffff_ffff)
}

pub fn now_rfc3339(offset_s: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(offset_s))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// An SQS record carrying a spot warning issued `age_s` seconds ago.
pub fn spot_record(instance: &str, event_id: &str, age_s: i64) -> SqsMessage {
    let body = json!({
        "version": "0", "id": event_id, "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2", "account": "123456789012", "time": now_rfc3339(-age_s),
        "region": "us-east-1", "resources": [format!("arn:aws:ec2:us-east-1a:instance/{instance}")],
        "detail": {"instance-id": instance, "instance-action": "terminate"}
    });
    sqs_record(body.to_string())
}

/// An SQS record carrying `body` (no SentTimestamp: the body's time is taken as it is).
pub fn sqs_record(body: String) -> SqsMessage {
    serde_json::from_value(json!({
        "messageId": unique("m-"), "receiptHandle": "rh", "body": body,
        "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
        "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
        "awsRegion": "us-east-1"
    }))
    .unwrap()
}

/// A kwok-managed node (the stack's kwok controller makes it Ready and runs its pods) whose
/// providerID names `instance`.
pub async fn make_node(client: &kube::Client, name: &str, instance: &str) {
    let nodes = Api::<Node>::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                     "labels": {"kubernetes.io/hostname": name, "type": "kwok", "prewarm-test": "h6"}},
        "spec": {"providerID": format!("aws:///us-east-1a/{instance}")}
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let resources = json!({"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "4"});
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"capacity": resources, "allocatable": resources}})),
        )
        .await
        .unwrap();
}

pub async fn ensure_namespace(client: &kube::Client) {
    let api = Api::<Namespace>::all(client.clone());
    if api.get_opt(NS).await.unwrap().is_none() {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
        let _ = api.create(&PostParams::default(), &ns).await;
    }
}

pub async fn make_pod(client: &kube::Client, name: &str, node: &str, app: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "labels": {"app": app}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]
        }
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
}

pub async fn cleanup(client: &kube::Client, node: &str, pods: &[&str], pdb: Option<&str>) {
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    if let Some(p) = pdb {
        let _ = Api::<PodDisruptionBudget>::namespaced(client.clone(), NS)
            .delete(p, &dp)
            .await;
    }
    for p in pods {
        let _ = Api::<Pod>::namespaced(client.clone(), NS)
            .delete(p, &dp)
            .await;
    }
    let _ = Api::<Node>::all(client.clone()).delete(node, &dp).await;
}

pub async fn pods_left(client: &kube::Client, node: &str) -> Vec<String> {
    Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect()
}

/// More than half the 2 s recheck: the next step is the drain's own, not a duplicate.
pub const CHECK_GAP: Duration = Duration::from_millis(1_200);

/// Runs checks of one record until it finishes (or `max` checks); its continuation would come
/// back after its delay each time, here the loop stands in for SQS.
pub async fn run_until_done(
    h: &Interruption,
    record: &SqsMessage,
    max: usize,
) -> Vec<RecordOutcome> {
    let parsed = parse_record(record);
    let mut outcomes = Vec::new();
    for _ in 0..max {
        let o = h.handle_record(&parsed, &Continuation::default()).await;
        let done = matches!(o, RecordOutcome::Delete { .. });
        outcomes.push(o);
        if done {
            break;
        }
        tokio::time::sleep(CHECK_GAP).await;
    }
    outcomes
}

pub async fn sqs() -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(
        &aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await,
    )
}

pub fn batch(records: Vec<SqsMessage>) -> aws_lambda_events::event::sqs::SqsEvent {
    serde_json::from_value(json!({ "Records": records })).unwrap()
}

pub fn failed_ids(r: &aws_lambda_events::event::sqs::SqsBatchResponse) -> Vec<String> {
    r.batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

/// Sets drain annotations on `node` (merge patch as the admin).
pub async fn annotate(client: &kube::Client, node: &str, pairs: &[(&str, String)]) {
    let annotations: serde_json::Map<String, serde_json::Value> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    Api::<Node>::all(client.clone())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
        )
        .await
        .unwrap();
}

pub fn ago(seconds: i64) -> String {
    now_rfc3339(-seconds)
}

/// A `drain` (the default) of a rebalance that moved everything 41 minutes ago, on a kwok node
/// still cordoned and tainted, returned once kwok has made it Ready: a false alarm, to un-drain
/// 10 min after the end of the 30-min wait. Returns (node, instance).
pub async fn false_alarm_node(client: &kube::Client, prefix: &str) -> (String, String) {
    let (node, instance) = (unique(prefix), unique("i-0abcd"));
    // kwok makes the node Ready NODE_READY_DELAY after it appears; 10 s more for a loaded
    // machine (the slack the default 10 s stack has always had here).
    let ready_by = Instant::now() + node_ready_delay() + Duration::from_secs(10);
    make_node(client, &node, &instance).await;
    annotate(
        client,
        &node,
        &[
            (
                "prewarm.io/drain-event-id",
                "ev-rebalance-drained".to_string(),
            ),
            ("prewarm.io/drain-kind", "rebalance".into()),
            ("prewarm.io/drain-phase", "drained".into()),
            ("prewarm.io/drain-notice-time", ago(2_460)),
            ("prewarm.io/drain-started-at", ago(2_460)),
            ("prewarm.io/drain-finished-at", ago(2_160)),
        ],
    )
    .await;
    let nodes = Api::<Node>::all(client.clone());
    nodes
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true, "taints": [
                {"key": "prewarm.io/draining", "value": "rebalance", "effect": "NoSchedule"}]}})),
        )
        .await
        .unwrap();
    while !prewarm::adapters::kube::drain::is_ready(&nodes.get(&node).await.unwrap()) {
        assert!(
            Instant::now() < ready_by,
            "{node} not Ready {:?} + 10 s after it was made (the stack's NODE_READY_DELAY)",
            node_ready_delay()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    (node, instance)
}

/// How long the stack's kwok takes to make a new node Ready: `tests/stack/up` exports its
/// NODE_READY_DELAY as NODE_READY_DELAY_MS in .run/env (10 s, `up`'s default, when unset).
pub fn node_ready_delay() -> Duration {
    let ms = std::env::var("NODE_READY_DELAY_MS").map_or(10_000, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("NODE_READY_DELAY_MS={v:?} is not milliseconds"))
    });
    Duration::from_millis(ms)
}

pub const POOL: &str = "h6-faults";
pub const BALLOON_NS: &str = "prewarm";
pub const BALLOON: &str = "balloon-gpu";

pub fn fault_targets() -> String {
    json!([{"name": "gpu", "nodePool": POOL, "maxSpare": 8, "gpusPerReplica": 1,
            "headroom": {"kind": "balloon", "namespace": BALLOON_NS, "name": BALLOON},
            "selector": "model_name=\"llama\""}])
    .to_string()
}

/// The balloon Deployment the reservations live on; its pods select no node (no capacity is made).
pub async fn ensure_balloon(client: &kube::Client) {
    use k8s_openapi::api::apps::v1::Deployment;
    let ns = Api::<Namespace>::all(client.clone());
    if ns.get_opt(BALLOON_NS).await.unwrap().is_none() {
        let n: Namespace =
            serde_json::from_value(json!({"metadata": {"name": BALLOON_NS}})).unwrap();
        let _ = ns.create(&PostParams::default(), &n).await;
    }
    let api = Api::<Deployment>::namespaced(client.clone(), BALLOON_NS);
    if api.get_opt(BALLOON).await.unwrap().is_none() {
        let labels = json!({"app.kubernetes.io/name": "balloon", "prewarm.io/target": "gpu"});
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": BALLOON, "namespace": BALLOON_NS, "labels": labels},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"nodeSelector": {"prewarm-test": "no-such-node"},
                         "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}}}
        }))
        .unwrap();
        api.create(&PostParams::default(), &d).await.unwrap();
    }
}

/// The drains holding warm capacity (instance ids): their replacement placeholder pods
/// (`prewarm.io/replacement-for`), in any namespace, and any reservation left on the balloon.
pub async fn reservations(client: &kube::Client) -> Vec<String> {
    let placeholders = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().labels("prewarm.io/replacement-for"))
        .await
        .unwrap();
    let mut out: Vec<String> = placeholders
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            p.metadata
                .labels
                .as_ref()?
                .get("prewarm.io/replacement-for")
                .cloned()
        })
        .collect();
    let config = Config::from_lookup(|k| match k {
        "PREWARM_TARGETS" => Some(fault_targets()),
        _ => None,
    })
    .unwrap();
    let read = prewarm::adapters::kube::headroom::read_headroom(client, &config.targets[0])
        .await
        .unwrap();
    out.extend(
        prewarm::adapters::kube::headroom::reservations(&read)
            .keys()
            .cloned(),
    );
    out
}

pub async fn pool_node(client: &kube::Client, name: &str, instance: &str) {
    make_node(client, name, instance).await;
    Api::<Node>::all(client.clone())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"karpenter.sh/nodepool": POOL}}})),
        )
        .await
        .unwrap();
}

/// A node of the pool with one GPU pod on it, remembered for the clean-up.
pub async fn fault_node(
    client: &kube::Client,
    prefix: &str,
    cleanups: &mut Vec<(String, Vec<String>)>,
) -> (String, String) {
    let (node, inst) = (unique(prefix), unique("i-0abcd"));
    pool_node(client, &node, &inst).await;
    let pod = format!("{node}-a");
    make_pod(client, &pod, &node, "h6-faults").await;
    cleanups.push((node.clone(), vec![pod]));
    (node, inst)
}

pub async fn queue(sqs: &aws_sdk_sqs::Client, prefix: &str) -> String {
    sqs.create_queue()
        .queue_name(unique(prefix))
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout,
            "2",
        )
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap()
}

pub async fn send(sqs: &aws_sdk_sqs::Client, queue: &str, body: &str) {
    sqs.send_message()
        .queue_url(queue)
        .message_body(body)
        .send()
        .await
        .unwrap();
}

/// Receives what is visible on `queue` now (up to 10), as the Lambda event of one batch.
pub async fn receive(sqs: &aws_sdk_sqs::Client, queue: &str) -> Vec<(SqsMessage, String)> {
    let got = sqs
        .receive_message()
        .queue_url(queue)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .message_attribute_names("All")
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    got.into_iter()
        .map(|m| {
            let attrs: serde_json::Map<String, serde_json::Value> = m
                .message_attributes
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| {
                    (
                        k,
                        json!({"stringValue": v.string_value, "dataType": v.data_type}),
                    )
                })
                .collect();
            let count = m
                .attributes
                .as_ref()
                .and_then(|a| {
                    a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
                })
                .cloned()
                .unwrap_or_else(|| "1".into());
            let record: SqsMessage = serde_json::from_value(json!({
                "messageId": m.message_id, "receiptHandle": m.receipt_handle, "body": m.body,
                "attributes": {"ApproximateReceiveCount": count}, "messageAttributes": attrs,
                "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
                "awsRegion": "us-east-1"
            }))
            .unwrap();
            (record, m.receipt_handle.unwrap_or_default())
        })
        .collect()
}

/// Waits (up to 10 s) for at least one message (a continuation is delayed to its next check).
pub async fn receive_some(sqs: &aws_sdk_sqs::Client, queue: &str) -> Vec<(SqsMessage, String)> {
    for _ in 0..10 {
        let got = receive(sqs, queue).await;
        if !got.is_empty() {
            return got;
        }
    }
    Vec::new()
}

/// One poll of the queue as Lambda's poller does it: the batch to the handler, then the records
/// not reported as failures deleted. Returns how many records there were.
pub async fn pump(h: &Interruption, sqs: &aws_sdk_sqs::Client, queue: &str) -> usize {
    pump_within(h, sqs, queue, Duration::from_secs(20)).await.0
}

/// `pump` with an invocation of `timeout` (the template's is 20 s): how many records there were
/// and how many of them were kept (batch item failures).
pub async fn pump_within(
    h: &Interruption,
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    timeout: Duration,
) -> (usize, usize) {
    let got = receive(sqs, queue).await;
    if got.is_empty() {
        return (0, 0);
    }
    let records: Vec<SqsMessage> = got.iter().map(|(r, _)| r.clone()).collect();
    let deadline = SystemTime::now() + timeout;
    let response = h.handle_batch(batch(records), deadline).await;
    let failed = failed_ids(&response);
    for (r, handle) in &got {
        if !failed.contains(r.message_id.as_ref().unwrap()) {
            sqs.delete_message()
                .queue_url(queue)
                .receipt_handle(handle)
                .send()
                .await
                .unwrap();
        }
    }
    (got.len(), failed.len())
}

/// Pumps until `done` holds or `max` passes; true when it held.
pub async fn pump_until<F, Fut>(
    h: &Interruption,
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    max: Duration,
    done: F,
) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = std::time::Instant::now() + max;
    while std::time::Instant::now() < until {
        if done().await {
            return true;
        }
        pump(h, sqs, queue).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    done().await
}

/// What a failed fault case prints: the node's annotations, taints and cordon, its Events, the
/// pods left on it and the reservations.
pub async fn fault_report(client: &kube::Client, node: &str) -> String {
    let n = Api::<Node>::all(client.clone())
        .get_opt(node)
        .await
        .unwrap();
    let events = Api::<CoreEvent>::all(client.clone())
        .list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
        .await
        .map(|l| {
            l.items
                .iter()
                .map(|e| {
                    format!(
                        "{} {}",
                        e.reason.clone().unwrap_or_default(),
                        e.message.clone().unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    format!(
        "node {node}: annotations {:?}; spec {:?}\nEvents: {events:#?}\npods left: {:?}\nreservations: {:?}",
        n.as_ref().and_then(|n| n.metadata.annotations.clone()),
        n.as_ref().and_then(|n| n.spec.clone()),
        pods_left(client, node).await,
        reservations(client).await
    )
}

/// One run of the tick's drain collection now, handing drains over on `queue`.
pub async fn tick_now(
    tick: &kube::Client,
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    targets: &[prewarm::core::spec::TargetSpec],
    settings: &prewarm::core::interruption::DrainSettings,
) -> Vec<prewarm::handlers::tick::reservations::Collected> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let handover = prewarm::handlers::tick::reservations::Handover {
        sqs,
        queue_url: queue,
    };
    prewarm::handlers::tick::reservations::collect(tick, &handover, targets, settings, now)
        .await
        .unwrap()
}

/// Prints how a fault case ended (run with --nocapture to see it), so that every case's outcome
/// is known even when a later one fails.
pub fn case_outcome(case: usize, name: &str, failed: &[String], started: std::time::Instant) {
    let secs = started.elapsed().as_secs_f64();
    match failed {
        [] => eprintln!("fault case {case} ({name}): ok in {secs:.0} s"),
        f => eprintln!(
            "fault case {case} ({name}): FAILED in {secs:.0} s\n{}",
            f.join("\n")
        ),
    }
}

/// The state a fault case ends in, for its assertions.
pub struct After {
    pub annotations: BTreeMap<String, String>,
    pub cordoned: bool,
    pub tainted: bool,
    pub pods: Vec<String>,
    pub reservations: Vec<String>,
}

pub async fn after(client: &kube::Client, node: &str) -> After {
    let n = Api::<Node>::all(client.clone())
        .get_opt(node)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("node {node} is gone: something other than its test deleted it"));
    let spec = n.spec.clone().unwrap_or_default();
    After {
        annotations: n
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| k.starts_with("prewarm.io/drain-"))
            .collect(),
        cordoned: spec.unschedulable == Some(true),
        tainted: spec
            .taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == "prewarm.io/draining"),
        pods: pods_left(client, node).await,
        reservations: reservations(client).await,
    }
}

pub fn health_notice(
    instance: &str,
    id: &str,
    arn: &str,
    status: &str,
    window_in_s: i64,
) -> String {
    json!({
        "version": "0", "id": id, "detail-type": "AWS Health Event", "source": "aws.health",
        "account": "123456789012", "time": now_rfc3339(0), "region": "us-east-1",
        "resources": [instance],
        "detail": {"eventArn": arn, "service": "EC2", "eventTypeCategory": "scheduledChange",
                   "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", "statusCode": status,
                   "startTime": now_rfc3339(window_in_s),
                   "affectedEntities": [{"entityValue": instance}]}
    })
    .to_string()
}

pub fn spot_body(instance: &str, age_s: i64) -> String {
    spot_record(instance, &unique("ev-"), age_s).body.unwrap()
}

/// A node of the pool that no kubelet runs (kwok does not manage it: no `kwok.x-k8s.io/node`
/// annotation): a dead kubelet. Pods deleted on it with a finalizer stay Terminating.
pub async fn dead_node(client: &kube::Client, name: &str, instance: &str) {
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name,
                     "labels": {"kubernetes.io/hostname": name, "prewarm-test": "h6",
                                "karpenter.sh/nodepool": POOL}},
        "spec": {"providerID": format!("aws:///us-east-1a/{instance}")}
    }))
    .unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
}

/// Puts a finalizer nobody removes on pod `name` (or takes it off again: `on` false).
pub async fn hold_pod(client: &kube::Client, name: &str, on: bool) {
    let finalizers = if on {
        json!(["prewarm.io/test-stuck"])
    } else {
        json!(null)
    };
    let _ = Api::<Pod>::namespaced(client.clone(), NS)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
        )
        .await;
}

/// A queue whose messages go to `dlq` after `max_receives` receives (the template's redrive).
pub async fn redrive_queue(
    sqs: &aws_sdk_sqs::Client,
    prefix: &str,
    dlq: &str,
    max_receives: u32,
) -> String {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let arn = sqs
        .get_queue_attributes()
        .queue_url(dlq)
        .attribute_names(A::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()
        .remove(&A::QueueArn)
        .unwrap();
    let policy = json!({"deadLetterTargetArn": arn, "maxReceiveCount": max_receives.to_string()});
    sqs.create_queue()
        .queue_name(unique(prefix))
        .attributes(A::VisibilityTimeout, "2")
        .attributes(A::RedrivePolicy, policy.to_string())
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap()
}

/// Messages on `queue`: visible, in flight and delayed (continuations).
pub async fn queue_total(sqs: &aws_sdk_sqs::Client, queue: &str) -> usize {
    queue_counts(sqs, queue)
        .await
        .values()
        .filter_map(|v| v.parse::<usize>().ok())
        .sum()
}

/// The queue's visible, in-flight and delayed message counts, by attribute name.
pub async fn queue_counts(
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
) -> std::collections::HashMap<aws_sdk_sqs::types::QueueAttributeName, String> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    sqs.get_queue_attributes()
        .queue_url(queue)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .attribute_names(A::ApproximateNumberOfMessagesDelayed)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap_or_default()
}

/// Adds labels to `node` (merge patch as the admin).
pub async fn label(client: &kube::Client, node: &str, labels: serde_json::Value) {
    Api::<Node>::all(client.clone())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": labels}})),
        )
        .await
        .unwrap();
}

/// The replacement placeholders of drain `instance` (balloon namespace `prewarm`).
pub async fn placeholders_of(client: &kube::Client, instance: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "prewarm")
        .list(&placeholder_selector(Some(instance)))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// Sends `signal` (`-STOP`, `-CONT`) to the stack's apiserver (its pid in the stack's run
/// directory, which tests/stack/up exports in .run/env); true when it was delivered.
pub fn signal_apiserver(signal: &str) -> bool {
    let pid_file = format!("{}/kube-apiserver.pid", env("STACK_RUN_DIR"));
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    std::process::Command::new("kill")
        .args([signal, pid.trim()])
        .status()
        .unwrap()
        .success()
}
