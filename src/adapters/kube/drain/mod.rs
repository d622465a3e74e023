//! The Kubernetes side of a drain: find the node of an instance by `spec.providerID` (`find`), observe it
//! and its pods for the planner, and execute the planner's commands — cordon, taint, drain state
//! annotations, evictions through the Eviction API (policy/v1), and Events on the node naming the
//! pod and PodDisruptionBudget that block the drain. (Interruption owner.)
//!
//! What to do is decided by `core::interruption::plan_drain` (and `surge_step` for the surges
//! and their release, from the workloads and surge records `surge` observes); this module only
//! observes and acts, and every action is idempotent (a merge patch to a value already there, an eviction of a pod
//! already gone), so re-running a step after a partial failure does no harm.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, Taint};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::{json, Value};

use super::shape::owners::controller_of;
use super::shape::selector::selector_matches;
use super::shape::{requests, DRAINING_TAINT};
use crate::core::interruption::state::{
    format_time, parse_time, ALL_KEYS, CLOSED_EVENT, FALSE_ALARM_AT, PODS_MOVED,
};
use crate::core::interruption::{
    DrainState, NodeView, NoticeKind, PodOwner, PodRef, PodView, ReplacementSeen,
};
use crate::error::Result;

pub mod execute;
pub mod find;
pub mod replacement;
pub mod reservation;
pub mod surge;

pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Priorities from here up are the system's critical classes.
const CRITICAL_PRIORITY: i32 = 2_000_000_000;
const FIELD_MANAGER: &str = "prewarm-interruption";
/// Kubernetes' terminationGracePeriodSeconds when a pod sets none.
const DEFAULT_GRACE_S: i64 = 30;

pub(crate) use crate::adapters::kube::api_error::api_failure;

/// The instance id at the end of a providerID: `aws:///us-east-1a/i-0abc` -> `i-0abc`
/// (`kwok://name` -> `name` for the test cluster's nodes).
pub fn instance_of_provider_id(provider_id: &str) -> Option<&str> {
    provider_id.rsplit('/').next().filter(|s| !s.is_empty())
}

/// The instance id of a node (from its providerID).
pub fn instance_of_node(node: &Node) -> Option<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .and_then(instance_of_provider_id)
        .map(str::to_string)
}

/// Every node of the cluster.
pub async fn list_nodes(client: &kube::Client) -> Result<Vec<Node>> {
    Ok(Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| api_failure("list", "nodes", e))?
        .items)
}

fn gpu_quantity(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> u32 {
    q.and_then(|q| q.0.trim().parse::<f64>().ok())
        .map(|v| v.max(0.0) as u32)
        .unwrap_or(0)
}

pub fn node_gpus(node: &Node) -> u32 {
    gpu_quantity(
        node.status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .and_then(|a| a.get(GPU_RESOURCE)),
    )
}

pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub(crate) fn has_draining_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == DRAINING_TAINT))
}

/// GPUs a pod requests (the larger of requests and limits, as the scheduler counts extended
/// resources from either).
pub fn pod_gpus(pod: &Pod) -> u32 {
    pod.spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .map(|c| {
                    let r = c.resources.as_ref();
                    gpu_quantity(
                        r.and_then(|r| r.requests.as_ref())
                            .and_then(|m| m.get(GPU_RESOURCE)),
                    )
                    .max(gpu_quantity(
                        r.and_then(|r| r.limits.as_ref())
                            .and_then(|m| m.get(GPU_RESOURCE)),
                    ))
                })
                .sum()
        })
        .unwrap_or(0)
}

fn pod_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Balloon pods (of the balloon PriorityClass, `priority_class`) hold warm capacity for real
/// pods and yield to them: nothing to stand in for.
pub(crate) fn is_balloon(pod: &Pod, priority_class: &str) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.priority_class_name.as_deref())
        == Some(priority_class)
}

