//! Drains at production timing on the local stack (tests/stack, brought up with
//! `NODE_READY_DELAY=30s`): the shipped settings (RECHECK_SECONDS 15, the default 30 s eviction
//! budget, the queue's visibility 30 s and maxReceiveCount 5 with a redrive to a DLQ, the
//! template's 20 s function timeout as each invocation's deadline, a spot warning's 120 s) and
//! the real Karpenter (kwok provider, nodes Ready 30 s after they appear). Three cases share one
//! path ([`Case`]):
//!
//! - **bare pods**, every fault at once: three nodes of a NodePool at its `spec.limits`
//!   reclaimed within one second; one pod with a 300 s `terminationGracePeriodSeconds` (more
//!   than the warning leaves); the function killed inside a step (a received batch dropped
//!   mid-step, never answered: it comes back after the visibility timeout); the apiserver
//!   stopped for 60 s mid-drain (SIGSTOP, once the drains saw their replacements); throttling:
//!   API Priority and Fairness objects that send the function's user to a priority level with no
//!   seats, so its requests are answered 429 for 15 s;
//! - **HPA-owned**: the same, every pod a Deployment's (one replica, pods Ready 10 s after they
//!   start: the model load) under an HPA, the targets read from a ConfigMap as the Helm chart
//!   sets them, so the drains surge the HPAs and evicted pods have successors;
//! - **429 storm**: two nodes of HPA-owned Deployments drained concurrently while the function's
//!   user is throttled from the claims until both drains are over, with a poison message on the
//!   queue; the function's own 429s are counted from the apiserver's
//!   `apiserver_flowcontrol_rejected_requests_total`.
//!
//! After each: every pod that could wait for its replacement (all but the one whose grace needs
//! the whole warning) was evicted only after its drain saw a Ready replacement; every drain
//! finished before its instance's end (deadline met; asserted in the storm only: the outage
//! of the other two holds the step that records the end past it); nothing is left behind (cordons, taints,
//! drain annotations, placeholders, the NodePool's limits, the saved limits); the queue is empty
//! and the DLQ holds exactly the poison sent (none but in the storm). Each drain's figures are
//! printed as a `drain figures:` line: the serving gap (ready-replica-seconds below the count
//! before the notice, sampled every 0.5 s by the admin, until the workload serves off the
//! reclaimed node again; HPA-owned cases only, a bare pod has no successor), notice → replacement
//! Ready, and whether the deadline was met. The storm also asserts no serving gap.
//!
//! Long (4 to 6 minutes each) and needing kwok's 30 s node delay, they live in `boot_30s`:
//! `make e2e` skips them, `DRAIN_REPEAT_ONLY=production|production-hpa|apf-storm
//! tests/stack/drain-repeat N` brings the stack up so and runs them; on any other stack they
//! fail, never pass.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent, Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use prewarm::adapters::kube::drain::instance_of_node;
use prewarm::adapters::kube::nodepool::limits_room::sync_room;
use prewarm::config::Config;
use prewarm::handlers::interruption::Interruption;
use serde_json::json;

mod common;
use common::kwok_pools::{gpu_pool, limits_of, pools, unique_hex, wait_for};
#[path = "common/drain_fixtures.rs"]
mod drain_fixtures;
use drain_fixtures::{
    batch, pump, pump_within, queue, queue_total, receive, redrive_queue, send, signal_apiserver,
    spot_body,
};

const NS: &str = "prewarm-production-stack";
const TAINT: &str = "prewarm.io/production-test";
/// The APF objects that throttle the function's user (the test's handler runs as prewarm-lambda;
/// the load that keeps its priority level busy runs as prewarm-interruption, under a FlowSchema
/// of its own, so the apiserver's counters tell the function's 429s apart).
const THROTTLE: &str = "prewarm-test-throttle";
const THROTTLE_LOAD: &str = "prewarm-test-throttle-load";
const THROTTLED_USER: &str = "prewarm-lambda";
const LOAD_USER: &str = "prewarm-interruption";
/// The model load of an HPA-owned pod (kwok's pod-ready delay): short enough that a surge
/// raised when the replacement is ready (about 45 s in) loads before the deadline (90 s).
const MODEL_LOAD: &str = "10s";
/// The poison message of the storm: not JSON, so never processable.
const POISON: &str = "not an EventBridge event (production-timing storm poison)";

/// The production-timing cases. Everything not said here is the same path.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Case {
    /// Bare pods through a kill, a 60 s outage and 15 s of 429s.
    BarePods,
    /// The same faults, every pod a Deployment's under an HPA, the targets in a ConfigMap.
    HpaOwned,
    /// Two drains of HPA-owned pods through 429s from the claims to their end, and a poison
    /// message; the serving gap must be nil.
    Storm,
}

impl Case {
    fn owned(self) -> bool {
        self != Case::BarePods
    }

    /// (name suffix, GPUs, grace seconds) of each workload: one 4-GPU node each, the first node
    /// of the three-node cases shared with the pod whose 300 s grace is more than the warning
    /// leaves (3 + 1 GPUs).
    fn workloads(self) -> &'static [(&'static str, u32, u32)] {
        match self {
            Case::Storm => &[("w0", 4, 0), ("w1", 4, 0)],
            _ => &[("w0", 3, 0), ("w1", 4, 0), ("w2", 4, 0), ("grace", 1, 300)],
        }
    }
}

