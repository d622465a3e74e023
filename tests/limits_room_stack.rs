//! Room in a NodePool's `spec.limits` for a drain's replacement, on the real apiserver of the
//! local stack (tests/stack) with the real Karpenter (kwok provider): a NodePool at its cap
//! cannot launch the replacement of a draining node, since Karpenter still counts that node.
//!
//! - `a_pool_at_its_cap_launches_the_replacement_and_gets_the_users_limits_back`: the whole
//!   path. A NodePool whose own `spec.limits` hold exactly its one node (no `limits` in the
//!   target); a spot warning for that node; at the claim the interruption function raises the
//!   limits by the node's capacity, Karpenter launches a node for the drain's placeholder (the
//!   proof that it became admissible), the drain hands over and evicts; once the node is gone the
//!   tick's computation gives the user's limits back exactly (a number stays a number).
//! - `a_targets_cap_grows_for_the_reservation_only_and_restore_gives_the_users_value_back`: a target
//!   with its own cap; the room at the claim, kept by the tick while the reservation lasts, gone when
//!   it expires; `prewarm restore` then puts the user's value back exactly.
//! - `a_write_that_conflicts_with_a_drains_claim_keeps_its_room`: the tick (or another drain)
//!   read the pool and its nodes, then a drain claimed one of them and made room; the first
//!   write conflicts, and the retry must count the new drain instead of erasing its room.
//! - `a_room_write_refused_at_the_claim_is_made_by_the_drains_next_step` and
//!   `a_tick_whose_headroom_read_fails_still_makes_a_drains_room`: the apiserver refuses the
//!   claim's room write (a ValidatingAdmissionPolicy for the lambda user on that NodePool, lifted
//!   after the claim); the drain's next step, or a tick whose headroom object cannot be read,
//!   writes it.
//! - `at_the_cap_a_long_grace_deployment_pod_leaves_the_placeholder_to_the_others`: two
//!   Deployments' pods on the one node of a pool at its cap, one with a grace period longer than
//!   the warning (evicted at the claim): the placeholder stands for the other alone, so it and
//!   the evicted pod's successor both fit the room, and the drain sees its replacement.
//!
//! The handler runs as the `prewarm-lambda` user (both functions' groups plus the stack-tests
//! grant for objects of any name, as these NodePools are the test's own); the admin makes the
//! NodePools, nodes and pods.

use std::collections::HashMap;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsMessage;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use prewarm::adapters::events::{parse_record_with, InstanceIdRule, ParsedRecord};
use prewarm::adapters::kube::drain::instance_of_node;
use prewarm::adapters::kube::drain::replacement::placeholder_selector;
use prewarm::adapters::kube::nodepool::limits::LimitsIntent;
use prewarm::adapters::kube::nodepool::limits_room::{pool_nodes, sync_room};
use prewarm::adapters::kube::nodepool::{apply_node_pool, read_node_pool, PatchOutcome};
use prewarm::adapters::kube::restore::{restore_all, Drains};
use prewarm::config::Config;
use prewarm::handlers::interruption::{Continuation, Interruption, RecordOutcome};
use prewarm::handlers::tick::{tick_once, TickDeps};
use serde_json::{json, Value};

mod common;
use common::kwok_pools::{gpu_pool, limits_of, pools, unique_hex, wait_for};
use common::{as_user, env, now};

const NS: &str = "prewarm-room-stack";

/// One test at a time: two of them run the real tick, whose reservation collection lists every node
/// and placeholder of the cluster and would collect another test's drain as one nobody drives.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The target of `pool`: placeholders in the balloon namespace `prewarm`; `limits` as given.
fn targets(pool: &str, limits: Option<Value>) -> String {
    let mut t = json!({"name": pool, "nodePool": pool, "maxSpare": 8, "gpusPerReplica": 1,
        "headroom": {"kind": "balloon", "namespace": "prewarm", "name": format!("{pool}-balloon")},
        "selector": "model_name=\"room\""});
    if let Some(l) = limits {
        t["limits"] = l;
    }
    json!([t]).to_string()
}

