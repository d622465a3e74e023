//! A drain's replacement placeholder on the stack's real kube-apiserver, made as the
//! `prewarm-lambda` user, and the node the kwok Karpenter provider launches for it: the node must
//! satisfy the required node affinity of every pod the placeholder stands for (their AND), not
//! only the NodePool. The draining node and its pods are objects in memory (`request` only reads
//! them); the placeholder, Karpenter's NodeClaim and the node are real.
//!
//! Why the node type tells: two pods of 1 GPU each make a 2-GPU placeholder. The NodePool `gpu`
//! offers 4-GPU g5.12xlarge from $2.25 and g6e.12xlarge from $4.38 (tests/stack/instance-types.json),
//! so without the pods' affinity Karpenter launches the cheaper g5.12xlarge; one pod requires
//! g6e.12xlarge and the other zone us-east-1b or us-east-1c.
//!
//! Run: `. tests/stack/.run/env && cargo test --test placeholder_stack -- --include-ignored`

use std::time::Duration;

use aws_lambda_events::event::sqs::SqsMessage;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use prewarm::adapters::events::parse_record;
use prewarm::adapters::kube::drain::pod_view;
use prewarm::adapters::kube::drain::replacement::{release, request, DrainContext, Requested};
use prewarm::adapters::kube::shape::placeholder::{placeholder_name, PlaceholderSettings};
use prewarm::config::Config;
use prewarm::core::TargetSpec;
use prewarm::handlers::interruption::{Continuation, Interruption};
use serde_json::json;

mod common;
use common::{as_user, env, now};

/// The balloon namespace of the stack fixtures.
const NS: &str = "prewarm";
const TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// A pod of the draining node: 1 GPU, tolerating the pool's GPU taint, with `required` as its
/// required node affinity terms.
fn pod(name: &str, node: &str, required: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "inference", "labels": {"app": "llama"}},
        "spec": {
            "nodeName": node,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": required}}},
            "containers": [{"name": "vllm", "image": "registry.k8s.io/pause:3.10", "resources": {
                "requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
                "limits": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Running"}
    }))
    .unwrap()
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn karpenter_launches_a_node_every_moved_pod_may_use() {
    let admin = as_user("KUBECONFIG").await;
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    let suffix = std::process::id();
    let drain_id = format!("placeholder-shape-{suffix}");
    let node_name = format!("reclaimed-{suffix}");
    let draining: Node = serde_json::from_value(json!({"metadata": {"name": node_name, "labels": {
        "karpenter.sh/nodepool": "gpu", TYPE_LABEL: "g5.xlarge", ZONE_LABEL: "us-east-1a"}}}))
    .unwrap();
    let pods = [
        pod(
            "llama-0",
            &node_name,
            json!([{"matchExpressions": [
                {"key": TYPE_LABEL, "operator": "In", "values": ["g6e.12xlarge"]}]}]),
        ),
        pod(
            "llama-1",
            &node_name,
            json!([{"matchExpressions": [
                {"key": ZONE_LABEL, "operator": "In", "values": ["us-east-1b", "us-east-1c"]}]}]),
        ),
    ];
    let targets: Vec<TargetSpec> = serde_json::from_value(json!([{
        "name": "placeholder-shape", "nodePool": "gpu", "maxSpare": 1,
        "headroom": {"kind": "balloon", "namespace": NS, "name": "none"}}]))
    .unwrap();

    let settings = PlaceholderSettings::default();
    let drain = DrainContext {
        drain_id: &drain_id,
        now: now(),
        event_id: "ev-shape",
        targets: &targets,
        placeholder: &settings,
    };
    let requested = request(
        &lambda,
        &drain,
        &draining,
        &pods,
        &pods.iter().map(|p| pod_view(p).pod).collect::<Vec<_>>(),
        now() + 600.0,
        2,
    )
    .await
    .expect("request");
    assert!(
        matches!(requested, Requested::Placeholder { created: true, .. }),
        "{requested:?}"
    );

    // Karpenter launches a node; kwok makes it Ready after NODE_READY_DELAY; the scheduler binds.
    let api: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let name = placeholder_name(&drain_id);
    let mut bound = None;
    for _ in 0..120 {
        let p = api.get(&name).await.expect("the placeholder exists");
        let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        if let (true, Some(host)) = (running, p.spec.as_ref().and_then(|s| s.node_name.clone())) {
            bound = Some((p, host));
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (placeholder, host) = bound.expect("the placeholder runs within 120 s");
    let node = Api::<Node>::all(admin.clone()).get(&host).await.unwrap();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let released = release(&lambda, &targets, Some("gpu"), &drain_id).await;

    // The copied requirement, as the apiserver stored it: one term, the AND of both pods'.
    let affinity = serde_json::to_value(
        placeholder
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
        json!({"nodeSelectorTerms": [{"matchExpressions": [
            {"key": TYPE_LABEL, "operator": "In", "values": ["g6e.12xlarge"]},
            {"key": ZONE_LABEL, "operator": "In", "values": ["us-east-1b", "us-east-1c"]}]}]})
    );
    // The node satisfies both pods' requirements (and is the pool's).
    assert_eq!(
        labels.get("karpenter.sh/nodepool").map(String::as_str),
        Some("gpu")
    );
    assert_eq!(
        labels.get(TYPE_LABEL).map(String::as_str),
        Some("g6e.12xlarge"),
        "{labels:?}"
    );
    let zone = labels.get(ZONE_LABEL).map(String::as_str);
    assert!(
        matches!(zone, Some("us-east-1b" | "us-east-1c")),
        "{labels:?}"
    );
    assert!(released.iter().all(Result::is_ok), "{released:?}");
}

/// A kwok-managed node of `pool` whose providerID names `instance`, with one CPU/memory-only pod
/// (4 cores, 8 GiB) on it.
async fn cpu_node(admin: &kube::Client, name: &str, instance: &str, pool: &str) {
    let resources = json!({"cpu": "16", "memory": "64Gi", "pods": "110"});
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                     "labels": {"kubernetes.io/hostname": name, "type": "kwok",
                                "karpenter.sh/nodepool": pool, "prewarm-test": "placeholder"}},
        "spec": {"providerID": format!("aws:///us-east-1a/{instance}")}
    }))
    .unwrap();
    let nodes = Api::<Node>::all(admin.clone());
    nodes.create(&PostParams::default(), &node).await.unwrap();
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"capacity": resources, "allocatable": resources}})),
        )
        .await
        .unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-api"), "namespace": "inference"},
        "spec": {"nodeName": name, "terminationGracePeriodSeconds": 0,
                 "tolerations": [{"operator": "Exists"}],
                 "containers": [{"name": "api", "image": "registry.k8s.io/pause:3.10",
                     "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}]}
    }))
    .unwrap();
    Api::<Pod>::namespaced(admin.clone(), "inference")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
}

