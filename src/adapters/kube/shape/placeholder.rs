//! The replacement placeholder of one drain, built from what the draining node runs (pure: no
//! cluster calls). One bare pod per drain, not a Deployment: a drain needs exactly one object
//! whose life it controls step by step — made while the drain waits, deleted in the step that
//! evicts (hand-over) — and a controller would re-create it behind the drain's back after the
//! hand-over or after a real pod preempted it. A drain that finds it preempted makes it again.
//!
//! Shape: the summed requests of the pods the drain will move (they all fit on the draining
//! node, so the sum fits a node of its kind), their scheduling constraints joined so that the
//! node it gets is one every one of them may use (nodeSelector, required node affinity, and the
//! required pod (anti-)affinity that is not about themselves: see `constraints`), their
//! tolerations (minus any that would let it onto the cordoned, tainted node), pinned to the
//! node's NodePool (`karpenter.sh/nodepool`), at the balloon PriorityClass (negative: every real
//! pod preempts it) with the balloon's pause image (both configurable: `PlaceholderSettings`).
//! The copied required terms sit next to its own preferred ones; the avoidance is never made
//! required. It is kept off the reclaimed instance type and zone by *preferred* node
//! affinity only: Karpenter treats the heaviest preferred term as required and, when nothing
//! fits, removes it and tries the next (sigs.k8s.io/karpenter v1.14.1
//! `pkg/scheduling/requirements.go` NewPodRequirements, and
//! `pkg/controllers/provisioning/scheduling/preferences.go` removePreferredNodeAffinityTerm),
//! so the terms go from "avoid both" to "avoid the type" to "avoid the zone" to anything.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelectorTerm, Pod, PodAffinityTerm, Toleration};
use serde_json::{json, Value};

use super::constraints::copied_constraints;
use super::requests::pod_requests;
use super::{DRAINING_TAINT, NODEPOOL_LABEL};
use crate::core::interruption::state::format_time;

/// Label on a placeholder: the drain id (the instance id) it holds capacity for.
pub const REPLACEMENT_FOR: &str = "prewarm.io/replacement-for";
/// Annotation: the notice (event id) that made the placeholder.
pub const REPLACEMENT_OWNER: &str = "prewarm.io/replacement-owner";
/// Annotation: the draining node the placeholder stands in for.
pub const REPLACEMENT_OF_NODE: &str = "prewarm.io/replacement-of-node";
/// Annotation: when the reservation ends at the latest (RFC 3339); the tick deletes it after that.
/// The key keeps its first name: placeholders already on a cluster carry it.
pub const RESERVATION_EXPIRES_AT: &str = "prewarm.io/lease-expires-at";
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
pub use crate::config::PlaceholderSettings;

const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// What one drain's placeholder is made of.
#[derive(Clone, Debug, PartialEq)]
pub struct Placeholder {
    pub drain_id: String,
    pub owner_event: String,
    pub node: String,
    pub node_pool: String,
    pub namespace: String,
    pub priority_class: String,
    pub image: String,
    /// Resource name -> summed request (cpu in cores, memory in bytes, others in units).
    pub requests: BTreeMap<String, f64>,
    pub node_selector: BTreeMap<String, String>,
    /// Copied from the pods (`constraints`): ORed required node terms, required pod
    /// (anti-)affinity terms.
    pub required_node_terms: Vec<NodeSelectorTerm>,
    pub pod_affinity: Vec<PodAffinityTerm>,
    pub pod_anti_affinity: Vec<PodAffinityTerm>,
    pub tolerations: Vec<Toleration>,
    pub avoid_instance_type: Option<String>,
    pub avoid_zone: Option<String>,
    pub expires_at: f64,
}

