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
use prewarm::adapters::kube::drain::surge::{release, surge_workload, SURGING_LABEL};
use prewarm::core::interruption::surge::SurgeIntent;
use prewarm::core::TargetSpec;
use serde_json::json;

mod common;
use common::{as_user, cpu_hpa, now, unique};

const NS: &str = "prewarm";

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
    let hpa = cpu_hpa(NS, &name, &name, 1, 3);
    hpas.create(&PostParams::default(), &hpa).await.unwrap();

    // Drain i-a moves 2 pods: floor = 2 replicas + 2, capped at maxReplicas 3.
    let want = surge_workload(&lambda, NS, &name, &hold(&a, 2), now())
        .await
        .unwrap()
        .want;
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

    let want = surge_workload(&lambda, NS, &name, &hold(&a, 1), now())
        .await
        .unwrap()
        .want;
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

/// The tests in the `inference` namespace (the chart's example podNamespace, where the
/// per-function users have their rights) run one at a time: `prewarm restore` gives back every
/// surge there.
static INFERENCE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const INFERENCE_NS: &str = "inference";

/// The chart's example target (values-examples.yaml): podNamespace inference, balloon prewarm/balloon-gpu.
fn chart_target() -> TargetSpec {
    serde_json::from_value(json!({
        "name": "llama", "nodePool": "gpu", "maxSpare": 4, "podNamespace": INFERENCE_NS,
        "headroom": {"kind": "balloon", "namespace": NS, "name": "balloon-gpu"}}))
    .unwrap()
}

fn in_namespace<T: serde::Serialize + serde::de::DeserializeOwned>(object: T, ns: &str) -> T {
    let mut v = serde_json::to_value(object).unwrap();
    v["metadata"]["namespace"] = json!(ns);
    serde_json::from_value(v).unwrap()
}