async fn handler(targets: &str) -> Interruption {
    let vars: HashMap<&str, String> = [
        ("KUBECONFIG", env("PREWARM_LAMBDA_KUBECONFIG")),
        ("RECHECK_SECONDS", "2".into()),
        ("ACCEPT_KWOK_INSTANCE_IDS", "true".into()),
        ("PREWARM_TARGETS", targets.to_string()),
    ]
    .into();
    let config = Config::from_lookup(|k| vars.get(k).cloned()).unwrap();
    Interruption::from_config(&config).await.unwrap()
}

/// A spot warning for `instance`, issued now (instance end in 120 s, eviction deadline in 90 s).
fn spot_warning(instance: &str) -> ParsedRecord {
    let body = json!({
        "version": "0", "id": unique_hex("ev-"), "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2", "account": "123456789012",
        "time": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "region": "us-east-1", "resources": [format!("arn:aws:ec2:us-east-1a:instance/{instance}")],
        "detail": {"instance-id": instance, "instance-action": "terminate"}
    });
    let message: SqsMessage = serde_json::from_value(json!({
        "messageId": unique_hex("m-"), "receiptHandle": "rh", "body": body.to_string(),
        "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
        "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
        "awsRegion": "us-east-1"
    }))
    .unwrap();
    parse_record_with(&message, InstanceIdRule::Ec2OrKwok)
}

async fn make_pool(admin: &kube::Client, name: &str, limits: Value) {
    let object: DynamicObject =
        serde_json::from_value(gpu_pool(name, &limits, "prewarm.io/room-test")).unwrap();
    pools(admin)
        .patch(
            name,
            &PatchParams::apply("prewarm-room-tests").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("creating NodePool {name}: {e}"));
}

async fn ensure_namespace(client: &kube::Client) {
    let api = Api::<Namespace>::all(client.clone());
    if api.get_opt(NS).await.unwrap().is_none() {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
        let _ = api.create(&PostParams::default(), &ns).await;
    }
}

/// A workload pod of `pool` asking for `gpus` (it tolerates the pool's taint; the drain's
/// placeholder copies that toleration). `node`: bound to it; None: for the scheduler.
async fn make_pod(client: &kube::Client, name: &str, pool: &str, gpus: u32, node: Option<&str>) {
    let mut pod = json!({
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "room"}},
        "spec": {
            "nodeSelector": {"karpenter.sh/nodepool": pool},
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"key": "prewarm.io/room-test", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                              "limits": {"nvidia.com/gpu": gpus.to_string()}}}]
        }
    });
    if let Some(n) = node {
        pod["spec"]["nodeName"] = json!(n);
    }
    Api::<Pod>::namespaced(client.clone(), NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod).unwrap(),
        )
        .await
        .unwrap();
}

/// The node a pod runs on, once it is Running.
async fn running_on(client: &kube::Client, namespace: &str, pod: &str) -> Option<String> {
    let p = Api::<Pod>::namespaced(client.clone(), namespace)
        .get_opt(pod)
        .await
        .ok()
        .flatten()?;
    let running = p.status.as_ref()?.phase.as_deref() == Some("Running");
    running.then(|| p.spec?.node_name).flatten()
}

/// The drain's placeholder pods (balloon namespace `prewarm`), by the label its id becomes (a
/// kwok node name may pass a label value's 63 characters).
async fn placeholders(client: &kube::Client, instance: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "prewarm")
        .list(&placeholder_selector(Some(instance)))
        .await
        .unwrap()
        .items
}

/// Deletes what a test made: the drain's placeholders (a drain not driven to its end leaves one,
/// which other tests' restores would find), the workload pods `pods` and the NodePool.
async fn clean_up(admin: &kube::Client, instance: &str, pods: &[&str], pool: &str) {
    for p in placeholders(admin, instance).await {
        let _ = Api::<Pod>::namespaced(admin.clone(), "prewarm")
            .delete(
                p.metadata.name.as_deref().unwrap(),
                &DeleteParams::default(),
            )
            .await;
    }
    for pod in pods {
        let _ = Api::<Pod>::namespaced(admin.clone(), NS)
            .delete(pod, &DeleteParams::default())
            .await;
    }
    let _ = pools(admin).delete(pool, &DeleteParams::default()).await;
}

