//! The drain against the real apiserver of the local stack (tests/stack): node lookup by
//! providerID, cordon, taint, drain state annotations, evictions through policy/v1, a
//! PodDisruptionBudget's 429 recorded as an Event on the node, a foreign instance, duplicates.
//!
//! The handler runs as the `prewarm-lambda` user (PREWARM_LAMBDA_KUBECONFIG), so these tests
//! also prove that the RBAC of infra/k8s is enough. Test objects (a kwok-managed Node with an
//! AWS-style providerID, pods bound to it, PDBs) are created with the admin kubeconfig.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::SqsMessage;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use prewarm::adapters::events::parse_record;
use prewarm::config::{ClusterAccess, Config};
use prewarm::handlers::interruption::{Continuation, Interruption, RecordOutcome};
use serde_json::json;

const NS: &str = "prewarm-h6-stack";

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: source tests/stack/.run/env"))
}

async fn admin() -> kube::Client {
    prewarm::adapters::kube::client(&ClusterAccess::Kubeconfig {
        path: env("KUBECONFIG"),
    })
    .await
    .unwrap()
}

async fn handler(extra: &[(&str, &str)]) -> Interruption {
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

fn unique(prefix: &str) -> String {
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}{:012x}", n & 0xffff_ffff_ffff)
}

fn now_rfc3339(offset_s: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(offset_s))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// An SQS record carrying a spot warning issued `age_s` seconds ago.
fn spot_record(instance: &str, event_id: &str, age_s: i64) -> SqsMessage {
    let body = json!({
        "version": "0", "id": event_id, "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2", "account": "123456789012", "time": now_rfc3339(-age_s),
        "region": "us-east-1", "resources": [format!("arn:aws:ec2:us-east-1a:instance/{instance}")],
        "detail": {"instance-id": instance, "instance-action": "terminate"}
    });
    serde_json::from_value(json!({
        "messageId": unique("m-"), "receiptHandle": "rh", "body": body.to_string(),
        "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
        "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
        "awsRegion": "us-east-1"
    }))
    .unwrap()
}

