//! The executor of drain surges (`core::interruption::surge` decides): before a step evicts
//! pods owned by a Deployment (through its ReplicaSet), raise that workload — its autoscaling/v2
//! HPA's `minReplicas` when an HPA targets it, else `spec.replicas` — by its pods on the node,
//! and hold those evictions until the surge pods are Ready (or the pod is due: the deadline
//! always wins). `release` gives a drain's share back when the drain finishes or un-drains;
//! `collect_orphans` (called by the tick's lease collection) gives back shares of drains that no
//! longer run.
//!
//! Surged objects carry the label `prewarm.io/surging=true` so releases list only them. Writes
//! are JSON merge patches guarded by the resourceVersion read; the HPA's floor goes through the
//! same floor code as the tick's (`hpa::floor::floor_object_of` + `FloorObject::plan`: the user's
//! value saved, restored exactly, a user's edit kept) under its field manager
//! `prewarm-hpa-floor`. An HPA owned by a KEDA ScaledObject is surged on the ScaledObject's
//! `minReplicaCount`, the surge record beside the floor lease there: KEDA rewrites the HPA from
//! its ScaledObject, so a surge written on the HPA would be undone at KEDA's next reconcile (and
//! a Deployment's replicas would be undone by the HPA), leaving the drain without its surge.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{json, Value};

use super::collected::Collected;
use super::{instance_of_node, kube_error, Observation};
use crate::adapters::kube::conflict::retry_on_conflict;
use crate::adapters::kube::hpa::{self, floor::FloorIntent, scaled_object};
use crate::core::interruption::surge::{
    hold_evictions, orphaned_drains, plan_deployment_surge, plan_surge, surge_ready, wants_surge,
    SurgeDecision, SurgeIntent, SurgeRecord, SURGE_BASE, SURGE_DRAINS, SURGE_WRITTEN_REPLICAS,
};
use crate::core::interruption::{DrainState, DrainStep, LeaseVerdict, Phase, PodRef};
use crate::core::lease::LeaseOutcome;
use crate::core::TargetSpec;
use crate::error::{Error, Result};

/// The label on every object a surge raised (removed on restore).
pub const SURGING_LABEL: &str = "prewarm.io/surging";
const FIELD_MANAGER: &str = "prewarm-drain-surge";
/// The HPA floor lease of a surge: the tick's own floor logic restores an HPA it manages once
/// this has passed; a drain renews it at every step, and the drain's end or the tick's
/// collection restores it long before.
const HPA_LEASE_S: f64 = 3600.0;

/// What the surge did in one step, for the step's log line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SurgeReport {
    /// `namespace/deployment: outcome (want, ready)` per workload touched.
    pub workloads: Vec<String>,
    /// Evictions held back until the surge pods are Ready.
    pub held: Vec<PodRef>,
    /// Failures (the evictions then go ahead as planned: a surge that could not be raised is
    /// no reason to wait).
    pub errors: Vec<String>,
}

fn controller_of<'a>(
    owners: Option<&'a Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>,
    kind: &str,
) -> Option<&'a str> {
    owners?
        .iter()
        .find(|o| o.kind == kind && o.controller == Some(true))
        .map(|o| o.name.as_str())
}

/// The Deployment of a pod (pod -> ReplicaSet -> Deployment), caching ReplicaSets per step.
async fn deployment_of(
    client: &kube::Client,
    pod: &Pod,
    cache: &mut BTreeMap<(String, String), Option<String>>,
) -> Result<Option<String>> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let Some(rs) = controller_of(pod.metadata.owner_references.as_ref(), "ReplicaSet") else {
        return Ok(None);
    };
    let key = (ns.clone(), rs.to_string());
    if let Some(d) = cache.get(&key) {
        return Ok(d.clone());
    }
    let got = Api::<ReplicaSet>::namespaced(client.clone(), &ns)
        .get_opt(rs)
        .await
        .map_err(|e| kube_error("get", &format!("replicaset/{ns}/{rs}"), e))?;
    let d = got.and_then(|r| {
        controller_of(r.metadata.owner_references.as_ref(), "Deployment").map(str::to_string)
    });
    cache.insert(key, d.clone());
    Ok(d)
}

