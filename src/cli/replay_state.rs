//! The cluster as `prewarm explain --cluster-state` holds it: the objects of a `kubectl get ...
//! -o json` List (Nodes, Pods, PodDisruptionBudgets, and the pods' Deployments, ReplicaSets and
//! HorizontalPodAutoscalers for surges: `replay_surge`), shown to the planner through the
//! handler's own shaping functions, and changed only by what a replayed step's commands do.
//! One reason to change: how a drain's commands change the cluster, offline.
//!
//! The rules, kept to what the drain itself causes:
//! - the drain state, cordon and taint (or their removal) are written with the executor's own
//!   patch builders (`node_patch`, `undrain_patch`), applied as a JSON merge patch;
//! - a requested placeholder is built by the executor's `placeholder_object` and is Running at
//!   once on a Ready node other than the draining one, of the same NodePool, not being drained
//!   (the first such node of STATE); with none, it stays Pending. Karpenter launches nothing;
//! - an eviction takes the pod away at once (no grace period spent) unless a
//!   PodDisruptionBudget of STATE that selects it has `status.disruptionsAllowed` 0 (or no
//!   status yet): then it is blocked, as the eviction API's 429 would say, or deleted when the
//!   step deletes past budgets. Each eviction lowers the budgets that allowed it by one;
//! - the hand-over and the release delete the drain's placeholder;
//! - a surge and its release are written on the Deployment or its HPA (`replay_surge`).
//!
//! Nothing else changes: no pod comes back (a surge's pods never turn Ready), no node appears
//! or goes.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{Map, Value};

use crate::adapters::kube::drain::execute::{state_write, undrain_write};
use crate::adapters::kube::drain::replacement::{
    placeholder_object, replacement_seen, seen_with_home, DrainContext,
};
use crate::adapters::kube::drain::reservation::instances_of;
use crate::adapters::kube::drain::{
    has_draining_taint, instance_of_node, is_ready, node_view, pod_view, Observation,
};
use crate::adapters::kube::shape::node_pool_of;
use crate::adapters::kube::shape::placeholder::{drain_label, REPLACEMENT_FOR};
use crate::adapters::kube::shape::selector::selector_matches;
use crate::adapters::kube::shape::CAPACITY_RESERVATION_LABEL;
use crate::core::interruption::{reservation_expiry, Command, DrainStep, Notice, PodRef};
use crate::core::TargetSpec;

/// The objects of STATE the replay looks at (other kinds are kept out: nothing changes them).
#[derive(Clone, Debug, Default)]
pub struct ClusterState {
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    pub pdbs: Vec<PodDisruptionBudget>,
    /// The pods' workloads, where surges are written (`replay_surge`).
    pub deployments: Vec<Deployment>,
    pub replica_sets: Vec<ReplicaSet>,
    pub hpas: Vec<HorizontalPodAutoscaler>,
}

/// What applying one step did, in words for the output.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Applied {
    pub evicted: Vec<String>,
    /// `pod` blocked by `budget` (disruptionsAllowed 0).
    pub blocked: Vec<String>,
    pub deleted_past_pdb: Vec<String>,
    /// The placeholder made: `namespace/name` and where it runs (or that it is Pending).
    pub placeholder: Option<String>,
    /// What that placeholder requests (resource -> quantity as written on the pod).
    pub placeholder_requests: Option<BTreeMap<String, String>>,
    /// Placeholders deleted (hand-over, release).
    pub released: Vec<String>,
    /// Surges written and given back (`namespace/deployment: field outcome`).
    pub surges: Vec<String>,
}

impl ClusterState {
    /// A `kubectl ... -o json` document: a List (`items`) or one object.
    pub fn parse(text: &str) -> Result<Self, String> {
        let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let items = match doc.get("items") {
            Some(Value::Array(items)) => items.clone(),
            _ => vec![doc],
        };
        let mut state = ClusterState::default();
        for (i, item) in items.into_iter().enumerate() {
            let kind = item
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let bad = |e: serde_json::Error| format!("item {i} ({kind}): {e}");
            match kind.as_str() {
                "Node" => state.nodes.push(serde_json::from_value(item).map_err(bad)?),
                "Pod" => state.pods.push(serde_json::from_value(item).map_err(bad)?),
                "PodDisruptionBudget" => {
                    state.pdbs.push(serde_json::from_value(item).map_err(bad)?)
                }
                "Deployment" => {
                    (state.deployments).push(serde_json::from_value(item).map_err(bad)?)
                }
                "ReplicaSet" => {
                    (state.replica_sets).push(serde_json::from_value(item).map_err(bad)?)
                }
                "HorizontalPodAutoscaler" => {
                    state.hpas.push(serde_json::from_value(item).map_err(bad)?)
                }
                _ => {}
            }
        }
        Ok(state)
    }