/// What the drain left on the node, for a failure message.
async fn node_report(client: &kube::Client, node: &str) -> String {
    match Api::<Node>::all(client.clone()).get_opt(node).await {
        Ok(Some(n)) => format!(
            "node {node}: annotations {:?}, taints {:?}",
            n.metadata.annotations.unwrap_or_default(),
            n.spec.and_then(|s| s.taints)
        ),
        other => format!("node {node}: {other:?}"),
    }
}

/// A new NodePool (name `prefix` + hex) whose user limits hold exactly one g5.12xlarge (48 cpu,
/// 4 GPUs; the GPU limit a number), with a 4-GPU workload Running on the node Karpenter
/// launched for it: (pool, the user's limits, workload pod, node).
async fn pool_at_its_cap(admin: &kube::Client, prefix: &str) -> (String, Value, String, String) {
    // The kwok provider's node names (the drain ids here) grow with the NodePool's: a prefix of
    // 19 characters or more makes them longer than a label value's 63, which the drain's
    // placeholder label must then cut (`drain_label`).
    let pool = unique_hex(prefix);
    let users = json!({"cpu": "48", "nvidia.com/gpu": 4});
    make_pool(admin, &pool, users.clone()).await;
    let workload = format!("{pool}-w");
    make_pod(admin, &workload, &pool, 4, None).await;
    let node = wait_for(
        "the workload on a node Karpenter launched",
        Duration::from_secs(180),
        || running_on(admin, NS, &workload),
    )
    .await;
    (pool, users, workload, node)
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_pool_at_its_cap_launches_the_replacement_and_gets_the_users_limits_back() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let admin = as_user("KUBECONFIG").await;
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    ensure_namespace(&admin).await;
    let (pool, users, workload, node) = pool_at_its_cap(&admin, "replacement-at-cap-").await;
    let nodes = Api::<Node>::all(admin.clone());
    let instance = instance_of_node(&nodes.get(&node).await.unwrap()).unwrap_or_default();
    assert!(
        instance.len() > 63,
        "a drain id past a label value's length: {instance}"
    );
    let claims = Api::<DynamicObject>::all_with(
        admin.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
            "nodeclaims",
        ),
    );
    let claims_of_pool = || async {
        let selector = format!("karpenter.sh/nodepool={pool}");
        claims
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items
    };
    // The control: at the cap, Karpenter launches nothing for another 4-GPU pod of the pool.
    let probe = format!("{pool}-probe");
    make_pod(&admin, &probe, &pool, 4, None).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let probe_node = running_on(&admin, NS, &probe).await;
    let claims_at_cap = claims_of_pool().await.len();
    let _ = Api::<Pod>::namespaced(admin.clone(), NS)
        .delete(
            &probe,
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await;

    let h = handler(&targets(&pool, None)).await;
    let record = spot_warning(&instance);
    let claim_at = now();
    let first = h.handle_record(&record, &Continuation::default()).await;
    // Right after the claim, before any tick: room for one more node of that size.
    let (at_claim, saved_at_claim) = limits_of(&admin, &pool).await;

    // The placeholder gets a node Karpenter launched: the replacement was admissible.
    let placeholder = wait_for(
        "the drain's placeholder",
        Duration::from_secs(10),
        || async {
            placeholders(&admin, &instance)
                .await
                .into_iter()
                .find_map(|p| p.metadata.name)
        },
    )
    .await;
    let replacement_node = wait_for(
        "the placeholder Running on a node Karpenter launched",
        Duration::from_secs(80),
        || running_on(&admin, "prewarm", &placeholder),
    )
    .await;
    let launched_in = now() - claim_at;

    // Drive the drain to its end (hand-over, eviction).
    let mut outcomes = vec![first];
    for _ in 0..60 {
        if matches!(outcomes.last(), Some(RecordOutcome::Delete { .. })) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        outcomes.push(h.handle_record(&record, &Continuation::default()).await);
    }
    let report = node_report(&admin, &node).await;
    // Drained, the node still there: Karpenter still counts it, so the room stays.
    let tick = sync_room(&lambda, &pool, None, now()).await.unwrap();
    let (while_there, _) = limits_of(&admin, &pool).await;

    // The instance goes (the NodeClaim deleted, as when EC2 takes it back): the tick's room
    // computation gives the user's limits back exactly and drops the annotation.
    for c in claims_of_pool().await {
        if c.data["status"]["nodeName"].as_str() == Some(node.as_str()) {
            let _ = claims
                .delete(
                    c.metadata.name.as_deref().unwrap(),
                    &DeleteParams::default(),
                )
                .await;
        }
    }
    wait_for("the drained node gone", Duration::from_secs(90), || async {
        nodes.get_opt(&node).await.unwrap().is_none().then_some(())
    })
    .await;
    sync_room(&lambda, &pool, None, now()).await.unwrap();
    let (after, saved_after) = limits_of(&admin, &pool).await;

    let _ = Api::<Pod>::namespaced(admin.clone(), NS)
        .delete(&workload, &DeleteParams::default())
        .await;
    let _ = pools(&admin).delete(&pool, &DeleteParams::default()).await;

    eprintln!("replacement node Running {launched_in:.1} s after the claim; {report}");
    assert_eq!(probe_node, None, "a pod got a node past the cap");
    assert_eq!(claims_at_cap, 1, "Karpenter launched past the cap");
    // By hand: 4 GPUs + the node's 4. The kwok provider gives its nodes the capacity of the
    // pods they were launched for (its cloudprovider.go: Capacity = the NodeClaim's requests),
    // here 4 GPUs and no cpu, so Karpenter counts no cpu for it and the cpu limit gets nothing:
    // on EC2 a node's capacity is its instance's (48 cpu) and the cpu limit would grow by 48.
    assert_eq!(
        at_claim,
        json!({"cpu": "48", "nvidia.com/gpu": "8"}),
        "room at the claim; {report}"
    );
    assert!(saved_at_claim.is_some(), "the user's limits were not saved");
    assert_ne!(replacement_node, node);
    assert!(
        matches!(outcomes.last(), Some(RecordOutcome::Delete { .. })),
        "the drain did not finish: {outcomes:?}; {report}"
    );
    assert_eq!(
        tick.as_str(),
        "unchanged",
        "the tick fought the claim's room"
    );
    assert_eq!(while_there, json!({"cpu": "48", "nvidia.com/gpu": "8"}));
    assert_eq!(after, users, "the user's limits exactly");
    assert_eq!(saved_after, None);
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_targets_cap_grows_for_the_reservation_only_and_restore_gives_the_users_value_back() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let admin = as_user("KUBECONFIG").await;
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    ensure_namespace(&admin).await;
    let pool = unique_hex("room-cap-");
    let users = json!({"cpu": "1000", "memory": "4Ti", "nvidia.com/gpu": 100});
    make_pool(&admin, &pool, users.clone()).await;
    // A node of the pool made by hand (kwok runs it): 4 GPUs, 32 cpu, 128Gi.
    let node = unique_hex("room-n-");
    let instance = unique_hex("kwok-room-");
    let nodes = Api::<Node>::all(admin.clone());
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": node, "annotations": {"kwok.x-k8s.io/node": "fake"},
                     "labels": {"kubernetes.io/hostname": node, "type": "kwok",
                                "karpenter.sh/nodepool": pool}},
        "spec": {"providerID": format!("kwok://{instance}")}
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &n).await.unwrap();
    // kwok's node-ready stage (NODE_READY_DELAY after the node appears) merges a default
    // capacity (4 cpu, 16Gi) from the copy it saw then: patched before it ran, the memory was
    // once 16Gi (the room 1040Gi, not 1152Gi). So the capacity is written once kwok made the
    // node Ready.
    let capacity = json!({"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "4"});
    common::write_capacity_once_ready(&nodes, &node, &capacity).await;
    let pod = format!("{node}-p");
    make_pod(&admin, &pod, &pool, 1, Some(&node)).await;

    let cap = json!({"nvidia.com/gpu": "64", "memory": "1Ti"});
    let targets_json = targets(&pool, Some(cap.clone()));
    let target_cap = serde_json::from_value(cap.clone()).unwrap();
    // The tick first writes the cap (the user's values saved).
    sync_room(&lambda, &pool, Some(&target_cap), now())
        .await
        .unwrap();
    let (capped, _) = limits_of(&admin, &pool).await;

    let h = handler(&targets_json).await;
    h.handle_record(&spot_warning(&instance), &Continuation::default())
        .await;
    let (at_claim, _) = limits_of(&admin, &pool).await;
    // The tick while the reservation lasts keeps the room (the same computation: nothing to write).
    let kept = sync_room(&lambda, &pool, Some(&target_cap), now())
        .await
        .unwrap();
    // 800 s on, past the reservation's expiry (instance end + 600 s): the room is given back.
    sync_room(&lambda, &pool, Some(&target_cap), now() + 800.0)
        .await
        .unwrap();
    let (expired, _) = limits_of(&admin, &pool).await;

    // `prewarm restore` as its own user would: the user's values exactly.
    let config =
        Config::from_lookup(|k| (k == "PREWARM_TARGETS").then(|| targets_json.clone())).unwrap();
    let restored = restore_all(&lambda, &config.targets, now(), false, Drains::GiveBack).await;
    let (after_restore, saved_after) = limits_of(&admin, &pool).await;

    let _ = nodes.delete(&node, &DeleteParams::default()).await;
    clean_up(&admin, &instance, &[&pod], &pool).await;

    // By hand: the cap 64 GPUs / 1Ti; the node adds 4 GPUs and 128Gi (1Ti + 128Gi = 1152Gi);
    // cpu is not in the cap and stays the user's.
    assert_eq!(
        capped,
        json!({"cpu": "1000", "memory": "1Ti", "nvidia.com/gpu": "64"})
    );
    assert_eq!(
        at_claim,
        json!({"cpu": "1000", "memory": "1152Gi", "nvidia.com/gpu": "68"})
    );
    assert_eq!(kept.as_str(), "unchanged");
    assert_eq!(expired, capped);
    // The limits step put them back (the other steps find no balloon: the test made none).
    let limits_step = restored.first().and_then(|r| r.as_ref().ok());
    assert!(
        limits_step.is_some_and(|r| r.iter().any(|x| x.outcome.to_string() == "restored")),
        "{restored:?}"
    );
    assert_eq!(after_restore, users);
    assert_eq!(saved_after, None);
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_write_that_conflicts_with_a_drains_claim_keeps_its_room() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let admin = as_user("KUBECONFIG").await;
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    ensure_namespace(&admin).await;
    let (pool, _, workload, node) = pool_at_its_cap(&admin, "rc-").await;
    let instance = instance_of_node(&Api::<Node>::all(admin.clone()).get(&node).await.unwrap())
        .unwrap_or_default();

    // What a tick read before the drain: the pool and its nodes, none draining.
    let stale_view = read_node_pool(&lambda, &pool).await.unwrap();
    let stale_nodes = pool_nodes(&lambda, &pool).await.unwrap();
    // Then the drain claims the node and makes room for its replacement (4 + 4 GPUs).
    let h = handler(&targets(&pool, None)).await;
    h.handle_record(&spot_warning(&instance), &Continuation::default())
        .await;
    let (at_claim, _) = limits_of(&admin, &pool).await;
    // The tick's write from what it read (its limits, and a consolidation freeze so that it
    // has something to write): its first attempt conflicts (the claim moved the pool's
    // resourceVersion); the retry reads the pool again, and must read the nodes again.
    let intent = LimitsIntent::Room {
        cap: None,
        nodes: stale_nodes,
        now: now(),
    };
    let outcome = apply_node_pool(&lambda, &stale_view, &intent, Some(true), false).await;
    let (after, _) = limits_of(&admin, &pool).await;

    clean_up(&admin, &instance, &[&workload], &pool).await;

    assert_eq!(
        at_claim,
        json!({"cpu": "48", "nvidia.com/gpu": "8"}),
        "no room at the claim"
    );
    // The freeze went through, on the retry.
    assert_eq!(
        outcome.as_ref().map(|o| o.patch).ok(),
        Some(PatchOutcome::Written),
        "{outcome:?}"
    );
    // By hand: the room counts the draining node (4 + 4). With the nodes listed before the
    // claim, the retry wrote the user's 4 back over the room.
    assert_eq!(after, at_claim, "the write took the drain's room away");
}

/// The `ValidatingAdmissionPolicy` (and its binding) that refuses the lambda user's writes to
/// NodePool `pool`: the apiserver's own admission (CEL), not a fault of the test's making.
fn refusal(pool: &str) -> (DynamicObject, DynamicObject) {
    let name = format!("prewarm-test-refuse-{pool}");
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["karpenter.sh"],
                "apiVersions": ["*"], "operations": ["UPDATE"], "resources": ["nodepools"]}]},
            "matchConditions": [{"name": "the-lambda-on-this-pool", "expression":
                format!("request.userInfo.username == 'prewarm-lambda' && object.metadata.name == '{pool}'")}],
            "validations": [{"expression": "false", "message": "refused by the test"}]
        }
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]}
    });
    (
        serde_json::from_value(policy).unwrap(),
        serde_json::from_value(binding).unwrap(),
    )
}

