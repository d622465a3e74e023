//! `prewarm restore`'s search beyond the targets (`restore_found`) against the stack's real
//! kube-apiserver, as the `prewarm-restore` user (only the chart's restore rows): nodes a drain
//! left behind are un-drained unless a live drain holds them, the cordon lifted only when prewarm
//! set it; a NodePool no target names any more gets its budgets back. The nodes are bare Node
//! objects (no kwok annotation: nothing runs on them) and the NodePool selects nothing
//! provisionable; every object is deleted at the end.
//!
//! Run: `. tests/stack/.run/env && cargo test --test restore_stack -- --include-ignored`

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use prewarm::adapters::kube::resources;
use prewarm::adapters::kube::restore::found::restore_found;
use prewarm::adapters::kube::restore::{Drains, RestoreOutcome};
use prewarm::core::interruption::{DrainSettings, DrainState, NoticeKind, Phase};
use serde_json::{json, Value};

mod common;
use common::{as_user, now, unique};

/// A drain's state as the interruption function writes it, `silent_s` after its last step.
fn drain(event_id: &str, silent_s: f64, user_cordoned: bool) -> DrainState {
    let t = now();
    DrainState {
        event_id: event_id.into(),
        kind: NoticeKind::SpotInterruption,
        phase: Phase::Evicting,
        notice_time: t - silent_s - 30.0,
        deadline: Some(t + 3_600.0),
        started_at: t - silent_s - 30.0,
        replacement_requested_at: Some(t - silent_s - 29.0),
        replacement_ready_at: None,
        evicting_since: Some(t - silent_s - 10.0),
        finished_at: None,
        replacement_gpus: 4,
        instance_end: Some(t + 3_600.0),
        last_step_at: Some(t - silent_s),
        user_cordoned,
        pods_moved: 0,
        event_time: None,
        // The check its last step planned, one recheck (15 s) later.
        next_check_at: Some(t - silent_s + 15.0),
    }
}

async fn make_drained_node(admin: &kube::Client, name: &str, state: &DrainState) {
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": state.to_annotations(),
                     "labels": {"prewarm-test": "restore"}},
        "spec": {
            "providerID": format!("aws:///us-east-1a/i-{name}"),
            "unschedulable": true,
            "taints": [
                {"key": "prewarm.io/draining", "value": "spot-interruption", "effect": "NoSchedule"},
                {"key": "example.com/keep", "value": "yes", "effect": "NoSchedule"}
            ]
        }
    }))
    .unwrap();
    Api::<Node>::all(admin.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap_or_else(|e| panic!("creating node {name}: {e}"));
}

fn prewarm_annotations(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Vec<String> {
    meta.annotations
        .iter()
        .flatten()
        .map(|(k, _)| k.clone())
        .filter(|k| k.starts_with("prewarm.io/"))
        .collect()
}

/// The node's taints but the ones Kubernetes itself manages (`node.kubernetes.io/...`: the node
/// lifecycle controller taints these hand-made nodes not-ready), which are neither prewarm's nor
/// the user's.
fn taint_keys(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.key)
        .filter(|k| !k.starts_with("node.kubernetes.io/"))
        .collect()
}

fn orphan_pool(name: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name, "annotations": {
            "prewarm.io/saved-budgets": "[{\"nodes\":\"10%\"}]",
            "prewarm.io/last-tick": "2026-11-29T12:00:00.000Z"}},
        "spec": {
            "template": {
                "metadata": {"labels": {"prewarm.io/kube-test": "true"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                    "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
                    "taints": [{"key": "prewarm.io/kube-test", "value": "true", "effect": "NoSchedule"}],
                    "expireAfter": "720h"
                }
            },
            "limits": {"cpu": "0"},
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "10m",
                "budgets": [{"nodes": "10%"}, {"nodes": "0", "reasons": ["Underutilized", "Empty"]}]
            }
        }
    })
}

