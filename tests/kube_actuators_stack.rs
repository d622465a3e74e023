//! The headroom and NodePool actuators against the stack's real kube-apiserver with Karpenter's
//! real CRDs (tests/stack). Objects are created by the admin; every write under test goes through
//! the `prewarm-lambda` user, so only the RBAC of infra/k8s is used. Each test makes objects with
//! its own names (never Karpenter-provisionable: balloons select a label no node has, test
//! NodePools have a cpu limit of 0) and deletes them at the end.
//!
//! Run: `. tests/stack/.run/env && cargo test --test kube_actuators_stack -- --include-ignored`

use std::collections::BTreeMap;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use prewarm::adapters::kube::headroom::{
    apply_plan, read_headroom, release_replacement, ApplyOutcome,
};
use prewarm::adapters::kube::nodepool::limits::LimitsIntent;
use prewarm::adapters::kube::nodepool::{
    apply_node_pool, freeze_budget, read_node_pool, send_node_pool_patch, PatchOutcome,
    SAVED_BUDGETS,
};
use prewarm::adapters::kube::resources;
use prewarm::core::lease::LeaseOutcome;
use prewarm::core::policy::plan::ForecastSummary;
use prewarm::core::{Action, HeadroomState, Plan, TargetSpec};
use prewarm::Error;
use serde_json::{json, Value};

mod common;
use common::{as_user, hpa_on_running_requests, now, unique};

async fn apply(api: &Api<DynamicObject>, name: &str, object: Value) -> DynamicObject {
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.patch(
        name,
        &PatchParams::apply("prewarm-kube-tests").force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap_or_else(|e| panic!("creating {name}: {e}"))
}

async fn delete(api: &Api<DynamicObject>, name: &str) {
    let _ = api.delete(name, &DeleteParams::default()).await;
}

fn ns_api(client: &kube::Client, resource: &kube::api::ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), "prewarm", resource)
}

fn target(json: Value) -> TargetSpec {
    serde_json::from_value(json).unwrap()
}

fn plan(action: Action, current: u32, desired: u32, next: HeadroomState) -> Plan {
    Plan {
        target: "kube-test".into(),
        action,
        current_spare: current,
        desired_spare: desired,
        freeze_consolidation: None,
        forecast: ForecastSummary::default(),
        reasons: vec![],
        hpa_floor: None,
        next_state: next,
    }
}

fn balloon(name: &str) -> Value {
    common::kwok_pools::balloon("prewarm", name)
}

fn replicas_of(object: &DynamicObject) -> u64 {
    object.data["spec"]["replicas"].as_u64().unwrap()
}

fn annotation<'a>(object: &'a DynamicObject, key: &str) -> Option<&'a str> {
    object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// prewarm's own annotations (controllers add theirs, e.g. the Deployment revision).
