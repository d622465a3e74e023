//! The tick beside the interruption function's drains, on the stack's real kube-apiserver: the
//! real `tick_once`, as the `prewarm-lambda` user, at its shipped 15 s interval.
//!
//! - A drain's surge holds through the whole drain: a target that names its HPA for sizing only
//!   (`raiseMinReplicas` false) never lowers the `minReplicas` a drain raised, and
//!   gives back nothing of it when the drain has given it back itself.
//! - The surge of a drain that no longer runs (its node gone) is given back by the tick.
//! - The drains' safety net runs whatever the tick's mode: under DRY_RUN (and PAUSED, which
//!   ticks as DRY_RUN does once its restore is through) the tick still hands a false-alarm
//!   rebalance's node to the interruption function to un-drain.
//!
//! The drain is the interruption function's own record and surge: its state annotations on a
//! kwok node (renewed at every step, as its owner's heartbeat), and its surge written by
//! `drain::surge::surge_workload` (what the drain's step calls) at every step. The stack has no
//! metrics API, so its HPA controller never scales the Deployment down: a lowered
//! `minReplicas` is what would remove the surge pods in a cluster, and is what is asserted.
//!
//! Run: `. tests/stack/.run/env && cargo test --test tick_drain_stack -- --include-ignored
//! --test-threads=1`

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, PostParams};
use prewarm::adapters::kube::drain::surge::{release, surge_workload};
use prewarm::core::interruption::surge::SurgeIntent;
use prewarm::core::TargetSpec;
use prewarm::handlers::restore::{restore_everything, Scope};
use prewarm::handlers::tick::{tick_once, TickDeps};
use serde_json::json;

mod common;
use common::{as_user, now, tick_config};
#[path = "common/drain_fixtures.rs"]
mod drain_fixtures;
use drain_fixtures::{
    ago, annotate, ensure_balloon, false_alarm_node, make_node, unique, BALLOON, BALLOON_NS,
};

/// Both tests list every node of the cluster through the tick: one at a time.
static CLUSTER_WIDE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const NS: &str = "prewarm";
/// The shipped TICK_SECONDS.
const TICK_S: f64 = 15.0;
/// A spot warning's two minutes.
const WARNING_S: f64 = 120.0;

fn time(t: f64) -> String {
    prewarm::adapters::kube::headroom::annotations::format_time(t)
}

/// The tick's environment: one target on the stack's `gpu` pool and balloon, its pods and HPA in
/// `prewarm`, DRY_RUN as given.
async fn tick_deps(target: serde_json::Value, queue_url: &str, dry_run: bool) -> Arc<TickDeps> {
    let config = tick_config(&[
        ("PREWARM_TARGETS", json!([target]).to_string()),
        ("INTERRUPTION_QUEUE_URL", queue_url.to_string()),
        ("DRY_RUN", dry_run.to_string()),
    ]);
    Arc::new(TickDeps::build(config).await.unwrap())
}

fn target(name: &str, hpa: Option<&str>) -> serde_json::Value {
    let mut t = json!({
        "name": name, "nodePool": "gpu", "maxSpare": 2, "podNamespace": NS,
        "selector": format!("model_name=\"{name}\""),
        "headroom": {"kind": "balloon", "namespace": BALLOON_NS, "name": BALLOON}
    });
    if let Some(hpa) = hpa {
        // Named for sizing only: no floor of the tick's own beside the drain's surge.
        t["hpa"] = json!({"namespace": NS, "name": hpa, "raiseMinReplicas": false});
    }
    t
}

/// The drain's record on its node at a step at `t`: a spot warning at `notice`, its replacement
/// Ready, evicting (held for the surge), its owner's heartbeat now and next check a recheck on.
fn evicting(notice: f64, t: f64) -> Vec<(&'static str, String)> {
    vec![
        ("prewarm.io/drain-event-id", "ev-tick-drain".to_string()),
        ("prewarm.io/drain-kind", "spot-interruption".into()),
        ("prewarm.io/drain-phase", "evicting".into()),
        ("prewarm.io/drain-notice-time", time(notice)),
        ("prewarm.io/drain-deadline", time(notice + WARNING_S)),
        ("prewarm.io/drain-started-at", time(notice)),
        ("prewarm.io/drain-replacement-ready-at", time(notice + 10.0)),
        ("prewarm.io/drain-evicting-since", time(notice + 10.0)),
        ("prewarm.io/drain-last-step-at", time(t)),
        ("prewarm.io/drain-next-check-at", time(t + TICK_S)),
    ]
}

/// The `prewarm.io/` annotations left on `hpa`.
fn prewarm_annotations(hpa: &HorizontalPodAutoscaler) -> Vec<String> {
    let annotations = hpa.metadata.annotations.clone().unwrap_or_default();
    annotations
        .into_keys()
        .filter(|k| k.starts_with("prewarm.io/"))
        .collect()
}

