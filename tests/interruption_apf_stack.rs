//! The interruption path under the real apiserver's API Priority and Fairness (tests/stack): a
//! FlowSchema counts the handler's calls (what a storm of foreign notices costs), another
//! throttles its read of the targets ConfigMap with real 429s. A binary of its own: the schemas
//! act on every request of the `prewarm-lambda` user, which the other stack tests share; the two
//! tests here take turns (`APF`).
//!
//! The throttle: a PriorityLevelConfiguration with no seats of its own rejects (429) whatever
//! comes while one request of it executes (an empty level still lets one through). A PUT from
//! the `prewarm-tick` user whose body trickles in executes for as long as the trickle lasts, so
//! while it does every read of the targets ConfigMap by `prewarm-lambda` gets a 429, as from a
//! loaded apiserver; when it stops, the reads get through.

use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::SqsMessage;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

#[path = "common/drain_fixtures.rs"]
mod drain_fixtures;
use drain_fixtures::*;

static APF: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const TARGETS_CM: &str = "prewarm-targets";

/// The targets ConfigMap the handler reads (`PREWARM_TARGETS_CONFIGMAP`), holding `targets`.
async fn put_targets(admin: &kube::Client, targets: &str) {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": TARGETS_CM, "namespace": BALLOON_NS},
        "data": {"targets.json": targets}});
    Api::<ConfigMap>::namespaced(admin.clone(), BALLOON_NS)
        .patch(TARGETS_CM, &apply(), &Patch::Apply(cm))
        .await
        .unwrap();
}

fn apply() -> PatchParams {
    PatchParams::apply("prewarm-apf-test").force()
}

/// This test's turn, and the admin client, with the balloon and the targets ConfigMap in place.
async fn with_targets() -> (tokio::sync::MutexGuard<'static, ()>, kube::Client) {
    let turn = APF.lock().await;
    let admin = admin().await;
    ensure_namespace(&admin).await;
    ensure_balloon(&admin).await;
    put_targets(&admin, &fault_targets()).await;
    (turn, admin)
}

/// A FlowSchema `name` sending what `rules` match to `level`.
async fn flow(
    admin: &kube::Client,
    name: &str,
    level: &str,
    precedence: i32,
    rules: serde_json::Value,
) {
    let fs = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": precedence,
                 "distinguisherMethod": {"type": "ByUser"}, "rules": rules}});
    Api::<FlowSchema>::all(admin.clone())
        .patch(name, &apply(), &Patch::Apply(fs))
        .await
        .unwrap();
}