fn prewarm_annotations(object: &DynamicObject) -> BTreeMap<String, String> {
    object
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k.starts_with("prewarm.io/"))
        .collect()
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn balloon_scale_reads_back_and_a_stale_write_is_a_conflict() {
    let (admin, lambda) = (
        as_user("KUBECONFIG").await,
        as_user("PREWARM_LAMBDA_KUBECONFIG").await,
    );
    let name = unique("kt-balloon");
    let deployments = ns_api(&admin, &resources::deployment());
    apply(&deployments, &name, balloon(&name)).await;
    let t = target(json!({
        "name": "kube-test", "nodePool": "gpu", "maxSpare": 8,
        "headroom": {"kind": "balloon", "namespace": "prewarm", "name": name}
    }));

    let read = read_headroom(&lambda, &t).await.unwrap();
    assert_eq!(read.parsed.size, 0);
    let t0 = now();
    let next = HeadroomState {
        spare: 3,
        cooldown_until: Some((t0 + 60.0).floor()),
        ..HeadroomState::default()
    };
    let outcome = apply_plan(
        &lambda,
        &read,
        &plan(Action::ScaleUp, 0, 3, next.clone()),
        t0,
        false,
    )
    .await
    .unwrap();
    assert_eq!(
        outcome,
        ApplyOutcome::Written {
            before: 0,
            after: 3
        }
    );

    let written = deployments.get(&name).await.unwrap();
    assert_eq!(replicas_of(&written), 3);
    assert!(annotation(&written, "prewarm.io/last-tick").is_some());
    let back = read_headroom(&lambda, &t).await.unwrap();
    assert_eq!(back.parsed.size, 3);
    assert_eq!(back.state().cooldown_until, next.cooldown_until);
    assert!((back.state().last_tick.unwrap() - t0).abs() < 0.001);

    // The first read is stale now: its resourceVersion no longer matches.
    let stale = apply_plan(
        &lambda,
        &read,
        &plan(Action::ScaleUp, 0, 5, next),
        t0 + 1.0,
        false,
    )
    .await
    .unwrap();
    assert_eq!(stale, ApplyOutcome::Conflict);
    assert_eq!(replicas_of(&deployments.get(&name).await.unwrap()), 3);

    // DRY_RUN computes but writes nothing.
    let fresh = read_headroom(&lambda, &t).await.unwrap();
    let dry = apply_plan(
        &lambda,
        &fresh,
        &plan(Action::ScaleDown, 3, 1, fresh.state().clone()),
        t0 + 2.0,
        true,
    )
    .await
    .unwrap();
    assert_eq!(
        dry,
        ApplyOutcome::DryRun {
            before: 3,
            after: 1
        }
    );
    let unchanged = deployments.get(&name).await.unwrap();
    assert_eq!(replicas_of(&unchanged), 3);
    assert_eq!(
        prewarm_annotations(&unchanged),
        prewarm_annotations(&written),
        "a dry run writes no annotation either"
    );

    // A write outside prewarm's part (here an unrelated annotation; in life the Deployment
    // controller's status updates) moves the resourceVersion but is no conflict for the plan.
    let before_foreign = read_headroom(&lambda, &t).await.unwrap();
    deployments
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"example.com/touched": "yes"}}})),
        )
        .await
        .unwrap();
    let outcome = apply_plan(
        &lambda,
        &before_foreign,
        &plan(Action::ScaleUp, 3, 4, before_foreign.state().clone()),
        t0 + 30.0,
        false,
    )
    .await
    .unwrap();
    assert_eq!(
        outcome,
        ApplyOutcome::Written {
            before: 3,
            after: 4
        }
    );
    assert_eq!(replicas_of(&deployments.get(&name).await.unwrap()), 4);

    delete(&deployments, &name).await;
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn reservations_of_the_earlier_design_are_released_once_per_drain() {
    // Drains used to reserve their replacement on the headroom (annotations + spec.replicas);
    // now each drain has its own placeholder pod, and what an earlier prewarm reserved is only
    // handed back. A balloon of 2 own replicas with 2 + 1 reserved by two drains:
    let (admin, lambda) = (
        as_user("KUBECONFIG").await,
        as_user("PREWARM_LAMBDA_KUBECONFIG").await,
    );
    let name = unique("kt-reserve");
    let deployments = ns_api(&admin, &resources::deployment());
    let mut object = balloon(&name);
    object["spec"]["replicas"] = json!(5);
    object["metadata"]["annotations"] = json!({
        "prewarm.io/replacement-drains": "{\"evt-1\":2,\"evt-2\":1}",
        "prewarm.io/replacement-reserved": "3",
    });
    apply(&deployments, &name, object).await;
    let t = target(json!({
        "name": "kube-test", "nodePool": "gpu", "maxSpare": 8,
        "headroom": {"kind": "balloon", "namespace": "prewarm", "name": name}
    }));

    let read = read_headroom(&lambda, &t).await.unwrap();
    assert_eq!(
        read.state().spare,
        5,
        "spare is the whole size, reservations included"
    );
    assert_eq!(read.state().replacement_reserved, 3);
    assert_eq!(read.parsed.drains.get("evt-1"), Some(&2));

    let released = release_replacement(&lambda, &t, "evt-1").await.unwrap();
    assert_eq!(
        (released.size, released.reserved, released.changed),
        (3, 1, true)
    );
    let repeat = release_replacement(&lambda, &t, "evt-1").await.unwrap();
    assert!(!repeat.changed);
    release_replacement(&lambda, &t, "evt-2").await.unwrap();
    let done = deployments.get(&name).await.unwrap();
    assert_eq!(replicas_of(&done), 2);
    assert_eq!(annotation(&done, "prewarm.io/replacement-drains"), None);

    delete(&deployments, &name).await;
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn capacity_buffer_replicas_read_back() {
    let (admin, lambda) = (
        as_user("KUBECONFIG").await,
        as_user("PREWARM_LAMBDA_KUBECONFIG").await,
    );
    let name = unique("kt-buffer");
    let templates = ns_api(
        &admin,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("", "v1", "PodTemplate"),
            "podtemplates",
        ),
    );
    apply(
        &templates,
        &name,
        json!({
            "apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": name, "namespace": "prewarm"},
            "template": {"spec": {
                "nodeSelector": {"prewarm.io/kube-test-never": "true"},
                "containers": [{"name": "shape", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "1"}}}]
            }}
        }),
    )
    .await;
    let buffers = ns_api(&admin, &resources::capacity_buffer());
    apply(
        &buffers,
        &name,
        json!({
            "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": name, "namespace": "prewarm"},
            "spec": {"podTemplateRef": {"name": name}, "replicas": 0}
        }),
    )
    .await;
    let t = target(json!({
        "name": "kube-test", "nodePool": "gpu", "maxSpare": 8,
        "headroom": {"kind": "capacityBuffer", "namespace": "prewarm", "name": name}
    }));

    let read = read_headroom(&lambda, &t).await.unwrap();
    assert_eq!(read.parsed.size, 0);
    let outcome = apply_plan(
        &lambda,
        &read,
        &plan(Action::ScaleUp, 0, 2, read.state().clone()),
        now(),
        false,
    )
    .await
    .unwrap();
    assert_eq!(
        outcome,
        ApplyOutcome::Written {
            before: 0,
            after: 2
        }
    );
    let written = buffers.get(&name).await.unwrap();
    assert_eq!(replicas_of(&written), 2);
    assert_eq!(
        written.data["spec"]["podTemplateRef"]["name"], name,
        "the rest of the spec is untouched"
    );

    delete(&buffers, &name).await;
    delete(&templates, &name).await;
}