/// What the planner needs to know about a pod.
pub fn pod_view(pod: &Pod) -> PodView {
    let meta = &pod.metadata;
    let annotations = meta.annotations.as_ref();
    let owner = if annotations.is_some_and(|a| a.contains_key(MIRROR_ANNOTATION)) {
        PodOwner::Mirror
    } else if controller_of(meta.owner_references.as_ref(), "DaemonSet").is_some() {
        PodOwner::DaemonSet
    } else {
        PodOwner::Other
    };
    let spec = pod.spec.as_ref();
    let critical = spec.and_then(|s| s.priority).unwrap_or(0) >= CRITICAL_PRIORITY
        || matches!(
            spec.and_then(|s| s.priority_class_name.as_deref()),
            Some("system-node-critical" | "system-cluster-critical")
        );
    PodView {
        pod: PodRef {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        },
        uid: meta.uid.clone(),
        owner,
        critical,
        do_not_disrupt: annotations
            .and_then(|a| a.get(DO_NOT_DISRUPT))
            .is_some_and(|v| v == "true"),
        deletion_at: meta
            .deletion_timestamp
            .as_ref()
            .map(|t| t.0.as_millisecond() as f64 / 1000.0),
        finished: pod_finished(pod),
        gpus: pod_gpus(pod),
        requests_room: requests::pod_requests(pod).values().any(|v| *v > 0.0),
        grace_s: spec
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(DEFAULT_GRACE_S) as f64,
    }
}

async fn pods_on(client: &kube::Client, node_name: &str) -> Result<Vec<Pod>> {
    Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node_name}")))
        .await
        .map(|l| l.items)
        .map_err(|e| api_failure("list", &format!("pods on node {node_name}"), e))
}

/// The node and its pods, as the planner sees them.
pub struct Observation {
    pub node: Node,
    pub view: NodeView,
    pub pods: Vec<Pod>,
    pub pod_views: Vec<PodView>,
    /// The drain annotations were present but unreadable (logged; treated as no state).
    pub state_error: Option<String>,
}

pub async fn observe(client: &kube::Client, node: Node) -> Result<Observation> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let pods = pods_on(client, &name).await?;
    // The drain's own placeholder is only an opinion about readiness: when it cannot be read,
    // the drain counts it as pending and goes on (deadline evictions must not wait for it, and
    // a pending one is not made twice).
    let drain_id = instance_of_node(&node).unwrap_or_else(|| name.clone());
    let replacement = replacement::observe_replacement(client, &drain_id, &name)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(node = %name, error = %e, "replacement placeholder unknown: counted as pending");
            ReplacementSeen::Pending
        });
    let (view, state_error) = node_view(&node, replacement);
    let pod_views = pods.iter().map(pod_view).collect();
    Ok(Observation {
        node,
        view,
        pods,
        pod_views,
        state_error,
    })
}

/// What the planner sees of `node`, its drain's placeholder seen as `replacement` (pure: the
/// handler's `observe` and `prewarm explain --cluster-state` both shape the node with it). The
/// second value says why the drain annotations were unreadable (then treated as no state).
pub fn node_view(node: &Node, replacement: ReplacementSeen) -> (NodeView, Option<String>) {
    let annotations: BTreeMap<String, String> =
        node.metadata.annotations.clone().unwrap_or_default();
    let (state, state_error) = match DrainState::from_annotations(&annotations) {
        Ok(s) => (s, None),
        Err(e) => (None, Some(e)),
    };
    let view = NodeView {
        name: node.metadata.name.clone().unwrap_or_default(),
        unschedulable: node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        tainted: has_draining_taint(node),
        gpus: node_gpus(node),
        replacement,
        state,
        closed_event: annotations.get(CLOSED_EVENT).and_then(|v| {
            let (at, id) = v.split_once(' ')?;
            Some((id.to_string(), parse_time(at)?))
        }),
        false_alarm_at: annotations.get(FALSE_ALARM_AT).and_then(|v| parse_time(v)),
    };
    (view, state_error)
}