fn admission_api(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
            plural,
        ),
    )
}

/// Refuses (`on`) or allows again the lambda's writes to `pool`, and waits until the apiserver
/// does so (a dry-run write by the lambda refused, or accepted: policies apply asynchronously).
async fn refuse_pool_writes(admin: &kube::Client, lambda: &kube::Client, pool: &str, on: bool) {
    let (policy, binding) = refusal(pool);
    let policies = admission_api(
        admin,
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
    );
    let bindings = admission_api(
        admin,
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
    );
    let name = policy.metadata.name.clone().unwrap();
    if on {
        let apply = PatchParams::apply("prewarm-room-tests").force();
        policies
            .patch(&name, &apply, &Patch::Apply(&policy))
            .await
            .unwrap();
        bindings
            .patch(&name, &apply, &Patch::Apply(&binding))
            .await
            .unwrap();
    } else {
        let _ = bindings.delete(&name, &DeleteParams::default()).await;
        let _ = policies.delete(&name, &DeleteParams::default()).await;
    }
    let probe = Patch::Merge(json!({"metadata": {"annotations": {"prewarm.io/room-probe": "1"}}}));
    let dry_run = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for(
        if on {
            "the refusal in force"
        } else {
            "the refusal lifted"
        },
        Duration::from_secs(30),
        || async {
            let refused = pools(lambda).patch(pool, &dry_run, &probe).await.is_err();
            (refused == on).then_some(())
        },
    )
    .await;
}

