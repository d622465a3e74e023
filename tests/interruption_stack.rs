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
use prewarm::handlers::interruption::{Interruption, RecordOutcome};
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
    vars.insert("RECHECK_SECONDS".into(), "5".into());
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

/// Runs checks of one record until it finishes (or `max` checks); the message would come back
/// after its visibility each time, here the loop stands in for SQS.
async fn run_until_done(h: &Interruption, record: &SqsMessage, max: usize) -> Vec<RecordOutcome> {
    let parsed = parse_record(record);
    let mut outcomes = Vec::new();
    for _ in 0..max {
        let o = h.handle_record(&parsed).await;
        let done = matches!(o, RecordOutcome::Delete { .. });
        outcomes.push(o);
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    outcomes
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_spot_warning_past_its_deadline_cordons_taints_evicts_and_finishes() {
    let admin = admin().await;
    ensure_namespace(&admin).await;
    let (node, instance) = (unique("h6-drain-"), unique("i-0a6ff"));
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
    let (node, instance) = (unique("h6-pdb-"), unique("i-0a6ff"));
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
    let first = h.handle_record(&parsed).await;
    let second = h.handle_record(&parsed).await;

    let events = Api::<CoreEvent>::all(admin.clone())
        .list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
        .await
        .unwrap()
        .items;
    let still_there = pods_left(&admin, &node).await;
    cleanup(&admin, &node, &[&pod], Some(&pdb_name)).await;

    for o in [&first, &second] {
        assert!(matches!(o, RecordOutcome::Later { .. }), "{o:?}");
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

    let foreign = parse_record(&spot_record(&unique("i-0f0ff"), &unique("ev-"), 5));
    match h.handle_record(&foreign).await {
        RecordOutcome::Delete { reason } => {
            assert!(reason.contains("not in this cluster"), "{reason}")
        }
        other => panic!("{other:?}"),
    }

    // The same notice delivered twice at once, on a fresh warning (deadline 85 s ahead, no warm
    // capacity): both copies agree, neither evicts, the node is claimed once.
    let (node, instance) = (unique("h6-dup-"), unique("i-0a6ff"));
    let pod = format!("{node}-a");
    make_node(&admin, &node, &instance).await;
    make_pod(&admin, &pod, &node, "h6-dup").await;
    let event_id = unique("ev-");
    let a = parse_record(&spot_record(&instance, &event_id, 5));
    let b = parse_record(&spot_record(&instance, &event_id, 5));
    let (oa, ob) = tokio::join!(h.handle_record(&a), h.handle_record(&b));
    let oc = h.handle_record(&a).await;
    let n = Api::<Node>::all(admin.clone()).get(&node).await.unwrap();
    let left = pods_left(&admin, &node).await;
    cleanup(&admin, &node, &[&pod], None).await;

    for o in [&oa, &ob, &oc] {
        assert!(matches!(o, RecordOutcome::Later { .. }), "{o:?}");
    }
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
