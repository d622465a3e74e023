//! `prewarm restore` beyond the targets: finds, across the cluster, every object that still
//! carries prewarm's marks and gives each back, so that a target removed from the ConfigMap (or a
//! drain in the middle of its work) leaves nothing behind. Changes when prewarm starts marking a
//! new kind of object.
//!
//! Runs after the targets' own steps (`restore::RESTORE_STEPS`), which have already given back
//! what they know: what is still marked here belongs to no current target. Per kind:
//! - nodes: a drain's state, the `prewarm.io/draining` taint and the cordon, unless a live drain
//!   holds the node (`core::interruption::node_restore`: the rule of what is live and which
//!   cordon is prewarm's);
//! - NodePools: limits and frozen budgets back, annotations off (the same patches as a target's);
//! - balloon Deployments and CapacityBuffers (carrying the tick's headroom annotations): size 0,
//!   annotations off;
//! - HPAs, and the KEDA ScaledObjects that own them: the user's floor back;
//! - drain surges (objects labelled `prewarm.io/surging`) given back, drain placeholders deleted.
//!
//! A kind the caller may not list cluster-wide (403) or that the cluster does not have (404) is
//! reported, not failed: the chart's restore identity lists nodes and NodePools everywhere and
//! workloads only in the targets' namespaces (infra/helm/prewarm/permissions.yaml); a cluster
//! admin finds everything.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{json, Map, Value};

use crate::adapters::kube::api_error::from_kube;
use crate::adapters::kube::conflict::retry_on_conflict;
use crate::adapters::kube::drain::replacement::delete_placeholder;
use crate::adapters::kube::drain::surge::{self, SURGING_LABEL};
use crate::adapters::kube::drain::{has_draining_taint, instance_of_node, is_ready, undrain_patch};
use crate::adapters::kube::headroom::annotations as headroom_keys;
use crate::adapters::kube::hpa::{self, floor::FloorIntent};
use crate::adapters::kube::nodepool::{self, NodePoolView};
use crate::adapters::kube::resources::{capacity_buffer, deployment, node_pool_api};
use crate::adapters::kube::restore::{self, RestoreOutcome, Restored, PREFIX};
use crate::adapters::kube::shape::placeholder::REPLACEMENT_FOR;
use crate::core::interruption::state::CLOSED_EVENT;
use crate::core::interruption::surge::{
    SURGE_BASE, SURGE_DRAINS, SURGE_USER_REPLICAS, SURGE_WRITTEN_REPLICAS,
};
use crate::core::interruption::{node_restore, DrainSettings, DrainState, NodeMarks, NodeRestore};
use crate::core::{HeadroomKind, TargetSpec};
use crate::error::{Error, Result};

/// The `target` column of what restore reports for an object no current target names.
pub const FOUND: &str = "(found)";

/// The kinds of object (other than nodes) restore looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FoundKind {
    NodePool,
    /// A Deployment or a CapacityBuffer.
    Workload,
    /// An HPA, or the KEDA ScaledObject that owns it (its floor object).
    Floor,
}

/// What to give back on one found object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GiveBack {
    Nothing,
    /// Limits and frozen budgets back, every `prewarm.io/` annotation off.
    NodePool,
    /// A balloon or CapacityBuffer: size 0, every `prewarm.io/` annotation off.
    Headroom,
    /// The user's floor back (`hpa::floor`, `FloorIntent::Restore`).
    Floor,
    /// Only these stray `prewarm.io/` annotations off.
    Annotations(Vec<String>),
}

/// The tick's headroom annotations: only a balloon or CapacityBuffer carries them.
const HEADROOM_KEYS: [&str; 6] = [
    headroom_keys::COOLDOWN_UNTIL,
    headroom_keys::HOLD,
    headroom_keys::LAST_TICK,
    headroom_keys::REPLACEMENT_RESERVED,
    headroom_keys::REPLACEMENT_DRAINS,
    headroom_keys::CALIBRATION,
];