/// A Deployment whose HPA a KEDA ScaledObject owns (KEDA's CRD v2.21.0 on the stack; no KEDA
/// operator runs, so nothing rewrites the HPA here: the test checks where prewarm writes). The
/// surge, as the interruption function's own user, goes to the ScaledObject's minReplicaCount
/// with its record there, never to the HPA; the tick's forecast floor (as the tick's user) does
/// not lower it; the tick's user gives it back exactly once the drain is over.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_keda_owned_hpa_is_surged_on_its_scaled_object() {
    use kube::api::DynamicObject;
    use prewarm::adapters::kube::hpa::floor::{plan_and_apply, FloorIntent};
    use prewarm::adapters::kube::hpa::scaled_object;
    use prewarm::core::lease::LeaseOutcome;
    use prewarm::core::spec::HpaRef;

    let _one = INFERENCE.lock().await;
    let admin = as_user("KUBECONFIG").await;
    let intr = as_user("PREWARM_INTERRUPTION_KUBECONFIG").await;
    let tick = as_user("PREWARM_TICK_KUBECONFIG").await;
    let name = unique("surge-keda");
    let drain = format!("{name}-a");
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), INFERENCE_NS);
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(admin.clone(), INFERENCE_NS);
    let sos: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), INFERENCE_NS, &scaled_object::resource());
    deployments
        .create(
            &PostParams::default(),
            &in_namespace(deployment(&name, 2), INFERENCE_NS),
        )
        .await
        .unwrap();
    let so: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": INFERENCE_NS},
        "spec": {"scaleTargetRef": {"name": name}, "minReplicaCount": 1, "maxReplicaCount": 5,
                 "triggers": [{"type": "prometheus", "metadata": {
                     "serverAddress": "http://127.0.0.1:9", "query": "sum(x)", "threshold": "4"}}]}
    }))
    .unwrap();
    let so = sos.create(&PostParams::default(), &so).await.unwrap();
    let hpa_name = format!("keda-hpa-{name}");
    let mut hpa = cpu_hpa(INFERENCE_NS, &hpa_name, &name, 1, 5);
    hpa.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "keda.sh/v1alpha1".into(),
            kind: "ScaledObject".into(),
            name: name.clone(),
            uid: so.metadata.uid.clone().unwrap(),
            controller: Some(true),
            ..Default::default()
        },
    ]);
    hpas.create(&PostParams::default(), &hpa).await.unwrap();
    let min_count = |o: &DynamicObject| o.data["spec"]["minReplicaCount"].as_u64();

    let result = async {
        // 2 pods of the drain: floor = 2 replicas + 2 = 4 (under maxReplicaCount 5).
        let write = surge_workload(&intr, INFERENCE_NS, &name, &hold(&drain, 2), now())
            .await
            .expect("the interruption user may surge through the ScaledObject");
        let outcome = write.outcome;
        assert_eq!(write.want, Some(4), "{outcome}");
        assert!(outcome.starts_with("scaledobject "), "{outcome}");
        let s = sos.get(&name).await.unwrap();
        assert_eq!(min_count(&s), Some(4));
        let ann = prewarm_annotations(&s.metadata);
        assert_eq!(ann["prewarm.io/user-min-replicas"], "1");
        assert_eq!(ann["prewarm.io/raised-min-replicas"], "4");
        assert_eq!(
            ann["prewarm.io/surge-drains"],
            format!(r#"{{"{drain}":2}}"#)
        );
        assert_eq!(ann["prewarm.io/surge-base"], "2");
        assert!(surging(&s.metadata));
        // Not the HPA (KEDA rewrites it from the ScaledObject) nor the Deployment.
        let h = hpas.get(&hpa_name).await.unwrap();
        assert_eq!(h.spec.as_ref().unwrap().min_replicas, Some(1));
        assert!(prewarm_annotations(&h.metadata).is_empty() && !surging(&h.metadata));
        let d = deployments.get(&name).await.unwrap();
        assert_eq!(d.spec.as_ref().unwrap().replicas, Some(2));
        assert!(prewarm_annotations(&d.metadata).is_empty());

        // The tick's forecast asks for 2: the drain's floor of 4 holds.
        let r = HpaRef {
            namespace: INFERENCE_NS.into(),
            name: hpa_name.clone(),
            raise_min_replicas: true,
            in_system_metric: None,
        };
        let change = plan_and_apply(&tick, &r, FloorIntent::AtLeast(2), now(), 300.0, false)
            .await
            .unwrap();
        assert_eq!(change.patch.outcome, LeaseOutcome::Renewed, "{change:?}");
        assert_eq!(min_count(&sos.get(&name).await.unwrap()), Some(4));

        // The drain is over: the tick's user finds the surge by its label on the ScaledObject
        // and gives it back: the user's 1 exactly, no record, no label.
        let target = chart_target();
        let released = release(&tick, std::slice::from_ref(&target), &drain, now()).await;
        assert_eq!(released.len(), 1, "{released:?}");
        assert!(released[0].is_ok(), "{released:?}");
        let s = sos.get(&name).await.unwrap();
        assert_eq!(min_count(&s), Some(1));
        assert!(
            prewarm_annotations(&s.metadata).is_empty(),
            "{:?}",
            s.metadata.annotations
        );
        assert!(!surging(&s.metadata));
    }
    .await;
    let dp = DeleteParams::default();
    let _ = hpas.delete(&hpa_name, &dp).await;
    let _ = sos.delete(&name, &dp).await;
    let _ = deployments.delete(&name, &dp).await;
    result
}