/// A pool at its cap whose node a drain claimed while the apiserver refused the lambda's
/// NodePool writes (the refusal lifted since): the claim made no room.
struct RefusedClaim {
    pool: String,
    users: Value,
    workload: String,
    node: String,
    instance: String,
    handler: Interruption,
    record: ParsedRecord,
    first: RecordOutcome,
    /// The limits right after the claim.
    at_claim: Value,
}

async fn refused_claim(admin: &kube::Client, prefix: &str) -> RefusedClaim {
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    ensure_namespace(admin).await;
    let (pool, users, workload, node) = pool_at_its_cap(admin, prefix).await;
    let instance = instance_of_node(&Api::<Node>::all(admin.clone()).get(&node).await.unwrap())
        .unwrap_or_default();
    let handler = handler(&targets(&pool, None)).await;
    let record = spot_warning(&instance);
    refuse_pool_writes(admin, &lambda, &pool, true).await;
    let first = handler
        .handle_record(&record, &Continuation::default())
        .await;
    let (at_claim, _) = limits_of(admin, &pool).await;
    refuse_pool_writes(admin, &lambda, &pool, false).await;
    RefusedClaim {
        pool,
        users,
        workload,
        node,
        instance,
        handler,
        record,
        first,
        at_claim,
    }
}