    /// The node whose providerID names `instance`.
    pub fn node_of(&self, instance: &str) -> Option<&Node> {
        self.nodes
            .iter()
            .find(|n| instance_of_node(n).as_deref() == Some(instance))
    }

    /// The instances a notice names, or for a capacity reservation's notice the instances of
    /// the nodes labelled with it (as the handler's fan-out finds them), in that order.
    pub fn instances_of_notice(&self, notice: &Notice) -> Vec<String> {
        match &notice.reservation_id {
            Some(id) => {
                let labelled: Vec<Node> = self
                    .nodes
                    .iter()
                    .filter(|n| {
                        n.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(CAPACITY_RESERVATION_LABEL))
                            == Some(id)
                    })
                    .cloned()
                    .collect();
                instances_of(&labelled)
            }
            None => notice.instance_ids.clone(),
        }
    }

    fn placeholders_of(&self, drain_id: &str) -> impl Iterator<Item = &Pod> {
        let label = drain_label(drain_id);
        self.pods.iter().filter(move |p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(REPLACEMENT_FOR))
                == Some(&label)
        })
    }

    /// What the handler's `observe` would see of the drain of `drain_id` on `node_name`.
    pub fn observe(&self, node_name: &str, drain_id: &str, targets: &[TargetSpec]) -> Observation {
        let node = self
            .nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(node_name))
            .cloned()
            .unwrap_or_default();
        let pods: Vec<Pod> = self
            .pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node_name))
            .cloned()
            .collect();
        let placeholders: Vec<Pod> = self.placeholders_of(drain_id).cloned().collect();
        let seen = replacement_seen(&placeholders, node_name, &self.nodes);
        let (view, state_error) = node_view(&node, seen_with_home(seen, targets, &node));
        let pod_views = pods.iter().map(pod_view).collect();
        Observation {
            node,
            view,
            pods,
            pod_views,
            state_error,
        }
    }

    /// Carries out `step` (planned from `observed`) on the objects, in the executor's order.
    pub fn apply(
        &mut self,
        observed: &Observation,
        step: &DrainStep,
        ctx: &DrainContext,
    ) -> Applied {
        let mut applied = Applied::default();
        let node = &observed.node;
        if let Some(write) = state_write(node, step) {
            self.patch_node(node, &write.patch);
        }
        if let Some(patch) = undrain_write(node, step) {
            self.patch_node(node, &patch);
        }
        for command in &step.commands {
            if let (Command::RequestReplacement { pods, .. }, Some(s)) =
                (command, step.state.as_ref())
            {
                if let Some((made, requests)) =
                    self.request(observed, pods, ctx, reservation_expiry(s))
                {
                    applied.placeholder = Some(made);
                    applied.placeholder_requests = Some(requests);
                }
            }
        }
        for command in &step.commands {
            match command {
                Command::Evict {
                    pod,
                    delete_if_blocked,
                    ..
                } => self.evict(pod, *delete_if_blocked, &mut applied),
                Command::Surge { .. } | Command::ReleaseSurge { .. } => {
                    (applied.surges).extend(self.write_surge(command, ctx.drain_id, ctx.now))
                }
                Command::HandOver | Command::ReleaseReplacement => {
                    let label = drain_label(ctx.drain_id);
                    self.pods.retain(|p| {
                        let ours = p
                            .metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(REPLACEMENT_FOR))
                            == Some(&label);
                        if ours {
                            applied.released.push(format!(
                                "placeholder {}/{} deleted",
                                p.metadata.namespace.as_deref().unwrap_or_default(),
                                p.metadata.name.as_deref().unwrap_or_default()
                            ));
                        }
                        !ours
                    });
                }
                _ => {}
            }
        }
        applied
    }

    fn patch_node(&mut self, node: &Node, patch: &Value) {
        if let Some(target) =
            (self.nodes.iter_mut()).find(|n| n.metadata.name == node.metadata.name)
        {
            patch_object(target, patch);
        }
    }

    /// Makes the drain's placeholder (a no-op when one exists, as the create's 409 is), Running
    /// on the first Ready node of the draining node's pool other than it, or Pending. Returns
    /// what was made and what it requests.
    fn request(
        &mut self,
        observed: &Observation,
        stands_for: &[PodRef],
        ctx: &DrainContext,
        expires_at: f64,
    ) -> Option<(String, BTreeMap<String, String>)> {
        if self.placeholders_of(ctx.drain_id).next().is_some() {
            return None;
        }
        let (namespace, mut pod) =
            placeholder_object(ctx, &observed.node, &observed.pods, stands_for, expires_at)?;
        let pool = node_pool_of(&observed.node);
        let home = self
            .nodes
            .iter()
            .find(|n| {
                n.metadata.name != observed.node.metadata.name
                    && pool.is_some()
                    && node_pool_of(n) == pool
                    && is_ready(n)
                    && !has_draining_taint(n)
            })
            .and_then(|n| n.metadata.name.clone());
        pod.metadata.namespace = Some(namespace.clone());
        let name = format!(
            "{namespace}/{}",
            pod.metadata.name.clone().unwrap_or_default()
        );
        let status = match &home {
            Some(host) => format!("placeholder {name} made, Running on {host}"),
            None => {
                format!("placeholder {name} made, Pending (no Ready node of the pool in STATE)")
            }
        };
        if let Some(host) = home {
            pod.spec.get_or_insert_with(Default::default).node_name = Some(host);
            pod.status.get_or_insert_with(Default::default).phase = Some("Running".into());
        }
        let requests = pod
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .filter_map(|c| c.resources.as_ref()?.requests.as_ref())
            .flatten()
            .map(|(k, q)| (k.clone(), q.0.clone()))
            .collect();
        self.pods.push(pod);
        Some((status, requests))
    }

    fn evict(&mut self, pod: &PodRef, delete_if_blocked: bool, applied: &mut Applied) {
        let Some(at) = self.pods.iter().position(|p| {
            p.metadata.namespace.as_deref() == Some(pod.namespace.as_str())
                && p.metadata.name.as_deref() == Some(pod.name.as_str())
        }) else {
            return;
        };
        let labels = self.pods[at].metadata.labels.clone().unwrap_or_default();
        let covering: Vec<usize> = (0..self.pdbs.len())
            .filter(|&i| {
                let b = &self.pdbs[i];
                b.metadata.namespace.as_deref() == Some(pod.namespace.as_str())
                    && b.spec
                        .as_ref()
                        .and_then(|s| s.selector.as_ref())
                        .is_some_and(|sel| selector_matches(sel, &labels))
            })
            .collect();
        let allowed =
            |b: &PodDisruptionBudget| b.status.as_ref().map_or(0, |s| s.disruptions_allowed);
        let blocking = covering
            .iter()
            .find(|&&i| allowed(&self.pdbs[i]) <= 0)
            .and_then(|&i| self.pdbs[i].metadata.name.clone());
        match blocking {
            Some(budget) if !delete_if_blocked => {
                applied.blocked.push(format!(
                    "{pod} (PodDisruptionBudget {}/{budget})",
                    pod.namespace
                ));
                return;
            }
            Some(_) => applied.deleted_past_pdb.push(pod.to_string()),
            None => {
                for i in covering {
                    if let Some(s) = self.pdbs[i].status.as_mut() {
                        s.disruptions_allowed -= 1;
                    }
                }
                applied.evicted.push(pod.to_string());
            }
        }
        self.pods.remove(at);
    }
}

