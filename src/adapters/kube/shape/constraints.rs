//! Where the placeholder of a drain may run: the scheduling constraints of the pods it stands
//! for, combined so that a node that fits the placeholder is a node every one of those pods may
//! use (pure: no cluster calls).
//!
//! The placeholder is one pod for all of them, so their constraints are joined with AND: a node
//! Karpenter launches for it must satisfy each pod's, or the pods, once evicted, stay Pending while
//! the drain counts the node as their replacement. The AND is satisfiable: the pods all run on the
//! draining node, which satisfied every one of them when they were scheduled.
//!
//! What is copied, and why:
//! - `nodeSelector`: every pod's entries. Two pods that disagree on a key (possible only if the
//!   node's labels changed after one was scheduled) keep the draining node's value, or none.
//! - required node affinity (`requiredDuringSchedulingIgnoredDuringExecution`): each pod's terms
//!   (ORed) joined with AND across pods, so the result is one term per combination of one term of
//!   each pod. `matchFields` are dropped: they name nodes (`metadata.name`), and the replacement is
//!   a new node no existing name matches; a pod pinned by name cannot move anyway.
//! - required pod affinity and anti-affinity terms whose label selector matches none of the pods
//!   the drain moves (for example "not on a node with a training job", "in the zone of the cache"):
//!   they constrain the real pods in the same way wherever the pods go. The term is pinned to the
//!   pod's own namespace (the placeholder lives in the balloon namespace, where the term would
//!   otherwise look). Terms that match the moved pods themselves (a Deployment's anti-affinity
//!   against its own app, or affinity to it) are not copied: the placeholder carries none of their
//!   labels, so it would count the pods still on the draining node, and the surge pods made for
//!   this drain, as other pods — an anti-affinity would repel it from the very nodes the surge
//!   fills and from the reclaimed node's zone the evicted pods leave, and an affinity to its own
//!   app on `kubernetes.io/hostname` could never be met on a new node (Kubernetes lets a pod's
//!   first replica through only because it matches its own selector; the placeholder does not).
//! - Not copied: preferred terms of any kind (the placeholder's own preferred terms keep it off the
//!   reclaimed offering, and Karpenter relaxes preferences by weight; the pods' would compete with
//!   that order), and `topologySpreadConstraints`: a spread counts matching pods per domain, and
//!   while the placeholder is placed the moved pods still count in the reclaimed node's domain, so
//!   the domain it picks is the one right for one more pod, not for a moved one (with
//!   `DoNotSchedule` it could forbid the very zone the moved pod will go back to). The scheduler
//!   applies each pod's spread when the pod itself moves.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::selector::selector_matches;

/// At most this many ORed terms in the joined required node affinity. Beyond it, each pod keeps
/// only the terms its draining node satisfies (the combinations stay satisfiable: that node meets
/// them all), and if that is still too many, the first of those.
pub const MAX_NODE_TERMS: usize = 16;

/// The copied constraints of a placeholder.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Constraints {
    pub node_selector: BTreeMap<String, String>,
    /// ORed terms, each the AND of one term of every pod that has required node affinity.
    /// Empty: no pod has any.
    pub required_node_terms: Vec<NodeSelectorTerm>,
    pub pod_affinity: Vec<PodAffinityTerm>,
    pub pod_anti_affinity: Vec<PodAffinityTerm>,
}

fn labels_of(node: &Node) -> BTreeMap<String, String> {
    node.metadata.labels.clone().unwrap_or_default()
}

/// Whether `labels` satisfy one node selector requirement (Kubernetes' semantics: NotIn and
/// DoesNotExist hold for a missing label; Gt/Lt compare integers).
fn requirement_holds(r: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&r.key);
    let values = r.values.as_deref().unwrap_or_default();
    let number = |v: &str| v.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            match (
                value.and_then(|v| number(v)),
                values.first().and_then(|v| number(v)),
            ) {
                (Some(v), Some(bound)) if r.operator == "Gt" => v > bound,
                (Some(v), Some(bound)) => v < bound,
                _ => false,
            }
        }
        _ => false,
    }
}

fn term_holds(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>) -> bool {
    term.match_expressions
        .iter()
        .flatten()
        .all(|r| requirement_holds(r, labels))
}

/// A pod's required node affinity terms without `matchFields`; None when it constrains nothing
/// once node names are ignored (no terms, or one that only named nodes).
fn pod_node_terms(pod: &Pod) -> Option<Vec<NodeSelectorTerm>> {
    let terms = pod
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms
        .clone();
    let mut out = Vec::new();
    for t in terms {
        let exprs = t.match_expressions.unwrap_or_default();
        // A term of only node names is true once names are ignored, and so is the OR.
        if exprs.is_empty() {
            return None;
        }
        out.push(NodeSelectorTerm {
            match_expressions: Some(exprs),
            match_fields: None,
        });
    }
    (!out.is_empty()).then_some(out)
}

