//! Fixtures shared by the stack-gated test binaries (`tests/*_stack.rs`, each `mod common;`).
// Each binary uses a part of them.
#![allow(dead_code)]

use std::time::{Duration, Instant};

pub mod kwok_pools;
pub mod prometheus_backfill;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};

/// Fails naming the setting unless the stack was brought up with kwok's nodes Ready after 30 s
/// (`tests/stack/up` exports NODE_READY_DELAY_MS): the tests in a `boot_30s` module are timed
/// for it, and on another stack they must fail, never pass. `needs` says which tests and how to
/// get such a stack.
pub fn assert_30s_stack(needs: &str) {
    assert_eq!(
        std::env::var("NODE_READY_DELAY_MS").as_deref(),
        Ok("30000"),
        "kwok's nodes must be Ready after 30 s for {needs}"
    );
}

/// Writes `capacity` as the node's capacity and allocatable once kwok has made it Ready, and
/// writes it again until it holds.
/// kwok renders a node stage from the copy of the node it saw when the stage was queued, so a
/// stage queued before the write can land after it and put the old capacity back. Waiting for
/// Ready first was not enough: fault-matrix case 8 once read 4 GPUs back 1 s after writing 1 to
/// a Ready node (2026-12-01, the kwok log of that run was not kept). Earlier, without the wait,
/// the limits-room test got 16Gi instead of 128Gi. So the value counts as written only once two
/// reads a second apart show it.
pub async fn write_capacity_once_ready(nodes: &Api<Node>, node: &str, capacity: &Value) {
    let ready_by = Instant::now() + Duration::from_secs(90);
    while !is_ready(&nodes.get(node).await.unwrap()) {
        assert!(Instant::now() < ready_by, "kwok never made {node} Ready");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let held_by = Instant::now() + Duration::from_secs(60);
    loop {
        nodes
            .patch_status(
                node,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"capacity": capacity, "allocatable": capacity}})),
            )
            .await
            .unwrap();
        let mut held = 0;
        while held < 2 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if !has_capacity(&nodes.get(node).await.unwrap(), capacity) {
                break;
            }
            held += 1;
        }
        if held == 2 {
            return;
        }
        assert!(
            Instant::now() < held_by,
            "kwok kept writing another capacity over {node}'s"
        );
    }
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Every resource of `capacity` is in the node's capacity and allocatable as written.
fn has_capacity(node: &Node, capacity: &Value) -> bool {
    let Some(status) = node.status.as_ref() else {
        return false;
    };
    let wanted = capacity.as_object().expect("capacity is an object");
    [&status.capacity, &status.allocatable].iter().all(|list| {
        wanted
            .iter()
            .all(|(k, v)| list.as_ref().and_then(|l| l.get(k)).map(|q| q.0.as_str()) == v.as_str())
    })
}

/// A variable of the running stack's environment, or a panic that says how to get it.
/// The tick's configuration as the stack's prewarm-lambda user, on the stack's Prometheus and
/// interruption queue, with `settings` (name, value) over those.
pub fn tick_config(settings: &[(&str, String)]) -> prewarm::config::Config {
    let stack = [
        ("METRIC_SOURCE", "prometheus".to_string()),
        ("PROMETHEUS_URL", env("PROMETHEUS_URL")),
        ("KUBECONFIG", env("PREWARM_LAMBDA_KUBECONFIG")),
        ("INTERRUPTION_QUEUE_URL", env("INTERRUPTION_QUEUE_URL")),
    ];
    prewarm::config::Config::from_lookup(|k| {
        settings
            .iter()
            .chain(&stack)
            .find(|(name, _)| *name == k)
            .map(|(_, v)| v.clone())
    })
    .unwrap()
}

pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: source tests/stack/.run/env (needs the local stack, make e2e)")
    })
}

/// A client as the stack user whose kubeconfig the variable `var` names.
pub async fn as_user(var: &str) -> kube::Client {
    prewarm::adapters::kube::client(&prewarm::config::ClusterAccess::Kubeconfig { path: env(var) })
        .await
        .expect("client")
}

/// An HPA (minReplicas 2, maxReplicas 9) in namespace prewarm on vLLM's running requests,
/// `per_replica` each (an AverageValue quantity), scaling a Deployment that does not exist
/// (nothing is scaled).
pub fn hpa_on_running_requests(
    name: &str,
    per_replica: &str,
) -> k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler {
    serde_json::from_value(json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": "prewarm"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nothing"},
            "minReplicas": 2, "maxReplicas": 9,
            "metrics": [{"type": "Pods", "pods": {
                "metric": {"name": "vllm:num_requests_running"},
                "target": {"type": "AverageValue", "averageValue": per_replica}}}]
        }
    }))
    .unwrap()
}

/// An autoscaling/v2 HPA `name` in `ns` scaling Deployment `target` between `min` and `max` on
/// CPU (the stack has no metrics API, so it only ever enforces its bounds).
pub fn cpu_hpa(
    ns: &str,
    name: &str,
    target: &str,
    min: i32,
    max: i32,
) -> k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler {
    serde_json::from_value(json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                 "minReplicas": min, "maxReplicas": max,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                     "target": {"type": "Utilization", "averageUtilization": 80}}}]}
    }))
    .unwrap()
}

/// A name no earlier run used: the process id and the clock's nanoseconds.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}-{}-{}", std::process::id(), nanos % 100_000)
}

/// The wall clock in Unix seconds (the stack's objects carry real times).
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A model or series name no earlier run wrote: metric stores keep old samples, so each test
/// writes its own series.
pub fn unique_series(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("h4-{tag}-{}-{nanos}", std::process::id())
}

/// The wall clock in whole Unix seconds (the metric stores' sample times).
pub fn now_whole_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}