/// A claim at the cap whose room write the apiserver refused: the drain's next step (the
/// placeholder Pending, since Karpenter cannot launch past the cap) writes the room.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_room_write_refused_at_the_claim_is_made_by_the_drains_next_step() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let admin = as_user("KUBECONFIG").await;
    let c = refused_claim(&admin, "rr-").await;
    let (pool, node, instance) = (&c.pool, &c.node, &c.instance);
    // The next check (RECHECK_SECONDS 2 after the claim; an earlier delivery is a duplicate).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pending = placeholders(&admin, instance).await;
    let second = c
        .handler
        .handle_record(&c.record, &Continuation::default())
        .await;
    let (after, _) = limits_of(&admin, pool).await;
    let report = node_report(&admin, node).await;

    clean_up(&admin, instance, &[&c.workload], pool).await;

    assert_eq!(
        c.at_claim, c.users,
        "the refusal did not hold at the claim: {:?}",
        c.first
    );
    assert_eq!(
        pending.len(),
        1,
        "no placeholder waiting at the cap; {report}"
    );
    // By hand, as in the first test: the user's 4 GPUs + the node's 4 (kwok: no cpu capacity).
    assert_eq!(
        after,
        json!({"cpu": "48", "nvidia.com/gpu": "8"}),
        "the drain did not make its room again: {second:?}; {report}"
    );
}

