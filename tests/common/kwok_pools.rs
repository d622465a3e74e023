//! Karpenter NodePools of the kwok provider for the stack tests that need a pool of their own
//! (the limits room, the production-timing drain), and the waits they share.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use prewarm::adapters::kube::nodepool::limits::SAVED_LIMITS;
use prewarm::adapters::kube::resources::node_pool;
use serde_json::{json, Value};

/// A name unique enough for one stack: `prefix` and 8 hex digits of the clock.
pub fn unique_hex(prefix: &str) -> String {
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}{:08x}", n & 0xffff_ffff)
}

/// A NodePool of the kwok provider: g5.12xlarge only (4 GPUs, 48 cpu, 192Gi), on-demand, never
/// consolidated (nodes go only when the test says), tainted with `taint` (so only the test's
/// pods land there), with the user's `limits`.
pub fn gpu_pool(name: &str, limits: &Value, taint: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g5.12xlarge"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
                ],
                "taints": [{"key": taint, "value": "true", "effect": "NoSchedule"}],
                "expireAfter": "Never"
            }},
            "limits": limits,
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}
        }
    })
}

/// A balloon Deployment `name` in `ns` of no replicas whose pods would land on no node.
pub fn balloon(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "priorityClassName": "prewarm-balloon",
                    "nodeSelector": {"prewarm.io/kube-test-never": "true"},
                    "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]
                }
            }
        }
    })
}

/// What a tick test's target names, made fresh: the namespace `ns`, a NodePool `pool` (room for
/// 1000 cpu, tainted `taint`) and the empty balloon `balloon_name` in `ns`.
pub async fn namespace_pool_and_balloon(
    client: &kube::Client,
    ns: &str,
    pool: &str,
    taint: &str,
    balloon_name: &str,
) {
    let created = PostParams::default();
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&created, &namespace)
        .await
        .unwrap();
    let p: DynamicObject =
        serde_json::from_value(gpu_pool(pool, &json!({"cpu": "1000"}), taint)).unwrap();
    pools(client).create(&created, &p).await.unwrap();
    let b: Deployment = serde_json::from_value(balloon(ns, balloon_name)).unwrap();
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&created, &b)
        .await
        .unwrap();
}

/// Deletes what `namespace_pool_and_balloon` made (the pool's nodes go with it).
pub async fn delete_namespace_and_pool(client: &kube::Client, ns: &str, pool: &str) {
    let _ = pools(client).delete(pool, &DeleteParams::default()).await;
    let _ = Api::<Namespace>::all(client.clone())
        .delete(ns, &DeleteParams::default())
        .await;
}

pub fn pools(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &node_pool())
}

/// The NodePool's `spec.limits` and its saved-limits annotation, as `client` reads them.
pub async fn limits_of(client: &kube::Client, pool: &str) -> (Value, Option<String>) {
    let p = pools(client).get(pool).await.unwrap();
    let saved = p
        .metadata
        .annotations
        .unwrap_or_default()
        .get(SAVED_LIMITS)
        .cloned();
    (p.data["spec"]["limits"].clone(), saved)
}

/// Waits up to `timeout` for `check` to give Some, looking once a second.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            start.elapsed() < timeout,
            "gave up waiting for {what} after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(1_000)).await;
    }
}