/// Long (4 to 6 minutes each) and timed for kwok's 30 s node delay: `boot_30s`, which `make
/// e2e` skips on its 10 s stack; `tests/stack/drain-repeat` runs them on a stack up with
/// NODE_READY_DELAY=30s. Run on any other stack, each fails naming the setting.
mod boot_30s {
    use super::{production, Case};

    fn on_the_30s_stack() {
        super::common::assert_30s_stack(
            "the production-timing drains (DRAIN_REPEAT_ONLY=production tests/stack/drain-repeat, \
             or NODE_READY_DELAY=30s tests/stack/up)",
        );
    }

    #[tokio::test]
    #[ignore = "long; needs the local stack up with NODE_READY_DELAY=30s (tests/stack/drain-repeat)"]
    async fn production_timing_three_reclaimed_at_the_cap_through_a_kill_an_outage_and_throttling()
    {
        on_the_30s_stack();
        // Boxed: the test thread's 2 MiB stack (see the fault matrix).
        Box::pin(production(Case::BarePods)).await;
    }

    #[tokio::test]
    #[ignore = "long; needs the local stack up with NODE_READY_DELAY=30s (tests/stack/drain-repeat)"]
    async fn production_timing_hpa_owned_deployments_through_a_kill_an_outage_and_throttling() {
        on_the_30s_stack();
        Box::pin(production(Case::HpaOwned)).await;
    }

    #[tokio::test]
    #[ignore = "long; needs the local stack up with NODE_READY_DELAY=30s (tests/stack/drain-repeat)"]
    async fn production_timing_two_drains_through_a_429_storm_from_priority_and_fairness() {
        on_the_30s_stack();
        Box::pin(production(Case::Storm)).await;
    }
}

fn node_claims(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
            "nodeclaims",
        ),
    )
}

/// Workload `name` of `pool` (for the scheduler) asking for `gpus`, with `grace_s`: a bare pod,
/// or (`owned`) a one-replica Deployment whose pods load for `MODEL_LOAD`, under an HPA (1 to 2
/// replicas; the stack has no metrics API, so the HPA only ever enforces its bounds). Its pods
/// carry the label `workload: name`.
async fn workload(
    client: &kube::Client,
    name: &str,
    pool: &str,
    gpus: u32,
    grace_s: u32,
    owned: bool,
) {
    let labels = json!({"app": "production", "workload": name});
    let spec = json!({
        "nodeSelector": {"karpenter.sh/nodepool": pool},
        "terminationGracePeriodSeconds": grace_s,
        "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                          "limits": {"nvidia.com/gpu": gpus.to_string()}}}]
    });
    let pp = PatchParams::apply("prewarm-production-test").force();
    if !owned {
        let pod: Pod = serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": NS, "labels": labels}, "spec": spec}),
        )
        .unwrap();
        Api::<Pod>::namespaced(client.clone(), NS)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
        return;
    }
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels,
                         "annotations": {"pod-ready.stage.kwok.x-k8s.io/delay": MODEL_LOAD}},
            "spec": spec}}
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), NS)
        .patch(name, &pp, &Patch::Apply(&deployment))
        .await
        .unwrap();
    Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), NS)
        .patch(
            name,
            &pp,
            &Patch::Apply(&common::cpu_hpa(NS, name, name, 1, 2)),
        )
        .await
        .unwrap();
}

/// Ready to serve: Ready and not terminating (what a Service's endpoints take).
fn serving(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn workload_label(p: &Pod) -> String {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("workload"))
        .cloned()
        .unwrap_or_default()
}

async fn test_pods(client: &kube::Client) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels("app=production"))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// The node each workload of `names` serves on (None until each has one pod serving).
async fn serving_nodes(client: &kube::Client, names: &[String]) -> Option<Vec<String>> {
    let pods = test_pods(client).await;
    names
        .iter()
        .map(|n| {
            let mut on = pods
                .iter()
                .filter(|p| &workload_label(p) == n && serving(p));
            match (on.next(), on.next()) {
                (Some(p), None) => p.spec.as_ref()?.node_name.clone(),
                _ => None,
            }
        })
        .collect()
}

/// Per sample (Unix seconds), each workload's serving pods: (all, on a reclaimed node).
type Samples = Vec<(f64, BTreeMap<String, (u32, u32)>)>;