/// A drain id as a DNS-1123 label (lowercase alphanumerics and '-'), at most `max` long: a
/// longer one keeps its start and ends in a hash of the whole id, so two long ids that share a
/// start still differ.
fn dns_label(drain_id: &str, max: usize) -> String {
    let cleaned: String = drain_id
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let cleaned = cleaned.trim_matches('-');
    if cleaned.len() <= max {
        return cleaned.to_string();
    }
    // FNV-1a (32 bit): stable across builds and platforms, unlike std's hasher.
    let hash = drain_id.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    });
    format!("{}-{hash:08x}", cleaned[..max - 9].trim_end_matches('-'))
}

/// The `prewarm.io/replacement-for` label value of a drain (a label value holds 63 characters).
pub fn drain_label(drain_id: &str) -> String {
    dns_label(drain_id, 63)
}

/// The placeholder's name: `prewarm-replacement-` and the drain id, 63 characters at most.
pub fn placeholder_name(drain_id: &str) -> String {
    format!("prewarm-replacement-{}", dns_label(drain_id, 43))
}

/// Whether a toleration would let the placeholder onto the draining node itself (a wildcard, or
/// one for the draining or cordon taint).
fn tolerates_the_drain(t: &Toleration) -> bool {
    match t.key.as_deref() {
        None | Some("") => t.operator.as_deref() == Some("Exists"),
        Some(k) => k == DRAINING_TAINT || k == UNSCHEDULABLE_TAINT,
    }
}

fn node_label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// The placeholder of the drain of `node`, standing in for `pods` (the pods the drain will move).
#[allow(clippy::too_many_arguments)]
pub fn placeholder_for(
    node: &Node,
    node_pool: &str,
    pods: &[&Pod],
    drain_id: &str,
    owner_event: &str,
    namespace: &str,
    settings: &PlaceholderSettings,
    expires_at: f64,
) -> Placeholder {
    let mut requests: BTreeMap<String, f64> = BTreeMap::new();
    for p in pods {
        for (k, v) in pod_requests(p) {
            *requests.entry(k).or_insert(0.0) += v;
        }
    }
    let copied = copied_constraints(node, pods);
    let mut node_selector = copied.node_selector;
    node_selector.insert(NODEPOOL_LABEL.into(), node_pool.into());
    let mut tolerations: Vec<Toleration> = Vec::new();
    for t in pods
        .iter()
        .flat_map(|p| p.spec.iter().flat_map(|s| s.tolerations.iter().flatten()))
    {
        if !tolerates_the_drain(t) && !tolerations.contains(t) {
            tolerations.push(t.clone());
        }
    }
    Placeholder {
        drain_id: drain_id.into(),
        owner_event: owner_event.into(),
        node: node.metadata.name.clone().unwrap_or_default(),
        node_pool: node_pool.into(),
        namespace: namespace.into(),
        priority_class: settings.priority_class.clone(),
        image: settings.image.clone(),
        requests,
        node_selector,
        required_node_terms: copied.required_node_terms,
        pod_affinity: copied.pod_affinity,
        pod_anti_affinity: copied.pod_anti_affinity,
        tolerations,
        avoid_instance_type: node_label(node, INSTANCE_TYPE_LABEL).map(str::to_string),
        avoid_zone: node_label(node, ZONE_LABEL).map(str::to_string),
        expires_at,
    }
}

/// A quantity as the apiserver accepts it: cpu in millicores, the rest in whole units (bytes
/// for memory), rounded up so the placeholder never holds less than the pods need.
fn quantity(name: &str, v: f64) -> String {
    if name == "cpu" {
        format!("{}m", (v * 1000.0).ceil() as u64)
    } else {
        format!("{}", v.ceil() as u64)
    }
}

fn not_in(key: &str, value: &str) -> Value {
    json!({"key": key, "operator": "NotIn", "values": [value]})
}

