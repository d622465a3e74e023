//! The drain against the real apiserver of the local stack (tests/stack): node lookup by
//! providerID, cordon, taint, drain state annotations, evictions through policy/v1, a
//! PodDisruptionBudget's 429 recorded as an Event on the node, a foreign instance, duplicates.
//!
//! The handler runs as the `prewarm-lambda` user (PREWARM_LAMBDA_KUBECONFIG), so these tests
//! also prove that the RBAC of infra/k8s is enough. Test objects (a kwok-managed Node with an
//! AWS-style providerID, pods bound to it, PDBs) are created with the admin kubeconfig.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::SqsMessage;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use prewarm::adapters::events::parse_record;
use prewarm::config::{ClusterAccess, Config};
use prewarm::handlers::interruption::{Continuation, Interruption, RecordOutcome};
use serde_json::json;

mod common;

const NS: &str = "prewarm-h6-stack";

/// The fault matrix stops the apiserver for 60 s. The other tests of this binary run in
/// parallel with it and hold this lock shared for their whole run, so the stop (which takes it
/// exclusively) waits for them and none of them meets a frozen apiserver on a slow machine.
static APISERVER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// The tick's drain collection is cluster-wide: run in parallel, one test's collection hands
/// over (or un-drains) another test's drains, which are orphaned on purpose (seen once: the
/// tick test stepped the fault matrix's DLQ drain). The tests that collect or leave drains
/// orphaned take this lock for their whole run, always before APISERVER (no lock cycle).
static CLUSTER_WIDE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
    let _apiserver_up = APISERVER.read().await;
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
    let _apiserver_up = APISERVER.read().await;
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
    let _apiserver_up = APISERVER.read().await;
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
    let _apiserver_up = APISERVER.read().await;
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
async fn the_tick_hands_orphaned_and_expired_drains_to_the_interruption_function() {
    let _alone = CLUSTER_WIDE.lock().await;
    let _apiserver_up = APISERVER.read().await;
    use prewarm::adapters::kube::drain::collect;
    use prewarm::core::interruption::{DrainSettings, LeaseVerdict};
    let admin = admin().await;
    ensure_namespace(&admin).await;
    // The tick runs as its own user: listing nodes is all it may do to them.
    let tick = prewarm::adapters::kube::client(&ClusterAccess::Kubeconfig {
        path: env("PREWARM_TICK_KUBECONFIG"),
    })
    .await
    .unwrap();
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
    // 2. A cordon-prewarm rebalance drain 31 minutes old that no spot warning followed, on a
    //    node prewarm cordoned; 3. the same on a node an operator had cordoned before the claim.
    let prewarmed = |user_cordoned: bool| {
        let mut a = vec![
            ("prewarm.io/drain-event-id", "ev-rebalance".to_string()),
            ("prewarm.io/drain-kind", "rebalance".into()),
            ("prewarm.io/drain-phase", "prewarmed".into()),
            ("prewarm.io/drain-notice-time", ago(1_860)),
            ("prewarm.io/drain-started-at", ago(1_860)),
        ];
        if user_cordoned {
            a.push(("prewarm.io/drain-user-cordoned", "true".into()));
        }
        a
    };
    let (survivor, survivor_i) = (unique("h6-prewarm-"), unique("i-0abcd"));
    let (cordoned, cordoned_i) = (unique("h6-usercordon-"), unique("i-0abcd"));
    for (node, instance, user) in [
        (&survivor, &survivor_i, false),
        (&cordoned, &cordoned_i, true),
    ] {
        make_node(&admin, node, instance).await;
        annotate(&admin, node, &prewarmed(user)).await;
        Api::<Node>::all(admin.clone())
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"unschedulable": true, "taints": [
                    {"key": "prewarm.io/draining", "value": "rebalance", "effect": "NoSchedule"}]}})),
            )
            .await
            .unwrap();
    }
    let sqs = sqs().await;
    let queue = sqs
        .create_queue()
        .queue_name(unique("h6-handover-"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();

    // The tick: detects and enqueues, writes nothing.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let handover = collect::Handover {
        sqs: &sqs,
        queue_url: &queue,
    };
    let collected = collect::collect(&tick, &handover, &[], &settings, now)
        .await
        .unwrap();
    let nodes = Api::<Node>::all(admin.clone());
    let orphan_after_tick = nodes.get(&orphan).await.unwrap();
    // The interruption function: takes the resume-drain messages off the queue and steps them.
    let mut messages = Vec::new();
    for _ in 0..5 {
        let got = sqs
            .receive_message()
            .queue_url(&queue)
            .max_number_of_messages(10)
            .wait_time_seconds(2)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap()
            .messages
            .unwrap_or_default();
        messages.extend(got);
        if messages.len() >= 3 {
            break;
        }
    }
    let mut outcomes = Vec::new();
    for m in &messages {
        let record: SqsMessage = serde_json::from_value(json!({
            "messageId": m.message_id, "receiptHandle": m.receipt_handle, "body": m.body,
            "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
            "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
            "awsRegion": "us-east-1"
        }))
        .unwrap();
        let parsed = prewarm::adapters::events::parse_record_with(
            &record,
            prewarm::adapters::events::InstanceIdRule::Ec2,
        );
        // A write that conflicts with kwok's own node writes is planned again up to 3 times in a
        // step; like the queue, deliver again if the step was left for later.
        let mut outcome = h.handle_record(&parsed, &Continuation::default()).await;
        for _ in 0..3 {
            if !matches!(outcome, RecordOutcome::Later { .. }) {
                break;
            }
            outcome = h.handle_record(&parsed, &Continuation::default()).await;
        }
        outcomes.push((m.body.clone().unwrap_or_default(), outcome));
    }
    let orphan_after = nodes.get(&orphan).await.unwrap();
    let survivor_after = nodes.get(&survivor).await.unwrap();
    let cordoned_after = nodes.get(&cordoned).await.unwrap();
    cleanup(&admin, &orphan, &[&format!("{orphan}-a")], None).await;
    cleanup(&admin, &survivor, &[], None).await;
    cleanup(&admin, &cordoned, &[], None).await;
    let _ = sqs.delete_queue().queue_url(&queue).send().await;

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
    assert!(outcome.unwrap().contains("enqueued"));
    for node in [&survivor, &cordoned] {
        let (v, outcome) = verdict_of(node).expect("the expired prewarm was collected");
        assert!(matches!(v, LeaseVerdict::Undrain { .. }), "{v:?}");
        assert!(outcome.unwrap().contains("enqueued"));
    }
    // The tick wrote nothing: the heartbeat is still the one of 10 minutes ago.
    let a = orphan_after_tick.metadata.annotations.unwrap();
    let last = prewarm::core::interruption::state::parse_time(&a["prewarm.io/drain-last-step-at"]);
    assert!(last.unwrap() < now - 500.0, "{a:?}");
    // One versioned message per node, naming node and instance.
    assert_eq!(messages.len(), 3, "{outcomes:?}");
    for (body, outcome) in &outcomes {
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            (&v["prewarm"], &v["version"]),
            (&json!("resume-drain"), &json!(1))
        );
        assert!(
            !matches!(
                outcome,
                RecordOutcome::Later { .. } | RecordOutcome::Poison { .. }
            ),
            "{body}: {outcome:?}"
        );
    }
    // The interruption function's step is the drain's new heartbeat.
    let a = orphan_after.metadata.annotations.unwrap();
    let last = prewarm::core::interruption::state::parse_time(&a["prewarm.io/drain-last-step-at"]);
    assert!(last.unwrap() > now - 5.0, "{a:?}");
    // Un-drained: no state, no taint; prewarm's cordon lifted, the operator's kept.
    for (after, still_cordoned) in [(survivor_after, false), (cordoned_after, true)] {
        let a = after.metadata.annotations.clone().unwrap_or_default();
        assert!(
            !a.keys().any(|k| k.starts_with("prewarm.io/drain-")),
            "{a:?}"
        );
        let spec = after.spec.unwrap();
        assert_eq!(spec.unschedulable == Some(true), still_cordoned, "{a:?}");
        assert!(!spec
            .taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == "prewarm.io/draining"));
    }
}