/// Samples the workloads' serving pods every 0.5 s as `admin` (exempt from the throttling)
/// until `stop`.
fn sampler(
    admin: &kube::Client,
    reclaimed: &[String],
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Samples> {
    let (admin, reclaimed) = (admin.clone(), reclaimed.to_vec());
    tokio::spawn(async move {
        let mut out = Samples::new();
        while !stop.load(Ordering::Relaxed) {
            let at = common::now();
            let listed = Api::<Pod>::namespaced(admin.clone(), NS)
                .list(&ListParams::default().labels("app=production"))
                .await;
            // A failed sample (the apiserver refusing connections while stopped) is skipped:
            // the last one holds, and nothing changes while it is down.
            let Ok(listed) = listed else {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            let mut counts: BTreeMap<String, (u32, u32)> = BTreeMap::new();
            for p in listed.items.iter().filter(|p| serving(p)) {
                let c = counts.entry(workload_label(p)).or_default();
                c.0 += 1;
                let node = p.spec.as_ref().and_then(|s| s.node_name.as_ref());
                c.1 += u32::from(node.is_some_and(|n| reclaimed.contains(n)));
            }
            out.push((at, counts));
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        out
    })
}

/// The serving gap of `workload` from `from`: the ready-replica-seconds below `want` (each
/// sample's shortfall held until the next sample) until it serves `want` replicas off the
/// reclaimed nodes for good, and when that was (None: not by the last sample).
fn serving_gap(samples: &Samples, workload: &str, from: f64, want: u32) -> (f64, Option<f64>) {
    let of = |c: &BTreeMap<String, (u32, u32)>| c.get(workload).copied().unwrap_or_default();
    let short = |(_, c): &(f64, BTreeMap<String, (u32, u32)>)| {
        let (all, on) = of(c);
        all.saturating_sub(on) < want
    };
    let recovered = match samples.iter().rposition(short) {
        None => Some(from),
        Some(i) => samples.get(i + 1).map(|(t, _)| t.max(from)),
    };
    let until = recovered.unwrap_or(f64::INFINITY);
    let lost = samples
        .windows(2)
        .filter(|w| w[1].0 > from && w[0].0 < until)
        .map(|w| {
            let span = w[1].0.min(until) - w[0].0.max(from);
            f64::from(want.saturating_sub(of(&w[0].1).0)) * span
        })
        .sum();
    (lost, recovered)
}

/// `serving_gap` on hand-made samples of workload "w" from t = 10, wanting 1 replica.
#[test]
fn serving_gap_counts_the_shortfall_until_served_off_the_node_for_good() {
    let samples = |rows: &[(f64, u32, u32)]| -> Samples {
        rows.iter()
            .map(|&(t, all, on)| (t, [("w".to_string(), (all, on))].into()))
            .collect()
    };
    // (row, samples (t, serving, of them on the reclaimed node), expected (lost, back at)).
    let rows = [
        // Evicted at 12 with nothing ready elsewhere until 15: 1 replica × 3 s; the sample
        // before `from` (9) and the one after recovery (16) count nothing.
        (
            "break before make",
            samples(&[
                (9.0, 1, 1),
                (10.0, 1, 1),
                (12.0, 0, 0),
                (15.0, 1, 0),
                (16.0, 1, 0),
            ]),
            (3.0, Some(15.0)),
        ),
        // Gone at 12 and never back by the last sample (14): 2 s lost so far, no recovery.
        (
            "never back",
            samples(&[(10.0, 1, 1), (12.0, 0, 0), (14.0, 0, 0)]),
            (2.0, None),
        ),
        // The surge pod serves at 20 beside the old one: off the node from 20, nothing lost.
        (
            "make before break",
            samples(&[(10.0, 1, 1), (20.0, 2, 1), (25.0, 1, 0)]),
            (0.0, Some(20.0)),
        ),
    ];
    for (row, s, want) in rows {
        assert_eq!(serving_gap(&s, "w", 10.0, 1), want, "{row}");
    }
}

fn rfc3339_s(v: &str) -> Option<f64> {
    chrono::DateTime::parse_from_rfc3339(v)
        .ok()
        .map(|t| t.timestamp_millis() as f64 / 1000.0)
}

/// When each pod on `node` was evicted, from the drain's `DrainEvicted` Events (pod name →
/// Unix seconds).
async fn evictions(client: &kube::Client, node: &str) -> BTreeMap<String, f64> {
    let events = Api::<CoreEvent>::all(client.clone())
        .list(
            &ListParams::default()
                .fields(&format!("involvedObject.name={node},reason=DrainEvicted")),
        )
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut out = BTreeMap::new();
    for e in events {
        let at = e
            .event_time
            .map(|t| t.0.as_millisecond() as f64 / 1000.0)
            .or_else(|| {
                e.first_timestamp
                    .map(|t| t.0.as_millisecond() as f64 / 1000.0)
            });
        let pod = e
            .related
            .and_then(|r| r.name)
            .or_else(|| {
                // "evicted pod NAME ..." when the Event names no related object.
                e.message.as_deref().and_then(|m| {
                    m.strip_prefix("evicted pod ")
                        .and_then(|r| r.split_whitespace().next())
                        .map(str::to_string)
                })
            })
            .unwrap_or_default();
        if let Some(at) = at {
            out.entry(pod)
                .and_modify(|t: &mut f64| *t = t.min(at))
                .or_insert(at);
        }
    }
    out
}

/// A node's drain annotations and its Events (time, reason, message), for a failed drain.
async fn drain_report(client: &kube::Client, node: &str, seen: &NodeSeen) -> String {
    let events = Api::<CoreEvent>::all(client.clone())
        .list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut lines: Vec<String> = events
        .iter()
        .map(|e| {
            let at = e
                .event_time
                .as_ref()
                .map(|t| t.0.to_string())
                .or_else(|| e.last_timestamp.as_ref().map(|t| t.0.to_string()));
            format!(
                "  {} {} {}",
                at.unwrap_or_default(),
                e.reason.clone().unwrap_or_default(),
                e.message.clone().unwrap_or_default()
            )
        })
        .collect();
    lines.sort();
    format!(
        "annotations {:?}\nEvents:\n{}",
        seen.annotations,
        lines.join("\n")
    )
}

/// What a node's drain recorded, and what is on it now.
#[derive(Debug, Default)]
struct NodeSeen {
    annotations: BTreeMap<String, String>,
    cordoned: bool,
    tainted: bool,
}

async fn seen(client: &kube::Client, node: &str) -> Option<NodeSeen> {
    let n = Api::<Node>::all(client.clone())
        .get_opt(node)
        .await
        .ok()??;
    let spec = n.spec.clone().unwrap_or_default();
    Some(NodeSeen {
        annotations: n
            .metadata
            .annotations
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| k.starts_with("prewarm.io/drain-"))
            .collect(),
        cordoned: spec.unschedulable == Some(true),
        tainted: spec
            .taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == "prewarm.io/draining"),
    })
}

/// The APF objects that answer the function's user (and the load's) 429: a priority level with
/// no seats of its own and none to borrow, rejecting instead of queueing, and a FlowSchema per
/// user sending it there.
async fn throttle(admin: &kube::Client, on: bool) {
    let gvk = |kind: &str, plural: &str| {
        kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("flowcontrol.apiserver.k8s.io", "v1", kind),
            plural,
        )
    };
    let levels: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &gvk("PriorityLevelConfiguration", "prioritylevelconfigurations"),
    );
    let schemas: Api<DynamicObject> =
        Api::all_with(admin.clone(), &gvk("FlowSchema", "flowschemas"));
    let users = [(THROTTLE, THROTTLED_USER), (THROTTLE_LOAD, LOAD_USER)];
    if !on {
        for (schema, _) in users {
            let _ = schemas.delete(schema, &DeleteParams::default()).await;
        }
        let _ = levels.delete(THROTTLE, &DeleteParams::default()).await;
        return;
    }
    let level: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": THROTTLE},
        "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 0, "lendablePercent": 0, "borrowingLimitPercent": 0,
            "limitResponse": {"type": "Reject"}}}
    }))
    .unwrap();
    let pp = PatchParams::apply("prewarm-production-test").force();
    levels
        .patch(THROTTLE, &pp, &Patch::Apply(&level))
        .await
        .expect("PriorityLevelConfiguration");
    for (name, user) in users {
        let schema: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": name},
            "spec": {
                "priorityLevelConfiguration": {"name": THROTTLE},
                "matchingPrecedence": 500,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [{
                    "subjects": [{"kind": "User", "user": {"name": user}}],
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                       "clusterScope": true, "namespaces": ["*"]}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
                }]
            }
        }))
        .unwrap();
        schemas
            .patch(name, &pp, &Patch::Apply(&schema))
            .await
            .expect("FlowSchema");
    }
}