/// The AND of several ORs of terms: one term per combination, requirements concatenated without
/// repeats.
fn join(per_pod: &[Vec<NodeSelectorTerm>]) -> Vec<NodeSelectorTerm> {
    let mut joined: Vec<Vec<NodeSelectorRequirement>> = vec![Vec::new()];
    for terms in per_pod {
        let mut next = Vec::new();
        for prefix in &joined {
            for t in terms {
                let mut exprs = prefix.clone();
                for r in t.match_expressions.iter().flatten() {
                    if !exprs.contains(r) {
                        exprs.push(r.clone());
                    }
                }
                next.push(exprs);
            }
        }
        joined = next;
    }
    let mut out: Vec<NodeSelectorTerm> = Vec::new();
    for exprs in joined {
        let term = NodeSelectorTerm {
            match_expressions: Some(exprs),
            match_fields: None,
        };
        if !out.contains(&term) {
            out.push(term);
        }
    }
    out
}

fn combinations(per_pod: &[Vec<NodeSelectorTerm>]) -> usize {
    per_pod
        .iter()
        .fold(1usize, |n, t| n.saturating_mul(t.len().max(1)))
}

/// The joined required node affinity of `pods`, at most `MAX_NODE_TERMS` terms.
fn required_node_terms(node: &Node, pods: &[&Pod]) -> Vec<NodeSelectorTerm> {
    let mut per_pod: Vec<Vec<NodeSelectorTerm>> = Vec::new();
    for terms in pods.iter().filter_map(|p| pod_node_terms(p)) {
        if !per_pod.contains(&terms) {
            per_pod.push(terms);
        }
    }
    if per_pod.is_empty() {
        return Vec::new();
    }
    if combinations(&per_pod) > MAX_NODE_TERMS {
        let labels = labels_of(node);
        for terms in per_pod.iter_mut() {
            let met: Vec<NodeSelectorTerm> = terms
                .iter()
                .filter(|t| term_holds(t, &labels))
                .cloned()
                .collect();
            // None met: the node's labels changed since; keep the pod's own first choice.
            *terms = if met.is_empty() {
                terms[..1].to_vec()
            } else {
                met
            };
        }
    }
    if combinations(&per_pod) > MAX_NODE_TERMS {
        for terms in per_pod.iter_mut() {
            terms.truncate(1);
        }
    }
    join(&per_pod)
}

/// Whether a term's label selector selects `labels` (a null selector selects nothing, an empty
/// one everything).
fn selects(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    selector.is_some_and(|s| selector_matches(s, labels))
}

/// The required pod (anti-)affinity terms of `pods` that select none of them, pinned to the
/// owning pod's namespace.
fn foreign_terms(
    pods: &[&Pod],
    terms_of: impl Fn(&Pod) -> Option<Vec<PodAffinityTerm>>,
) -> Vec<PodAffinityTerm> {
    let moved: Vec<BTreeMap<String, String>> = pods
        .iter()
        .map(|p| p.metadata.labels.clone().unwrap_or_default())
        .collect();
    let mut out: Vec<PodAffinityTerm> = Vec::new();
    for pod in pods {
        for mut term in terms_of(pod).unwrap_or_default() {
            if moved
                .iter()
                .any(|labels| selects(term.label_selector.as_ref(), labels))
            {
                continue;
            }
            let unscoped = term.namespaces.as_ref().is_none_or(Vec::is_empty)
                && term.namespace_selector.is_none();
            if unscoped {
                term.namespaces = Some(vec![pod.metadata.namespace.clone().unwrap_or_default()]);
            }
            if !out.contains(&term) {
                out.push(term);
            }
        }
    }
    out
}

/// Merges the pods' nodeSelectors (see the module comment for conflicts).
fn node_selector(node: &Node, pods: &[&Pod]) -> BTreeMap<String, String> {
    let labels = labels_of(node);
    let mut merged: BTreeMap<String, String> = BTreeMap::new();
    let mut conflicting: Vec<String> = Vec::new();
    for selector in pods
        .iter()
        .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_selector.as_ref()))
    {
        for (k, v) in selector {
            match merged.get(k) {
                Some(have) if have != v => conflicting.push(k.clone()),
                _ => {
                    merged.insert(k.clone(), v.clone());
                }
            }
        }
    }
    for k in conflicting {
        match labels.get(&k) {
            Some(v) => merged.insert(k, v.clone()),
            None => merged.remove(&k),
        };
    }
    merged
}

