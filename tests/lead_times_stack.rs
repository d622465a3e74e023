//! Lead times learned from the cluster, on the local stack brought up with
//! `NODE_READY_DELAY=30s`: the real Karpenter (kwok provider) creates the NodeClaims and kwok
//! makes their nodes Ready 30 s after they appear; three pods annotated
//! `prewarm.io/test-model-load: 20s` have their containers started once bound and turn Ready
//! 20 s later (tests/stack/manifests/kwok-pod-model-load.yaml): the model load.
//!
//! The tick (the real `tick_once`, as the stack's prewarm-lambda user) learns them:
//! - the first tick learns the boots from the NodeClaims and the pulls and loads from the pods,
//!   decides with LEAD_TIME_SECONDS (the pods' samples count from the next tick) and writes the
//!   book to the `prewarm/prewarm-lead-times` ConfigMap;
//! - a second tick in a fresh execution environment reads the book back and decides with the
//!   learned horizon: every learned boot within 20 % of 30 s, every load within 20 % of 20 s,
//!   and the horizon the sum of the slowest of each phase rounded up to the 15 s step, as the
//!   test reads them off the objects itself; its EMF record says so.
//!
//! It needs the stack's kwok nodes to take 30 s (`NODE_READY_DELAY_MS=30000` in
//! tests/stack/.run/env), so it lives in `boot_30s`: `make e2e` skips `boot_30s::` on its 10 s
//! stack and runs this binary on a second stack up with NODE_READY_DELAY=30s; run on any other
//! stack, it fails naming the setting.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use prewarm::config::Config;
use prewarm::handlers::tick::{emf_record, tick_once, TickDeps};
use serde_json::{json, Value};

mod common;
use common::kwok_pools::{
    delete_namespace_and_pool, namespace_pool_and_balloon, unique_hex, wait_for,
};

const TAINT: &str = "prewarm.io/lead-times-test";
const LOAD: &str = "20s";
const LOAD_S: f64 = 20.0;
const BOOT_S: f64 = 30.0;
const PODS: usize = 3;
const STEP_S: f64 = 15.0;

mod boot_30s {
    #[tokio::test]
    #[ignore = "needs the local stack up with NODE_READY_DELAY=30s (make e2e's second stack)"]
    async fn node_boot_and_model_load_are_learned_within_20_percent_and_the_horizon_follows() {
        super::common::assert_30s_stack(
            "the lead-times test (NODE_READY_DELAY=30s tests/stack/up)",
        );
        Box::pin(super::learn()).await;
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} unset: source tests/stack/.run/env"))
}

async fn client(kubeconfig: &str) -> kube::Client {
    prewarm::adapters::kube::client(&prewarm::config::ClusterAccess::Kubeconfig {
        path: env(kubeconfig),
    })
    .await
    .unwrap()
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn unix(raw: &str) -> f64 {
    chrono::DateTime::parse_from_rfc3339(raw)
        .unwrap()
        .timestamp_millis() as f64
        / 1000.0
}

/// `lastTransitionTime` of the True condition `kind` in `status`.
fn true_since(status: &Value, kind: &str) -> Option<f64> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind && c["status"] == "True")
        .map(|c| unix(c["lastTransitionTime"].as_str().unwrap()))
}

/// A model server of `pool` that needs a node of its own (40 of the g5.12xlarge's 48 cpu).
fn server(ns: &str, name: &str, pool: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "lead"},
                     "annotations": {"prewarm.io/test-model-load": LOAD}},
        "spec": {
            "nodeSelector": {"karpenter.sh/nodepool": pool},
            "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "server", "image": "vllm/vllm-openai:v0.6",
                            "resources": {"requests": {"cpu": "40"}}}]
        }
    }))
    .unwrap()
}