/// The apiserver's count of requests of FlowSchema `THROTTLE` (the function's user) answered
/// 429 and let through, from its /metrics (read as the admin, who is exempt).
async fn function_requests(admin: &kube::Client) -> (f64, f64) {
    let text = admin
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .expect("the apiserver's /metrics");
    let schema = format!("flow_schema=\"{THROTTLE}\"");
    let sum = |metric: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(&format!("{metric}{{")) && l.contains(&schema))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    (
        sum("apiserver_flowcontrol_rejected_requests_total"),
        sum("apiserver_flowcontrol_dispatched_requests_total"),
    )
}

/// Throttling under way: the APF objects applied and four loops of requests as `LOAD_USER`
/// keeping the seatless level busy (the apiserver lets a request through only when nothing of
/// the level is executing), so the function's own requests meet 429s, as when its share is used
/// up by a noisy neighbour.
struct Throttling {
    stop: Arc<AtomicBool>,
    loaders: Vec<tokio::task::JoinHandle<(usize, usize)>>,
    before: (f64, f64),
}

/// What a throttling came to.
struct Throttled {
    /// The function's requests answered 429 and let through (the apiserver's counters).
    function_429: f64,
    function_through: f64,
    /// The load's requests and how many of them were answered 429.
    load: usize,
    load_429: usize,
}

impl std::fmt::Display for Throttled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the function's user: {} requests answered 429, {} let through \
             (apiserver_flowcontrol_*_requests_total); the load: {} of {} answered 429",
            self.function_429, self.function_through, self.load_429, self.load
        )
    }
}

impl Throttling {
    async fn start(admin: &kube::Client, load_user: &kube::Client) -> Self {
        throttle(admin, true).await;
        let before = function_requests(admin).await;
        let stop = Arc::new(AtomicBool::new(false));
        let loaders = (0..4)
            .map(|_| {
                let (user, stop) = (load_user.clone(), stop.clone());
                tokio::spawn(async move {
                    let (mut answered, mut throttled) = (0, 0);
                    while !stop.load(Ordering::Relaxed) {
                        let r = Api::<Node>::all(user.clone())
                            .list(&ListParams::default())
                            .await;
                        answered += 1;
                        if matches!(r, Err(kube::Error::Api(ref e)) if e.code == 429) {
                            throttled += 1;
                        }
                    }
                    (answered, throttled)
                })
            })
            .collect();
        Throttling {
            stop,
            loaders,
            before,
        }
    }

    async fn stop(self, admin: &kube::Client) -> Throttled {
        self.stop.store(true, Ordering::Relaxed);
        let (mut load, mut load_429) = (0, 0);
        for l in self.loaders {
            let (a, t) = l.await.unwrap();
            load += a;
            load_429 += t;
        }
        let after = function_requests(admin).await;
        throttle(admin, false).await;
        Throttled {
            function_429: after.0 - self.before.0,
            function_through: after.1 - self.before.1,
            load,
            load_429,
        }
    }
}