// ------------------------------------------------------------------ the fault matrix
// Each fault on the real apiserver and a real SQS queue (moto), through `handle_batch` as the
// Lambda poller drives it (received messages go in, failures stay, the rest are deleted), with a
// replacement lease on a real balloon Deployment (the chart's default target prewarm/balloon-gpu,
// the only headroom object the interruption user may patch). Timings are shortened by
// configuration (RECHECK_SECONDS 2, EVICTION_BUDGET_SECONDS 110, queue visibility 2 s) or, where
// a wait is a fixed rule (the owner's 4 x recheck + 60 s of silence, the 30-minute cordon-prewarm
// expiry), by dating the drain's own record back by that much: the clock moving on.

const POOL: &str = "h6-faults";
const BALLOON_NS: &str = "prewarm";
const BALLOON: &str = "balloon-gpu";

fn fault_targets() -> String {
    json!([{"name": "gpu", "nodePool": POOL, "maxSpare": 8, "gpusPerReplica": 1,
            "headroom": {"kind": "balloon", "namespace": BALLOON_NS, "name": BALLOON},
            "selector": "model_name=\"llama\""}])
    .to_string()
}

/// The balloon Deployment the lease lives on; its pods select no node (no capacity is made).
async fn ensure_balloon(client: &kube::Client) {
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
async fn leases(client: &kube::Client) -> Vec<String> {
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

async fn pool_node(client: &kube::Client, name: &str, instance: &str) {
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
async fn fault_node(
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

async fn queue(sqs: &aws_sdk_sqs::Client, prefix: &str) -> String {
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

async fn send(sqs: &aws_sdk_sqs::Client, queue: &str, body: &str) {
    sqs.send_message()
        .queue_url(queue)
        .message_body(body)
        .send()
        .await
        .unwrap();
}

/// Receives what is visible on `queue` now (up to 10), as the Lambda event of one batch.
async fn receive(sqs: &aws_sdk_sqs::Client, queue: &str) -> Vec<(SqsMessage, String)> {
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
async fn receive_some(sqs: &aws_sdk_sqs::Client, queue: &str) -> Vec<(SqsMessage, String)> {
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
async fn pump(h: &Interruption, sqs: &aws_sdk_sqs::Client, queue: &str) -> usize {
    let got = receive(sqs, queue).await;
    if got.is_empty() {
        return 0;
    }
    let records: Vec<SqsMessage> = got.iter().map(|(r, _)| r.clone()).collect();
    let deadline = SystemTime::now() + Duration::from_secs(20);
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
    got.len()
}

/// Pumps until `done` holds or `max` passes; true when it held.
async fn pump_until<F, Fut>(
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
/// pods left on it and the leases.
async fn fault_report(client: &kube::Client, node: &str) -> String {
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
        "node {node}: annotations {:?}; spec {:?}\nEvents: {events:#?}\npods left: {:?}\nleases: {:?}",
        n.as_ref().and_then(|n| n.metadata.annotations.clone()),
        n.as_ref().and_then(|n| n.spec.clone()),
        pods_left(client, node).await,
        leases(client).await
    )
}

/// One run of the tick's drain collection now, handing drains over on `queue`.
async fn tick_now(
    tick: &kube::Client,
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    targets: &[prewarm::core::spec::TargetSpec],
    settings: &prewarm::core::interruption::DrainSettings,
) -> Vec<prewarm::adapters::kube::drain::collect::Collected> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let handover = prewarm::adapters::kube::drain::collect::Handover {
        sqs,
        queue_url: queue,
    };
    prewarm::adapters::kube::drain::collect::collect(tick, &handover, targets, settings, now)
        .await
        .unwrap()
}

/// Prints how a fault case ended (run with --nocapture to see it), so that every case's outcome
/// is known even when a later one fails.
fn case_outcome(case: usize, name: &str, failed: &[String], started: std::time::Instant) {
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
struct After {
    annotations: BTreeMap<String, String>,
    cordoned: bool,
    tainted: bool,
    pods: Vec<String>,
    leases: Vec<String>,
}

async fn after(client: &kube::Client, node: &str) -> After {
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
        leases: leases(client).await,
    }
}

fn health_notice(instance: &str, id: &str, arn: &str, status: &str, window_in_s: i64) -> String {
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

fn spot_body(instance: &str, age_s: i64) -> String {
    spot_record(instance, &unique("ev-"), age_s).body.unwrap()
}

/// A node of the pool that no kubelet runs (kwok does not manage it: no `kwok.x-k8s.io/node`
/// annotation): a dead kubelet. Pods deleted on it with a finalizer stay Terminating.
async fn dead_node(client: &kube::Client, name: &str, instance: &str) {
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
async fn hold_pod(client: &kube::Client, name: &str, on: bool) {
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
async fn redrive_queue(
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
async fn queue_total(sqs: &aws_sdk_sqs::Client, queue: &str) -> usize {
    queue_counts(sqs, queue)
        .await
        .values()
        .filter_map(|v| v.parse::<usize>().ok())
        .sum()
}

/// The queue's visible, in-flight and delayed message counts, by attribute name.
async fn queue_counts(
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

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn fault_matrix_every_drain_ends_and_nothing_is_left_behind() {
    // The matrix's state is large: boxed, it lives on the heap and not on the test thread's
    // stack, which it overflowed as cases grew (case 8 inline; later the whole matrix, in a
    // drain-repeat round and a clean-clone CI run: "fatal runtime error: stack overflow").
    Box::pin(fault_matrix()).await;
}

/// The fault matrix (issue 11): each case checks what happened to the pods, the node and the
/// warm capacity.
async fn fault_matrix() {
    let _alone = CLUSTER_WIDE.lock().await;
    let admin = admin().await;
    ensure_namespace(&admin).await;
    ensure_balloon(&admin).await;
    let sqs = sqs().await;
    let q = queue(&sqs, "h6-faults-").await;
    let dlq = queue(&sqs, "h6-faults-dlq-").await;
    let targets = fault_targets();
    let base: Vec<(&str, &str)> = vec![
        ("INTERRUPTION_QUEUE_URL", &q),
        ("PREWARM_TARGETS", &targets),
        // A spot warning's deadline 10 s after its notice: a drain ends within seconds.
        ("EVICTION_BUDGET_SECONDS", "110"),
    ];
    let h = handler(&base).await;
    let mut prewarm_env = base.clone();
    prewarm_env.push(("ACTIONS", "rebalance=cordon-prewarm"));
    let h_prewarm = handler(&prewarm_env).await;
    let tick = prewarm::adapters::kube::client(&ClusterAccess::Kubeconfig {
        path: env("PREWARM_TICK_KUBECONFIG"),
    })
    .await
    .unwrap();
    let tick_targets = Config::from_lookup(|k| (k == "PREWARM_TARGETS").then(|| targets.clone()))
        .unwrap()
        .targets;
    let settings = prewarm::core::interruption::DrainSettings {
        recheck_s: 2.0,
        ..Default::default()
    };
    let mut failures: Vec<String> = Vec::new();
    let mut cleanups: Vec<(String, Vec<String>)> = Vec::new();
    let drained = |a: &After| {
        a.pods.is_empty()
            && a.annotations
                .get("prewarm.io/drain-phase")
                .map(String::as_str)
                == Some("drained")
    };
    let untouched = |a: &After| a.annotations.is_empty() && !a.cordoned && !a.tainted;

    // The stuck-terminating case (6) starts here so that the minute after which a Terminating
    // pod counts as stuck (a fixed rule, STUCK_TERMINATING_S; the apiserver sets
    // deletionTimestamp, so it cannot be dated back) passes during cases 1-5. A node whose
    // kubelet is dead, with an ordinary pod and a pod that a finalizer keeps Terminating; its
    // drain has its own queue, so the other cases' polls do not move it on meanwhile.
    let q_stuck = queue(&sqs, "h6-stuck-").await;
    let (stuck_node, stuck_inst) = (unique("h6-stuck-"), unique("i-0abcd"));
    let (stuck_plain, stuck_held) = (format!("{stuck_node}-a"), format!("{stuck_node}-held"));
    dead_node(&admin, &stuck_node, &stuck_inst).await;
    make_pod(&admin, &stuck_plain, &stuck_node, "h6-faults").await;
    make_pod(&admin, &stuck_held, &stuck_node, "h6-faults").await;
    hold_pod(&admin, &stuck_held, true).await;
    cleanups.push((
        stuck_node.clone(),
        vec![stuck_plain.clone(), stuck_held.clone()],
    ));
    let mut stuck_env = base.clone();
    stuck_env.retain(|(k, _)| *k != "INTERRUPTION_QUEUE_URL");
    stuck_env.push(("INTERRUPTION_QUEUE_URL", &q_stuck));
    let h_stuck = handler(&stuck_env).await;
    // Issued 100 s ago: past its deadline, the drain evicts at once; the held pod goes
    // Terminating and stays so, holding the drain open until it counts as stuck.
    send(&sqs, &q_stuck, &spot_body(&stuck_inst, 100)).await;
    pump(&h_stuck, &sqs, &q_stuck).await;
    let stuck_since = std::time::Instant::now();
    let stuck_first = after(&admin, &stuck_node).await;
    let held_terminating = Api::<Pod>::namespaced(admin.clone(), NS)
        .get_opt(&stuck_held)
        .await
        .unwrap()
        .is_some_and(|p| p.metadata.deletion_timestamp.is_some());

    // ---- 1. The Lambda killed mid-drain: the claimed drain's continuation is received by an
    // invocation that dies (never answers, never deletes); the queue delivers it again after
    // its visibility timeout and that delivery finishes the drain.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    {
        let (node, inst) = fault_node(&admin, "h6-killed-", &mut cleanups).await;
        send(&sqs, &q, &spot_body(&inst, 0)).await;
        pump(&h, &sqs, &q).await; // claims: cordon, taint, lease; continuation queued
        let claimed = after(&admin, &node).await;
        let dropped = receive_some(&sqs, &q).await; // the invocation that died
        let ok = pump_until(&h, &sqs, &q, Duration::from_secs(40), || async {
            let a = after(&admin, &node).await;
            drained(&a) && !a.leases.contains(&inst)
        })
        .await;
        let a = after(&admin, &node).await;
        if !(ok && claimed.cordoned && claimed.leases.contains(&inst) && !dropped.is_empty()) {
            failures.push(format!(
                "killed mid-drain: claimed cordoned={} leased={} dropped={}; {}",
                claimed.cordoned,
                claimed.leases.contains(&inst),
                dropped.len(),
                fault_report(&admin, &node).await
            ));
        }
        // Drained: the node stays cordoned and tainted until the instance goes (legitimate).
        assert!(a.cordoned || !ok);
    }
    case_outcome(
        1,
        "killed mid-drain",
        &failures[failed_before..],
        case_start,
    );

    // ---- 2. The message dropped to the DLQ mid-drain: the owner goes silent; the tick hands the
    // drain over with a resume-drain message and the interruption function finishes it.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    {
        let (node, inst) = fault_node(&admin, "h6-dlq-", &mut cleanups).await;
        // A warning 60 s ahead: claimed and waiting (no warm capacity in the pool).
        let mut waiting_env = base.clone();
        waiting_env.retain(|(k, _)| *k != "EVICTION_BUDGET_SECONDS");
        let h_slow = handler(&waiting_env).await;
        send(&sqs, &q, &spot_body(&inst, 0)).await;
        pump(&h_slow, &sqs, &q).await;
        for (r, handle) in receive_some(&sqs, &q).await {
            send(&sqs, &dlq, r.body.as_deref().unwrap()).await;
            sqs.delete_message()
                .queue_url(&q)
                .receipt_handle(handle)
                .send()
                .await
                .unwrap();
        }
        // Silent past 4 x recheck + 60 s: the record dated back by that much.
        annotate(
            &admin,
            &node,
            &[
                ("prewarm.io/drain-last-step-at", ago(600)),
                ("prewarm.io/drain-notice-time", ago(600)),
                ("prewarm.io/drain-deadline", ago(500)),
                ("prewarm.io/drain-instance-end", ago(480)),
            ],
        )
        .await;
        let collected = tick_now(&tick, &sqs, &q, &tick_targets, &settings).await;
        let handed = collected.iter().any(|c| {
            c.node.as_deref() == Some(node.as_str())
                && c.outcome.as_ref().is_ok_and(|o| o.contains("enqueued"))
        });
        let ok = pump_until(&h, &sqs, &q, Duration::from_secs(40), || async {
            let a = after(&admin, &node).await;
            drained(&a) && !a.leases.contains(&inst)
        })
        .await;
        if !(ok && handed) {
            failures.push(format!(
                "dropped to the DLQ: handed over={handed} {collected:?}; {}",
                fault_report(&admin, &node).await
            ));
        }
    }
    case_outcome(
        2,
        "dropped to the DLQ",
        &failures[failed_before..],
        case_start,
    );

    // ---- 3. The apiserver unavailable for 60 s mid-drain (the process stopped with SIGSTOP,
    // then continued): steps fail and keep their message; once it answers, the drain finishes.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    {
        let (node, inst) = fault_node(&admin, "h6-apiserver-", &mut cleanups).await;
        let mut waiting_env = base.clone();
        waiting_env.retain(|(k, _)| *k != "EVICTION_BUDGET_SECONDS");
        waiting_env.push(("EVICTION_BUDGET_SECONDS", "90")); // deadline 30 s after the notice
        let h30 = handler(&waiting_env).await;
        send(&sqs, &q, &spot_body(&inst, 0)).await;
        pump(&h30, &sqs, &q).await;
        // The stack's own run directory (tests/stack/up exports it in .run/env).
        let pid_file = format!("{}/kube-apiserver.pid", env("STACK_RUN_DIR"));
        let pid = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .to_string();
        let signal = |s: &str| {
            std::process::Command::new("kill")
                .args([s, &pid])
                .status()
                .unwrap()
        };
        // Exclusive: waits for the other tests of this binary to finish (see APISERVER).
        let _frozen = APISERVER.write().await;
        assert!(signal("-STOP").success());
        let stopped = std::time::Instant::now();
        let mut kept_while_down = 0;
        while stopped.elapsed() < Duration::from_secs(60) {
            let got = receive(&sqs, &q).await;
            if got.is_empty() {
                continue;
            }
            let records: Vec<SqsMessage> = got.iter().map(|(r, _)| r.clone()).collect();
            let n = records.len();
            let response = h30
                .handle_batch(batch(records), SystemTime::now() + Duration::from_secs(8))
                .await;
            kept_while_down += failed_ids(&response).len().min(n);
        }
        assert!(signal("-CONT").success());
        let ok = pump_until(&h30, &sqs, &q, Duration::from_secs(90), || async {
            let a = after(&admin, &node).await;
            drained(&a) && !a.leases.contains(&inst)
        })
        .await;
        if !(ok && kept_while_down > 0) {
            failures.push(format!(
                "apiserver down 60 s: kept while down {kept_while_down}; {}",
                fault_report(&admin, &node).await
            ));
        }
    }
    case_outcome(
        3,
        "apiserver down 60 s",
        &failures[failed_before..],
        case_start,
    );

    // ---- 4. A Health notice cancelled: the closed update (new EventBridge id, same eventArn)
    // un-drains the node; the pods were never evicted.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    {
        let (node, inst) = fault_node(&admin, "h6-health-", &mut cleanups).await;
        let arn = format!(
            "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/{}",
            unique("x")
        );
        send(
            &sqs,
            &q,
            &health_notice(&inst, &unique("ev-"), &arn, "upcoming", 3_600),
        )
        .await;
        pump(&h, &sqs, &q).await;
        let claimed = after(&admin, &node).await;
        send(
            &sqs,
            &q,
            &health_notice(&inst, &unique("ev-"), &arn, "closed", 3_600),
        )
        .await;
        let ok = pump_until(&h, &sqs, &q, Duration::from_secs(30), || async {
            let a = after(&admin, &node).await;
            untouched(&a) && !a.leases.contains(&inst)
        })
        .await;
        let a = after(&admin, &node).await;
        if !(ok && claimed.cordoned && claimed.leases.contains(&inst) && a.pods.len() == 1) {
            failures.push(format!(
                "Health cancelled: claimed cordoned={} leased={}; {}",
                claimed.cordoned,
                claimed.leases.contains(&inst),
                fault_report(&admin, &node).await
            ));
        }
    }
    case_outcome(
        4,
        "Health notice cancelled",
        &failures[failed_before..],
        case_start,
    );

    // ---- 5. A rebalance that never becomes a spot warning (rebalance=cordon-prewarm): the
    // cordon expires 30 min after the notice and the node is un-drained, pods untouched. The
    // clock moving on is the notice itself dated 30 min minus EXPIRES_IN_S back: every delivery
    // of it (the claim, its continuations) carries that time, so the record cannot be back-dated
    // alone (a later delivery's newer time would replace it, as a Health update's does).
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    {
        const EXPIRES_IN_S: i64 = 8;
        let (node, inst) = fault_node(&admin, "h6-rebalance-", &mut cleanups).await;
        let notice_age =
            prewarm::core::interruption::drain::NO_DEADLINE_MAX_WAIT_S as i64 - EXPIRES_IN_S;
        let body = json!({
            "version": "0", "id": unique("ev-"), "detail-type": "EC2 Instance Rebalance Recommendation",
            "source": "aws.ec2", "account": "123456789012", "time": now_rfc3339(-notice_age),
            "region": "us-east-1", "resources": [format!("arn:aws:ec2:us-east-1a:instance/{inst}")],
            "detail": {"instance-id": inst}
        })
        .to_string();
        let expires = std::time::Instant::now() + Duration::from_secs(EXPIRES_IN_S as u64 + 1);
        send(&sqs, &q, &body).await;
        pump(&h_prewarm, &sqs, &q).await;
        let claimed = after(&admin, &node).await;
        // Whichever way it stands at the expiry (waiting for a replacement: its own continuation
        // expires it; prewarmed: no continuation, the tick hands it over and the resume-drain
        // step expires it), the node is un-drained.
        let (mut last_phase, mut ticked) = (String::new(), false);
        let mut handed = Vec::new();
        let until = std::time::Instant::now() + Duration::from_secs(40);
        let mut ok = false;
        while std::time::Instant::now() < until {
            let a = after(&admin, &node).await;
            if untouched(&a) && !a.leases.contains(&inst) {
                ok = true;
                break;
            }
            last_phase = a
                .annotations
                .get("prewarm.io/drain-phase")
                .cloned()
                .unwrap_or_default();
            if !ticked && std::time::Instant::now() >= expires {
                ticked = true;
                handed = tick_now(&tick, &sqs, &q, &tick_targets, &settings)
                    .await
                    .into_iter()
                    .filter(|c| c.node.as_deref() == Some(node.as_str()))
                    .map(|c| format!("{:?}", c.outcome))
                    .collect();
            }
            pump(&h_prewarm, &sqs, &q).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let a = after(&admin, &node).await;
        eprintln!("fault case 5: last phase before the un-drain {last_phase:?}, tick: {handed:?}");
        if !(ok && claimed.cordoned && a.pods.len() == 1) {
            failures.push(format!(
                "rebalance expired: claimed cordoned={} last phase {last_phase:?} \
                 tick {handed:?}; {}",
                claimed.cordoned,
                fault_report(&admin, &node).await
            ));
        }
    }
    case_outcome(
        5,
        "rebalance expired",
        &failures[failed_before..],
        case_start,
    );

    // ---- 6. A pod stuck in Terminating (dead kubelet, a finalizer nobody removes), set up
    // before case 1: it held the drain open at first; a minute past its deletionTimestamp it no
    // longer does, and the drain ends with the ordinary pod evicted and the stuck one left.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    {
        let stuck_after =
            Duration::from_secs_f64(prewarm::core::interruption::pods::STUCK_TERMINATING_S + 2.0);
        if let Some(left) = stuck_after.checked_sub(stuck_since.elapsed()) {
            tokio::time::sleep(left).await;
        }
        let held_open = stuck_first.cordoned
            && stuck_first
                .annotations
                .get("prewarm.io/drain-phase")
                .map(String::as_str)
                != Some("drained")
            && held_terminating;
        let ok = pump_until(
            &h_stuck,
            &sqs,
            &q_stuck,
            Duration::from_secs(30),
            || async {
                let a = after(&admin, &stuck_node).await;
                drained(&a) && !a.leases.contains(&stuck_inst)
            },
        )
        .await;
        let still_held = Api::<Pod>::namespaced(admin.clone(), NS)
            .get_opt(&stuck_held)
            .await
            .unwrap()
            .is_some();
        if !(ok && held_open && still_held) {
            failures.push(format!(
                "stuck terminating: held the drain open at first={held_open} (phase {:?}, \
                 terminating={held_terminating}); stuck pod still there={still_held}; {}",
                stuck_first.annotations.get("prewarm.io/drain-phase"),
                fault_report(&admin, &stuck_node).await
            ));
        }
    }
    case_outcome(
        6,
        "stuck-terminating pod",
        &failures[failed_before..],
        case_start,
    );

    // ---- 7. A PDB that blocks for longer than the queue's whole receive budget
    // (maxReceiveCount 2, visibility 2 s): the drain keeps going on its own continuations (each
    // delivery's receive count stays 1), none reaches the DLQ; the node stays cordoned and the
    // pod running while blocked (a drain legitimately running). Once the budget allows, the
    // drain evicts and ends, and its lease is given back.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    {
        let pdb_dlq = queue(&sqs, "h6-pdb-dlq-").await;
        let q_pdb = redrive_queue(&sqs, "h6-pdb-", &pdb_dlq, 2).await;
        let (node, inst) = (unique("h6-pdb-"), unique("i-0abcd"));
        pool_node(&admin, &node, &inst).await;
        let (pod, app) = (format!("{node}-a"), unique("h6-guarded-"));
        make_pod(&admin, &pod, &node, &app).await;
        cleanups.push((node.clone(), vec![pod]));
        let pdb_name = format!("{node}-pdb");
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": pdb_name, "namespace": NS},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}}
        }))
        .unwrap();
        let pdbs = Api::<PodDisruptionBudget>::namespaced(admin.clone(), NS);
        pdbs.create(&PostParams::default(), &pdb).await.unwrap();
        let mut pdb_env = base.clone();
        pdb_env.retain(|(k, _)| *k != "INTERRUPTION_QUEUE_URL");
        pdb_env.push(("INTERRUPTION_QUEUE_URL", &q_pdb));
        let h_pdb = handler(&pdb_env).await;
        send(&sqs, &q_pdb, &spot_body(&inst, 100)).await;
        // Three times the receive budget in deliveries.
        let mut delivered = 0;
        let until = std::time::Instant::now() + Duration::from_secs(40);
        while delivered < 6 && std::time::Instant::now() < until {
            delivered += pump(&h_pdb, &sqs, &q_pdb).await;
        }
        let blocked = after(&admin, &node).await;
        let (in_dlq, carried) = (
            queue_total(&sqs, &pdb_dlq).await,
            queue_total(&sqs, &q_pdb).await,
        );
        let blocked_events = Api::<CoreEvent>::all(admin.clone())
            .list(&ListParams::default().fields(&format!(
                "involvedObject.name={node},reason=DrainBlockedByPDB"
            )))
            .await
            .map(|l| l.items.len())
            .unwrap_or(0);
        eprintln!(
            "fault case 7: {delivered} deliveries while blocked; lease held {}",
            blocked.leases.contains(&inst)
        );
        pdbs.delete(&pdb_name, &DeleteParams::default())
            .await
            .unwrap();
        let ok = pump_until(&h_pdb, &sqs, &q_pdb, Duration::from_secs(30), || async {
            let a = after(&admin, &node).await;
            drained(&a) && !a.leases.contains(&inst)
        })
        .await;
        let in_dlq_after = queue_total(&sqs, &pdb_dlq).await;
        if !(ok
            && delivered >= 6
            && in_dlq + in_dlq_after == 0
            && carried == 1
            && blocked.cordoned
            && blocked.pods.len() == 1
            && blocked_events > 0)
        {
            failures.push(format!(
                "PDB past the receive budget: {delivered} deliveries, DLQ {in_dlq}+{in_dlq_after}, \
                 carried on by {carried} message(s), cordoned={} pods {:?}, \
                 DrainBlockedByPDB Events {blocked_events}; {}",
                blocked.cordoned,
                blocked.pods,
                fault_report(&admin, &node).await
            ));
        }
        let _ = sqs.delete_queue().queue_url(&q_pdb).send().await;
        let _ = sqs.delete_queue().queue_url(&pdb_dlq).send().await;
    }
    case_outcome(
        7,
        "PDB past the receive budget",
        &failures[failed_before..],
        case_start,
    );

    // ---- 8. Three nodes reclaimed at once with room for one replacement at a time (a pool of
    // its own whose one spare node has a single free GPU; each drain's placeholder asks for the
    // GPU of its node's one pod): never two placeholders run at once; each drain evicts only
    // after its own placeholder ran, and the next one's runs only after that hand-over (the
    // evicted pods here have no controller, so no successor takes the freed room; with one, the
    // others wait for Karpenter or their deadlines); all three end before their deadlines and
    // nothing stays leased.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    // Boxed: this case's state is the largest of the matrix, and inline it overflowed the
    // test thread's 2 MiB stack in a debug build.
    Box::pin(async {
        let pool = unique("h6-three-");
        let three_targets = json!([{
            "name": "three", "nodePool": pool, "maxSpare": 4, "gpusPerReplica": 1,
            "headroom": {"kind": "balloon", "namespace": BALLOON_NS, "name": "h6-no-balloon"},
            "selector": "model_name=\"three\"",
        }])
        .to_string();
        let q3 = queue(&sqs, "h6-three-").await;
        // A warning's own 120 s with the default 30 s budget: deadlines 90 s after the notice.
        let h3 = handler(&[
            ("INTERRUPTION_QUEUE_URL", q3.as_str()),
            ("PREWARM_TARGETS", three_targets.as_str()),
        ])
        .await;
        // Every node has one GPU: the reclaimed ones are full (no placeholder lands on a node
        // whose claim comes a moment later), the spare one is the room for one replacement.
        let mut reclaimed = Vec::new();
        for k in 0..3 {
            let (node, inst) = (format!("{pool}-{k}"), unique("i-0abcd"));
            make_node(&admin, &node, &inst).await;
            label(&admin, &node, json!({"karpenter.sh/nodepool": pool})).await;
            reclaimed.push((node, inst));
        }
        let spare = format!("{pool}-spare");
        make_node(&admin, &spare, &unique("i-0cccc")).await;
        label(&admin, &spare, json!({"karpenter.sh/nodepool": pool})).await;
        // kwok's node-ready stage (NODE_READY_DELAY after the node appears) writes the status
        // from the copy it saw then: a single GPU patched before it ran was once overwritten with
        // make_node's 4 (all three placeholders then fit the spare at once). So the one GPU is
        // written once every node is Ready, and read back.
        let nodes_api = Api::<Node>::all(admin.clone());
        let one = json!({"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "1"});
        let all: Vec<String> = reclaimed
            .iter()
            .map(|(n, _)| n.clone())
            .chain([spare.clone()])
            .collect();
        for node in &all {
            common::write_capacity_once_ready(&nodes_api, node, &one).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        for node in &all {
            let n = nodes_api.get(node).await.unwrap();
            let gpus = n
                .status
                .and_then(|s| s.allocatable)
                .and_then(|a| a.get("nvidia.com/gpu").map(|q| q.0.clone()));
            assert_eq!(gpus.as_deref(), Some("1"), "{node} kept one GPU");
        }
        for (node, _) in &reclaimed {
            let pod = format!("{node}-a");
            make_pod(&admin, &pod, node, "h6-three").await;
            cleanups.push((node.clone(), vec![pod]));
        }
        cleanups.push((spare.clone(), Vec::new()));
        for (_, inst) in &reclaimed {
            send(&sqs, &q3, &spot_body(inst, 0)).await;
        }
        let running_placeholders = || async {
            Api::<Pod>::all(admin.clone())
                .list(&ListParams::default().labels("prewarm.io/replacement-for"))
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(spare.as_str())
                })
                .count()
        };
        let mut most_at_once = 0;
        let until = std::time::Instant::now() + Duration::from_secs(80);
        let mut all_done = false;
        while std::time::Instant::now() < until {
            most_at_once = most_at_once.max(running_placeholders().await);
            let mut done = true;
            for (node, inst) in &reclaimed {
                let a = after(&admin, node).await;
                done &= drained(&a) && !a.leases.contains(inst);
            }
            if done {
                all_done = true;
                break;
            }
            pump(&h3, &sqs, &q3).await;
        }
        // (ready, first eviction, deadline) of each drain, in the order they became ready.
        let mut milestones: Vec<(String, f64, f64, f64)> = Vec::new();
        for (node, _) in &reclaimed {
            let a = after(&admin, node).await.annotations;
            let at = |k: &str| {
                a.get(k)
                    .and_then(|v| chrono::DateTime::parse_from_rfc3339(v).ok())
                    .map_or(f64::NAN, |t| t.timestamp_millis() as f64 / 1000.0)
            };
            milestones.push((
                node.clone(),
                at("prewarm.io/drain-replacement-ready-at"),
                at("prewarm.io/drain-evicting-since"),
                at("prewarm.io/drain-deadline"),
            ));
        }
        milestones.sort_by(|x, y| x.1.total_cmp(&y.1));
        let each_before = milestones
            .iter()
            .all(|(_, ready, evict, deadline)| ready <= evict && evict < deadline);
        // The next drain's placeholder could run only once the previous one was handed over.
        let one_at_a_time = milestones.windows(2).all(|w| w[1].1 >= w[0].2);
        eprintln!("fault case 8: milestones {milestones:?}; most placeholders running at once {most_at_once}");
        let left = queue_total(&sqs, &q3).await;
        if !(all_done && each_before && one_at_a_time && most_at_once <= 1 && left == 0) {
            let mut reports = Vec::new();
            for (node, _) in &reclaimed {
                reports.push(fault_report(&admin, node).await);
            }
            failures.push(format!(
                "three at once: all drained={all_done} messages left {left} each ready<=evict<deadline={each_before} \
                 one at a time={one_at_a_time} most running at once={most_at_once} \
                 {milestones:?}\n{}",
                reports.join("\n")
            ));
        }
        let _ = sqs.delete_queue().queue_url(&q3).send().await;
    })
    .await;
    case_outcome(
        8,
        "three at once, room for one",
        &failures[failed_before..],
        case_start,
    );

    // Deliveries still queued (a closed notice's continuation, a resume message) are handled and
    // must leave every node as the cases left it: nothing drains again.
    let (case_start, failed_before) = (std::time::Instant::now(), failures.len());
    let settled: Vec<(String, After)> = {
        let mut v = Vec::new();
        for (node, _) in &cleanups {
            v.push((node.clone(), after(&admin, node).await));
        }
        v
    };
    // At least 8 s, and on until both queues are empty: a delivery still invisible (a
    // continuation's delay, a retried record's visibility) is handled, not counted as left
    // over; one that keeps coming back for 90 s is left over (it would loop forever).
    let quiet = std::time::Instant::now() + Duration::from_secs(8);
    let give_up = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        pump(&h_prewarm, &sqs, &q).await;
        pump(&h_stuck, &sqs, &q_stuck).await;
        let now = std::time::Instant::now();
        let empty = queue_total(&sqs, &q).await + queue_total(&sqs, &q_stuck).await == 0;
        if (now >= quiet && empty) || now >= give_up {
            break;
        }
    }
    for (node, before) in &settled {
        let now = after(&admin, node).await;
        if (now.cordoned, now.tainted, &now.annotations)
            != (before.cordoned, before.tainted, &before.annotations)
        {
            failures.push(format!(
                "{node} changed after its case ended: {}",
                fault_report(&admin, node).await
            ));
        }
    }
    case_outcome(
        9,
        "nothing drains again",
        &failures[failed_before..],
        case_start,
    );
    let leftover = queue_total(&sqs, &q).await + queue_total(&sqs, &q_stuck).await;
    let leftover_bodies: Vec<String> = if leftover > 0 {
        let mut v = Vec::new();
        for queue in [&q, &q_stuck] {
            v.push(format!("{queue}: {:?}", queue_counts(&sqs, queue).await));
            for (m, _) in receive(&sqs, queue).await {
                v.push(format!(
                    "{queue}: {} attributes {:?} system {:?}",
                    m.body.unwrap_or_default(),
                    m.message_attributes,
                    m.attributes
                ));
            }
        }
        v
    } else {
        Vec::new()
    };
    hold_pod(&admin, &stuck_held, false).await;
    for (node, pods) in &cleanups {
        let pods: Vec<&str> = pods.iter().map(String::as_str).collect();
        cleanup(&admin, node, &pods, None).await;
    }
    let _ = sqs.delete_queue().queue_url(&q).send().await;
    let _ = sqs.delete_queue().queue_url(&dlq).send().await;
    let _ = sqs.delete_queue().queue_url(&q_stuck).send().await;
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert_eq!(
        leftover, 0,
        "messages left on the queue 90 s after every drain ended (counts, then the visible ones: {leftover_bodies:?})"
    );
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
    let _alone = CLUSTER_WIDE.lock().await;
    let _apiserver_up = APISERVER.read().await;
    use prewarm::adapters::kube::drain::collect;
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

    // The waiting drain's node goes away (instance reclaimed): the tick collects its lease, as
    // its own user (its RBAC lists pods in the balloon namespaces only) with the targets.
    nodes.delete(loser, &DeleteParams::default()).await.unwrap();
    let tick = prewarm::adapters::kube::client(&ClusterAccess::Kubeconfig {
        path: env("PREWARM_TICK_KUBECONFIG"),
    })
    .await
    .unwrap();
    let target_specs: Vec<prewarm::core::spec::TargetSpec> =
        serde_json::from_str(&targets).unwrap();
    let settings = DrainSettings {
        recheck_s: 2.0,
        ..DrainSettings::default()
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    // A gone node's lease is released by the tick itself: nothing is handed over (no queue).
    let sqs_client = sqs().await;
    let handover = collect::Handover {
        sqs: &sqs_client,
        queue_url: "http://127.0.0.1:9/unused",
    };
    let collected = collect::collect(&tick, &handover, &target_specs, &settings, now)
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
    // The tick could list the placeholders (a 403 here once left every placeholder to its lease).
    assert!(
        !collected
            .iter()
            .any(|c| matches!(&c.outcome, Err(e) if e.contains("placeholders"))),
        "{collected:?}"
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