fn spot_record(instance: &str) -> SqsMessage {
    let body = json!({
        "version": "0", "id": format!("ev-{instance}"), "source": "aws.ec2",
        "detail-type": "EC2 Spot Instance Interruption Warning", "account": "123456789012",
        "time": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "region": "us-east-1", "resources": [format!("arn:aws:ec2:us-east-1a:instance/{instance}")],
        "detail": {"instance-id": instance, "instance-action": "terminate"}
    });
    serde_json::from_value(json!({
        "messageId": format!("m-{instance}"), "receiptHandle": "rh", "body": body.to_string(),
        "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
        "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
        "awsRegion": "us-east-1"
    }))
    .unwrap()
}

/// The pod is still on its node and not terminating.
async fn still_serving(admin: &kube::Client, pod: &str) -> bool {
    Api::<Pod>::namespaced(admin.clone(), "inference")
        .get_opt(pod)
        .await
        .unwrap()
        .is_some_and(|p| p.metadata.deletion_timestamp.is_none())
}

/// A fresh spot warning for two nodes whose only pod requests CPU and memory: in a pool a target
/// manages, the drain makes a placeholder of the pod's size and keeps the pod serving while it
/// waits; in a pool no target manages, no placeholder can be made and the pod is evicted at once.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_cpu_only_drain_waits_for_a_placeholder_only_where_one_can_be_made() {
    let admin = as_user("KUBECONFIG").await;
    let suffix = std::process::id();
    let (managed_pool, other_pool) = (format!("ph-cpu-{suffix}"), format!("ph-none-{suffix}"));
    let (managed, other) = (format!("ph-cpu-a-{suffix}"), format!("ph-cpu-b-{suffix}"));
    let (managed_i, other_i) = (format!("i-0c{suffix:014x}a"), format!("i-0c{suffix:014x}b"));
    cpu_node(&admin, &managed, &managed_i, &managed_pool).await;
    cpu_node(&admin, &other, &other_i, &other_pool).await;
    let targets = json!([{"name": "cpu", "nodePool": managed_pool, "maxSpare": 1,
        "headroom": {"kind": "balloon", "namespace": NS, "name": "none"}}])
    .to_string();
    let vars: std::collections::HashMap<&str, String> = [
        ("KUBECONFIG", env("PREWARM_LAMBDA_KUBECONFIG")),
        ("PREWARM_TARGETS", targets),
    ]
    .into();
    let config = Config::from_lookup(|k| vars.get(k).cloned()).unwrap();
    let h = Interruption::from_config(&config).await.unwrap();

    let mut outcomes = Vec::new();
    for instance in [&managed_i, &other_i] {
        let parsed = parse_record(&spot_record(instance));
        outcomes.push(h.handle_record(&parsed, &Continuation::default()).await);
    }
    let managed_serving = still_serving(&admin, &format!("{managed}-api")).await;
    let other_serving = still_serving(&admin, &format!("{other}-api")).await;
    let placeholder = Api::<Pod>::namespaced(admin.clone(), NS)
        .get_opt(&placeholder_name(&managed_i))
        .await
        .unwrap();
    let none_for_other = Api::<Pod>::namespaced(admin.clone(), NS)
        .get_opt(&placeholder_name(&other_i))
        .await
        .unwrap()
        .is_none();

    // Clean up before asserting.
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    let released = release(&lambda, &[], None, &managed_i).await;
    let gone = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for n in [&managed, &other] {
        let _ = Api::<Pod>::namespaced(admin.clone(), "inference")
            .delete(&format!("{n}-api"), &gone)
            .await;
        let _ = Api::<Node>::all(admin.clone()).delete(n, &gone).await;
    }

    assert!(
        managed_serving,
        "the managed pool's pod waits for its placeholder: {outcomes:?}"
    );
    let placeholder = placeholder.expect("a placeholder for the managed pool's drain");
    let requests = placeholder.spec.unwrap().containers[0]
        .resources
        .clone()
        .unwrap()
        .requests
        .unwrap();
    // The pod's size (the apiserver canonicalises the quantities' spelling).
    let value = |k: &str| prewarm::adapters::kube::hpa::parse_quantity(&requests[k].0);
    assert_eq!(value("cpu"), Some(4.0));
    assert_eq!(value("memory"), Some((8u64 << 30) as f64));
    assert!(
        !other_serving,
        "no placeholder can be made: evicted at once: {outcomes:?}"
    );
    assert!(none_for_other);
    assert!(released.iter().all(Result::is_ok), "{released:?}");
}