/// The autoscaling/v2 HPA in `ns` whose scaleTargetRef is Deployment `name`.
async fn hpa_for(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Result<Option<HorizontalPodAutoscaler>> {
    let hpas = Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(|e| kube_error("list", &format!("horizontalpodautoscalers in {ns}"), e))?;
    Ok(hpas.items.into_iter().find(|h| {
        h.spec.as_ref().is_some_and(|s| {
            s.scale_target_ref.kind == "Deployment"
                && s.scale_target_ref.name == name
                && s.scale_target_ref
                    .api_version
                    .as_deref()
                    .is_none_or(|v| v.starts_with("apps/"))
        })
    }))
}

fn annotations_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> BTreeMap<String, String> {
    meta.annotations.clone().unwrap_or_default()
}

fn annotation_values(a: &BTreeMap<String, Option<String>>) -> serde_json::Map<String, Value> {
    a.iter()
        .map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String)))
        .collect()
}

/// The surge record's annotations set to null (merge-patch removal).
fn record_removed() -> BTreeMap<String, Option<String>> {
    [
        (SURGE_DRAINS.to_string(), None),
        (SURGE_BASE.to_string(), None),
    ]
    .into()
}

/// The surge label follows the record: present while any drain holds one.
fn label_value(a: &BTreeMap<String, Option<String>>) -> Option<Value> {
    match a.get(SURGE_DRAINS) {
        Some(Some(_)) => Some(Value::String("true".into())),
        Some(None) => Some(Value::Null),
        None => None,
    }
}

fn merge_body(
    version: Option<&String>,
    annotations: &BTreeMap<String, Option<String>>,
    spec: Option<Value>,
) -> Value {
    let mut body = json!({"metadata": {
        "resourceVersion": version,
        "annotations": annotation_values(annotations),
    }});
    if let Some(l) = label_value(annotations) {
        body["metadata"]["labels"] = json!({ SURGING_LABEL: l });
    }
    if let Some(spec) = spec {
        body["spec"] = spec;
    }
    body
}

/// What one surge write did to a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct SurgeWrite {
    /// For the log: the field written and the outcome (`replicas raised`,
    /// `HorizontalPodAutoscaler/x minReplicas restored`, ...).
    pub outcome: String,
    /// The user changed the surged field while it was raised: their value stays and the surge
    /// ends (nothing of prewarm's was put back).
    pub user_edit_kept: bool,
    /// The replicas a held surge waits for (None: no surge held).
    pub want: Option<u32>,
    /// The Deployment's ready replicas.
    pub ready: u32,
}

/// Applies `intent` to Deployment `name`'s surge (through its HPA if one targets it).
pub async fn surge_workload(
    client: &kube::Client,
    ns: &str,
    name: &str,
    intent: &SurgeIntent,
    now: f64,
) -> Result<SurgeWrite> {
    // A write that conflicts (the Deployment controller or the HPA controller wrote status
    // since the read) is re-read and re-planned: every write carries the resourceVersion read.
    retry_on_conflict(SURGE_ATTEMPTS, |_| {
        surge_once(client, ns, name, intent, now)
    })
    .await
}

/// Conflicting surge writes are re-read and re-planned this often within one step (with the
/// conflict backoff, about 0.4 s in all): a Deployment's controllers write its status several
/// times in a row while it rolls out, and 3 attempts were seen to lose to that on the stack.
const SURGE_ATTEMPTS: usize = 5;