/// A Deployment `name` of 2 replicas whose pods select no node (nothing needs to run for the
/// floor), under an HPA with the user's minReplicas 2.
async fn hpa_workload(
    admin: &kube::Client,
    name: &str,
) -> (Api<Deployment>, Api<HorizontalPodAutoscaler>) {
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(admin.clone(), NS);
    let labels = json!({"app.kubernetes.io/name": name});
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"nodeSelector": {"prewarm.io/no-such-node": "true"},
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                 "minReplicas": 2, "maxReplicas": 6,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                     "target": {"type": "Utilization", "averageUtilization": 80}}}]}
    }))
    .unwrap();
    hpas.create(&PostParams::default(), &hpa).await.unwrap();
    (deployments, hpas)
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn the_tick_never_lowers_a_drains_surge_through_the_whole_drain() {
    let _alone = CLUSTER_WIDE.lock().await;
    let admin = as_user("KUBECONFIG").await;
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    ensure_balloon(&admin).await;
    let name = unique("tick-surge-");
    let (node, instance) = (format!("{name}-node"), unique("i-0abcd"));
    let (deployments, hpas) = hpa_workload(&admin, &name).await;
    make_node(&admin, &node, &instance).await;
    let sqs = drain_fixtures::sqs().await;
    let queue = drain_fixtures::queue(&sqs, "tick-surge-").await;
    // raiseMinReplicas false: the HPA is named for sizing only.
    let deps = tick_deps(target(&name, Some(&name)), &queue, false).await;
    let targets: Vec<TargetSpec> = vec![serde_json::from_value(target(&name, None)).unwrap()];
    let min_of = |h: &HorizontalPodAutoscaler| h.spec.as_ref().unwrap().min_replicas.unwrap();

    let result = async {
        // The drain's claim and first surge step: its 2 pods moved, the floor 2 + 2 = 4.
        let notice = now();
        annotate(&admin, &node, &evicting(notice, notice)).await;
        let hold = SurgeIntent::Hold {
            drain: instance.clone(),
            k: 2,
        };
        let surged = surge_workload(&lambda, NS, &name, &hold, notice).await;
        if surged.as_ref().ok().map(|s| s.want) != Some(Some(4)) {
            return Err(format!("the drain's surge to 4: {surged:?}"));
        }
        // The tick every 15 s through the drain's two minutes, the drain stepping between ticks
        // (renewing its heartbeat and its surge, as its continuation does).
        let mut floors = Vec::new();
        let mut t = now();
        while t < notice + WARNING_S {
            let reports = tick_once(&deps, t, false).await;
            let floor = min_of(&hpas.get(&name).await.unwrap());
            eprintln!(
                "tick at +{:.0} s: minReplicas {floor}, report {:?}",
                t - notice,
                reports[0].hpa_floor
            );
            floors.push((t - notice, floor, reports[0].hpa_floor.clone()));
            tokio::time::sleep(Duration::from_secs_f64(TICK_S / 2.0)).await;
            let step = now();
            annotate(&admin, &node, &evicting(notice, step)).await;
            if let Err(e) = surge_workload(&lambda, NS, &name, &hold, step).await {
                return Err(format!("the drain's step at +{:.0} s: {e}", step - notice));
            }
            t += TICK_S;
            tokio::time::sleep(Duration::from_secs_f64((t - now()).max(0.0))).await;
        }
        let lowered: Vec<_> = floors.iter().filter(|(_, min, _)| *min < 4).collect();
        if floors.len() < 8 || !lowered.is_empty() {
            return Err(format!(
                "the tick lowered the drain's surge of 4: {lowered:?} (all ticks: {floors:?})"
            ));
        }

        // The drain over: its release gives the user's 2 back; the next tick leaves it there.
        annotate(
            &admin,
            &node,
            &[
                ("prewarm.io/drain-phase", "drained".to_string()),
                ("prewarm.io/drain-finished-at", ago(0)),
            ],
        )
        .await;
        let released = release(&lambda, &targets, &instance, now()).await;
        if !released.iter().all(Result::is_ok) {
            return Err(format!("the drain's release: {released:?}"));
        }
        tokio::time::sleep(Duration::from_secs_f64(TICK_S)).await;
        tick_once(&deps, now(), false).await;
        let h = hpas.get(&name).await.unwrap();
        let left = prewarm_annotations(&h);
        match (min_of(&h), left.is_empty()) {
            (2, true) => Ok(()),
            (min, _) => Err(format!(
                "after the drain: minReplicas {min} (the user's 2), prewarm.io/ left: {left:?}"
            )),
        }
    }
    .await;
    // Cleaned up before any assertion: a failed run leaves no drain for the next one's tick.
    let dp = DeleteParams::default();
    let _ = hpas.delete(&name, &dp).await;
    let _ = deployments.delete(&name, &dp).await;
    let _ = Api::<Node>::all(admin.clone()).delete(&node, &dp).await;
    result.unwrap();
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_dry_run_tick_still_hands_a_false_alarm_to_the_interruption_function() {
    let _alone = CLUSTER_WIDE.lock().await;
    let admin = as_user("KUBECONFIG").await;
    ensure_balloon(&admin).await;
    let (node, _) = false_alarm_node(&admin, "tick-dry-").await;
    let sqs = drain_fixtures::sqs().await;
    let queue = drain_fixtures::queue(&sqs, "tick-dry-").await;
    let deps = tick_deps(target("tick-dry", None), &queue, true).await;

    tick_once(&deps, now(), true).await;
    let handed: Vec<String> = drain_fixtures::receive_some(&sqs, &queue)
        .await
        .into_iter()
        .filter_map(|(record, _)| record.body)
        .filter(|body| body.contains(&node))
        .collect();
    let _ = Api::<Node>::all(admin.clone())
        .delete(&node, &DeleteParams::default())
        .await;
    assert_eq!(
        handed.len(),
        1,
        "a dry-run tick hands the false alarm on {node} over to be un-drained: {handed:?}"
    );
    assert!(handed[0].contains("resume-drain"), "{handed:?}");
}

/// PAUSED's restore (once per execution environment) leaves a running drain's surge and its
/// floor alone: drains keep running under PAUSED, and a surge given back mid-drain lets the HPA
/// remove the new pods before the old ones are evicted. The control: the stack's delete
/// (`Scope::ReportNodes`, prewarm going away) gives the same surge back.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_paused_ticks_restore_leaves_a_running_drains_surge() {
    let _alone = CLUSTER_WIDE.lock().await;
    let admin = as_user("KUBECONFIG").await;
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    ensure_balloon(&admin).await;
    let name = unique("pause-surge-");
    let (node, instance) = (format!("{name}-node"), unique("i-0abcd"));
    let (deployments, hpas) = hpa_workload(&admin, &name).await;
    make_node(&admin, &node, &instance).await;
    let sqs = drain_fixtures::sqs().await;
    let queue = drain_fixtures::queue(&sqs, "pause-surge-").await;
    let deps = tick_deps(target(&name, Some(&name)), &queue, true).await;
    let min_of = |h: &HorizontalPodAutoscaler| h.spec.as_ref().unwrap().min_replicas.unwrap();

    let notice = now();
    annotate(&admin, &node, &evicting(notice, notice)).await;
    let hold = SurgeIntent::Hold {
        drain: instance.clone(),
        k: 2,
    };
    let surged = surge_workload(&lambda, NS, &name, &hold, notice).await;
    let paused = restore_everything(&lambda, &deps.config, now(), Scope::KeepDrains, false).await;
    let after_pause = min_of(&hpas.get(&name).await.unwrap());
    let deleted = restore_everything(&lambda, &deps.config, now(), Scope::ReportNodes, false).await;
    let after_delete = min_of(&hpas.get(&name).await.unwrap());

    let dp = DeleteParams::default();
    let _ = hpas.delete(&name, &dp).await;
    let _ = deployments.delete(&name, &dp).await;
    let _ = Api::<Node>::all(admin.clone()).delete(&node, &dp).await;
    assert_eq!(
        surged.ok().and_then(|s| s.want),
        Some(4),
        "the drain's surge"
    );
    assert_eq!(
        after_pause, 4,
        "the paused tick's restore lowered a running drain's surge: {paused:?}"
    );
    assert_eq!(
        after_delete, 2,
        "the control: the stack's delete gives it back: {deleted:?}"
    );
}