/// A namespace enforcing the `restricted` Pod Security Standard (what the install docs tell users
/// to put on the balloon namespaces) admits the placeholder as prewarm builds it, and refuses the
/// same pod without its securityContext: the apiserver's PodSecurity admission is on, so the
/// first half is not vacuous. Server-side dry runs as the admin: nothing is left behind but the
/// namespace, which is deleted.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_restricted_namespace_admits_the_placeholder() {
    use k8s_openapi::api::core::v1::Namespace;
    use prewarm::adapters::kube::shape::placeholder::{placeholder_for, placeholder_pod};
    let admin = as_user("KUBECONFIG").await;
    let ns_name = format!("pss-restricted-{}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": ns_name, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted"}}}))
    .unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let draining: Node = serde_json::from_value(json!({"metadata": {"name": "n", "labels": {
        "karpenter.sh/nodepool": "gpu", TYPE_LABEL: "g5.xlarge", ZONE_LABEL: "us-east-1a"}}}))
    .unwrap();
    let moved = pod(
        "llama-0",
        "n",
        json!([{"matchExpressions": [
        {"key": ZONE_LABEL, "operator": "In", "values": ["us-east-1b"]}]}]),
    );
    let shape = placeholder_for(
        &draining,
        "gpu",
        &[&moved],
        "pss-check",
        "ev-pss",
        &ns_name,
        &PlaceholderSettings::default(),
        now() + 600.0,
    );
    let object: Pod = serde_json::from_value(placeholder_pod(&shape)).unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns_name);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let admitted = pods.create(&dry, &object).await;
    let mut bare = object.clone();
    if let Some(spec) = bare.spec.as_mut() {
        spec.security_context = None;
        for c in &mut spec.containers {
            c.security_context = None;
        }
    }
    let refused = pods.create(&dry, &bare).await;
    namespaces
        .delete(&ns_name, &DeleteParams::default())
        .await
        .unwrap();
    admitted.expect("the placeholder complies with restricted");
    match refused {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403, "{s:?}");
            assert!(s.message.contains("PodSecurity"), "{}", s.message);
        }
        other => panic!("a pod without securityContext was not refused: {other:?}"),
    }
}