async fn surge_once(
    client: &kube::Client,
    ns: &str,
    name: &str,
    intent: &SurgeIntent,
    now: f64,
) -> Result<SurgeWrite> {
    let deployments = Api::<Deployment>::namespaced(client.clone(), ns);
    let display = format!("deployment/{ns}/{name}");
    let d = deployments
        .get(name)
        .await
        .map_err(|e| kube_error("get", &display, e))?;
    let replicas = d
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .map_or(1, |r| u32::try_from(r).unwrap_or(0));
    let ready = d
        .status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .map_or(0, |r| u32::try_from(r).unwrap_or(0));
    let plan_error = |object: String, message: String| Error::Kube {
        operation: "plan surge".into(),
        object,
        message,
        retryable: false,
    };
    if let Some(hpa) = hpa_for(client, ns, name).await? {
        // The floor and the surge's record live on the object the floor is on: the HPA, or the
        // KEDA ScaledObject that owns it (KEDA rewrites the HPA from it). One conditional write
        // carries both, so the tick's forecast floor sees the surge (`hpa::floor::surge_floor`).
        let on = hpa::floor::floor_object_of(client, hpa).await?;
        let record = SurgeRecord::from_annotations(&on.view.annotations)
            .map_err(|m| plan_error(on.object.clone(), m))?;
        let max = on.view.max_replicas;
        let decision = plan_surge(record.as_ref(), replicas, Some(max), intent);
        let (floor_intent, mut surge_annotations, want) = match &decision {
            SurgeDecision::Set { want, record } => (
                FloorIntent::AtLeast(*want),
                [
                    (
                        SURGE_DRAINS.to_string(),
                        Some(serde_json::to_string(&record.drains).unwrap_or_default()),
                    ),
                    (SURGE_BASE.to_string(), Some(record.base.to_string())),
                ]
                .into(),
                Some(*want),
            ),
            SurgeDecision::Restore => (FloorIntent::Restore, record_removed(), None),
            SurgeDecision::Unchanged => {
                let want = record
                    .as_ref()
                    .filter(|_| matches!(intent, SurgeIntent::Hold { .. }))
                    .map(|r| r.want(Some(max)));
                match want {
                    // A live surge renews its floor lease.
                    Some(w) => (FloorIntent::AtLeast(w), BTreeMap::new(), Some(w)),
                    None => {
                        return Ok(SurgeWrite {
                            outcome: format!("{} unchanged", on.object),
                            user_edit_kept: false,
                            want: None,
                            ready,
                        })
                    }
                }
            }
        };
        let floor = on.plan(floor_intent, now, HPA_LEASE_S)?;
        // The user changed the floor while it was raised: the edit is theirs; the surge ends.
        let user_edit_kept = floor.outcome == LeaseOutcome::UserEditKept;
        let want = if user_edit_kept {
            surge_annotations = record_removed();
            None
        } else {
            want
        };
        let mut all = floor.annotations.clone();
        all.extend(surge_annotations);
        if floor.min_replicas.is_some() || !all.is_empty() {
            let spec = floor.min_replicas.map(|m| json!({ on.field: m }));
            on.write(&merge_body(Some(&on.resource_version), &all, spec))
                .await?;
        }
        return Ok(SurgeWrite {
            outcome: format!("{} {} {}", on.object, on.field, floor.outcome),
            user_edit_kept,
            want,
            ready,
        });
    }
    let annotations = annotations_of(&d.metadata);
    let patch = plan_deployment_surge(replicas, &annotations, intent)
        .map_err(|m| plan_error(display.clone(), m))?;
    let user_edit_kept = patch.outcome == LeaseOutcome::UserEditKept;
    let want = if user_edit_kept || matches!(intent, SurgeIntent::Release { .. }) {
        None
    } else {
        patch.replicas.or_else(|| {
            annotations
                .get(SURGE_WRITTEN_REPLICAS)
                .and_then(|w| w.parse().ok())
        })
    };
    if patch.replicas.is_some() || !patch.annotations.is_empty() {
        let spec = patch.replicas.map(|r| json!({ "replicas": r }));
        deployments
            .patch(
                name,
                &PatchParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..PatchParams::default()
                },
                &Patch::Merge(merge_body(
                    d.metadata.resource_version.as_ref(),
                    &patch.annotations,
                    spec,
                )),
            )
            .await
            .map_err(|e| kube_error("patch", &display, e))?;
    }
    Ok(SurgeWrite {
        outcome: format!("replicas {}", patch.outcome),
        user_edit_kept,
        want,
        ready,
    })
}