async fn unflow(admin: &kube::Client, name: &str) {
    let _ = Api::<FlowSchema>::all(admin.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

/// `apiserver_flowcontrol_dispatched_requests_total` of `schema` (0 before its first request).
async fn dispatched(admin: &kube::Client, schema: &str) -> u64 {
    let text = admin
        .request_text(http::Request::get("/metrics").body(vec![]).unwrap())
        .await
        .unwrap();
    let key = format!("apiserver_flowcontrol_dispatched_requests_total{{flow_schema=\"{schema}\",");
    text.lines()
        .filter(|l| l.starts_with(&key))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// SQS stamps every record with its SentTimestamp: `ago_ms` before now.
fn sent_ago(mut r: SqsMessage, ago_ms: u128) -> SqsMessage {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    r.attributes
        .insert("SentTimestamp".into(), (now - ago_ms).to_string());
    r
}

/// The rules are account-wide: most notices name instances of other clusters. With real targets
/// configured (a targets ConfigMap, a balloon, the surge on), a notice the node index says is
/// not here costs no Kubernetes call beyond the index's own list.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_storm_of_foreign_notices_costs_no_call_beyond_the_node_index() {
    let (_turn, admin) = with_targets().await;
    let schema = unique("prewarm-test-count-");
    // Every request of the handler's user, to a level that never throttles at this rate.
    let everything = json!([{"subjects": [{"kind": "User", "user": {"name": "prewarm-lambda"}}],
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                           "clusterScope": true, "namespaces": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]);
    flow(&admin, &schema, "workload-low", 60, everything).await;
    let configmap = format!("{BALLOON_NS}/{TARGETS_CM}");
    let h = handler(&[("PREWARM_TARGETS_CONFIGMAP", &configmap)]).await;
    // All sent a second ago, before the index's one list.
    let foreign: Vec<SqsMessage> = (0..30)
        .map(|_| sent_ago(spot_record(&unique("i-0f0f0"), &unique("ev-"), 1), 1_000))
        .collect();
    // Warm: the client built, the index listed, the schema seen in force (its counter moves).
    let mut kept = failed_ids(
        &h.handle_batch(batch(foreign[..10].to_vec()), in_15s())
            .await,
    );
    let until = Instant::now() + Duration::from_secs(20);
    while dispatched(&admin, &schema).await == 0 && Instant::now() < until {
        let c = h.kube.get(SystemTime::now()).await.unwrap();
        let _ = Api::<Node>::all(c).get_opt("no-such-node").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let (calls_before, lists_before) = (dispatched(&admin, &schema).await, h.nodes.lists().await);
    for chunk in foreign[10..].chunks(10) {
        kept.extend(failed_ids(
            &h.handle_batch(batch(chunk.to_vec()), in_15s()).await,
        ));
    }
    let (calls_after, lists_after) = (dispatched(&admin, &schema).await, h.nodes.lists().await);
    unflow(&admin, &schema).await;
    let _ = Api::<ConfigMap>::namespaced(admin.clone(), BALLOON_NS)
        .delete(TARGETS_CM, &DeleteParams::default())
        .await;

    assert!(
        calls_before > 0,
        "the counting FlowSchema never saw a request"
    );
    assert!(kept.is_empty(), "{kept:?}");
    let index_lists = lists_after - lists_before;
    let beyond = calls_after - calls_before - index_lists;
    eprintln!(
        "20 foreign notices: {} API calls, {index_lists} of them the index's lists: {:.1} per notice beyond the index",
        calls_after - calls_before,
        beyond as f64 / 20.0
    );
    assert_eq!(
        beyond, 0,
        "calls beyond the node index for 20 foreign notices"
    );
}

fn in_15s() -> SystemTime {
    SystemTime::now() + Duration::from_secs(15)
}

/// Holds the throttling level's one execution: a PUT as `prewarm-tick` whose body trickles in
/// for `seconds` (python: the stack's own dependency for its helpers).
/// How long the holder keeps the throttled level's one execution.
const HOLD_S: u64 = 24;

fn hold(seconds: u64) -> Child {
    let script = r#"
import socket, ssl, sys, time
pki, seconds = sys.argv[1], float(sys.argv[2])
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.load_cert_chain(pki + "/prewarm-tick.crt", pki + "/prewarm-tick.key")
ctx.set_alpn_protocols(["http/1.1"])
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", 16443)), server_hostname="127.0.0.1")
s.sendall(b"PUT /api/v1/namespaces/prewarm/configmaps/prewarm-lead-times HTTP/1.1\r\n"
          b"Host: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{")
end = time.time() + seconds
while time.time() < end:
    time.sleep(0.5)
    s.sendall(b" ")
s.close()
"#;
    Command::new("python3")
        .args([
            "-c",
            script,
            &format!("{}/pki", env("STACK_RUN_DIR")),
            &seconds.to_string(),
        ])
        .spawn()
        .unwrap()
}

/// Whether reading the targets ConfigMap as the handler's user is refused with a 429 now.
async fn throttled(client: &kube::Client) -> bool {
    matches!(
        Api::<ConfigMap>::namespaced(client.clone(), BALLOON_NS).get(TARGETS_CM).await,
        Err(kube::Error::Api(s)) if s.code == 429
    )
}

/// A spot warning arrives while the apiserver throttles the handler's reads of the targets
/// ConfigMap (429s from API Priority and Fairness, 12 s). Each step fails as retryable and is
/// carried on by a message, the node untouched (a drain run with no targets would get no
/// replacement); once the reads get through, the drain claims the node with its targets (its
/// replacement placeholder made) and drains at the deadline. No message is kept (nothing
/// receive-counted towards the DLQ) and none is left.
#[tokio::test]
#[ignore = "needs the local stack (make e2e)"]
async fn a_throttled_targets_read_is_retried_until_it_succeeds_then_drains_with_its_targets() {
    let (_turn, admin) = with_targets().await;
    let level = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration", "metadata": {"name": "prewarm-test-jail"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 0,
            "lendablePercent": 0, "borrowingLimitPercent": 0,
            "limitResponse": {"type": "Reject"}}}});
    Api::<PriorityLevelConfiguration>::all(admin.clone())
        .patch("prewarm-test-jail", &apply(), &Patch::Apply(level))
        .await
        .unwrap();
    let schema = unique("prewarm-test-jail-");
    let rules = json!([
        {"subjects": [{"kind": "User", "user": {"name": "prewarm-lambda"}}],
         "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"],
                            "namespaces": [BALLOON_NS]}]},
        {"subjects": [{"kind": "User", "user": {"name": "prewarm-tick"}}],
         "resourceRules": [{"verbs": ["update"], "apiGroups": [""], "resources": ["configmaps"],
                            "namespaces": [BALLOON_NS]}]}]);
    flow(&admin, &schema, "prewarm-test-jail", 50, rules).await;
    let sqs = sqs().await;
    let q = queue(&sqs, "h6-apf-").await;
    let configmap = format!("{BALLOON_NS}/{TARGETS_CM}");
    let h = handler(&[
        ("INTERRUPTION_QUEUE_URL", &q),
        ("PREWARM_TARGETS_CONFIGMAP", &configmap),
        // The deadline 20 s after the notice: the drain ends within the test.
        ("EVICTION_BUDGET_SECONDS", "100"),
    ])
    .await;
    let lambda = h.kube.get(SystemTime::now()).await.unwrap();
    let mut cleanups = Vec::new();
    let (node, instance) = fault_node(&admin, "h6-apf-", &mut cleanups).await;

    // The holder's own PUT is rejected if it comes while the level's one execution is taken
    // (a read of the handler's in flight): then it tries again. Long enough for two deliveries:
    // each waits out the client's retries of its shed read (`shed_retry`, about 3 s) before it
    // fails, then its retry comes a recheck later.
    let mut holder = hold(HOLD_S);
    let until = Instant::now() + Duration::from_secs(20);
    while !throttled(&lambda).await && Instant::now() < until {
        if holder.try_wait().unwrap().is_some() {
            holder = hold(HOLD_S);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let was_throttled = throttled(&lambda).await;
    send(&sqs, &q, &spot_body(&instance, 0)).await;
    // While throttled: every delivery fails, none touches the node.
    let (mut records, mut kept, mut touched) = (0, 0, Vec::new());
    while holder.try_wait().unwrap().is_none() {
        let (n, k) = pump_within(&h, &sqs, &q, Duration::from_secs(20)).await;
        (records, kept) = (records + n, kept + k);
        let a = after(&admin, &node).await;
        let placeholders = placeholders_of(&admin, &instance).await.len();
        // A delivery pumped while the holder ran may have retried its read after the hold
        // ended and rightly stepped the node: only a step seen while the holder still runs
        // (the level still held, every read refused) is one taken without its targets.
        let still_held = holder.try_wait().unwrap().is_none();
        if still_held && (!a.annotations.is_empty() || placeholders > 0) {
            let phase = a.annotations.get("prewarm.io/drain-phase").cloned();
            touched.push(format!("phase {phase:?}, {placeholders} placeholder(s)"));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let _ = holder.wait();
    // Through: claimed with its placeholder, then drained at the deadline, the reservation given back.
    let got_placeholder = pump_until(&h, &sqs, &q, Duration::from_secs(20), || async {
        !placeholders_of(&admin, &instance).await.is_empty()
    })
    .await;
    let drained = pump_until(&h, &sqs, &q, Duration::from_secs(60), || async {
        let a = after(&admin, &node).await;
        a.pods.is_empty()
            && a.annotations
                .get("prewarm.io/drain-phase")
                .map(String::as_str)
                == Some("drained")
    })
    .await;
    // The drain's last step deletes its own message; anything left would be a loop.
    let emptied = pump_until(&h, &sqs, &q, Duration::from_secs(20), || async {
        queue_total(&sqs, &q).await == 0
    })
    .await;
    let report = fault_report(&admin, &node).await;
    let reservations_left = placeholders_of(&admin, &instance).await.len();
    unflow(&admin, &schema).await;
    for (node, pods) in &cleanups {
        let pods: Vec<&str> = pods.iter().map(String::as_str).collect();
        cleanup(&admin, node, &pods, None).await;
    }
    let _ = Api::<ConfigMap>::namespaced(admin.clone(), BALLOON_NS)
        .delete(TARGETS_CM, &DeleteParams::default())
        .await;

    assert!(
        was_throttled,
        "the targets read was never refused with a 429"
    );
    assert!(records >= 2, "{records} deliveries while throttled");
    assert!(
        touched.is_empty(),
        "the node was stepped while its targets could not be read: {touched:?}"
    );
    assert_eq!(kept, 0, "deliveries kept (receive-counted towards the DLQ)");
    assert!(
        got_placeholder,
        "no replacement placeholder once the targets were read: {report}"
    );
    assert!(drained, "not drained: {report}");
    assert_eq!(reservations_left, 0, "{report}");
    assert!(emptied, "messages left on the queue: {report}");
}