/// Preferred terms, heaviest first: avoid the reclaimed type and zone, then the type alone,
/// then the zone alone. Never required: Karpenter relaxes them one by one when nothing fits.
fn avoid_reclaimed(p: &Placeholder) -> Vec<Value> {
    let ty = p
        .avoid_instance_type
        .as_deref()
        .map(|v| not_in(INSTANCE_TYPE_LABEL, v));
    let zone = p.avoid_zone.as_deref().map(|v| not_in(ZONE_LABEL, v));
    let mut terms = Vec::new();
    if let (Some(t), Some(z)) = (&ty, &zone) {
        terms.push(json!({"weight": 100, "preference": {"matchExpressions": [t, z]}}));
    }
    if let Some(t) = ty {
        terms.push(json!({"weight": 50, "preference": {"matchExpressions": [t]}}));
    }
    if let Some(z) = zone {
        terms.push(json!({"weight": 10, "preference": {"matchExpressions": [z]}}));
    }
    terms
}

/// The uid and gid the placeholder's pause container runs as (the pause image's own `nobody`).
pub const PAUSE_UID: i64 = 65535;

/// The pod-level securityContext of every pod prewarm creates (`restricted`).
pub fn pod_security_context() -> Value {
    json!({
        "runAsNonRoot": true,
        "runAsUser": PAUSE_UID,
        "runAsGroup": PAUSE_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

/// The container-level securityContext of every pod prewarm creates (`restricted`).
pub fn container_security_context() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "capabilities": {"drop": ["ALL"]},
    })
}