/// A drain surge's record: given back by the surge release, which knows the user's value.
const SURGE_KEYS: [&str; 4] = [
    SURGE_DRAINS,
    SURGE_BASE,
    SURGE_USER_REPLICAS,
    SURGE_WRITTEN_REPLICAS,
];

const FLOOR_KEYS: [&str; 3] = [
    hpa::floor::USER_MIN,
    hpa::floor::RAISED_MIN,
    hpa::floor::LEASE_UNTIL,
];

/// What restore gives back on an object of `kind` carrying `annotations`. A surge's record is
/// left to the surge release (it restores the user's value exactly, a user's edit kept).
pub fn give_back(kind: FoundKind, annotations: &BTreeMap<String, String>) -> GiveBack {
    let ours: Vec<&str> = annotations
        .keys()
        .map(String::as_str)
        .filter(|k| k.starts_with(PREFIX) && !SURGE_KEYS.contains(k))
        .collect();
    if ours.is_empty() {
        return GiveBack::Nothing;
    }
    let any = |keys: &[&str]| ours.iter().any(|k| keys.contains(k));
    match kind {
        FoundKind::NodePool => GiveBack::NodePool,
        FoundKind::Workload if any(&HEADROOM_KEYS) => GiveBack::Headroom,
        FoundKind::Floor if any(&FLOOR_KEYS) => GiveBack::Floor,
        FoundKind::Workload | FoundKind::Floor => {
            GiveBack::Annotations(ours.iter().map(|k| k.to_string()).collect())
        }
    }
}

/// The patch that gives a node back: `drain::undrain_patch` (drain state off, the draining taint
/// off, with `uncordon` the cordon lifted) and every other `prewarm.io/` annotation off too
/// (the closed-event mark: nothing of prewarm's stays).
pub fn node_give_back_patch(node: &Node, uncordon: bool) -> Value {
    let mut patch = undrain_patch(node, uncordon, None, None);
    let annotations = &mut patch["metadata"]["annotations"];
    for key in node.metadata.annotations.iter().flatten().map(|(k, _)| k) {
        if key.starts_with(PREFIX) {
            annotations[key.as_str()] = Value::Null;
        }
    }
    annotations[CLOSED_EVENT] = Value::Null;
    patch
}

fn found(object: String, outcome: RestoreOutcome, detail: String) -> Restored {
    Restored {
        target: FOUND.into(),
        object,
        outcome,
        detail,
    }
}

/// A listing: its items, or the line that says why a kind was not searched.
enum Listed<T> {
    Items(Vec<T>),
    NotSearched(Restored),
}

async fn list<K>(api: Api<K>, params: &ListParams, what: &str) -> Result<Listed<K>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.list(params).await {
        Ok(l) => Ok(Listed::Items(l.items)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Listed::Items(Vec::new())),
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(Listed::NotSearched(found(
            what.into(),
            RestoreOutcome::Kept,
            format!("not searched: may not list {what} cluster-wide ({}); only the targets' own were restored", s.message),
        ))),
        Err(e) => Err(from_kube("list", what, "cluster-wide", e)),
    }
}

/// Every kind, after the targets' steps. One failing kind never stops the others.
/// `nodes_report_only`: nodes are listed and what would be given back reported as kept, never
/// written (an identity that may not write nodes: the tick's).
pub async fn restore_found(
    client: &kube::Client,
    settings: &DrainSettings,
    now: f64,
    dry_run: bool,
    nodes_report_only: bool,
    drains: restore::Drains,
) -> Vec<Result<Vec<Restored>>> {
    let mut out = vec![
        restore_nodes(client, settings, now, dry_run, nodes_report_only).await,
        restore_node_pools(client, dry_run).await,
        restore_workloads(client, dry_run).await,
        restore_floors(client, now, dry_run).await,
    ];
    if drains == restore::Drains::GiveBack {
        out.push(restore_surges_and_placeholders(client, now, dry_run).await);
    }
    out
}