/// `prewarm restore`'s drain reservations step as the restore user, on what drains left: a surged
/// Deployment (given back exactly), a Deployment surged through its HPA whose floor the user then
/// edited (the edit kept), and a replacement placeholder (deleted; an unlabelled pod beside it
/// stays). A dry run first changes nothing.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn restore_deletes_placeholders_and_gives_surges_back() {
    use k8s_openapi::api::core::v1::Pod;
    use prewarm::adapters::kube::restore::restore_reservations;
    use prewarm::adapters::kube::shape::placeholder::REPLACEMENT_FOR;

    let _one = INFERENCE.lock().await;
    let admin = as_user("KUBECONFIG").await;
    let intr = as_user("PREWARM_INTERRUPTION_KUBECONFIG").await;
    let restorer = as_user("PREWARM_RESTORE_KUBECONFIG").await;
    let name = unique("restore-surge");
    let (plain, floored) = (format!("{name}-d"), format!("{name}-h"));
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), INFERENCE_NS);
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(admin.clone(), INFERENCE_NS);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    for d in [&plain, &floored] {
        deployments
            .create(
                &PostParams::default(),
                &in_namespace(deployment(d, 2), INFERENCE_NS),
            )
            .await
            .unwrap();
    }
    hpas.create(
        &PostParams::default(),
        &cpu_hpa(INFERENCE_NS, &floored, &floored, 1, 6),
    )
    .await
    .unwrap();
    let pod = |pod_name: &str, labels: serde_json::Value| -> Pod {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name, "namespace": NS, "labels": labels},
            "spec": {"nodeSelector": {"prewarm.io/no-such-node": "true"},
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
        }))
        .unwrap()
    };
    let placeholder = format!("prewarm-replacement-{name}");
    let bystander = format!("{name}-bystander");
    pods.create(
        &PostParams::default(),
        &pod(&placeholder, json!({ REPLACEMENT_FOR: name })),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &pod(&bystander, json!({"app": name})),
    )
    .await
    .unwrap();

    let result = async {
        // Drains surge both workloads (as the interruption function).
        surge_workload(
            &intr,
            INFERENCE_NS,
            &plain,
            &hold(&format!("{name}-a"), 1),
            now(),
        )
        .await
        .unwrap();
        surge_workload(
            &intr,
            INFERENCE_NS,
            &floored,
            &hold(&format!("{name}-b"), 2),
            now(),
        )
        .await
        .unwrap();
        let replicas = |d: &Deployment| d.spec.as_ref().unwrap().replicas;
        assert_eq!(replicas(&deployments.get(&plain).await.unwrap()), Some(3));
        let min = |h: &HorizontalPodAutoscaler| h.spec.as_ref().unwrap().min_replicas;
        assert_eq!(min(&hpas.get(&floored).await.unwrap()), Some(4));
        // The user edits the surged floor to 5.
        hpas.patch(
            &floored,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minReplicas": 5}})),
        )
        .await
        .unwrap();

        let target = chart_target();
        let dry = restore_reservations(&restorer, &target, now(), true)
            .await
            .unwrap();
        let mentions = |out: &[prewarm::adapters::kube::restore::Restored], what: &str| {
            out.iter().any(|r| r.detail.contains(what))
        };
        assert!(mentions(&dry, &placeholder), "{dry:?}");
        assert!(
            mentions(&dry, &plain) && mentions(&dry, &floored),
            "{dry:?}"
        );
        assert_eq!(replicas(&deployments.get(&plain).await.unwrap()), Some(3));
        assert!(pods.get_opt(&placeholder).await.unwrap().is_some());

        let done = restore_reservations(&restorer, &target, now(), false)
            .await
            .expect("the restore user may give drain reservations back");
        let line = |what: &str| {
            done.iter()
                .find(|r| r.detail.contains(what))
                .unwrap_or_else(|| panic!("{what} not in {done:?}"))
        };
        assert_eq!(line(&placeholder).outcome.to_string(), "restored");
        assert_eq!(line(&plain).outcome.to_string(), "restored");
        assert_eq!(line(&floored).outcome.to_string(), "kept");

        // The Deployment: the user's 2 exactly, nothing of prewarm's left.
        let d = deployments.get(&plain).await.unwrap();
        assert_eq!(replicas(&d), Some(2));
        assert!(prewarm_annotations(&d.metadata).is_empty() && !surging(&d.metadata));
        // The HPA: the user's edit (5) kept, nothing of prewarm's left.
        let h = hpas.get(&floored).await.unwrap();
        assert_eq!(min(&h), Some(5));
        assert!(
            prewarm_annotations(&h.metadata).is_empty(),
            "{:?}",
            h.metadata.annotations
        );
        assert!(!surging(&h.metadata));
        // The placeholder is gone (or going); the unlabelled pod stays.
        let left = pods.get_opt(&placeholder).await.unwrap();
        assert!(left.is_none_or(|p| p.metadata.deletion_timestamp.is_some()));
        let b = pods
            .get_opt(&bystander)
            .await
            .unwrap()
            .expect("bystander kept");
        assert!(b.metadata.deletion_timestamp.is_none());
    }
    .await;
    let dp = DeleteParams::default();
    let _ = hpas.delete(&floored, &dp).await;
    for d in [&plain, &floored] {
        let _ = deployments.delete(d, &dp).await;
    }
    for p in [&placeholder, &bystander] {
        let _ = pods.delete(p, &dp).await;
    }
    result
}