/// The pod object of a placeholder.
pub fn placeholder_pod(p: &Placeholder) -> Value {
    let requests: serde_json::Map<String, Value> = p
        .requests
        .iter()
        .filter(|(_, v)| **v > 0.0)
        .map(|(k, v)| (k.clone(), Value::String(quantity(k, *v))))
        .collect();
    // Extended resources (GPUs) need limits equal to requests; cpu is left unlimited.
    let limits: serde_json::Map<String, Value> = requests
        .iter()
        .filter(|(k, _)| k.as_str() != "cpu")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut spec = json!({
        "priorityClassName": p.priority_class,
        "terminationGracePeriodSeconds": 0,
        // The `restricted` Pod Security Standard, which the balloon namespaces enforce: no
        // token, non-root (the pause image runs as 65535), RuntimeDefault seccomp, no
        // capabilities, a read-only root.
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "securityContext": pod_security_context(),
        "nodeSelector": p.node_selector,
        "tolerations": p.tolerations,
        "containers": [{
            "name": "pause",
            "image": p.image,
            "resources": {"requests": requests, "limits": limits},
            "securityContext": container_security_context(),
        }],
    });
    let mut node_affinity = serde_json::Map::new();
    if !p.required_node_terms.is_empty() {
        node_affinity.insert(
            "requiredDuringSchedulingIgnoredDuringExecution".into(),
            json!({"nodeSelectorTerms": p.required_node_terms}),
        );
    }
    let preferred = avoid_reclaimed(p);
    if !preferred.is_empty() {
        node_affinity.insert(
            "preferredDuringSchedulingIgnoredDuringExecution".into(),
            Value::Array(preferred),
        );
    }
    let mut affinity = serde_json::Map::new();
    if !node_affinity.is_empty() {
        affinity.insert("nodeAffinity".into(), Value::Object(node_affinity));
    }
    for (field, terms) in [
        ("podAffinity", &p.pod_affinity),
        ("podAntiAffinity", &p.pod_anti_affinity),
    ] {
        if !terms.is_empty() {
            affinity.insert(
                field.into(),
                json!({"requiredDuringSchedulingIgnoredDuringExecution": terms}),
            );
        }
    }
    if !affinity.is_empty() {
        spec["affinity"] = Value::Object(affinity);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": placeholder_name(&p.drain_id),
            "namespace": p.namespace,
            "labels": {
                REPLACEMENT_FOR: drain_label(&p.drain_id),
                "app.kubernetes.io/name": "prewarm-replacement",
                "app.kubernetes.io/managed-by": "prewarm",
            },
            "annotations": {
                REPLACEMENT_OWNER: p.owner_event,
                REPLACEMENT_OF_NODE: p.node,
                RESERVATION_EXPIRES_AT: format_time(p.expires_at),
                // The replacement node must not be consolidated away while the reservation lasts.
                "karpenter.sh/do-not-disrupt": "true",
            },
        },
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Node {
        serde_json::from_value(json!({"metadata": {"name": "ip-10-0-1-7", "labels": {
            "karpenter.sh/nodepool": "gpu",
            "node.kubernetes.io/instance-type": "g5.12xlarge",
            "topology.kubernetes.io/zone": "us-east-1a"}}}))
        .unwrap()
    }

    fn pod(json: Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn shaped_like_the_pods_pinned_to_the_pool_and_preferring_other_offerings() {
        let a = pod(json!({"metadata": {"name": "llama-0"}, "spec": {
            "nodeSelector": {"karpenter.sh/nodepool": "gpu", "gpu": "a10g", "team": "x"},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"operator": "Exists"}],
            "containers": [
                {"name": "vllm", "resources": {"requests": {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "2"},
                                               "limits": {"nvidia.com/gpu": "2"}}},
                {"name": "sidecar", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}]}}));
        let b = pod(json!({"metadata": {"name": "llama-1"}, "spec": {
            "nodeSelector": {"gpu": "a10g", "team": "y"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                            {"key": "prewarm.io/draining", "operator": "Exists"}],
            "containers": [{"name": "vllm", "resources": {"limits": {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "2"}}}]}}));
        let p = placeholder_for(
            &node(),
            "gpu",
            &[&a, &b],
            "i-0abc",
            "ev-1",
            "prewarm",
            &PlaceholderSettings::default(),
            1_795_954_320.0,
        );
        let got = placeholder_pod(&p);
        // 6 + 0.25 + 6 cores; 24Gi + 64Mi + 24Gi bytes; 2 + 2 GPUs.
        let gib = 1024u64 * 1024 * 1024;
        let memory = (48 * gib + 64 * 1024 * 1024).to_string();
        let expected = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "prewarm-replacement-i-0abc", "namespace": "prewarm",
                "labels": {"prewarm.io/replacement-for": "i-0abc",
                           "app.kubernetes.io/name": "prewarm-replacement",
                           "app.kubernetes.io/managed-by": "prewarm"},
                "annotations": {"prewarm.io/replacement-owner": "ev-1",
                                "prewarm.io/replacement-of-node": "ip-10-0-1-7",
                                "prewarm.io/lease-expires-at": "2026-11-29T12:12:00.000Z",
                                "karpenter.sh/do-not-disrupt": "true"}},
            "spec": {
                "priorityClassName": "prewarm-balloon",
                "terminationGracePeriodSeconds": 0,
                "automountServiceAccountToken": false,
                "enableServiceLinks": false,
                "securityContext": {"runAsNonRoot": true, "runAsUser": 65535, "runAsGroup": 65535,
                                    "seccompProfile": {"type": "RuntimeDefault"}},
                // Both pods' entries; "team" (x against y) is not a label of the node: dropped.
                // Plus the draining node's pool.
                "nodeSelector": {"gpu": "a10g", "karpenter.sh/nodepool": "gpu"},
                // The wildcard and the draining-taint tolerations would let it onto the node.
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {"cpu": "12250m", "memory": memory, "nvidia.com/gpu": "4"},
                        "limits": {"memory": memory, "nvidia.com/gpu": "4"}},
                    "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                        "capabilities": {"drop": ["ALL"]}}}],
                "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "preference": {"matchExpressions": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ["g5.12xlarge"]},
                        {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["us-east-1a"]}]}},
                    {"weight": 50, "preference": {"matchExpressions": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ["g5.12xlarge"]}]}},
                    {"weight": 10, "preference": {"matchExpressions": [
                        {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["us-east-1a"]}]}}]}}
            }
        });
        assert_eq!(got, expected);
        // Never a required affinity: nothing in the spec may forbid every other offering.
        assert!(got
            .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution")
            .is_none());
        // It parses as a Pod.
        let _: Pod = serde_json::from_value(got).unwrap();
    }

    #[test]
    fn required_node_affinity_is_copied_next_to_the_preferred_avoidance() {
        let a = pod(
            json!({"metadata": {"name": "llama-0", "namespace": "inference"}, "spec": {
            "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                           "values": ["g5.12xlarge", "g6e.12xlarge"]}]}]},
                // The pod's own preference is not copied.
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference":
                    {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}}]}},
            "containers": [{"name": "vllm", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}),
        );
        let settings = PlaceholderSettings {
            priority_class: "team-spare".into(),
            image: "mirror.example/pause:3.10".into(),
        };
        let p = placeholder_for(
            &node(),
            "gpu",
            &[&a],
            "i-0abc",
            "ev-1",
            "prewarm",
            &settings,
            0.0,
        );
        let got = placeholder_pod(&p);
        assert_eq!(got["spec"]["priorityClassName"], "team-spare");
        assert_eq!(
            got["spec"]["containers"][0]["image"],
            "mirror.example/pause:3.10"
        );
        let node_affinity = &got["spec"]["affinity"]["nodeAffinity"];
        assert_eq!(
            node_affinity["requiredDuringSchedulingIgnoredDuringExecution"],
            json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "node.kubernetes.io/instance-type",
                "operator": "In", "values": ["g5.12xlarge", "g6e.12xlarge"]}]}]})
        );
        // The avoidance stays preferred, three terms, and no pod preference joins them.
        let preferred = node_affinity["preferredDuringSchedulingIgnoredDuringExecution"]
            .as_array()
            .unwrap();
        assert_eq!(
            preferred
                .iter()
                .map(|t| t["weight"].clone())
                .collect::<Vec<_>>(),
            vec![json!(100), json!(50), json!(10)]
        );
        assert!(got["spec"]["affinity"].get("podAntiAffinity").is_none());
        let _: Pod = serde_json::from_value(got).unwrap();
    }

    #[test]
    fn a_node_without_type_or_zone_labels_gets_no_affinity() {
        let bare: Node = serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap();
        let p = placeholder_for(
            &bare,
            "gpu",
            &[],
            "kwok-node-1",
            "ev",
            "prewarm",
            &PlaceholderSettings::default(),
            0.0,
        );
        let got = placeholder_pod(&p);
        assert!(got["spec"].get("affinity").is_none());
        assert_eq!(
            got["spec"]["nodeSelector"],
            json!({"karpenter.sh/nodepool": "gpu"})
        );
        assert_eq!(got["metadata"]["name"], "prewarm-replacement-kwok-node-1");
    }

    #[test]
    fn names_are_dns_labels() {
        let cases = [
            (
                "i-0abc1111111111111",
                "prewarm-replacement-i-0abc1111111111111",
            ),
            ("Gpu_Node.7", "prewarm-replacement-gpu-node-7"),
        ];
        for (id, expected) in cases {
            assert_eq!(placeholder_name(id), expected, "{id}");
        }
        // A kwok node name of 50 characters: the label keeps it whole, the name is cut and
        // ends in a hash of the whole id.
        let kwok = "kwok-gpu-lxnz8-spiderflash-1-agumunvcon-1017999018";
        assert_eq!(drain_label(kwok), kwok);
        let name = placeholder_name(kwok);
        assert_eq!(name.len(), 63, "{name}");
        assert!(
            name.starts_with("prewarm-replacement-kwok-gpu-lxnz8-spiderflash-1-"),
            "{name}"
        );
        assert_ne!(
            name,
            placeholder_name("kwok-gpu-lxnz8-spiderflash-1-agumunvcon-1017999019")
        );
        assert!(drain_label(&"x".repeat(100)).len() <= 63);
    }
}