/// Nodes: given back unless a live drain holds them (`node_restore`).
pub async fn restore_nodes(
    client: &kube::Client,
    settings: &DrainSettings,
    now: f64,
    dry_run: bool,
    report_only: bool,
) -> Result<Vec<Restored>> {
    let api: Api<Node> = Api::all(client.clone());
    let nodes = match list(api.clone(), &ListParams::default(), "nodes").await? {
        Listed::Items(n) => n,
        Listed::NotSearched(line) => return Ok(vec![line]),
    };
    let mut out = Vec::new();
    for node in nodes {
        let annotations = node.metadata.annotations.clone().unwrap_or_default();
        let parsed = DrainState::from_annotations(&annotations);
        let marks = NodeMarks {
            state: parsed.as_ref().map(Option::as_ref).map_err(String::as_str),
            tainted: has_draining_taint(&node),
            other_annotations: annotations.keys().any(|k| k.starts_with(PREFIX)),
            ready: is_ready(&node),
        };
        let name = node.metadata.name.clone().unwrap_or_default();
        let object = format!(
            "node {name} ({})",
            instance_of_node(&node).unwrap_or_default()
        );
        match node_restore(&marks, now, settings) {
            NodeRestore::Unchanged => {}
            NodeRestore::Held { reason } => out.push(found(object, RestoreOutcome::Kept, format!(
                "{reason}: left as it is; run restore again once the drain is over"
            ))),
            NodeRestore::GiveBack { reason, .. } if report_only => out.push(found(object, RestoreOutcome::Kept, format!(
                "would be given back ({reason}), but this identity never writes nodes: run `prewarm restore`"
            ))),
            NodeRestore::GiveBack { reason, .. } if dry_run => {
                out.push(written(object, reason, Ok(()), "Node")?);
            }
            NodeRestore::GiveBack { uncordon, reason } => {
                // The node lifecycle controller and kubelet write nodes often: a conflict
                // re-reads the node and builds the patch again.
                let (api, node, name) = (&api, &node, &name);
                let line = retry_on_conflict(nodepool::WRITE_ATTEMPTS, |n| {
                    let (object, reason) = (object.clone(), reason.clone());
                    async move {
                        let fresh = if n == 0 {
                            None
                        } else {
                            Some(api.get(name).await.map_err(|e| {
                                from_kube("get", "Node", &object, e)
                            })?)
                        };
                        let patch = node_give_back_patch(fresh.as_ref().unwrap_or(node), uncordon);
                        let sent = api
                            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                            .map(drop);
                        written(object, reason, sent, "Node")
                    }
                })
                .await?;
                out.push(line);
            }
        }
    }
    Ok(out)
}

/// NodePools carrying `prewarm.io/` annotations: limits, then budgets and annotations (the
/// limits step first: if it fails, the annotation it needs stays), each re-read on a conflict.
async fn restore_node_pools(client: &kube::Client, dry_run: bool) -> Result<Vec<Restored>> {
    let pools = match list(node_pool_api(client), &ListParams::default(), "nodepools").await? {
        Listed::Items(p) => p,
        Listed::NotSearched(line) => return Ok(vec![line]),
    };
    let mut out = Vec::new();
    for pool in pools {
        let annotations = pool.metadata.annotations.clone().unwrap_or_default();
        if give_back(FoundKind::NodePool, &annotations) != GiveBack::NodePool {
            continue;
        }
        let name = pool.metadata.name.clone().unwrap_or_default();
        // The chart's restore identity lists NodePools everywhere but reads and writes only the
        // targets' own: a removed target's pool is reported, for a cluster admin to restore.
        if let Err(kube::Error::Api(s)) = node_pool_api(client).get(&name).await {
            if s.code == 403 {
                out.push(found(
                    format!("nodepool {name}"),
                    RestoreOutcome::Kept,
                    format!(
                        "may not read it ({}): run `prewarm restore` as a cluster admin",
                        s.message
                    ),
                ));
                continue;
            }
        }
        for plan in [restore::node_pool_limits_patch, restore::node_pool_patch] {
            if let Some(line) = restore_pool_with(client, &name, plan, dry_run).await? {
                out.push(line);
            }
        }
    }
    Ok(out)
}

