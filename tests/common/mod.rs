//! Fixtures shared by the stack-gated test binaries (each `mod common;`).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};

/// Writes `capacity` as the node's capacity and allocatable once kwok has made it Ready.
/// kwok's node-ready stage (NODE_READY_DELAY after the node appears) merges a default capacity
/// (4 cpu, 16Gi) into the copy it saw then, so a capacity patched before it ran can be
/// overwritten (fault-matrix case 8 once saw 4 GPUs on its single-GPU nodes; the limits-room
/// test got 16Gi instead of 128Gi).
pub async fn write_capacity_once_ready(nodes: &Api<Node>, node: &str, capacity: &Value) {
    let ready_by = Instant::now() + Duration::from_secs(90);
    loop {
        let ready = nodes
            .get(node)
            .await
            .unwrap()
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if ready {
            break;
        }
        assert!(Instant::now() < ready_by, "kwok never made {node} Ready");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    nodes
        .patch_status(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"capacity": capacity, "allocatable": capacity}})),
        )
        .await
        .unwrap();
}