/// A tick whose target's headroom object cannot be read (here: there is none) still writes the
/// room of its NodePool's draining node, whose own write at the claim the apiserver refused.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_tick_whose_headroom_read_fails_still_makes_a_drains_room() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let admin = as_user("KUBECONFIG").await;
    let c = refused_claim(&admin, "rt-").await;
    let (pool, node, instance) = (&c.pool, &c.node, &c.instance);
    // The tick, as the lambda user: its balloon `<pool>-balloon` was never made.
    let vars: HashMap<&str, String> = [
        ("PREWARM_TARGETS", targets(pool, None)),
        ("METRIC_SOURCE", "prometheus".to_string()),
        ("PROMETHEUS_URL", env("PROMETHEUS_URL")),
        ("KUBECONFIG", env("PREWARM_LAMBDA_KUBECONFIG")),
        ("INTERRUPTION_QUEUE_URL", env("INTERRUPTION_QUEUE_URL")),
    ]
    .into();
    let config = Config::from_lookup(|k| vars.get(k).cloned()).unwrap();
    let deps = std::sync::Arc::new(TickDeps::build(config).await.unwrap());
    let reports = tick_once(&deps, now(), false).await;
    let (after, _) = limits_of(&admin, pool).await;
    let report = node_report(&admin, node).await;

    clean_up(&admin, instance, &[&c.workload], pool).await;

    assert_eq!(c.at_claim, c.users, "the refusal did not hold at the claim");
    let target = reports
        .iter()
        .find(|r| &r.target == pool)
        .expect("a report");
    assert!(
        target
            .error
            .as_deref()
            .is_some_and(|e| e.contains("balloon")),
        "the headroom read did not fail: {target:?}"
    );
    assert_eq!(
        after,
        json!({"cpu": "48", "nvidia.com/gpu": "8"}),
        "the tick did not make the drain's room: {target:?}; {report}"
    );
}

/// A Deployment `name` of `pool`: one replica asking for `gpus`, with `grace_s`.
async fn make_deployment(client: &kube::Client, name: &str, pool: &str, gpus: u32, grace_s: u32) {
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {"karpenter.sh/nodepool": pool},
                    "terminationGracePeriodSeconds": grace_s,
                    "tolerations": [{"key": "prewarm.io/room-test", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                                      "limits": {"nvidia.com/gpu": gpus.to_string()}}}]
                }
            }
        }
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
}

/// The Running pods of Deployment `app` (label `app`): (name, node).
async fn running_pods_of(client: &kube::Client, app: &str) -> Vec<(String, String)> {
    Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| Some((p.metadata.name?, p.spec?.node_name?)))
        .collect()
}