/// The constraints a placeholder standing for `pods` (all on `node`) copies from them.
pub fn copied_constraints(node: &Node, pods: &[&Pod]) -> Constraints {
    let affinity = |p: &Pod| p.spec.as_ref().and_then(|s| s.affinity.clone());
    Constraints {
        node_selector: node_selector(node, pods),
        required_node_terms: required_node_terms(node, pods),
        pod_affinity: foreign_terms(pods, |p| {
            affinity(p)?
                .pod_affinity?
                .required_during_scheduling_ignored_during_execution
        }),
        pod_anti_affinity: foreign_terms(pods, |p| {
            affinity(p)?
                .pod_anti_affinity?
                .required_during_scheduling_ignored_during_execution
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn node(labels: Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n", "labels": labels}})).unwrap()
    }

    fn pod(labels: Value, spec: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "inference",
            "labels": labels}, "spec": spec}))
        .unwrap()
    }

    fn required(terms: Value) -> Value {
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": terms}}}, "containers": []})
    }

    fn terms(got: &Constraints) -> Value {
        serde_json::to_value(&got.required_node_terms).unwrap()
    }

    fn g5_node() -> Node {
        node(json!({"node.kubernetes.io/instance-type": "g5.12xlarge",
            "karpenter.k8s.aws/instance-family": "g5", "gpu": "a10g"}))
    }

    #[test]
    fn required_node_affinity_is_joined_with_and_across_pods() {
        let family = json!({"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5", "g6"]});
        let gpu_a10 = json!({"key": "gpu", "operator": "In", "values": ["a10g"]});
        let gpu_l4 = json!({"key": "gpu", "operator": "In", "values": ["l4"]});
        let name = json!({"key": "metadata.name", "operator": "In", "values": ["n"]});
        let no_spec = json!({"containers": []});
        // (situation, pods' specs, expected terms — written out by hand)
        let cases: Vec<(&str, Vec<Value>, Value)> = vec![
            (
                "no pod has any",
                vec![no_spec.clone(), no_spec.clone()],
                json!([]),
            ),
            (
                "one pod: its terms as they are, the other pod adds nothing",
                vec![
                    required(json!([{"matchExpressions": [family]}])),
                    no_spec.clone(),
                ],
                json!([{"matchExpressions": [family]}]),
            ),
            (
                "two pods: each term of one with each of the other",
                vec![
                    required(json!([{"matchExpressions": [family]}])),
                    required(
                        json!([{"matchExpressions": [gpu_a10]}, {"matchExpressions": [gpu_l4]}]),
                    ),
                ],
                json!([{"matchExpressions": [family, gpu_a10]}, {"matchExpressions": [family, gpu_l4]}]),
            ),
            (
                "the same requirement in both pods appears once",
                vec![
                    required(json!([{"matchExpressions": [family, gpu_a10]}])),
                    required(json!([{"matchExpressions": [gpu_a10]}])),
                ],
                json!([{"matchExpressions": [family, gpu_a10]}]),
            ),
            (
                "matchFields dropped from a term that has expressions",
                vec![required(
                    json!([{"matchExpressions": [family], "matchFields": [name]}]),
                )],
                json!([{"matchExpressions": [family]}]),
            ),
            (
                "a term of only node names: the pod constrains nothing",
                vec![
                    required(json!([{"matchFields": [name]}, {"matchExpressions": [gpu_l4]}])),
                    required(json!([{"matchExpressions": [gpu_a10]}])),
                ],
                json!([{"matchExpressions": [gpu_a10]}]),
            ),
        ];
        for (what, specs, expected) in cases {
            let pods: Vec<Pod> = specs.into_iter().map(|s| pod(json!({}), s)).collect();
            let refs: Vec<&Pod> = pods.iter().collect();
            assert_eq!(
                terms(&copied_constraints(&g5_node(), &refs)),
                expected,
                "{what}"
            );
        }
    }

    #[test]
    fn too_many_combinations_keep_the_terms_the_draining_node_meets() {
        // Five pods with five alternatives each: 3125 combinations. The g5 node meets only the
        // "gpu In [a10g]" alternative of each, so one term is left.
        let alternatives = |tag: usize| {
            let mut ts = vec![
                json!({"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a10g"]}]}),
            ];
            for i in 0..4 {
                ts.push(json!({"matchExpressions": [{"key": format!("alt-{tag}"), "operator": "In", "values": [format!("v{i}")]}]}));
            }
            Value::Array(ts)
        };
        let pods: Vec<Pod> = (0..5)
            .map(|i| pod(json!({}), required(alternatives(i))))
            .collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        assert_eq!(
            terms(&copied_constraints(&g5_node(), &refs)),
            json!([{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a10g"]}]}])
        );
        // A node that meets several of each: the first of each pod's.
        let many = |tag: usize| {
            json!([
                {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
                {"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]},
                {"matchExpressions": [{"key": format!("t{tag}"), "operator": "NotIn", "values": ["x"]}]},
            ])
        };
        let pods: Vec<Pod> = (0..3).map(|i| pod(json!({}), required(many(i)))).collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        // 27 > 16 and the node meets all three of each: first of each, joined (one repeat).
        assert_eq!(
            terms(&copied_constraints(&g5_node(), &refs)),
            json!([{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}])
        );
    }

    #[test]
    fn requirement_operators_follow_kubernetes() {
        let labels: BTreeMap<String, String> = [
            ("gpu-count".to_string(), "4".to_string()),
            ("gpu".into(), "a10g".into()),
        ]
        .into();
        let r = |op: &str, key: &str, values: &[&str]| NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        };
        let cases = [
            (r("In", "gpu", &["a10g", "l4"]), true),
            (r("In", "gpu", &["l4"]), false),
            (r("NotIn", "gpu", &["l4"]), true),
            (r("NotIn", "missing", &["l4"]), true),
            (r("Exists", "gpu", &[]), true),
            (r("DoesNotExist", "gpu", &[]), false),
            (r("Gt", "gpu-count", &["3"]), true),
            (r("Gt", "gpu-count", &["4"]), false),
            (r("Lt", "gpu-count", &["5"]), true),
            (r("Lt", "gpu", &["5"]), false),
            (r("Bogus", "gpu", &[]), false),
        ];
        for (req, expected) in cases {
            assert_eq!(requirement_holds(&req, &labels), expected, "{req:?}");
        }
    }

    #[test]
    fn node_selectors_are_merged_and_conflicts_take_the_nodes_value() {
        let a = pod(
            json!({}),
            json!({"nodeSelector": {"gpu": "a10g", "team": "x"}, "containers": []}),
        );
        let b = pod(
            json!({}),
            json!({"nodeSelector": {"gpu": "l4", "tier": "serve", "team": "y"}, "containers": []}),
        );
        let got = copied_constraints(&g5_node(), &[&a, &b]);
        // gpu: the node says a10g; team: the node has no such label, dropped; tier: only b.
        let expected: BTreeMap<String, String> = [
            ("gpu".to_string(), "a10g".to_string()),
            ("tier".into(), "serve".into()),
        ]
        .into();
        assert_eq!(got.node_selector, expected);
    }

    #[test]
    fn pod_affinity_terms_that_select_the_moved_pods_are_not_copied() {
        let self_anti = json!({"labelSelector": {"matchLabels": {"app": "llama"}},
            "topologyKey": "kubernetes.io/hostname"});
        let other_anti = json!({"labelSelector": {"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["training"]}]},
            "topologyKey": "kubernetes.io/hostname"});
        let cache_affinity = json!({"labelSelector": {"matchLabels": {"app": "cache"}},
            "namespaces": ["cache"], "topologyKey": "topology.kubernetes.io/zone"});
        let self_affinity = json!({"labelSelector": {"matchExpressions": [
            {"key": "app", "operator": "Exists"}]}, "topologyKey": "topology.kubernetes.io/zone"});
        let llama = pod(
            json!({"app": "llama"}),
            json!({"containers": [], "affinity": {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [self_anti, other_anti]},
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [cache_affinity, self_affinity]}}}),
        );
        let got = copied_constraints(&g5_node(), &[&llama]);
        // The foreign anti-affinity, pinned to the pod's namespace; the cache affinity kept as
        // written (it names its namespace).
        assert_eq!(
            serde_json::to_value(&got.pod_anti_affinity).unwrap(),
            json!([{"labelSelector": {"matchExpressions": [
                {"key": "app", "operator": "In", "values": ["training"]}]},
                "namespaces": ["inference"], "topologyKey": "kubernetes.io/hostname"}])
        );
        assert_eq!(
            serde_json::to_value(&got.pod_affinity).unwrap(),
            json!([{"labelSelector": {"matchLabels": {"app": "cache"}},
                "namespaces": ["cache"], "topologyKey": "topology.kubernetes.io/zone"}])
        );
    }

    #[test]
    fn label_selectors_follow_kubernetes() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "llama".to_string())].into();
        let sel = |v: Value| -> LabelSelector { serde_json::from_value(v).unwrap() };
        let cases = [
            (Some(sel(json!({}))), true),
            (None, false),
            (Some(sel(json!({"matchLabels": {"app": "llama"}}))), true),
            (Some(sel(json!({"matchLabels": {"app": "other"}}))), false),
            (
                Some(sel(
                    json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["x"]}]}),
                )),
                true,
            ),
            (
                Some(sel(
                    json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
                )),
                true,
            ),
            (
                Some(sel(
                    json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}),
                )),
                false,
            ),
        ];
        for (s, expected) in cases {
            assert_eq!(selects(s.as_ref(), &labels), expected, "{s:?}");
        }
    }
}