/// A kwok-managed node (the stack's kwok controller makes it Ready and runs its pods) whose
/// providerID names `instance`.
async fn make_node(client: &kube::Client, name: &str, instance: &str) {
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

async fn ensure_namespace(client: &kube::Client) {
    let api = Api::<Namespace>::all(client.clone());
    if api.get_opt(NS).await.unwrap().is_none() {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
        let _ = api.create(&PostParams::default(), &ns).await;
    }
}

async fn make_pod(client: &kube::Client, name: &str, node: &str, app: &str) {
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

async fn cleanup(client: &kube::Client, node: &str, pods: &[&str], pdb: Option<&str>) {
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

async fn pods_left(client: &kube::Client, node: &str) -> Vec<String> {
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
const CHECK_GAP: Duration = Duration::from_millis(1_200);

/// Runs checks of one record until it finishes (or `max` checks); its continuation would come
/// back after its delay each time, here the loop stands in for SQS.
async fn run_until_done(h: &Interruption, record: &SqsMessage, max: usize) -> Vec<RecordOutcome> {
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

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_spot_warning_past_its_deadline_cordons_taints_evicts_and_finishes() {
    let admin = admin().await;
    ensure_namespace(&admin).await;
    let (node, instance) = (unique("h6-drain-"), unique("i-0abcd"));
    let pods = [format!("{node}-a"), format!("{node}-b")];
    make_node(&admin, &node, &instance).await;
    for p in &pods {
        make_pod(&admin, p, &node, "h6-free").await;
    }
    let h = handler(&[]).await;
    // Issued 100 s ago: the eviction deadline (120 - 30 s) has passed, so eviction is at once.
    let record = spot_record(&instance, &unique("ev-"), 100);
    let outcomes = run_until_done(&h, &record, 40).await;

    let n = Api::<Node>::all(admin.clone()).get(&node).await.unwrap();
    let pod_names: Vec<&str> = pods.iter().map(String::as_str).collect();
    let left = pods_left(&admin, &node).await;
    cleanup(&admin, &node, &pod_names, None).await;

    assert!(
        matches!(outcomes.last(), Some(RecordOutcome::Delete { .. })),
        "{outcomes:?}"
    );
    assert!(left.is_empty(), "pods left on the node: {left:?}");
    let spec = n.spec.unwrap();
    assert_eq!(spec.unschedulable, Some(true));
    let taint = spec
        .taints
        .unwrap()
        .into_iter()
        .find(|t| t.key == "prewarm.io/draining")
        .expect("the draining taint");
    assert_eq!(
        (taint.value.as_deref(), taint.effect.as_str()),
        (Some("spot-interruption"), "NoSchedule")
    );
    let a = n.metadata.annotations.unwrap();
    assert_eq!(a["prewarm.io/drain-phase"], "drained");
    assert_eq!(a["prewarm.io/drain-kind"], "spot-interruption");
    assert!(a.contains_key("prewarm.io/drain-evicting-since"));
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_pdb_that_allows_nothing_keeps_the_record_and_names_the_pod_and_budget_in_an_event() {
    let admin = admin().await;
    ensure_namespace(&admin).await;
    let (node, instance) = (unique("h6-pdb-"), unique("i-0abcd"));
    let pod = format!("{node}-guarded");
    let app = unique("h6-guarded-");
    let pdb_name = format!("{node}-pdb");
    make_node(&admin, &node, &instance).await;
    make_pod(&admin, &pod, &node, &app).await;
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": pdb_name, "namespace": NS},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}}
    }))
    .unwrap();
    Api::<PodDisruptionBudget>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &pdb)
        .await
        .unwrap();

    let h = handler(&[]).await;
    let record = spot_record(&instance, &unique("ev-"), 100);
    let parsed = parse_record(&record);
    let first = h.handle_record(&parsed, &Continuation::default()).await;
    tokio::time::sleep(CHECK_GAP).await;
    let second = h.handle_record(&parsed, &Continuation::default()).await;

    let events = Api::<CoreEvent>::all(admin.clone())
        .list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
        .await
        .unwrap()
        .items;
    let still_there = pods_left(&admin, &node).await;
    cleanup(&admin, &node, &[&pod], Some(&pdb_name)).await;

    // Claimed, blocked: each check continues the drain (a continuation, not a kept message).
    for o in [&first, &second] {
        assert!(matches!(o, RecordOutcome::Continue { .. }), "{o:?}");
    }
    assert_eq!(still_there, std::slice::from_ref(&pod));
    let blocked: Vec<&CoreEvent> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("DrainBlockedByPDB"))
        .collect();
    assert!(
        !blocked.is_empty(),
        "no DrainBlockedByPDB event among {events:?}"
    );
    let note = blocked[0].message.clone().unwrap_or_default();
    assert!(note.contains(&pod), "{note}");
    assert!(note.contains(&format!("{NS}/{pdb_name}")), "{note}");
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_foreign_instance_is_acknowledged_and_duplicates_are_harmless() {
    let admin = admin().await;
    ensure_namespace(&admin).await;
    let h = handler(&[]).await;

    let foreign = parse_record(&spot_record(&unique("i-0f0f0"), &unique("ev-"), 5));
    match h.handle_record(&foreign, &Continuation::default()).await {
        RecordOutcome::Delete { reason } => {
            assert!(reason.contains("not in this cluster"), "{reason}")
        }
        other => panic!("{other:?}"),
    }

    // The same notice delivered twice at once, on a fresh warning (deadline 85 s ahead, no warm
    // capacity): both copies agree, neither evicts, the node is claimed once, and exactly one
    // delivery carries the drain on (the other collapses into it as a duplicate).
    let (node, instance) = (unique("h6-dup-"), unique("i-0abcd"));
    let pod = format!("{node}-a");
    make_node(&admin, &node, &instance).await;
    make_pod(&admin, &pod, &node, "h6-dup").await;
    let event_id = unique("ev-");
    let a = parse_record(&spot_record(&instance, &event_id, 5));
    let b = parse_record(&spot_record(&instance, &event_id, 5));
    let first = Continuation::default();
    let (oa, ob) = tokio::join!(h.handle_record(&a, &first), h.handle_record(&b, &first));
    let oc = h.handle_record(&a, &first).await;
    let n = Api::<Node>::all(admin.clone()).get(&node).await.unwrap();
    let left = pods_left(&admin, &node).await;
    cleanup(&admin, &node, &[&pod], None).await;

    let carrying = [&oa, &ob]
        .iter()
        .filter(|o| matches!(o, RecordOutcome::Continue { .. }))
        .count();
    assert_eq!(carrying, 1, "{oa:?} {ob:?}");
    for o in [&oa, &ob, &oc] {
        if let RecordOutcome::Delete { reason } = o {
            assert!(reason.contains("duplicate delivery"), "{reason}");
        }
    }
    assert!(matches!(oc, RecordOutcome::Delete { .. }), "{oc:?}");
    assert_eq!(left, [pod]);
    let a = n.metadata.annotations.unwrap();
    assert_eq!(a["prewarm.io/drain-event-id"], event_id);
    assert_eq!(a["prewarm.io/drain-phase"], "waiting-for-replacement");
    let taints = n.spec.unwrap().taints.unwrap();
    assert_eq!(
        taints
            .iter()
            .filter(|t| t.key == "prewarm.io/draining")
            .count(),
        1
    );
}

async fn sqs() -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(
        &aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await,
    )
}

fn batch(records: Vec<SqsMessage>) -> aws_lambda_events::event::sqs::SqsEvent {
    serde_json::from_value(json!({ "Records": records })).unwrap()
}

fn failed_ids(r: &aws_lambda_events::event::sqs::SqsBatchResponse) -> Vec<String> {
    r.batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn handle_batch_continues_a_claimed_drain_with_its_own_message_and_keeps_poison() {
    let admin = admin().await;
    ensure_namespace(&admin).await;
    let (node, instance) = (unique("h6-batch-"), unique("i-0abcd"));
    let pod = format!("{node}-a");
    make_node(&admin, &node, &instance).await;
    make_pod(&admin, &pod, &node, "h6-batch").await;
    let sqs = sqs().await;
    let queue = sqs
        .create_queue()
        .queue_name(unique("h6-batch-"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let h = handler(&[("INTERRUPTION_QUEUE_URL", &queue)]).await;
    // A fresh warning (deadline 85 s ahead, no warm capacity): claimed, work left.
    let claimed = spot_record(&instance, &unique("ev-"), 5);
    let mut poison = spot_record(&instance, &unique("ev-"), 5);
    poison.body = Some("spot interruption {not json".into());
    poison.message_id = Some(unique("m-"));
    let deadline = SystemTime::now() + Duration::from_secs(20);
    let response = h
        .handle_batch(batch(vec![claimed.clone(), poison.clone()]), deadline)
        .await;

    // The poison record is kept (to the DLQ after maxReceiveCount); the claimed one is
    // acknowledged, and its continuation waits in the queue: same body, attempt 1.
    assert_eq!(failed_ids(&response), [poison.message_id.clone().unwrap()]);
    let got = sqs
        .receive_message()
        .queue_url(&queue)
        .wait_time_seconds(5)
        .message_attribute_names("All")
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    // A continuation sent with a send that fails falls back to keeping the message.
    let broken = handler(&[("INTERRUPTION_QUEUE_URL", &format!("{queue}-missing"))]).await;
    tokio::time::sleep(CHECK_GAP).await;
    let kept = broken
        .handle_batch(batch(vec![claimed.clone()]), deadline)
        .await;
    cleanup(&admin, &node, &[&pod], None).await;
    let _ = sqs.delete_queue().queue_url(&queue).send().await;

    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].body, claimed.body);
    let attempt = got[0]
        .message_attributes
        .as_ref()
        .and_then(|a| a.get("prewarm-attempt"))
        .and_then(|v| v.string_value.clone());
    assert_eq!(attempt.as_deref(), Some("1"));
    assert_eq!(failed_ids(&kept), [claimed.message_id.clone().unwrap()]);
}

/// Sets drain annotations on `node` (merge patch as the admin).
async fn annotate(client: &kube::Client, node: &str, pairs: &[(&str, String)]) {
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

fn ago(seconds: i64) -> String {
    now_rfc3339(-seconds)
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn the_tick_adopts_an_orphaned_drain_and_undrains_an_expired_prewarm() {
    use prewarm::adapters::kube::drain::{collect, event_recorder};
    use prewarm::core::interruption::{DrainSettings, LeaseVerdict};
    let admin = admin().await;
    ensure_namespace(&admin).await;
    let lambda = prewarm::adapters::kube::client(&ClusterAccess::Kubeconfig {
        path: env("PREWARM_LAMBDA_KUBECONFIG"),
    })
    .await
    .unwrap();
    let recorder = event_recorder(&lambda);
    let settings = DrainSettings {
        recheck_s: 2.0,
        ..DrainSettings::default()
    };
    let h = handler(&[]).await;

    // 1. A drain whose message went to the DLQ mid-drain: claimed, then silent for 10 minutes.
    let (orphan, orphan_i) = (unique("h6-orphan-"), unique("i-0abcd"));
    make_node(&admin, &orphan, &orphan_i).await;
    make_pod(&admin, &format!("{orphan}-a"), &orphan, "h6-orphan").await;
    // A spot warning issued 100 s ago: past its deadline, so a step evicts.
    let record = parse_record(&spot_record(&orphan_i, &unique("ev-"), 100));
    let claimed = h.handle_record(&record, &Continuation::default()).await;
    annotate(
        &admin,
        &orphan,
        &[("prewarm.io/drain-last-step-at", ago(600))],
    )
    .await;
    // Nothing will come for it from the queue: the tick must step it from the node's record.
    // 2. A cordon-prewarm rebalance drain 31 minutes old that no spot warning followed.
    let (survivor, survivor_i) = (unique("h6-prewarm-"), unique("i-0abcd"));
    make_node(&admin, &survivor, &survivor_i).await;
    annotate(
        &admin,
        &survivor,
        &[
            ("prewarm.io/drain-event-id", "ev-rebalance".into()),
            ("prewarm.io/drain-kind", "rebalance".into()),
            ("prewarm.io/drain-phase", "prewarmed".into()),
            ("prewarm.io/drain-notice-time", ago(1_860)),
            ("prewarm.io/drain-started-at", ago(1_860)),
        ],
    )
    .await;
    Api::<Node>::all(admin.clone())
        .patch(
            &survivor,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true, "taints": [
                {"key": "prewarm.io/draining", "value": "rebalance", "effect": "NoSchedule"}]}})),
        )
        .await
        .unwrap();

    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    // A node write that conflicts with another writer (the node controller, kwok) is left to the
    // next tick: like successive ticks, collect up to three times and keep, per node, the first
    // success (or the last failure).
    let mut collected: Vec<collect::Collected> = Vec::new();
    for _ in 0..3 {
        for c in collect::collect(&lambda, &recorder, &[], &settings, now)
            .await
            .unwrap()
        {
            match collected.iter_mut().find(|k| k.node == c.node) {
                Some(k) if k.outcome.is_err() => *k = c,
                Some(_) => {}
                None => collected.push(c),
            }
        }
        let settled = |n: &str| {
            collected
                .iter()
                .any(|c| c.node.as_deref() == Some(n) && c.outcome.is_ok())
        };
        if settled(&orphan) && settled(&survivor) {
            break;
        }
    }
    let nodes = Api::<Node>::all(admin.clone());
    let orphan_after = nodes.get(&orphan).await.unwrap();
    let survivor_after = nodes.get(&survivor).await.unwrap();
    cleanup(&admin, &orphan, &[&format!("{orphan}-a")], None).await;
    cleanup(&admin, &survivor, &[], None).await;

    assert!(
        matches!(claimed, RecordOutcome::Continue { .. }),
        "{claimed:?}"
    );
    let verdict_of = |node: &str| {
        collected
            .iter()
            .find(|c| c.node.as_deref() == Some(node))
            .map(|c| (c.verdict.clone(), c.outcome.clone()))
    };
    let (v, outcome) = verdict_of(&orphan).expect("the orphaned drain was collected");
    assert_eq!(v, LeaseVerdict::Resume, "{outcome:?}");
    assert!(outcome.is_ok(), "{outcome:?}");
    // The tick's step is the drain's new heartbeat.
    let a = orphan_after.metadata.annotations.unwrap();
    let last = prewarm::core::interruption::state::parse_time(&a["prewarm.io/drain-last-step-at"]);
    assert!(last.unwrap() > now - 5.0, "{a:?}");

    let (v, outcome) = verdict_of(&survivor).expect("the expired prewarm was collected");
    assert!(matches!(v, LeaseVerdict::Undrain { .. }), "{v:?}");
    assert!(outcome.is_ok(), "{outcome:?}");
    let a = survivor_after.metadata.annotations.unwrap_or_default();
    assert!(
        !a.keys().any(|k| k.starts_with("prewarm.io/drain-")),
        "{a:?}"
    );
    let spec = survivor_after.spec.unwrap();
    assert_ne!(spec.unschedulable, Some(true));
    assert!(!spec
        .taints
        .unwrap_or_default()
        .iter()
        .any(|t| t.key == "prewarm.io/draining"));
}