/// A NodePool at its cap (4 GPUs, one node) running two Deployments' pods of 2 GPUs each, one
/// with a 300 s grace period (more than the spot warning's 120 s: due, and evicted, at the
/// claim). The claim's placeholder stands for the other pod only (2 GPUs): the due pod's
/// successor asks for its own 2, and the room (the node's 4) holds both, so the placeholder runs
/// and the drain sees its replacement before the deadline.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn at_the_cap_a_long_grace_deployment_pod_leaves_the_placeholder_to_the_others() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let admin = as_user("KUBECONFIG").await;
    ensure_namespace(&admin).await;
    let pool = unique_hex("rg-");
    make_pool(&admin, &pool, json!({"nvidia.com/gpu": 4})).await;
    let (slow, quick) = (format!("{pool}-slow"), format!("{pool}-quick"));
    // Together, within Karpenter's batch: one NodeClaim for both (a g5.12xlarge holds 4 GPUs).
    make_deployment(&admin, &slow, &pool, 2, 300).await;
    make_deployment(&admin, &quick, &pool, 2, 0).await;
    let node = wait_for(
        "both Deployments' pods Running on one node",
        Duration::from_secs(180),
        || async {
            let (s, q) = (
                running_pods_of(&admin, &slow).await,
                running_pods_of(&admin, &quick).await,
            );
            match (s.as_slice(), q.as_slice()) {
                ([(_, a)], [(_, b)]) => {
                    assert_eq!(a, b, "Karpenter put the two pods on two nodes");
                    Some(a.clone())
                }
                _ => None,
            }
        },
    )
    .await;
    let nodes = Api::<Node>::all(admin.clone());
    let instance = instance_of_node(&nodes.get(&node).await.unwrap()).unwrap_or_default();

    let h = handler(&targets(&pool, None)).await;
    let record = spot_warning(&instance);
    let claim_at = now();
    let mut outcomes = vec![h.handle_record(&record, &Continuation::default()).await];
    let requested: Option<Value> = placeholders(&admin, &instance)
        .await
        .first()
        .and_then(|p| p.spec.as_ref()?.containers.first()?.resources.clone())
        .and_then(|r| serde_json::to_value(r.requests?).ok());
    for _ in 0..80 {
        if matches!(outcomes.last(), Some(RecordOutcome::Delete { .. })) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        outcomes.push(h.handle_record(&record, &Continuation::default()).await);
    }
    let annotations = nodes
        .get(&node)
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap_or_default();
    let time = |key: &str| {
        annotations
            .get(key)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp_millis() as f64 / 1000.0)
    };
    let ready_at = time("prewarm.io/drain-replacement-ready-at");
    let deadline = time("prewarm.io/drain-deadline");
    let successor = running_pods_of(&admin, &slow).await;
    let report = node_report(&admin, &node).await;

    let deployments = Api::<Deployment>::namespaced(admin.clone(), NS);
    for d in [&slow, &quick] {
        let _ = deployments.delete(d, &DeleteParams::default()).await;
    }
    clean_up(&admin, &instance, &[], &pool).await;

    // By hand: the quick pod's 2 GPUs, not the 4 of both pods.
    assert_eq!(
        requested,
        Some(json!({"nvidia.com/gpu": "2"})),
        "the claim's placeholder; {report}"
    );
    eprintln!(
        "replacement ready {:?} s after the claim, deadline {:?} s after it",
        ready_at.map(|t| t - claim_at),
        deadline.map(|t| t - claim_at)
    );
    assert!(
        ready_at.zip(deadline).is_some_and(|(r, d)| r < d),
        "the drain never saw its replacement before the deadline: {outcomes:?}; {report}"
    );
    assert!(
        successor.iter().any(|(_, n)| *n != node),
        "the due pod's successor found no room: {successor:?}"
    );
    assert!(
        matches!(outcomes.last(), Some(RecordOutcome::Delete { .. })),
        "the drain did not finish: {outcomes:?}; {report}"
    );
}