/// What a node's drain recorded (Unix seconds), and when each of its pods was evicted.
struct DrainRecord {
    node: String,
    ready: Option<f64>,
    deadline: Option<f64>,
    finished: Option<f64>,
    end: Option<f64>,
    evicted: BTreeMap<String, f64>,
    /// The node's annotations, Events and pods left, printed when its drain failed.
    report: String,
}

impl DrainRecord {
    /// The drain's own "deadline met": finished no later than the instance's end.
    fn deadline_met(&self) -> bool {
        self.finished.zip(self.end).is_some_and(|(f, e)| f <= e)
    }
}

async fn production(case: Case) {
    // The function's own log lines (one per drain step), for a failed round's log.
    prewarm::telemetry::init_logging();
    let admin = common::as_user("KUBECONFIG").await;
    let lambda = common::as_user("PREWARM_LAMBDA_KUBECONFIG").await;
    let load_user = common::as_user("PREWARM_INTERRUPTION_KUBECONFIG").await;
    assert_eq!(
        std::env::var("NODE_READY_DELAY_MS").as_deref(),
        Ok("30000"),
        "the production case needs kwok's nodes Ready after 30 s: NODE_READY_DELAY=30s tests/stack/up"
    );
    let namespaces = Api::<Namespace>::all(admin.clone());
    if namespaces.get_opt(NS).await.unwrap().is_none() {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
        let _ = namespaces.create(&PostParams::default(), &ns).await;
    }
    throttle(&admin, false).await; // a previous run's, if it died

    // A pool whose limits hold exactly its nodes (the kwok provider's nodes have the capacity
    // of the pods they were launched for: 4 GPUs each here), and the workloads, one 4-GPU node
    // of them each (see `Case::workloads`).
    let pool = unique_hex("prod-");
    let node_count = case.workloads().iter().filter(|w| w.2 == 0).count();
    let users = json!({"cpu": (48 * node_count).to_string(), "nvidia.com/gpu": 4 * node_count});
    let object: DynamicObject = serde_json::from_value(gpu_pool(&pool, &users, TAINT)).unwrap();
    pools(&admin)
        .patch(
            &pool,
            &PatchParams::apply("prewarm-production-test").force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap();
    let names: Vec<String> = case
        .workloads()
        .iter()
        .map(|(suffix, ..)| format!("{pool}-{suffix}"))
        .collect();
    // The first workload alone until Karpenter has a NodeClaim for it, so that the pod sharing
    // its node lands in that claim's room: a Deployment's pods appear one by one, and in
    // separate provisioning batches Karpenter gave the 1-GPU pod a node of its own, leaving a
    // 4-GPU workload no room under the limits.
    for (i, ((_, gpus, grace), name)) in case.workloads().iter().zip(&names).enumerate() {
        workload(&admin, name, &pool, *gpus, *grace, case.owned()).await;
        if i == 0 {
            wait_for(
                "a NodeClaim for the first workload",
                Duration::from_secs(60),
                || async {
                    let claims = node_claims(&admin)
                        .list(
                            &ListParams::default().labels(&format!("karpenter.sh/nodepool={pool}")),
                        )
                        .await
                        .ok()?;
                    (!claims.items.is_empty()).then_some(())
                },
            )
            .await;
        }
    }
    let long_grace = format!("{pool}-grace");
    let on_nodes = wait_for(
        "every workload serving on the nodes Karpenter launched",
        Duration::from_secs(240),
        || serving_nodes(&admin, &names),
    )
    .await;
    let mut reclaimed: Vec<String> = on_nodes.clone();
    reclaimed.sort();
    reclaimed.dedup();
    assert_eq!(reclaimed.len(), node_count, "nodes: {on_nodes:?}");
    let nodes = Api::<Node>::all(admin.clone());
    let mut instances = Vec::new();
    for n in &reclaimed {
        instances.push(instance_of_node(&nodes.get(n).await.unwrap()).unwrap_or_default());
    }

    let dlq = queue(&sqs_client().await, "prod-dlq-").await;
    let sqs = sqs_client().await;
    let q = redrive_queue(&sqs, "prod-", &dlq, 5).await;
    sqs.set_queue_attributes()
        .queue_url(&q)
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout,
            "30",
        )
        .send()
        .await
        .unwrap();
    // podNamespace: the namespace drain surges may touch (the HPA-owned cases' Deployments).
    let targets = json!([{"name": pool, "nodePool": pool, "maxSpare": 8, "gpusPerReplica": 1,
        "podNamespace": NS, "headroom": {"kind": "balloon", "namespace": "prewarm", "name": format!("{pool}-balloon")},
        "selector": "model_name=\"production\""}])
    .to_string();
    // The HPA-owned cases read their targets from a ConfigMap at every invocation, as the Helm
    // chart sets the function up.
    let targets_map = format!("{pool}-targets");
    let mut vars: HashMap<&str, String> = [
        ("KUBECONFIG", common::env("PREWARM_LAMBDA_KUBECONFIG")),
        ("ACCEPT_KWOK_INSTANCE_IDS", "true".into()),
        ("INTERRUPTION_QUEUE_URL", q.clone()),
    ]
    .into();
    if case.owned() {
        let map: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": targets_map, "namespace": "prewarm"},
            "data": {"targets.json": targets}
        }))
        .unwrap();
        Api::<ConfigMap>::namespaced(admin.clone(), "prewarm")
            .create(&PostParams::default(), &map)
            .await
            .unwrap();
        vars.insert(
            "PREWARM_TARGETS_CONFIGMAP",
            format!("prewarm/{targets_map}"),
        );
    } else {
        vars.insert("PREWARM_TARGETS", targets.clone());
    }
    let config = Config::from_lookup(|k| vars.get(k).cloned()).unwrap();
    assert_eq!(config.interruption.recheck_s, 15.0, "the shipped recheck");
    let h = Interruption::from_config(&config).await.unwrap();
    let stop_sampling = Arc::new(AtomicBool::new(false));
    let sampling = sampler(&admin, &reclaimed, stop_sampling.clone());
    // ---- t0: a warning per node within a second (and the storm's poison); the first
    // deliveries claim.
    let t0 = Instant::now();
    let notice_at = common::now();
    for i in &instances {
        send(&sqs, &q, &spot_body(i, 0)).await;
    }
    let poison = if case == Case::Storm {
        vec![POISON]
    } else {
        vec![]
    };
    for p in &poison {
        send(&sqs, &q, p).await;
    }
    let mut log: Vec<String> = Vec::new();
    let stamp = |what: String, log: &mut Vec<String>| {
        let line = format!("t+{:5.1} s  {what}", t0.elapsed().as_secs_f64());
        eprintln!("{line}");
        log.push(line);
    };
    let mut handled = 0;
    while handled < instances.len() + poison.len() && t0.elapsed() < Duration::from_secs(10) {
        handled += poll(&h, &sqs, &q).await.0;
    }
    let mut claimed = 0;
    for n in &reclaimed {
        claimed += usize::from(seen(&admin, n).await.is_some_and(|s| s.cordoned));
    }
    let (limits_at_claim, _) = limits_of(&admin, &pool).await;
    stamp(
        format!("{handled} first deliveries, {claimed} claimed; limits {limits_at_claim}"),
        &mut log,
    );
    // The storm: from the claims until every drain is over.
    let storm = match case {
        Case::Storm => Some(Throttling::start(&admin, &load_user).await),
        _ => None,
    };
    if storm.is_some() {
        stamp("storm on (APF objects, 4 loops of load)".into(), &mut log);
    }
    // Karpenter launches the replacements (the claims made room in the limits); the outage
    // comes once their nodes exist (kwok makes them Ready 30 s later), mid-drain.
    let launched = {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let n = nodes
                .list(&ListParams::default().labels(&format!("karpenter.sh/nodepool={pool}")))
                .await
                .unwrap()
                .items
                .len()
                .saturating_sub(reclaimed.len());
            if n >= reclaimed.len() || Instant::now() >= until {
                break n;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    stamp(format!("{launched} replacement nodes"), &mut log);

    let (mut kept_throttled, mut kept_down, mut killed, mut finished_before_kill) =
        (0, 0, 0, false);
    let mut throttled = None;
    if storm.is_none() {
        // ---- Throttling while the replacements boot: 15 s of 429s for the function's user,
        // over the drains' first check (15 s after the claims).
        let window = Throttling::start(&admin, &load_user).await;
        stamp(
            "throttling on (APF objects, 4 loops of load)".into(),
            &mut log,
        );
        let mut handled_throttled = 0;
        while t0.elapsed() < Duration::from_secs(20) {
            let (n, kept) = poll(&h, &sqs, &q).await;
            handled_throttled += n;
            kept_throttled += kept;
        }
        let counted = window.stop(&admin).await;
        stamp(
            format!(
                "throttling off; {handled_throttled} deliveries throttled, {kept_throttled} \
                 kept; {counted}"
            ),
            &mut log,
        );
        throttled = Some(counted);

        // ---- The function killed inside a step: the next batch is dropped mid-step, never
        // answered (back after the 30 s visibility).
        while killed == 0 && t0.elapsed() < Duration::from_secs(60) {
            let got = receive(&sqs, &q).await;
            if got.is_empty() {
                continue;
            }
            let records = got.iter().map(|(r, _)| r.clone()).collect();
            let deadline = SystemTime::now() + Duration::from_secs(20);
            // 30 ms: a step is a handful of apiserver calls, so it dies between two of them.
            finished_before_kill = tokio::time::timeout(
                Duration::from_millis(30),
                h.handle_batch(batch(records), deadline),
            )
            .await
            .is_ok();
            killed = got.len();
        }
        stamp(
            format!("killed a batch of {killed} (it had finished before: {finished_before_kill})"),
            &mut log,
        );

        // ---- The apiserver stopped for 60 s mid-drain: once the drains hand over (saw their
        // replacements), or 80 s after the notices at the latest.
        let evicting = |s: &Option<NodeSeen>| {
            s.as_ref().is_some_and(|s| {
                s.annotations
                    .contains_key("prewarm.io/drain-evicting-since")
            })
        };
        while t0.elapsed() < Duration::from_secs(80) {
            poll(&h, &sqs, &q).await;
            let mut handed = 0;
            for n in &reclaimed {
                handed += usize::from(evicting(&seen(&admin, n).await));
            }
            if handed == reclaimed.len() {
                break;
            }
        }
        assert!(signal_apiserver("-STOP"));
        stamp("apiserver stopped".into(), &mut log);
        let stopped = Instant::now();
        let mut handled_down = 0;
        while stopped.elapsed() < Duration::from_secs(60) {
            let (n, kept) = poll(&h, &sqs, &q).await;
            handled_down += n;
            kept_down += kept;
        }
        assert!(signal_apiserver("-CONT"));
        stamp(
            format!("apiserver continued; {handled_down} deliveries while down, {kept_down} kept"),
            &mut log,
        );
    }

    // ---- On until every drain is over (or past the instance's end).
    let drained = |s: &Option<NodeSeen>| {
        s.as_ref().is_none_or(|s| {
            s.annotations
                .get("prewarm.io/drain-phase")
                .map(String::as_str)
                == Some("drained")
        })
    };
    let (mut all_drained, mut kept_draining) = (false, 0);
    while t0.elapsed() < Duration::from_secs(200) {
        let mut done = true;
        for n in &reclaimed {
            done &= drained(&seen(&admin, n).await);
        }
        if done {
            all_drained = true;
            break;
        }
        kept_draining += poll(&h, &sqs, &q).await.1;
    }
    if let Some(storm) = storm {
        throttled = Some(storm.stop(&admin).await);
    }
    let throttled = throttled.expect("a throttling ran");
    stamp(
        format!(
            "all drained: {all_drained}; {kept_draining} deliveries kept meanwhile; test pods \
             left on the reclaimed nodes {:?}",
            pods_on(&admin, &reclaimed).await
        ),
        &mut log,
    );
    if case == Case::Storm {
        stamp(format!("storm off; {throttled}"), &mut log);
    }

    // What each drain recorded, before the nodes go.
    let mut records = Vec::new();
    for n in &reclaimed {
        let s = seen(&admin, n).await.unwrap_or_default();
        let at = |k: &str| s.annotations.get(k).and_then(|v| rfc3339_s(v));
        records.push(DrainRecord {
            node: n.clone(),
            ready: at("prewarm.io/drain-replacement-ready-at"),
            deadline: at("prewarm.io/drain-deadline"),
            finished: at("prewarm.io/drain-finished-at"),
            end: at("prewarm.io/drain-instance-end"),
            evicted: evictions(&admin, n).await,
            report: drain_report(&admin, n, &s).await,
        });
    }

    // ---- The instances end (EC2 takes them back: their NodeClaims deleted).
    let end_at = notice_at + 120.0;
    let wait = end_at - common::now();
    if wait > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(wait)).await;
    }
    let claims = node_claims(&admin);
    for c in claims
        .list(&ListParams::default().labels(&format!("karpenter.sh/nodepool={pool}")))
        .await
        .unwrap()
        .items
    {
        if c.data["status"]["nodeName"]
            .as_str()
            .is_some_and(|n| reclaimed.iter().any(|r| r == n))
        {
            let _ = claims
                .delete(
                    c.metadata.name.as_deref().unwrap(),
                    &DeleteParams::default(),
                )
                .await;
        }
    }
    let mut gone = true;
    for n in &reclaimed {
        let until = Instant::now() + Duration::from_secs(90);
        while nodes.get_opt(n).await.unwrap().is_some() && Instant::now() < until {
            poll(&h, &sqs, &q).await;
        }
        gone &= nodes.get_opt(n).await.unwrap().is_none();
    }
    // Whatever is still queued is handled (the poison until its fifth receive sends it to the
    // DLQ: 30 s apart); then the tick runs once.
    let until = Instant::now() + Duration::from_secs(150);
    while queue_total(&sqs, &q).await > 0 && Instant::now() < until {
        pump(&h, &sqs, &q).await;
    }
    sync_room(&lambda, &pool, None, common::now())
        .await
        .unwrap();
    stamp(format!("instances ended: nodes gone {gone}"), &mut log);
    stop_sampling.store(true, Ordering::Relaxed);
    let samples = sampling.await.unwrap();

    // ---- What is left.
    let (limits_after, saved_after) = limits_of(&admin, &pool).await;
    let placeholders: Vec<String> = Api::<Pod>::all(admin.clone())
        .list(&ListParams::default().labels("prewarm.io/replacement-for"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("prewarm.io/replacement-for"))
                .is_some_and(|i| instances.contains(i))
        })
        .filter_map(|p| p.metadata.name)
        .collect();
    let mut stranded_nodes = Vec::new();
    for n in nodes
        .list(&ListParams::default().labels(&format!("karpenter.sh/nodepool={pool}")))
        .await
        .unwrap()
        .items
    {
        let name = n.metadata.name.clone().unwrap_or_default();
        if let Some(s) = seen(&admin, &name).await {
            if s.cordoned || s.tainted || !s.annotations.is_empty() {
                stranded_nodes.push(format!("{name}: {s:?}"));
            }
        }
    }
    let left_on_queue = queue_total(&sqs, &q).await;
    let mut in_dlq: Vec<String> = receive(&sqs, &dlq)
        .await
        .into_iter()
        .filter_map(|(r, _)| r.body)
        .collect();
    in_dlq.sort();

    // Clean up before judging (the pool's nodes go with it).
    throttle(&admin, false).await;
    for name in &names {
        let _ = Api::<Deployment>::namespaced(admin.clone(), NS)
            .delete(name, &DeleteParams::default())
            .await;
        let _ = Api::<HorizontalPodAutoscaler>::namespaced(admin.clone(), NS)
            .delete(name, &DeleteParams::default())
            .await;
    }
    let _ = Api::<Pod>::namespaced(admin.clone(), NS)
        .delete_collection(
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
            &ListParams::default().labels("app=production"),
        )
        .await;
    let _ = Api::<ConfigMap>::namespaced(admin.clone(), "prewarm")
        .delete(&targets_map, &DeleteParams::default())
        .await;
    let _ = pools(&admin).delete(&pool, &DeleteParams::default()).await;
    let _ = sqs.delete_queue().queue_url(&q).send().await;
    let _ = sqs.delete_queue().queue_url(&dlq).send().await;

    // ---- Each drain's figures (one line each, collected by tests/stack/drain-repeat).
    let mut gaps = Vec::new();
    for r in &records {
        let on_node: Vec<&String> = names
            .iter()
            .zip(&on_nodes)
            .filter(|(_, n)| **n == r.node)
            .map(|(w, _)| w)
            .collect();
        let gap = case.owned().then(|| {
            on_node
                .iter()
                .map(|w| serving_gap(&samples, w, notice_at, 1))
                .fold((0.0, Some(notice_at)), |(lost, at), (l, a)| {
                    (lost + l, at.zip(a).map(|(x, y)| x.max(y)))
                })
        });
        let since =
            |t: Option<f64>| t.map_or("never".into(), |t| format!("{:.1} s", t - notice_at));
        let gap_text = match gap {
            None => "n/a (bare pods have no successor)".to_string(),
            Some((lost, at)) => format!(
                "{lost:.1} replica-s (serving off the node again after {})",
                since(at)
            ),
        };
        eprintln!(
            "drain figures: {case:?} {}: serving gap {gap_text}; notice → replacement Ready {}; \
             deadline met {} (finished after {}, instance end after {}; evictions after {:?})",
            r.node,
            since(r.ready),
            r.deadline_met(),
            since(r.finished),
            since(r.end),
            r.evicted
                .iter()
                .map(|(p, t)| format!("{p} {:.1} s", t - notice_at))
                .collect::<Vec<_>>()
        );
        gaps.push((r.node.clone(), gap));
    }

    // ---- Judged.
    let mut failures = Vec::new();
    if throttled.function_429 <= 0.0 {
        failures.push(format!(
            "API Priority and Fairness did not answer the function's user 429: {throttled}"
        ));
    }
    if claimed != node_count
        || launched < node_count
        || (case != Case::Storm && (killed == 0 || finished_before_kill))
        || !all_drained
        || !gone
    {
        failures.push(format!(
            "claimed {claimed}, replacements launched {launched}, killed {killed} (finished \
             before the kill {finished_before_kill}), all drained {all_drained}, nodes gone {gone}"
        ));
    }
    for r in &records {
        for (pod, at) in &r.evicted {
            // The pod whose grace needs the whole warning is evicted at once, by design.
            if pod == &long_grace || pod.starts_with(&format!("{long_grace}-")) {
                continue;
            }
            if !r.ready.is_some_and(|ready| ready <= *at) {
                failures.push(format!(
                    "{}: {pod} evicted at {at:.1} before its replacement was ready \
                     ({:?}; deadline {:?})",
                    r.node, r.ready, r.deadline
                ));
            }
        }
        // Asserted in the storm only: under every fault the kill (a batch back only after the
        // 30 s visibility) and the 60 s outage from the hand-over (about 63 s in) hold the step
        // that records the end past the instance's end, even when every pod went at 63 s (bare
        // pods, measured: finished at 130 s), so there the figure is only reported.
        if !r.deadline_met() && case == Case::Storm {
            failures.push(format!(
                "{}: the drain finished at {:?}, after the instance's end {:?}\n{}",
                r.node, r.finished, r.end, r.report
            ));
        }
    }
    if case == Case::Storm {
        for (node, gap) in &gaps {
            if !gap.is_some_and(|(lost, at)| lost == 0.0 && at.is_some()) {
                failures.push(format!(
                    "{node}: ready replicas lost in the storm: {gap:?} (replica-s, back at)"
                ));
            }
        }
    }
    if kept_down + kept_throttled > 0 || left_on_queue > 0 || in_dlq != poison {
        failures.push(format!(
            "messages kept while down {kept_down}, while throttled {kept_throttled}; \
             DLQ {in_dlq:?} (only the poison {poison:?} belongs there); left on the queue \
             {left_on_queue}"
        ));
    }
    if limits_after != users || saved_after.is_some() {
        failures.push(format!(
            "limits after {limits_after} (the user's {users}), saved {saved_after:?}"
        ));
    }
    if !placeholders.is_empty() || !stranded_nodes.is_empty() {
        failures.push(format!(
            "left behind: placeholders {placeholders:?}; nodes {stranded_nodes:?}"
        ));
    }
    assert!(
        failures.is_empty(),
        "{}\n--- timeline\n{}",
        failures.join("\n"),
        log.join("\n")
    );
}

async fn sqs_client() -> aws_sdk_sqs::Client {
    drain_fixtures::sqs().await
}

/// One poll as Lambda's poller does it, with the template's 20 s function timeout: (records,
/// kept).
async fn poll(h: &Interruption, sqs: &aws_sdk_sqs::Client, q: &str) -> (usize, usize) {
    pump_within(h, sqs, q, Duration::from_secs(20)).await
}

/// The test pods still on `nodes` and not terminating.
async fn pods_on(client: &kube::Client, nodes: &[String]) -> Vec<String> {
    test_pods(client)
        .await
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some_and(|n| nodes.contains(n))
        })
        .filter_map(|p| p.metadata.name)
        .collect()
}