/// Adds labels to `node` (merge patch as the admin).
async fn label(client: &kube::Client, node: &str, labels: serde_json::Value) {
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
async fn placeholders_of(client: &kube::Client, instance: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "prewarm")
        .list(&ListParams::default().labels(&format!("prewarm.io/replacement-for={instance}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// Two nodes of one pool reclaimed at once, with room for one replacement: each drain makes its
/// own placeholder; the one that runs (on the pool's spare node) makes only its own drain ready,
/// which hands it over (deletes it) and evicts; the other drain waits on its pending
/// placeholder. Then the node of the waiting drain goes away and the tick collects its lease.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn each_drain_is_ready_only_on_its_own_placeholder_and_the_tick_collects_orphans() {
    use prewarm::adapters::kube::drain::{collect, event_recorder};
    use prewarm::core::interruption::{DrainSettings, LeaseVerdict};
    let admin = admin().await;
    ensure_namespace(&admin).await;
    let pool = unique("h6pool-");
    let targets = json!([{
        "name": "h6", "nodePool": pool, "maxSpare": 4, "gpusPerReplica": 1,
        "headroom": {"kind": "balloon", "namespace": "prewarm", "name": "h6-no-balloon"},
        "selector": "model_name=\"h6\"",
    }])
    .to_string();
    let h = handler(&[("PREWARM_TARGETS", &targets)]).await;
    // Two draining nodes with three 1-GPU pods each; one spare node of the pool with 4 GPUs:
    // room for one 3-GPU placeholder.
    let (a, a_i) = (unique("h6-a-"), unique("i-0aaaa"));
    let (b, b_i) = (unique("h6-b-"), unique("i-0bbbb"));
    let (spare, spare_i) = (unique("h6-spare-"), unique("i-0cccc"));
    for (n, i) in [(&a, &a_i), (&b, &b_i), (&spare, &spare_i)] {
        make_node(&admin, n, i).await;
        label(&admin, n, json!({"karpenter.sh/nodepool": pool})).await;
    }
    let pods_a: Vec<String> = (0..3).map(|k| format!("{a}-{k}")).collect();
    let pods_b: Vec<String> = (0..3).map(|k| format!("{b}-{k}")).collect();
    for p in &pods_a {
        make_pod(&admin, p, &a, "h6-a").await;
    }
    for p in &pods_b {
        make_pod(&admin, p, &b, "h6-b").await;
    }
    let rec_a = parse_record(&spot_record(&a_i, &unique("ev-"), 0));
    let rec_b = parse_record(&spot_record(&b_i, &unique("ev-"), 0));

    // Step both drains until one sees its replacement ready (at most ~40 s, before the 90 s
    // deadline, so readiness and nothing else starts an eviction).
    let nodes = Api::<Node>::all(admin.clone());
    let ready_at = |n: Node| {
        n.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("prewarm.io/drain-replacement-ready-at")
    };
    let mut made: Vec<(String, Pod)> = Vec::new();
    let mut first_ready = None;
    for _ in 0..30 {
        for (rec, node, inst) in [(&rec_a, &a, &a_i), (&rec_b, &b, &b_i)] {
            h.handle_record(rec, &Continuation::default()).await;
            for p in placeholders_of(&admin, inst).await {
                if !made.iter().any(|(i, _)| i == inst) {
                    made.push((inst.clone(), p));
                }
            }
            // Stop at once: the winner's hand-over frees the spare node, and the other drain's
            // placeholder may run there a moment later (one replacement at a time, as wanted).
            if ready_at(nodes.get(node).await.unwrap()) {
                first_ready = Some(node.clone());
                break;
            }
        }
        if first_ready.is_some() {
            break;
        }
        tokio::time::sleep(CHECK_GAP).await;
    }
    let winner = first_ready.clone().unwrap_or_default();
    let (loser, loser_i, winner_i) = if winner == a {
        (&b, &b_i, &a_i)
    } else {
        (&a, &a_i, &b_i)
    };
    let loser_ready = ready_at(nodes.get(loser).await.unwrap());
    let winner_left = placeholders_of(&admin, winner_i).await;
    let winner_pods_left = pods_left(&admin, &winner).await;
    let loser_placeholders = placeholders_of(&admin, loser_i).await;

    // The waiting drain's node goes away (instance reclaimed): the tick collects its lease.
    nodes.delete(loser, &DeleteParams::default()).await.unwrap();
    let lambda = prewarm::adapters::kube::client(&ClusterAccess::Kubeconfig {
        path: env("PREWARM_LAMBDA_KUBECONFIG"),
    })
    .await
    .unwrap();
    let settings = DrainSettings {
        recheck_s: 2.0,
        ..DrainSettings::default()
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let collected = collect::collect(&lambda, &event_recorder(&lambda), &[], &settings, now)
        .await
        .unwrap();
    let loser_after = placeholders_of(&admin, loser_i).await;

    for p in placeholders_of(&admin, &a_i)
        .await
        .into_iter()
        .chain(placeholders_of(&admin, &b_i).await)
    {
        let _ = Api::<Pod>::namespaced(admin.clone(), "prewarm")
            .delete(
                p.metadata.name.as_deref().unwrap(),
                &DeleteParams::default(),
            )
            .await;
    }
    let all_a: Vec<&str> = pods_a.iter().map(String::as_str).collect();
    let all_b: Vec<&str> = pods_b.iter().map(String::as_str).collect();
    cleanup(&admin, &a, &all_a, None).await;
    cleanup(&admin, &b, &all_b, None).await;
    cleanup(&admin, &spare, &[], None).await;

    // Each drain made its own placeholder: 3 GPUs (its pods), the balloon priority, the pool.
    assert_eq!(made.len(), 2, "one placeholder per drain: {made:?}");
    for (inst, p) in &made {
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.priority_class_name.as_deref(), Some("prewarm-balloon"));
        assert_eq!(
            spec.node_selector.as_ref().unwrap()["karpenter.sh/nodepool"],
            pool
        );
        let requests = spec.containers[0]
            .resources
            .as_ref()
            .unwrap()
            .requests
            .clone()
            .unwrap();
        assert_eq!(requests["nvidia.com/gpu"].0, "3", "{inst}");
        let a = p.metadata.annotations.as_ref().unwrap();
        assert!(a.contains_key("prewarm.io/lease-expires-at"), "{a:?}");
        assert!(a.contains_key("prewarm.io/replacement-owner"), "{a:?}");
    }
    assert!(first_ready.is_some(), "no drain saw its replacement ready");
    assert!(
        !loser_ready,
        "both drains saw ready with room for one replacement"
    );
    // Hand-over: the ready drain deleted its placeholder and evicted its pods.
    assert!(winner_left.is_empty(), "{winner_left:?}");
    assert!(
        winner_pods_left.len() < 3,
        "no eviction after ready: {winner_pods_left:?}"
    );
    // The waiting drain's placeholder held on until its node went, then the tick collected it.
    assert_eq!(loser_placeholders.len(), 1);
    assert!(loser_after.is_empty(), "{loser_after:?}");
    let c = collected
        .iter()
        .find(|c| &c.instance == loser_i)
        .unwrap_or_else(|| panic!("not collected: {collected:?}"));
    assert!(
        matches!(&c.verdict, LeaseVerdict::Release { reason } if reason.contains("gone")),
        "{c:?}"
    );
    assert!(c.outcome.is_ok(), "{c:?}");
}