type PoolPlan = fn(&NodePoolView) -> std::result::Result<Option<Value>, String>;

async fn restore_pool_with(
    client: &kube::Client,
    name: &str,
    plan: PoolPlan,
    dry_run: bool,
) -> Result<Option<Restored>> {
    retry_on_conflict(nodepool::WRITE_ATTEMPTS, |_| async move {
        let view = nodepool::read_node_pool(client, name).await?;
        let patch = plan(&view).map_err(|message| {
            Error::kube("restore", format!("nodepool {name}"), message, false)
        })?;
        let Some(p) = patch else { return Ok(None) };
        let sent = if dry_run {
            Ok(())
        } else {
            node_pool_api(client)
                .patch(name, &PatchParams::default(), &Patch::Merge(&p))
                .await
                .map(drop)
        };
        written(format!("nodepool {name}"), p.to_string(), sent, "NodePool").map(Some)
    })
    .await
}

/// Balloon Deployments and CapacityBuffers no target names any more: size 0, annotations off.
async fn restore_workloads(client: &kube::Client, dry_run: bool) -> Result<Vec<Restored>> {
    let mut out = Vec::new();
    for (resource, what) in [
        (deployment(), "deployments"),
        (capacity_buffer(), "capacitybuffers"),
    ] {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let objects = match list(api, &ListParams::default(), what).await? {
            Listed::Items(o) => o,
            Listed::NotSearched(line) => {
                out.push(line);
                continue;
            }
        };
        for o in objects {
            let annotations = o.metadata.annotations.clone().unwrap_or_default();
            let ns = o.metadata.namespace.clone().unwrap_or_default();
            let name = o.metadata.name.clone().unwrap_or_default();
            let version = o.metadata.resource_version.clone().unwrap_or_default();
            let patch = match give_back(FoundKind::Workload, &annotations) {
                GiveBack::Headroom => {
                    let size = o
                        .data
                        .pointer("/spec/replicas")
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                    let kind = HeadroomKind::Balloon {
                        namespace: ns.clone(),
                        name: name.clone(),
                    };
                    restore::headroom_patch(
                        &kind,
                        &version,
                        &annotations,
                        u32::try_from(size).unwrap_or(u32::MAX),
                    )
                }
                GiveBack::Annotations(keys) => Some(annotations_off(&version, &keys)),
                _ => None,
            };
            let Some(p) = patch else { continue };
            let object = format!("{} {ns}/{name}", what.trim_end_matches('s'));
            let sent = if dry_run {
                Ok(())
            } else {
                Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &resource)
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&p))
                    .await
                    .map(drop)
            };
            out.push(written(object, p.to_string(), sent, what)?);
        }
    }
    Ok(out)
}

/// What a write came to: restored, or, when the identity may not write the object (403: the
/// chart's restore rows name the targets' objects), kept with the reason; any other error fails.
fn written(
    object: String,
    detail: String,
    sent: std::result::Result<(), kube::Error>,
    kind: &str,
) -> Result<Restored> {
    match sent {
        Ok(()) => Ok(found(object, RestoreOutcome::Restored, detail)),
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(found(
            object,
            RestoreOutcome::Kept,
            format!(
                "may not write it ({}): run `prewarm restore` as a cluster admin",
                s.message
            ),
        )),
        Err(e) => Err(from_kube("patch", kind, &object, e)),
    }
}

fn annotations_off(resource_version: &str, keys: &[String]) -> Value {
    let off: Map<String, Value> = keys.iter().map(|k| (k.clone(), Value::Null)).collect();
    json!({"metadata": {"resourceVersion": resource_version, "annotations": off}})
}