/// Three nodes a drain marked (stale owner, live owner, stale owner over a user's cordon) and a
/// NodePool left frozen by a removed target. A dry run changes nothing; the restore gives back
/// exactly what no live drain holds; a second restore finds nothing.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn restore_finds_what_prewarm_left_and_spares_live_drains() {
    let admin = as_user("KUBECONFIG").await;
    let restorer = as_user("PREWARM_RESTORE_KUBECONFIG").await;
    let name = unique("rs");
    let (orphan, live, user) = (
        format!("{name}-orphan"),
        format!("{name}-live"),
        format!("{name}-user"),
    );
    // Default settings: recheck 15 s, so an owner silent for 120 s (4 x 15 + 60) is gone.
    // (node, drain state) - by hand: 600 s silent is orphaned, 5 s silent is live.
    make_drained_node(&admin, &orphan, &drain(&format!("{name}-a"), 600.0, false)).await;
    make_drained_node(&admin, &live, &drain(&format!("{name}-b"), 5.0, false)).await;
    make_drained_node(&admin, &user, &drain(&format!("{name}-c"), 600.0, true)).await;
    let pools = Api::<DynamicObject>::all_with(admin.clone(), &resources::node_pool());
    let pool: DynamicObject = serde_json::from_value(orphan_pool(&name)).unwrap();
    pools
        .patch(
            &name,
            &PatchParams::apply("prewarm-restore-tests").force(),
            &Patch::Apply(&pool),
        )
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(admin.clone());
    let settings = DrainSettings::default();

    let result = async {
        for step in restore_found(&restorer, &settings, now(), true, false, Drains::GiveBack).await
        {
            step.unwrap();
        }
        let still = nodes.get(&orphan).await.unwrap();
        assert_eq!(
            still.spec.as_ref().unwrap().unschedulable,
            Some(true),
            "a dry run wrote"
        );

        let mut lines = Vec::new();
        for step in restore_found(&restorer, &settings, now(), false, false, Drains::GiveBack).await
        {
            lines.extend(step.unwrap());
        }
        let orphaned = nodes.get(&orphan).await.unwrap();
        assert_ne!(
            orphaned.spec.as_ref().unwrap().unschedulable,
            Some(true),
            "{lines:?}"
        );
        assert_eq!(taint_keys(&orphaned), vec!["example.com/keep".to_string()]);
        assert!(prewarm_annotations(&orphaned.metadata).is_empty());

        let held = nodes.get(&live).await.unwrap();
        assert_eq!(held.spec.as_ref().unwrap().unschedulable, Some(true));
        assert!(taint_keys(&held).contains(&"prewarm.io/draining".to_string()));
        assert!(!prewarm_annotations(&held.metadata).is_empty());
        assert!(
            lines
                .iter()
                .any(|r| r.object.contains(&live) && r.outcome == RestoreOutcome::Kept),
            "{lines:?}"
        );

        let users = nodes.get(&user).await.unwrap();
        assert_eq!(
            users.spec.as_ref().unwrap().unschedulable,
            Some(true),
            "the user's cordon"
        );
        assert_eq!(taint_keys(&users), vec!["example.com/keep".to_string()]);
        assert!(prewarm_annotations(&users.metadata).is_empty());

        // A removed target's NodePool: the restore identity may list it but not read or write
        // it (the chart grants those on the targets' pools only), so it is reported and left.
        let p = pools.get(&name).await.unwrap();
        assert_eq!(
            p.data["spec"]["disruption"]["budgets"],
            json!([{"nodes": "10%"}, {"nodes": "0", "reasons": ["Underutilized", "Empty"]}])
        );
        assert!(
            lines.iter().any(|r| r.object == format!("nodepool {name}")
                && r.outcome == RestoreOutcome::Kept
                && r.detail.contains("cluster admin")),
            "{lines:?}"
        );
        // As a cluster admin the same restore gives the pool back: the budgets the annotation
        // saved, and no prewarm.io/ annotation left.
        for step in restore_found(&admin, &settings, now(), false, false, Drains::GiveBack).await {
            step.unwrap();
        }
        let p = pools.get(&name).await.unwrap();
        assert_eq!(
            p.data["spec"]["disruption"]["budgets"],
            json!([{"nodes": "10%"}])
        );
        assert!(prewarm_annotations(&p.metadata).is_empty());

        let mut again = Vec::new();
        for step in restore_found(&restorer, &settings, now(), false, false, Drains::GiveBack).await
        {
            again.extend(step.unwrap());
        }
        assert!(
            again
                .iter()
                .all(|r| r.outcome != RestoreOutcome::Restored || r.object.contains(&live)),
            "{again:?}"
        );
    }
    .await;
    for n in [&orphan, &live, &user] {
        let _ = nodes.delete(n, &DeleteParams::default()).await;
    }
    let _ = pools.delete(&name, &DeleteParams::default()).await;
    result
}