fn user_budgets() -> Value {
    json!([
        {"nodes": "20%"},
        {"nodes": "0", "reasons": ["Drifted"], "schedule": "0 8 * * mon-fri", "duration": "10h"}
    ])
}

/// A NodePool Karpenter can never launch for (cpu limit 0).
fn test_pool(name: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name},
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
            "limits": {"cpu": "0", "nvidia.com/gpu": "4"},
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "10m",
                "budgets": user_budgets()
            }
        }
    })
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn budgets_freeze_and_restore_round_trip_exactly_and_never_touch_the_template() {
    let (admin, lambda) = (
        as_user("KUBECONFIG").await,
        as_user("PREWARM_LAMBDA_KUBECONFIG").await,
    );
    let name = unique("kt-pool");
    let pools = Api::<DynamicObject>::all_with(admin.clone(), &resources::node_pool());
    let created = apply(&pools, &name, test_pool(&name)).await;
    let original_spec = created.data["spec"].clone();

    let view = read_node_pool(&lambda, &name).await.unwrap();
    assert!(!view.consolidation_frozen());
    let frozen = apply_node_pool(&lambda, &view, &LimitsIntent::Leave, Some(true), false)
        .await
        .unwrap();
    assert_eq!(
        (frozen.patch, frozen.budgets),
        (PatchOutcome::Written, LeaseOutcome::Raised),
        "{frozen:?}"
    );

    let during = pools.get(&name).await.unwrap();
    let mut expected = user_budgets().as_array().unwrap().clone();
    expected.push(freeze_budget());
    assert_eq!(
        during.data["spec"]["disruption"]["budgets"],
        Value::Array(expected)
    );
    assert_eq!(during.data["spec"]["disruption"]["consolidateAfter"], "10m");
    assert_eq!(during.data["spec"]["template"], original_spec["template"]);
    let saved: Value = serde_json::from_str(annotation(&during, SAVED_BUDGETS).unwrap()).unwrap();
    assert_eq!(saved, user_budgets());

    // Freezing again is a no-op.
    let view = read_node_pool(&lambda, &name).await.unwrap();
    assert!(view.consolidation_frozen());
    assert_eq!(
        apply_node_pool(&lambda, &view, &LimitsIntent::Leave, Some(true), false)
            .await
            .unwrap()
            .patch,
        PatchOutcome::Unchanged
    );

    let restored = apply_node_pool(&lambda, &view, &LimitsIntent::Leave, Some(false), false)
        .await
        .unwrap();
    assert_eq!(
        (restored.patch, restored.budgets),
        (PatchOutcome::Written, LeaseOutcome::Restored),
        "{restored:?}"
    );
    let after = pools.get(&name).await.unwrap();
    assert_eq!(
        after.data["spec"], original_spec,
        "the spec is exactly as before"
    );
    assert_eq!(annotation(&after, SAVED_BUDGETS), None);

    delete(&pools, &name).await;
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn limits_patch_changes_only_the_named_limit() {
    let (admin, lambda) = (
        as_user("KUBECONFIG").await,
        as_user("PREWARM_LAMBDA_KUBECONFIG").await,
    );
    let name = unique("kt-limits");
    let pools = Api::<DynamicObject>::all_with(admin.clone(), &resources::node_pool());
    let created = apply(&pools, &name, test_pool(&name)).await;

    let view = read_node_pool(&lambda, &name).await.unwrap();
    let wanted: BTreeMap<String, String> =
        [("nvidia.com/gpu".to_string(), "16".to_string())].into();
    let outcome = apply_node_pool(
        &lambda,
        &view,
        &LimitsIntent::Write(wanted.clone()),
        None,
        false,
    )
    .await
    .unwrap();
    assert_eq!(
        (outcome.patch, outcome.limits),
        (PatchOutcome::Written, LeaseOutcome::Raised),
        "{outcome:?}"
    );
    let after = pools.get(&name).await.unwrap();
    assert_eq!(
        after.data["spec"]["limits"],
        json!({"cpu": "0", "nvidia.com/gpu": "16"})
    );
    assert_eq!(
        after.data["spec"]["template"],
        created.data["spec"]["template"]
    );
    assert_eq!(
        after.data["spec"]["disruption"],
        created.data["spec"]["disruption"]
    );

    let again = read_node_pool(&lambda, &name).await.unwrap();
    assert_eq!(
        apply_node_pool(
            &lambda,
            &again,
            &LimitsIntent::Write(wanted.clone()),
            None,
            false
        )
        .await
        .unwrap()
        .patch,
        PatchOutcome::Unchanged
    );

    delete(&pools, &name).await;
}

/// Ticks write limits (twice, with a freeze between), then `prewarm restore` (every step of
/// RESTORE_STEPS) as the Lambda's user; the admin reads back exactly the user's NodePool: the
/// limits as they were (a number stays a number, an absent key absent, no `spec.limits` when
/// there was none, an empty map empty), or the user's own edit made meanwhile.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn restore_puts_back_the_users_limits_exactly_and_keeps_their_edits() {
    use prewarm::adapters::kube::nodepool::limits::SAVED_LIMITS;
    use prewarm::adapters::kube::restore::{restore_all, Drains};
    let (admin, lambda) = (
        as_user("KUBECONFIG").await,
        as_user("PREWARM_LAMBDA_KUBECONFIG").await,
    );
    let pools = Api::<DynamicObject>::all_with(admin.clone(), &resources::node_pool());
    let balloons = ns_api(&admin, &resources::deployment());
    let wanted: BTreeMap<String, String> = [
        ("nvidia.com/gpu".to_string(), "16".to_string()),
        ("memory".to_string(), "1Ti".to_string()),
    ]
    .into();
    let fewer: BTreeMap<String, String> = [("nvidia.com/gpu".to_string(), "8".to_string())].into();
    // (situation, limits before (None: no spec.limits), the user's edit while prewarm ran,
    // expected spec.limits after the restore) - written by hand.
    let cases = [
        (
            "a number and a string",
            Some(json!({"cpu": "0", "nvidia.com/gpu": 4})),
            None,
            Some(json!({"cpu": "0", "nvidia.com/gpu": 4})),
        ),
        ("no spec.limits", None, None, None),
        (
            "an empty spec.limits",
            Some(json!({})),
            None,
            Some(json!({})),
        ),
        (
            "the user raised the gpu limit meanwhile",
            Some(json!({"cpu": "0", "nvidia.com/gpu": "4"})),
            Some(json!({"nvidia.com/gpu": "24"})),
            Some(json!({"cpu": "0", "nvidia.com/gpu": "24"})),
        ),
    ];
    for (situation, before, edit, expected) in cases {
        let name = unique("kt-restore");
        let mut pool = test_pool(&name);
        match &before {
            Some(l) => pool["spec"]["limits"] = l.clone(),
            None => {
                pool["spec"].as_object_mut().unwrap().remove("limits");
            }
        }
        let created = apply(&pools, &name, pool).await;
        assert_eq!(
            created.data["spec"].get("limits"),
            before.as_ref(),
            "{situation}"
        );
        apply(&balloons, &name, balloon(&name)).await;
        let t = target(json!({
            "name": name, "nodePool": name, "maxSpare": 8, "limits": wanted,
            "headroom": {"kind": "balloon", "namespace": "prewarm", "name": name}
        }));

        let view = read_node_pool(&lambda, &name).await.unwrap();
        apply_node_pool(
            &lambda,
            &view,
            &LimitsIntent::Write(wanted.clone()),
            None,
            false,
        )
        .await
        .unwrap();
        let view = read_node_pool(&lambda, &name).await.unwrap();
        assert!(view.annotations.contains_key(SAVED_LIMITS), "{situation}");
        apply_node_pool(
            &lambda,
            &view,
            &LimitsIntent::Write(fewer.clone()),
            Some(true),
            false,
        )
        .await
        .unwrap();
        let during = pools.get(&name).await.unwrap();
        assert_eq!(
            during.data["spec"]["limits"]["nvidia.com/gpu"], "8",
            "{situation}"
        );
        assert_eq!(
            during.data["spec"]["limits"]["memory"], "1Ti",
            "{situation}"
        );
        if let Some(e) = &edit {
            let edited = json!({"spec": {"limits": e}});
            pools
                .patch(&name, &PatchParams::default(), &Patch::Merge(&edited))
                .await
                .unwrap();
        }

        for step in restore_all(
            &lambda,
            std::slice::from_ref(&t),
            now(),
            false,
            Drains::GiveBack,
        )
        .await
        {
            step.unwrap_or_else(|e| panic!("{situation}: {e}"));
        }
        let after = pools.get(&name).await.unwrap();
        assert_eq!(
            after.data["spec"].get("limits"),
            expected.as_ref(),
            "{situation}"
        );
        assert_eq!(
            after.data["spec"]["disruption"], created.data["spec"]["disruption"],
            "{situation}"
        );
        assert_eq!(
            after.data["spec"]["template"],
            created.data["spec"]["template"]
        );
        let ours: Vec<_> = after
            .metadata
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| k.starts_with("prewarm.io/"))
            .collect();
        assert!(ours.is_empty(), "{situation}: {ours:?}");
        // A second restore finds nothing to do.
        for step in restore_all(
            &lambda,
            std::slice::from_ref(&t),
            now(),
            false,
            Drains::GiveBack,
        )
        .await
        {
            assert!(
                step.unwrap()
                    .iter()
                    .all(|r| r.outcome.to_string() != "restored"),
                "{situation}"
            );
        }
        delete(&balloons, &name).await;
        delete(&pools, &name).await;
    }
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_patch_the_apiserver_rejects_is_final_and_changes_nothing() {
    let (admin, lambda) = (
        as_user("KUBECONFIG").await,
        as_user("PREWARM_LAMBDA_KUBECONFIG").await,
    );
    let name = unique("kt-reject");
    let pools = Api::<DynamicObject>::all_with(admin.clone(), &resources::node_pool());
    let created = apply(&pools, &name, test_pool(&name)).await;

    let rejected = [
        // Schema pattern: nodes is a count or a percentage.
        json!({"spec": {"disruption": {"consolidateAfter": "10m", "budgets": [{"nodes": "abc"}]}}}),
        // CEL rule: schedule and duration come together.
        json!({"spec": {"disruption": {"consolidateAfter": "10m",
            "budgets": [{"nodes": "0", "schedule": "@daily"}]}}}),
    ];
    for patch in rejected {
        match send_node_pool_patch(&lambda, &name, &patch).await {
            Err(Error::Kube {
                retryable,
                message,
                object,
                ..
            }) => {
                assert!(!retryable, "a rejection must not be retried: {message}");
                assert!(message.starts_with("422"), "{message}");
                assert!(object.contains(&name), "{object}");
            }
            other => panic!("expected a rejection of {patch}, got {other:?}"),
        }
    }
    let after = pools.get(&name).await.unwrap();
    assert_eq!(after.data["spec"], created.data["spec"]);

    delete(&pools, &name).await;
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn missing_objects_are_named_and_nothing_is_written() {
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    let missing = unique("kt-missing");
    let t = target(json!({
        "name": "kube-test", "nodePool": missing, "maxSpare": 8,
        "headroom": {"kind": "balloon", "namespace": "prewarm", "name": missing}
    }));
    match read_headroom(&lambda, &t).await {
        Err(Error::NotFound { kind, name }) => {
            assert_eq!(kind, "balloon Deployment");
            assert_eq!(name, format!("deployment prewarm/{missing}"));
        }
        other => panic!("{other:?}"),
    }
    match read_node_pool(&lambda, &missing).await {
        Err(Error::NotFound { kind, name }) => {
            assert_eq!(kind, "NodePool");
            assert_eq!(name, missing);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn static_node_pool_replicas_read_back_with_the_template_untouched() {
    let (admin, lambda) = (
        as_user("KUBECONFIG").await,
        as_user("PREWARM_LAMBDA_KUBECONFIG").await,
    );
    let name = unique("kt-static");
    let pools = Api::<DynamicObject>::all_with(admin.clone(), &resources::node_pool());
    let mut object = test_pool(&name);
    // A static NodePool: replicas set, and only limits.nodes allowed (0: Karpenter never launches).
    object["spec"]["replicas"] = json!(0);
    object["spec"]["limits"] = json!({"nodes": "0"});
    let created = apply(&pools, &name, object).await;
    let t = target(json!({
        "name": "kube-test", "nodePool": name, "maxSpare": 8,
        "headroom": {"kind": "nodePoolReplicas"}
    }));

    let read = read_headroom(&lambda, &t).await.unwrap();
    assert_eq!(read.parsed.size, 0);
    let outcome = apply_plan(
        &lambda,
        &read,
        &plan(Action::ScaleUp, 0, 2, read.state().clone()),
        now(),
        false,
    )
    .await
    .unwrap();
    assert_eq!(
        outcome,
        ApplyOutcome::Written {
            before: 0,
            after: 2
        }
    );
    let after = pools.get(&name).await.unwrap();
    assert_eq!(replicas_of(&after), 2);
    assert_eq!(
        after.data["spec"]["template"],
        created.data["spec"]["template"]
    );
    assert!(annotation(&after, "prewarm.io/last-tick").is_some());

    delete(&pools, &name).await;
}

/// The HPA reader as the `prewarm-lambda` user (RBAC: `get` on horizontalpodautoscalers): an HPA
/// on vLLM's running requests (4 per replica) is predictable; min/max come back as written.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn hpa_is_read_as_the_lambda_user() {
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    use prewarm::adapters::kube::hpa::read_hpa_status;
    use prewarm::core::policy::observation::HpaMetric;
    use prewarm::core::spec::HpaRef;

    let name = unique("hpa");
    let admin_api: Api<HorizontalPodAutoscaler> =
        Api::namespaced(as_user("KUBECONFIG").await, "prewarm");
    let hpa = hpa_on_running_requests(&name, "4");
    admin_api
        .create(&Default::default(), &hpa)
        .await
        .expect("admin creates the HPA");
    let r = HpaRef {
        namespace: "prewarm".into(),
        name: name.clone(),
        raise_min_replicas: false,
        in_system_metric: None,
    };
    let got = read_hpa_status(&as_user("PREWARM_LAMBDA_KUBECONFIG").await, &r).await;
    let _ = admin_api.delete(&name, &DeleteParams::default()).await;
    let got = got.expect("the lambda user may get HPAs");
    assert_eq!((got.min_replicas, got.max_replicas), (2, 9));
    assert_eq!(
        got.metric,
        HpaMetric::InSystemPerReplica {
            target_average: 4.0
        }
    );
    // A missing HPA is NotFound, naming it.
    let missing = HpaRef {
        name: "no-such-hpa".into(),
        ..r
    };
    match read_hpa_status(&as_user("PREWARM_LAMBDA_KUBECONFIG").await, &missing).await {
        Err(Error::NotFound { kind, .. }) => assert_eq!(kind, "HorizontalPodAutoscaler"),
        other => panic!("expected NotFound, got {other:?}"),
    }
}

/// The HPA floor lease on the real apiserver, written as the `prewarm-lambda` user: a raise is
/// never above maxReplicas, the user's minReplicas comes back exactly, a user's edit made while
/// raised is kept, and the writes carry prewarm's own field manager.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn hpa_floor_is_raised_and_restored_as_the_lambda_user() {
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    use prewarm::adapters::kube::hpa::floor::{
        apply_floor, FloorIntent, FIELD_MANAGER, RAISED_MIN, USER_MIN,
    };
    use prewarm::core::spec::HpaRef;

    let name = unique("floor");
    let admin_api: Api<HorizontalPodAutoscaler> =
        Api::namespaced(as_user("KUBECONFIG").await, "prewarm");
    let hpa = hpa_on_running_requests(&name, "4");
    admin_api.create(&Default::default(), &hpa).await.unwrap();
    let r = HpaRef {
        namespace: "prewarm".into(),
        name: name.clone(),
        raise_min_replicas: true,
        in_system_metric: None,
    };
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    let min_of = |h: &HorizontalPodAutoscaler| h.spec.as_ref().unwrap().min_replicas;
    let result = async {
        // Asked for 20, capped at maxReplicas 9; the user's 2 is saved.
        let outcome = apply_floor(&lambda, &r, FloorIntent::AtLeast(20), now(), 300.0, false)
            .await
            .expect("the lambda user may patch HPAs");
        assert_eq!(outcome, LeaseOutcome::Raised);
        let h = admin_api.get(&name).await.unwrap();
        assert_eq!(min_of(&h), Some(9));
        let ann = h.metadata.annotations.clone().unwrap();
        assert_eq!(ann.get(USER_MIN).map(String::as_str), Some("2"));
        assert_eq!(ann.get(RAISED_MIN).map(String::as_str), Some("9"));
        let managers: Vec<String> = h
            .metadata
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| m.manager)
            .collect();
        assert!(managers.iter().any(|m| m == FIELD_MANAGER), "{managers:?}");

        // Restored exactly.
        assert_eq!(
            apply_floor(&lambda, &r, FloorIntent::Restore, now(), 0.0, false)
                .await
                .unwrap(),
            LeaseOutcome::Restored
        );
        let h = admin_api.get(&name).await.unwrap();
        assert_eq!(min_of(&h), Some(2));
        assert!(!h
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(USER_MIN));

        // Raised again, then the user sets 4 by hand: the restore keeps the user's 4.
        apply_floor(&lambda, &r, FloorIntent::AtLeast(6), now(), 300.0, false)
            .await
            .unwrap();
        admin_api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"minReplicas": 4}})),
            )
            .await
            .unwrap();
        assert_eq!(
            apply_floor(&lambda, &r, FloorIntent::Restore, now(), 0.0, false)
                .await
                .unwrap(),
            LeaseOutcome::UserEditKept
        );
        let h = admin_api.get(&name).await.unwrap();
        assert_eq!(min_of(&h), Some(4));
        assert!(!h
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(RAISED_MIN));
    }
    .await;
    let _ = admin_api.delete(&name, &DeleteParams::default()).await;
    result
}