/// HPA floors (on the HPA, or on the KEDA ScaledObject that owns it) no target names any more.
async fn restore_floors(client: &kube::Client, now: f64, dry_run: bool) -> Result<Vec<Restored>> {
    let api: Api<HorizontalPodAutoscaler> = Api::all(client.clone());
    let hpas = match list(api, &ListParams::default(), "horizontalpodautoscalers").await? {
        Listed::Items(h) => h,
        Listed::NotSearched(line) => return Ok(vec![line]),
    };
    let mut out = Vec::new();
    for hpa in hpas {
        let view = hpa::floor::floor_view(&hpa);
        if view.keda_owner.is_none()
            && give_back(FoundKind::Floor, &view.annotations) == GiveBack::Nothing
        {
            continue;
        }
        let on = hpa::floor::floor_object_of(client, hpa).await?;
        let body = match give_back(FoundKind::Floor, &on.view.annotations) {
            GiveBack::Floor => {
                // A running drain's surge stays on the floor: it is given back by the surges
                // step below, or, when drains keep running (PAUSED), by the drain itself.
                let patch = on.plan_beside_surge(FloorIntent::Restore, now, 0.0)?;
                if patch.min_replicas.is_none() && patch.annotations.is_empty() {
                    continue;
                }
                on.patch_body(&patch)
            }
            GiveBack::Annotations(keys) => annotations_off(&on.resource_version, &keys),
            _ => continue,
        };
        if !dry_run {
            on.write(&body).await?;
        }
        out.push(found(
            on.object.clone(),
            RestoreOutcome::Restored,
            body.to_string(),
        ));
    }
    Ok(out)
}

/// Drain surges (labelled `prewarm.io/surging`) in every namespace that has one, given back
/// exactly; drain placeholders (labelled `prewarm.io/replacement-for`) deleted.
async fn restore_surges_and_placeholders(
    client: &kube::Client,
    now: f64,
    dry_run: bool,
) -> Result<Vec<Restored>> {
    let mut out = Vec::new();
    let surging = ListParams::default().labels(&format!("{SURGING_LABEL}=true"));
    let mut namespaces = BTreeSet::new();
    let scaled_objects = hpa::scaled_object::resource();
    for (resource, what) in [
        (deployment(), "deployments"),
        (
            kube::api::ApiResource::erase::<HorizontalPodAutoscaler>(&()),
            "horizontalpodautoscalers",
        ),
        (scaled_objects, "scaledobjects"),
    ] {
        match list(
            Api::<DynamicObject>::all_with(client.clone(), &resource),
            &surging,
            what,
        )
        .await?
        {
            Listed::Items(items) => {
                namespaces.extend(items.into_iter().filter_map(|o| o.metadata.namespace))
            }
            Listed::NotSearched(line) => out.push(line),
        }
    }
    // The surge release works per target podNamespace: one stand-in target per namespace found.
    let stand_ins: Vec<TargetSpec> = namespaces
        .into_iter()
        .map(|ns| TargetSpec {
            pod_namespace: Some(ns.clone()),
            ..TargetSpec::new(FOUND, "", HeadroomKind::NodePoolReplicas, 0)
        })
        .collect();
    for released in surge::release_all(client, &stand_ins, now, dry_run).await {
        let r = released?;
        let outcome = if r.user_edit_kept {
            RestoreOutcome::Kept
        } else {
            RestoreOutcome::Restored
        };
        out.push(found("drain surge".into(), outcome, r.line));
    }
    let pods = match list(
        Api::<Pod>::all(client.clone()),
        &ListParams::default().labels(REPLACEMENT_FOR),
        "pods",
    )
    .await?
    {
        Listed::Items(p) => p,
        Listed::NotSearched(line) => {
            out.push(line);
            Vec::new()
        }
    };
    for pod in &pods {
        let line = if dry_run {
            format!(
                "placeholder {}/{} would be deleted",
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                pod.metadata.name.as_deref().unwrap_or_default()
            )
        } else {
            delete_placeholder(client, pod).await?
        };
        out.push(found(
            "drain placeholder".into(),
            RestoreOutcome::Restored,
            line,
        ));
    }
    Ok(out)
}

#[cfg(test)]
#[path = "found_tests.rs"]
mod tests;