/// `object` with a JSON merge patch applied (unchanged if the result is not such an object).
pub(super) fn patch_object<T: serde::Serialize + serde::de::DeserializeOwned>(
    object: &mut T,
    patch: &Value,
) {
    let mut doc = serde_json::to_value(&*object).unwrap_or_default();
    merge_patch(&mut doc, patch);
    if let Ok(patched) = serde_json::from_value(doc) {
        *object = patched;
    }
}

/// A JSON merge patch (RFC 7386), as the apiserver applies the executor's node patches: null
/// removes a key, objects merge, anything else replaces.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(doc) = target {
        for (key, value) in fields {
            if value.is_null() {
                doc.remove(key);
            } else {
                merge_patch(doc.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 7386 by hand: null removes, objects merge key by key, arrays and scalars replace.
    #[test]
    fn merge_patches_remove_merge_and_replace() {
        let mut doc = json!({"metadata": {"annotations": {"a": "1", "b": "2"}, "name": "n"},
            "spec": {"taints": [{"key": "x"}], "unschedulable": true}});
        merge_patch(
            &mut doc,
            &json!({"metadata": {"annotations": {"a": null, "c": "3"}},
                "spec": {"taints": [{"key": "y"}], "unschedulable": null}}),
        );
        assert_eq!(
            doc,
            json!({"metadata": {"annotations": {"b": "2", "c": "3"}, "name": "n"},
                "spec": {"taints": [{"key": "y"}]}})
        );
    }
}
