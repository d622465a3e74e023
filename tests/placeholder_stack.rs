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

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use prewarm::adapters::kube::client;
use prewarm::adapters::kube::drain::placeholder::{placeholder_name, PlaceholderSettings};
use prewarm::adapters::kube::drain::replacement::{release, request, Requested};
use prewarm::config::ClusterAccess;
use prewarm::core::TargetSpec;
use serde_json::json;

/// The balloon namespace of the stack fixtures.
const NS: &str = "prewarm";
const TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: source tests/stack/.run/env"))
}

async fn as_user(var: &str) -> kube::Client {
    client(&ClusterAccess::Kubeconfig { path: env(var) })
        .await
        .expect("client")
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

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

    let requested = request(
        &lambda,
        &targets,
        &draining,
        &pods,
        &drain_id,
        "ev-shape",
        now() + 600.0,
        2,
        &PlaceholderSettings::default(),
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