/// The floor of a KEDA-managed workload on the real apiserver with KEDA's ScaledObject CRD
/// (tests/stack/crds, v2.21.0; no KEDA operator runs, so the test makes the HPA KEDA would make,
/// owned by the ScaledObject). Written as the `prewarm-lambda` user: the raise goes to the
/// ScaledObject's `minReplicaCount`, never above its `maxReplicaCount`, and the HPA is left to
/// KEDA; the user's value comes back exactly; a user's edit made while raised is kept.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_keda_owned_hpa_is_floored_through_its_scaled_object_as_the_lambda_user() {
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    use prewarm::adapters::kube::hpa::floor::{
        apply_floor, plan_and_apply, FloorIntent, FIELD_MANAGER, RAISED_MIN, USER_MIN,
    };
    use prewarm::adapters::kube::hpa::scaled_object;
    use prewarm::core::spec::HpaRef;

    let name = unique("keda");
    let admin = as_user("KUBECONFIG").await;
    let sos: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), "prewarm", &scaled_object::resource());
    let so = apply(
        &sos,
        &name,
        json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": name, "namespace": "prewarm", "annotations": {"team": "ml"}},
            "spec": {"scaleTargetRef": {"name": "nothing"}, "minReplicaCount": 1,
                     "maxReplicaCount": 5,
                     "triggers": [{"type": "prometheus", "metadata": {
                         "serverAddress": "http://127.0.0.1:9", "query": "sum(x)", "threshold": "4"}}]}
        }),
    )
    .await;
    let hpa_name = format!("keda-hpa-{name}");
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(admin.clone(), "prewarm");
    let mut hpa = hpa_on_running_requests(&hpa_name, "4");
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
    hpas.create(&Default::default(), &hpa).await.unwrap();
    let r = HpaRef {
        namespace: "prewarm".into(),
        name: hpa_name.clone(),
        raise_min_replicas: true,
        in_system_metric: None,
    };
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    let min_count = |o: &DynamicObject| o.data["spec"]["minReplicaCount"].as_u64();
    let ann = |o: &DynamicObject, k: &str| annotation(o, k).map(str::to_string);
    let result = async {
        // Asked for 20: capped at maxReplicaCount 5, written on the ScaledObject.
        let change = plan_and_apply(&lambda, &r, FloorIntent::AtLeast(20), now(), 300.0, false)
            .await
            .expect("the lambda user may get and patch ScaledObjects");
        assert_eq!(change.patch.outcome, LeaseOutcome::Raised);
        assert_eq!(change.object, format!("scaledobject prewarm/{name}"));
        let got = sos.get(&name).await.unwrap();
        assert_eq!(min_count(&got), Some(5));
        assert_eq!(got.data["spec"]["maxReplicaCount"].as_u64(), Some(5));
        assert_eq!(ann(&got, USER_MIN).as_deref(), Some("1"));
        assert_eq!(ann(&got, RAISED_MIN).as_deref(), Some("5"));
        assert_eq!(ann(&got, "team").as_deref(), Some("ml"));
        let managers: Vec<String> = got
            .metadata
            .managed_fields
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| m.manager)
            .collect();
        assert!(managers.iter().any(|m| m == FIELD_MANAGER), "{managers:?}");
        // The HPA itself is KEDA's to write: untouched.
        let h = hpas.get(&hpa_name).await.unwrap();
        assert_eq!(h.spec.as_ref().unwrap().min_replicas, Some(2));
        assert!(!h
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(USER_MIN));

        // Restored exactly.
        assert_eq!(
            apply_floor(&lambda, &r, FloorIntent::Restore, now(), 0.0, false)
                .await
                .unwrap(),
            LeaseOutcome::Restored
        );
        let got = sos.get(&name).await.unwrap();
        assert_eq!(min_count(&got), Some(1));
        assert_eq!(ann(&got, USER_MIN), None);
        assert_eq!(ann(&got, RAISED_MIN), None);
        assert_eq!(ann(&got, "team").as_deref(), Some("ml"));

        // Raised to 3, then the user sets 2 on the ScaledObject: the restore keeps the 2.
        assert_eq!(
            apply_floor(&lambda, &r, FloorIntent::AtLeast(3), now(), 300.0, false)
                .await
                .unwrap(),
            LeaseOutcome::Raised
        );
        assert_eq!(min_count(&sos.get(&name).await.unwrap()), Some(3));
        sos.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minReplicaCount": 2}})),
        )
        .await
        .unwrap();
        assert_eq!(
            apply_floor(&lambda, &r, FloorIntent::Restore, now(), 0.0, false)
                .await
                .unwrap(),
            LeaseOutcome::UserEditKept
        );
        let got = sos.get(&name).await.unwrap();
        assert_eq!(min_count(&got), Some(2));
        assert_eq!(ann(&got, RAISED_MIN), None);
    }
    .await;
    let _ = hpas.delete(&hpa_name, &DeleteParams::default()).await;
    delete(&sos, &name).await;
    result
}