/// The patch that adds a step's `moved` pods (evicted, or deleted past a budget) to the drain's
/// count, `before` being the count its state recorded. Written after the evictions, without a
/// resourceVersion guard (the step's own state write changed it): only this annotation, and a
/// step that lost a race re-plans into a duplicate before it evicts anything.
pub fn pods_moved_patch(before: u32, moved: usize) -> Value {
    let total = u32::try_from(moved).map_or(u32::MAX, |m| before.saturating_add(m));
    json!({"metadata": {"annotations": {PODS_MOVED: total.to_string()}}})
}

/// The one patch that writes the drain state, cordons and taints: one write, guarded by the
/// resourceVersion read, so the taint list is not clobbered by a concurrent writer.
pub fn node_patch(
    node: &Node,
    state: &DrainState,
    cordon: bool,
    taint: Option<NoticeKind>,
) -> Value {
    let mut annotations = serde_json::Map::new();
    let written = state.to_annotations();
    for key in ALL_KEYS {
        annotations.insert(
            key.to_string(),
            written
                .get(key)
                .map_or(Value::Null, |v| Value::String(v.clone())),
        );
    }
    let mut patch = json!({
        "metadata": {
            "resourceVersion": node.metadata.resource_version,
            "annotations": annotations,
        }
    });
    let mut spec = serde_json::Map::new();
    if cordon {
        spec.insert("unschedulable".into(), Value::Bool(true));
    }
    if let Some(kind) = taint {
        let mut taints: Vec<Taint> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        taints.retain(|t| t.key != DRAINING_TAINT);
        taints.push(Taint {
            key: DRAINING_TAINT.into(),
            value: Some(kind.as_str().into()),
            effect: "NoSchedule".into(),
            time_added: None,
        });
        spec.insert(
            "taints".into(),
            serde_json::to_value(taints).unwrap_or_default(),
        );
    }
    if !spec.is_empty() {
        patch["spec"] = Value::Object(spec);
    }
    patch
}

/// Writes `node_patch`. Returns false on a conflict (someone else wrote the node meanwhile):
/// the caller re-observes and plans again.
pub async fn patch_node(client: &kube::Client, node: &Node, patch: &Value) -> Result<bool> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    match Api::<Node>::all(client.clone())
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Merge(patch),
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if crate::adapters::kube::api_error::is_conflict(&e) => Ok(false),
        Err(e) => Err(api_failure("patch", &format!("node/{name}"), e)),
    }
}

/// The PodDisruptionBudgets that cover `pod` (names), to say who blocks an eviction.
pub async fn pdbs_covering(client: &kube::Client, pod: &Pod) -> Result<Vec<String>> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let pdbs = Api::<PodDisruptionBudget>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .map_err(|e| api_failure("list", &format!("poddisruptionbudgets in {ns}"), e))?;
    Ok(pdbs
        .items
        .iter()
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .is_some_and(|sel| selector_matches(sel, &labels))
        })
        .filter_map(|p| p.metadata.name.clone())
        .collect())
}

/// The one Event recorder of an execution environment: the recorder aggregates repeats of an
/// Event into a series by its cache, which only works if the same recorder is used every time.
pub fn event_recorder(client: &kube::Client) -> Recorder {
    Recorder::new(
        client.clone(),
        Reporter {
            controller: "prewarm".into(),
            instance: None,
        },
    )
}

/// An Event note (events.k8s.io: at most 1 KiB) cut to 1000 bytes at a character boundary.
pub fn bounded_note(mut note: String) -> String {
    if note.len() > 1000 {
        let mut end = 1000;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
    }
    note
}

/// Records a Kubernetes Event on the node (events.k8s.io/v1; repeats are aggregated into a
/// series by the recorder).
pub async fn record_event(
    recorder: &Recorder,
    node: &Node,
    warning: bool,
    reason: &str,
    note: String,
    related: Option<&Pod>,
) -> Result<()> {
    let regarding = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: node.metadata.name.clone(),
        uid: node.metadata.uid.clone(),
        ..Default::default()
    };
    let secondary = related.map(|p| ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: p.metadata.name.clone(),
        namespace: p.metadata.namespace.clone(),
        uid: p.metadata.uid.clone(),
        ..Default::default()
    });
    let note = bounded_note(note);
    recorder
        .publish(
            &Event {
                type_: if warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: reason.into(),
                note: Some(note),
                action: "Drain".into(),
                secondary,
            },
            &regarding,
        )
        .await
        .map_err(|e| api_failure("create", "event", e))
}