/// Raises the surges the step needs and takes out of it the evictions that wait for theirs.
/// Does nothing unless the step evicts and the drain's replacement is ready before the deadline.
pub async fn gate(
    client: &kube::Client,
    targets: &[TargetSpec],
    observed: &Observation,
    step: &mut DrainStep,
    drain_id: &str,
    now: f64,
) -> SurgeReport {
    let namespaces = surge_namespaces(targets);
    let mut report = SurgeReport::default();
    let evicting: BTreeSet<PodRef> = step.evictions().cloned().collect();
    if evicting.is_empty() || !step.state.as_ref().is_some_and(|s| wants_surge(s, now)) {
        return report;
    }
    // k per workload: its pods on the node that still serve (not terminating, not finished).
    let mut cache = BTreeMap::new();
    let mut workloads: BTreeMap<(String, String), (u32, Vec<PodRef>)> = BTreeMap::new();
    for (pod, view) in observed.pods.iter().zip(&observed.pod_views) {
        if view.terminating() || view.finished || !namespaces.contains(&view.pod.namespace) {
            continue;
        }
        match deployment_of(client, pod, &mut cache).await {
            Ok(Some(d)) => {
                let entry = workloads
                    .entry((view.pod.namespace.clone(), d))
                    .or_insert((0, Vec::new()));
                entry.0 += 1;
                entry.1.push(view.pod.clone());
            }
            Ok(None) => {}
            Err(e) => report.errors.push(e.to_string()),
        }
    }
    let mut held = BTreeSet::new();
    for ((ns, name), (k, pods)) in workloads {
        if !pods.iter().any(|p| evicting.contains(p)) {
            continue;
        }
        let intent = SurgeIntent::Hold {
            drain: drain_id.to_string(),
            k,
        };
        match surge_workload(client, &ns, &name, &intent, now).await {
            Ok(SurgeWrite {
                outcome,
                want,
                ready,
                ..
            }) => {
                let waiting = want.is_some_and(|w| !surge_ready(w, ready));
                report.workloads.push(format!(
                    "{ns}/{name}: {outcome} (k {k}, want {want:?}, ready {ready})"
                ));
                if waiting {
                    held.extend(pods);
                }
            }
            Err(e) => report.errors.push(format!("{ns}/{name}: {e}")),
        }
    }
    report.held = hold_evictions(step, &observed.pod_views, &held, now);
    report
}

/// The namespaces surges may touch: the targets' podNamespaces, where the inference workloads
/// run (the RBAC grants Deployments and HPAs there only; permissions.yaml). Pods elsewhere are
/// evicted as planned, without a surge.
pub fn surge_namespaces(targets: &[TargetSpec]) -> BTreeSet<String> {
    targets
        .iter()
        .filter_map(|t| t.pod_namespace.clone())
        .collect()
}

/// Gives back `drain_id`'s surges: every surged Deployment and HPA whose record names it.
/// Returns one line per workload restored or lowered.
pub async fn release(
    client: &kube::Client,
    targets: &[TargetSpec],
    drain_id: &str,
    now: f64,
) -> Vec<Result<String>> {
    release_where(client, targets, now, |record: &SurgeRecord| {
        record
            .drains
            .contains_key(drain_id)
            .then(|| vec![drain_id.to_string()])
    })
    .await
    .into_iter()
    .map(|r| r.map(|released| released.line))
    .collect()
}

/// Surged objects as (namespace, Deployment the surge is for, its record).
async fn surged_workloads(
    client: &kube::Client,
    ns: &str,
) -> Result<Vec<(String, String, SurgeRecord)>> {
    let params = ListParams::default().labels(&format!("{SURGING_LABEL}=true"));
    let mut out = Vec::new();
    let deployments = Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&params)
        .await
        .map_err(|e| kube_error("list", &format!("surged deployments in {ns}"), e))?;
    for d in deployments.items {
        if let Ok(Some(r)) = SurgeRecord::from_annotations(&annotations_of(&d.metadata)) {
            out.push((
                d.metadata.namespace.unwrap_or_default(),
                d.metadata.name.unwrap_or_default(),
                r,
            ));
        }
    }
    let hpas = Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), ns)
        .list(&params)
        .await
        .map_err(|e| {
            kube_error(
                "list",
                &format!("surged horizontalpodautoscalers in {ns}"),
                e,
            )
        })?;
    for h in hpas.items {
        let target = h.spec.as_ref().map(|s| s.scale_target_ref.name.clone());
        if let (Ok(Some(r)), Some(target)) = (
            SurgeRecord::from_annotations(&annotations_of(&h.metadata)),
            target,
        ) {
            out.push((h.metadata.namespace.unwrap_or_default(), target, r));
        }
    }
    out.extend(surged_scaled_objects(client, ns, &params).await?);
    Ok(out)
}