async fn learn() {
    let admin = client("KUBECONFIG").await;
    let ns = unique_hex("lead-");
    let pool = unique_hex("lead");
    let target = format!("{pool}-llama");
    namespace_pool_and_balloon(&admin, &ns, &pool, TAINT, "balloon-lead").await;
    // The book's ConfigMap as the chart makes it: empty, the tick only gets and updates it.
    let configmaps = Api::<ConfigMap>::namespaced(admin.clone(), "prewarm");
    let _ = configmaps
        .delete("prewarm-lead-times", &DeleteParams::default())
        .await;
    wait_for("the old book deleted", Duration::from_secs(30), || async {
        configmaps
            .get_opt("prewarm-lead-times")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    configmaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "prewarm-lead-times"}})).unwrap(),
        )
        .await
        .unwrap();

    let pods = Api::<Pod>::namespaced(admin.clone(), &ns);
    for k in 0..PODS {
        pods.create(
            &PostParams::default(),
            &server(&ns, &format!("llama-{k}"), &pool),
        )
        .await
        .unwrap();
    }
    // Karpenter launches a node per pod (30 s each), then each pod loads for 20 s.
    let ready: Vec<Pod> = wait_for(
        "three model servers Ready",
        Duration::from_secs(300),
        || async {
            let list = pods.list(&ListParams::default()).await.unwrap().items;
            let ready = list
                .iter()
                .filter(|p| {
                    let status = serde_json::to_value(p.status.as_ref()).unwrap();
                    true_since(&status, "Ready").is_some()
                })
                .count();
            (ready == PODS).then_some(list)
        },
    )
    .await;

    // What the objects say, read here without prewarm's code.
    let claims = Api::<DynamicObject>::all_with(
        admin.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
            "nodeclaims",
        ),
    );
    let boots: Vec<f64> = wait_for(
        "the NodeClaims Initialized",
        Duration::from_secs(60),
        || async {
            let list = claims
                .list(&ListParams::default().labels(&format!("karpenter.sh/nodepool={pool}")))
                .await
                .unwrap()
                .items;
            let boots: Vec<f64> = list
                .iter()
                .filter_map(|c| {
                    let created =
                        c.metadata.creation_timestamp.as_ref()?.0.as_millisecond() as f64 / 1000.0;
                    Some(true_since(&c.data["status"], "Initialized")? - created)
                })
                .collect();
            (boots.len() >= PODS && boots.len() == list.len()).then_some(boots)
        },
    )
    .await;
    let (mut pulls, mut loads) = (Vec::new(), Vec::new());
    for p in &ready {
        let status = serde_json::to_value(p.status.as_ref()).unwrap();
        let started = unix(
            status["containerStatuses"][0]["state"]["running"]["startedAt"]
                .as_str()
                .expect("the server's container started"),
        );
        pulls.push(started - true_since(&status, "PodScheduled").expect("scheduled"));
        loads.push(true_since(&status, "Ready").unwrap() - started);
    }
    let max = |v: &[f64]| v.iter().copied().fold(f64::MIN, f64::max);
    eprintln!("on the objects: boots {boots:?} s (truth {BOOT_S}), pulls {pulls:?} s, loads {loads:?} s (truth {LOAD_S})");

    let targets = json!([{
        "name": target, "nodePool": pool, "maxSpare": 2,
        "podNamespace": ns, "podSelector": "app=lead",
        "headroom": {"kind": "balloon", "namespace": ns, "name": "balloon-lead"}
    }])
    .to_string();
    let config = common::tick_config(&[
        ("PREWARM_TARGETS", targets),
        ("INGESTION_LAG_SECONDS", "0".to_string()),
        ("LEAD_TIME_SECONDS", "180".to_string()),
        // The second tick comes one tick later (an earlier one within a tick is skipped).
        ("TICK_SECONDS", "5".to_string()),
    ]);

    // Tick 1: the boots are learned before the targets decide; the pods' pulls and loads
    // during the tick, for the next one. The book is written.
    let first = tick_once(
        &Arc::new(TickDeps::build(config.clone()).await.unwrap()),
        now(),
        false,
    )
    .await;
    let lead = first[0]
        .lead
        .clone()
        .expect("the tick reports its lead time");
    eprintln!("tick 1: {lead:?}");
    assert_eq!(lead.seconds, 180.0, "{lead:?}");
    let reason = lead.fallback.expect("not learned yet at the first tick");
    assert!(reason.contains("model-load"), "{reason}");
    let raw = configmaps
        .get("prewarm-lead-times")
        .await
        .unwrap()
        .data
        .unwrap()["lead-times.json"]
        .clone();
    let stored: Value = serde_json::from_str(&raw).unwrap();
    for key in [
        format!("node-boot/{pool}"),
        format!("image-pull/{target}"),
        format!("model-load/{target}"),
    ] {
        let n = stored["windows"][&key]["samples"]
            .as_array()
            .map_or(0, Vec::len);
        assert!(n >= PODS, "{key}: {n} samples in the ConfigMap: {raw}");
    }

    // Tick 2, a tick later in a fresh execution environment: the book comes back from the
    // ConfigMap.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let second = tick_once(
        &Arc::new(TickDeps::build(config.clone()).await.unwrap()),
        now(),
        false,
    )
    .await;
    let report = &second[0];
    let lead = report.lead.clone().expect("the tick reports its lead time");
    eprintln!(
        "tick 2: {lead:?}; plan action {:?}, error {:?}",
        report.action(),
        report.error
    );
    assert_eq!(lead.fallback, None, "learned at the second tick: {lead:?}");
    let phase = |name: &str| -> f64 {
        let p = lead
            .phases
            .iter()
            .find(|p| p.phase.as_str() == name)
            .unwrap();
        p.seconds.unwrap()
    };
    let (boot, pull, load) = (phase("node-boot"), phase("image-pull"), phase("model-load"));
    assert!(
        (boot - BOOT_S).abs() <= 0.2 * BOOT_S,
        "node boot learned {boot} s vs {BOOT_S} s"
    );
    assert!(
        (load - LOAD_S).abs() <= 0.2 * LOAD_S,
        "model load learned {load} s vs {LOAD_S} s"
    );
    // With three samples the 0.9 quantile is the slowest of each phase.
    assert_eq!((boot, pull, load), (max(&boots), max(&pulls), max(&loads)));
    let expected = ((max(&boots) + max(&pulls) + max(&loads)) / STEP_S).ceil() * STEP_S;
    assert_eq!(lead.seconds, expected, "{lead:?}");
    // The truth's horizon is 30 + 0 + 20 = 50 s: one step up, 60 s.
    assert!((60.0..=75.0).contains(&lead.seconds), "{lead:?}");
    assert!(report.plan.is_some(), "the tick decided: {report:?}");
    let emf: Value = serde_json::from_str(&emf_record(report).render("Prewarm", 0)).unwrap();
    assert_eq!(emf["LeadTimeSeconds"], expected);
    assert_eq!(emf["LeadTimeLearned"], 1.0);
    eprintln!(
        "learned: node boot {boot} s (truth {BOOT_S}, {:+.1} %), image pull {pull} s, model load {load} s \
         (truth {LOAD_S}, {:+.1} %), horizon {} s (LEAD_TIME_SECONDS 180)",
        100.0 * (boot - BOOT_S) / BOOT_S,
        100.0 * (load - LOAD_S) / LOAD_S,
        lead.seconds
    );

    // Without the RBAC to list NodeClaims or read the book (the interruption function's user),
    // the tick falls back to LEAD_TIME_SECONDS and says why; learning fails nothing.
    let refused = Config {
        cluster: Some(prewarm::config::ClusterAccess::Kubeconfig {
            path: env("PREWARM_INTERRUPTION_KUBECONFIG"),
        }),
        ..config.clone()
    };
    tokio::time::sleep(Duration::from_secs(6)).await;
    let third = tick_once(
        &Arc::new(TickDeps::build(refused).await.unwrap()),
        now(),
        false,
    )
    .await;
    let lead = third[0]
        .lead
        .clone()
        .expect("the tick reports its lead time");
    eprintln!(
        "tick 3 (no RBAC for the lead times): {lead:?}; error {:?}",
        third[0].error
    );
    assert_eq!(lead.seconds, 180.0, "{lead:?}");
    let reason = lead.fallback.unwrap();
    for why in [
        "the learned lead times not read",
        "403 Forbidden",
        "NodeClaims not read",
    ] {
        assert!(reason.contains(why), "{why:?} not in {reason:?}");
    }

    // A pod without the model-load annotation is still started and made Ready at once by
    // kwok's stock stage (the stack's stages leave only annotated pods to ours).
    let mut plain = server(&ns, "plain", &pool);
    plain.metadata.annotations = None;
    plain.metadata.labels = Some([("app".to_string(), "plain".to_string())].into());
    plain.spec.as_mut().unwrap().containers[0].resources = None;
    pods.create(&PostParams::default(), &plain).await.unwrap();
    wait_for("a plain pod Ready", Duration::from_secs(60), || async {
        let p = pods.get("plain").await.unwrap();
        let status = serde_json::to_value(p.status.as_ref()).unwrap();
        true_since(&status, "Ready").map(|_| ())
    })
    .await;

    // Clean up: the pool's nodes go with it.
    let _ = pods
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    delete_namespace_and_pool(&admin, &ns, &pool).await;
    let _ = configmaps
        .delete("prewarm-lead-times", &DeleteParams::default())
        .await;
}