/// The patch that un-drains a node: every drain annotation removed, the draining taint taken off
/// (other taints kept) and, with `uncordon`, the cordon lifted (without: a cordon someone else set
/// before the drain stays), guarded by the resourceVersion read.
/// `false_alarm_at`: the rebalance false alarm to remember (its cool-down), if this un-drain ends
/// one.
pub fn undrain_patch(
    node: &Node,
    uncordon: bool,
    closed_by: Option<&(String, f64)>,
    false_alarm_at: Option<f64>,
) -> Value {
    let mut annotations: serde_json::Map<String, Value> = ALL_KEYS
        .iter()
        .map(|k| (k.to_string(), Value::Null))
        .collect();
    if let Some((id, at)) = closed_by {
        annotations.insert(
            CLOSED_EVENT.into(),
            Value::String(format!("{} {id}", format_time(*at))),
        );
    }
    if let Some(at) = false_alarm_at {
        annotations.insert(FALSE_ALARM_AT.into(), Value::String(format_time(at)));
    }
    let taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.key != DRAINING_TAINT)
        .collect();
    let mut patch = json!({
        "metadata": {
            "resourceVersion": node.metadata.resource_version,
            "annotations": annotations,
        },
        "spec": {
            "taints": taints,
        }
    });
    if uncordon {
        patch["spec"]["unschedulable"] = Value::Null;
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_notes_are_cut_at_a_character_boundary() {
        // 999 ASCII bytes then two-byte characters: byte 1000 is inside one.
        let note = format!("{}{}", "a".repeat(999), "é".repeat(100));
        let got = bounded_note(note);
        assert_eq!(got.len(), 999);
        assert!(got.chars().all(|c| c == 'a'));
        assert_eq!(bounded_note("short".into()), "short");
        assert_eq!(bounded_note("x".repeat(5000)).len(), 1000);
    }

    /// An un-drain that ends a rebalance false alarm leaves its time on the node, which the next
    /// step reads back (the cool-down); other un-drains leave none.
    #[test]
    fn a_false_alarm_is_remembered_on_the_node() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "gpu-1", "resourceVersion": "7",
                "annotations": {"prewarm.io/drain-event-id": "reb-1"}},
            "spec": {"unschedulable": true, "taints": [
                {"key": DRAINING_TAINT, "value": "rebalance", "effect": "NoSchedule"}]}
        }))
        .unwrap();
        let at = 1_795_956_001.0;
        for (false_alarm, want) in [(Some(at), Some(at)), (None, None)] {
            let patch = undrain_patch(
                &node,
                true,
                Some(&("reb-1".into(), at - 2401.0)),
                false_alarm,
            );
            let mut after = node.clone();
            let annotations = after
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            for (k, v) in patch["metadata"]["annotations"].as_object().unwrap() {
                match v.as_str() {
                    Some(v) => annotations.insert(k.clone(), v.to_string()),
                    None => annotations.remove(k),
                };
            }
            let (view, _) = node_view(&after, ReplacementSeen::Absent);
            assert_eq!(view.false_alarm_at, want, "{false_alarm:?}");
            assert_eq!(view.state, None);
            assert_eq!(view.closed_event, Some(("reb-1".into(), at - 2401.0)));
        }
    }

    #[test]
    fn instance_ids_from_provider_ids() {
        let cases = [
            (
                "aws:///us-east-1a/i-0abc1111111111111",
                Some("i-0abc1111111111111"),
            ),
            ("kwok://gpu-x7k2p", Some("gpu-x7k2p")),
            ("aws:///us-east-1a/", None),
        ];
        for (pid, expected) in cases {
            assert_eq!(instance_of_provider_id(pid), expected, "{pid}");
        }
    }

    fn pod(json: Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn pod_views_classify_owners_priority_and_annotations() {
        let ds = pod(json!({"metadata": {"name": "exporter", "namespace": "mon",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "e", "uid": "u", "controller": true}]},
            "spec": {"containers": []}}));
        assert_eq!(pod_view(&ds).owner, PodOwner::DaemonSet);
        let mirror = pod(json!({"metadata": {"name": "m", "namespace": "kube-system",
            "annotations": {"kubernetes.io/config.mirror": "abc"}}, "spec": {"containers": []}}));
        assert_eq!(pod_view(&mirror).owner, PodOwner::Mirror);
        let llama = pod(
            json!({"metadata": {"name": "llama-0", "namespace": "inference",
            "annotations": {"karpenter.sh/do-not-disrupt": "true"}, "deletionTimestamp": "2026-11-29T12:00:00Z"},
            "spec": {"priority": 1000, "containers": [
                {"name": "a", "resources": {"requests": {"nvidia.com/gpu": "2"}}},
                {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": "Running"}}),
        );
        let v = pod_view(&llama);
        assert_eq!(
            (
                v.owner,
                v.critical,
                v.do_not_disrupt,
                v.deletion_at,
                v.finished,
                v.gpus,
                v.grace_s
            ),
            (
                PodOwner::Other,
                false,
                true,
                Some(1_795_953_600.0),
                false,
                3,
                30.0
            )
        );
        let crit = pod(
            json!({"metadata": {"name": "c", "namespace": "kube-system"},
            "spec": {"priorityClassName": "system-node-critical", "containers": []},
            "status": {"phase": "Succeeded"}}),
        );
        let v = pod_view(&crit);
        assert!(v.critical && v.finished);
    }

    #[test]
    fn pods_moved_patch_adds_the_steps_pods_to_the_recorded_count() {
        // 3 recorded + 2 this step = 5; a count at u32::MAX - 1 plus 5 stays at u32::MAX.
        for (before, moved, written) in [(0, 1, "1"), (3, 2, "5"), (u32::MAX - 1, 5, "4294967295")]
        {
            assert_eq!(
                pods_moved_patch(before, moved),
                json!({"metadata": {"annotations": {"prewarm.io/drain-pods-moved": written}}}),
                "{before} + {moved}"
            );
        }
    }

    #[test]
    fn node_patch_cordons_taints_and_writes_every_state_key() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n", "resourceVersion": "42"},
            "spec": {"taints": [
                {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
                {"key": "prewarm.io/draining", "value": "rebalance", "effect": "NoSchedule"}]}
        }))
        .unwrap();
        let state = DrainState {
            event_id: "e".into(),
            kind: NoticeKind::SpotInterruption,
            phase: crate::core::interruption::Phase::WaitingForReplacement,
            notice_time: 0.0,
            deadline: None,
            started_at: 1.0,
            replacement_requested_at: None,
            replacement_ready_at: None,
            evicting_since: None,
            finished_at: None,
            replacement_gpus: 8,
            instance_end: None,
            last_step_at: None,
            next_check_at: None,
            event_time: None,
            user_cordoned: false,
            pods_moved: 0,
        };
        let p = node_patch(&node, &state, true, Some(NoticeKind::SpotInterruption));
        assert_eq!(p["metadata"]["resourceVersion"], "42");
        assert_eq!(
            p["metadata"]["annotations"]["prewarm.io/drain-event-id"],
            "e"
        );
        // Keys without a value are removed (null in a merge patch), so stale state cannot linger.
        assert_eq!(
            p["metadata"]["annotations"]["prewarm.io/drain-deadline"],
            Value::Null
        );
        assert_eq!(p["spec"]["unschedulable"], true);
        assert_eq!(
            p["spec"]["taints"],
            json!([{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
                   {"key": "prewarm.io/draining", "value": "spot-interruption", "effect": "NoSchedule"}])
        );
        let only_state = node_patch(&node, &state, false, None);
        assert!(only_state.get("spec").is_none());
    }
}