#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn the_tick_gives_back_the_surge_of_a_drain_that_no_longer_runs() {
    let _alone = CLUSTER_WIDE.lock().await;
    let admin = as_user("KUBECONFIG").await;
    let lambda = as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    ensure_balloon(&admin).await;
    let name = unique("orphan-surge-");
    // No node has this instance: the drain's node is gone, its end's release lost.
    let instance = unique("i-0gone");
    let (deployments, hpas) = hpa_workload(&admin, &name).await;
    let sqs = drain_fixtures::sqs().await;
    let queue = drain_fixtures::queue(&sqs, "orphan-surge-").await;
    let deps = tick_deps(target(&name, Some(&name)), &queue, false).await;
    let min_of = |h: &HorizontalPodAutoscaler| h.spec.as_ref().unwrap().min_replicas.unwrap();

    let hold = SurgeIntent::Hold {
        drain: instance.clone(),
        k: 2,
    };
    let surged = surge_workload(&lambda, NS, &name, &hold, now()).await;
    tick_once(&deps, now(), false).await;
    let h = hpas.get(&name).await.unwrap();
    let left = prewarm_annotations(&h);

    let dp = DeleteParams::default();
    let _ = hpas.delete(&name, &dp).await;
    let _ = deployments.delete(&name, &dp).await;
    // The user's 2 + the drain's 2 pods.
    assert_eq!(
        surged.ok().and_then(|s| s.want),
        Some(4),
        "the drain's surge"
    );
    assert_eq!(
        (min_of(&h), left),
        (2, vec![]),
        "the tick gives the user's 2 back exactly, no prewarm.io/ annotation left"
    );
}
