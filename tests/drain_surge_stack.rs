//! The drain surge's writes against the stack's real kube-apiserver, as the `prewarm-lambda`
//! user (only the RBAC of infra/k8s and the stack-tests grant): an HPA's minReplicas raised
//! through the floor lease and restored exactly when the last drain gives its share back; a
//! Deployment without an HPA raised and a user's edit kept. The pods select a label no node has,
//! so nothing is scheduled; the stack's HPA controller may scale the Deployment meanwhile, which
//! the assertions do not depend on.
//!
//! Run: `. tests/stack/.run/env && cargo test --test drain_surge_stack -- --include-ignored`

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use prewarm::adapters::kube::client;
use prewarm::adapters::kube::drain::surge::{release, surge_workload, SURGING_LABEL};
use prewarm::config::ClusterAccess;
use prewarm::core::interruption::surge::SurgeIntent;
use prewarm::core::TargetSpec;
use serde_json::json;

const NS: &str = "prewarm";

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: source tests/stack/.run/env"))
}

async fn as_user(var: &str) -> kube::Client {
    client(&ClusterAccess::Kubeconfig { path: env(var) })
        .await
        .expect("client")
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}-{}-{}", std::process::id(), nanos % 100_000)
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    let labels = json!({"app.kubernetes.io/name": name});
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"nodeSelector": {"prewarm.io/no-such-node": "true"},
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}
    }))
    .unwrap()
}

fn hold(drain: &str, k: u32) -> SurgeIntent {
    SurgeIntent::Hold {
        drain: drain.into(),
        k,
    }
}

fn prewarm_annotations(meta: &kube::api::ObjectMeta) -> BTreeMap<String, String> {
    meta.annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k.starts_with("prewarm.io/"))
        .collect()
}

fn surging(meta: &kube::api::ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .is_some_and(|l| l.get(SURGING_LABEL).map(String::as_str) == Some("true"))
}

fn targets() -> Vec<TargetSpec> {
    serde_json::from_value(json!([{
        "name": "surge-test", "nodePool": "gpu", "maxSpare": 1, "podNamespace": NS,
        "headroom": {"kind": "balloon", "namespace": NS, "name": "none"}}]))
    .unwrap()
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn an_hpa_floor_surge_is_shared_by_drains_and_restored_exactly() {
    let admin = as_user("KUBECONFIG").await;
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    let name = unique("surge-hpa");
    // Drain ids of this test only: releases find surges by drain id across the namespace, and
    // the tests run concurrently.
    let (a, b) = (format!("{name}-a"), format!("{name}-b"));
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(admin.clone(), NS);
    deployments
        .create(&PostParams::default(), &deployment(&name, 2))
        .await
        .unwrap();
    let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                 "minReplicas": 1, "maxReplicas": 3,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                     "target": {"type": "Utilization", "averageUtilization": 80}}}]}
    }))
    .unwrap();
    hpas.create(&PostParams::default(), &hpa).await.unwrap();

    // Drain i-a moves 2 pods: floor = 2 replicas + 2, capped at maxReplicas 3.
    let (_, want, _) = surge_workload(&lambda, NS, &name, &hold(&a, 2), now())
        .await
        .unwrap();
    assert_eq!(want, Some(3));
    let h = hpas.get(&name).await.unwrap();
    assert_eq!(h.spec.as_ref().unwrap().min_replicas, Some(3));
    let ann = prewarm_annotations(&h.metadata);
    assert_eq!(ann["prewarm.io/user-min-replicas"], "1");
    assert_eq!(ann["prewarm.io/raised-min-replicas"], "3");
    assert_eq!(ann["prewarm.io/surge-drains"], format!(r#"{{"{a}":2}}"#));
    assert_eq!(ann["prewarm.io/surge-base"], "2");
    assert!(surging(&h.metadata));
    // The HPA is raised, not the Deployment (the HPA would undo a Deployment write).
    let d = deployments.get(&name).await.unwrap();
    assert!(prewarm_annotations(&d.metadata).is_empty());

    // A second drain joins; the first finishing leaves the second's share in place.
    surge_workload(&lambda, NS, &name, &hold(&b, 1), now())
        .await
        .unwrap();
    let released = release(&lambda, &targets(), &a, now()).await;
    assert_eq!(released.len(), 1, "{released:?}");
    assert!(released[0].is_ok(), "{released:?}");
    let h = hpas.get(&name).await.unwrap();
    assert_eq!(h.spec.as_ref().unwrap().min_replicas, Some(3));
    assert_eq!(
        prewarm_annotations(&h.metadata)["prewarm.io/surge-drains"],
        format!(r#"{{"{b}":1}}"#)
    );

    // The last share given back: the user's 1 exactly, no annotation or label left.
    let released = release(&lambda, &targets(), &b, now()).await;
    assert!(released.iter().all(Result::is_ok), "{released:?}");
    let h = hpas.get(&name).await.unwrap();
    assert_eq!(h.spec.as_ref().unwrap().min_replicas, Some(1));
    assert!(
        prewarm_annotations(&h.metadata).is_empty(),
        "{:?}",
        h.metadata.annotations
    );
    assert!(!surging(&h.metadata));

    hpas.delete(&name, &DeleteParams::default()).await.unwrap();
    deployments
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_deployment_surge_keeps_a_users_edit() {
    let admin = as_user("KUBECONFIG").await;
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    let name = unique("surge-dep");
    let (a, b) = (format!("{name}-a"), format!("{name}-b"));
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    deployments
        .create(&PostParams::default(), &deployment(&name, 2))
        .await
        .unwrap();
    let replicas = |d: &Deployment| d.spec.as_ref().unwrap().replicas;

    let (_, want, _) = surge_workload(&lambda, NS, &name, &hold(&a, 1), now())
        .await
        .unwrap();
    assert_eq!(want, Some(3));
    let d = deployments.get(&name).await.unwrap();
    assert_eq!(replicas(&d), Some(3));
    assert_eq!(
        prewarm_annotations(&d.metadata)["prewarm.io/surge-user-replicas"],
        "2"
    );
    assert!(surging(&d.metadata));

    // The user scales to 5 during the drain: kept when the drain ends.
    deployments
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    let released = release(&lambda, &targets(), &a, now()).await;
    assert_eq!(released.len(), 1, "{released:?}");
    assert!(
        released[0].as_ref().unwrap().contains("user_edit_kept"),
        "{released:?}"
    );
    let d = deployments.get(&name).await.unwrap();
    assert_eq!(replicas(&d), Some(5));
    assert!(prewarm_annotations(&d.metadata).is_empty());
    assert!(!surging(&d.metadata));

    // Without an edit the user's value comes back exactly.
    surge_workload(&lambda, NS, &name, &hold(&b, 2), now())
        .await
        .unwrap();
    assert_eq!(replicas(&deployments.get(&name).await.unwrap()), Some(7));
    release(&lambda, &targets(), &b, now()).await;
    let d = deployments.get(&name).await.unwrap();
    assert_eq!(replicas(&d), Some(5));
    assert!(prewarm_annotations(&d.metadata).is_empty());

    deployments
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
}