/// Surged KEDA ScaledObjects (the floor of a KEDA-owned HPA is raised there). A cluster without
/// KEDA has no such resource (404): none.
async fn surged_scaled_objects(
    client: &kube::Client,
    ns: &str,
    params: &ListParams,
) -> Result<Vec<(String, String, SurgeRecord)>> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &scaled_object::resource());
    let listed = match api.list(params).await {
        Ok(l) => l.items,
        Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
        Err(e) => {
            return Err(kube_error(
                "list",
                &format!("surged scaledobjects in {ns}"),
                e,
            ))
        }
    };
    Ok(listed
        .into_iter()
        .filter_map(|so| {
            let target = so.data["spec"]["scaleTargetRef"]["name"]
                .as_str()?
                .to_string();
            let record = SurgeRecord::from_annotations(&annotations_of(&so.metadata)).ok()??;
            Some((so.metadata.namespace.unwrap_or_default(), target, record))
        })
        .collect())
}

/// `prewarm restore`: gives back every drain's surge in `targets`' podNamespaces, exactly (the
/// user's value back, a user's edit made while surged kept), whether or not the drain still
/// runs. `dry_run`: only says which would be given back.
pub async fn release_all(
    client: &kube::Client,
    targets: &[TargetSpec],
    now: f64,
    dry_run: bool,
) -> Vec<Result<Released>> {
    if !dry_run {
        return release_where(client, targets, now, |record| {
            Some(record.drains.keys().cloned().collect())
        })
        .await;
    }
    let (workloads, mut out) = surged_in(client, targets).await;
    for (ns, name, record) in workloads {
        for drain in record.drains.keys() {
            out.push(Ok(Released {
                line: format!("{ns}/{name} (drain {drain}): would be given back"),
                user_edit_kept: false,
            }));
        }
    }
    out
}

/// One drain's surge given back on one workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Released {
    /// `namespace/deployment (drain id): outcome`, for the log.
    pub line: String,
    /// The user's edit made while surged stays (`SurgeWrite::user_edit_kept`).
    pub user_edit_kept: bool,
}

/// Every surged workload of `targets`' podNamespaces, and the listings that failed.
async fn surged_in<T>(
    client: &kube::Client,
    targets: &[TargetSpec],
) -> (Vec<(String, String, SurgeRecord)>, Vec<Result<T>>) {
    let mut failed = Vec::new();
    let mut workloads = Vec::new();
    for ns in surge_namespaces(targets) {
        match surged_workloads(client, &ns).await {
            Ok(w) => workloads.extend(w),
            Err(e) => failed.push(Err(e)),
        }
    }
    (workloads, failed)
}

async fn release_where(
    client: &kube::Client,
    targets: &[TargetSpec],
    now: f64,
    which: impl Fn(&SurgeRecord) -> Option<Vec<String>>,
) -> Vec<Result<Released>> {
    let (workloads, mut out) = surged_in(client, targets).await;
    for (ns, name, record) in workloads {
        for drain in which(&record).unwrap_or_default() {
            let intent = SurgeIntent::Release {
                drain: drain.clone(),
            };
            out.push(
                surge_workload(client, &ns, &name, &intent, now)
                    .await
                    .map(|w| Released {
                        line: format!("{ns}/{name} (drain {drain}): {}", w.outcome),
                        user_edit_kept: w.user_edit_kept,
                    }),
            );
        }
    }
    out
}

/// The drains running now: instances of nodes whose drain waits for its replacement or evicts.
pub fn active_drains(nodes: &[Node]) -> BTreeSet<String> {
    nodes
        .iter()
        .filter(|n| {
            DrainState::from_annotations(&annotations_of(&n.metadata))
                .ok()
                .flatten()
                .is_some_and(|s| matches!(s.phase, Phase::WaitingForReplacement | Phase::Evicting))
        })
        .filter_map(instance_of_node)
        .collect()
}

/// The tick's collection of surges whose drain no longer runs (its message lost, the node gone,
/// the drain over without its release going through): each share is given back.
pub async fn collect_orphans(
    client: &kube::Client,
    targets: &[TargetSpec],
    nodes: &[Node],
    now: f64,
) -> Vec<Collected> {
    let active = active_drains(nodes);
    release_where(client, targets, now, |record| {
        Some(orphaned_drains(record, &active)).filter(|o| !o.is_empty())
    })
    .await
    .into_iter()
    .map(|r| Collected {
        instance: String::new(),
        node: None,
        verdict: LeaseVerdict::Release {
            reason: "surge of a drain that no longer runs".into(),
        },
        outcome: r.map(|released| released.line).map_err(|e| e.to_string()),
    })
    .collect()
}
