//! The adapter of drain surges. The core decides (`core::interruption::surge_step`: which
//! workloads a step surges, by how much, which evictions wait for the surge pods, and which
//! shares are given back); this file observes each workload of the step's pods (`gate`: its
//! Deployment through the pod's ReplicaSet, its replicas, and the floor object or Deployment the
//! surge is recorded on) and the surge records (`plan_release`, at the drain's end), and writes
//! one workload's surge (`surge_workload`, the executor's `Command::Surge` and
//! `Command::ReleaseSurge`). `release` (the drain's node gone) and `release_all` (`prewarm
//! restore`) observe the records and carry out the releases the core picks; the tick's
//! reservation collection observes them by `surged_in` and gives shares back by `release_surge`.
//!
//! Surged objects carry the label `prewarm.io/surging=true` so releases list only them. Writes
//! are JSON merge patches guarded by the resourceVersion read; the HPA's floor goes through the
//! same floor object and rules as the tick's (`hpa::floor::floor_object_of`, `core::floor`: the
//! user's value saved, restored exactly, a user's edit kept) under its field manager
//! `prewarm-hpa-floor`. An HPA owned by a KEDA ScaledObject is surged on the ScaledObject's
//! `minReplicaCount`, the surge record beside the floor lease there: KEDA rewrites the HPA from
//! its ScaledObject, so a surge written on the HPA would be undone at KEDA's next reconcile (and
//! a Deployment's replicas would be undone by the HPA), leaving the drain without its surge.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{json, Value};

use super::{api_failure, Observation};
use crate::adapters::kube::conflict::retry_on_conflict;
use crate::adapters::kube::hpa::{self, floor::FloorObject, scaled_object};
use crate::adapters::kube::shape::owners::{controller_of, scales};
use crate::core::interruption::surge::{SurgeIntent, SurgeRecord, SURGE_DRAINS};
use crate::core::interruption::surge_floor::{plan_workload_surge, SurgeOn, WorkloadSurge};
use crate::core::interruption::surge_step::{
    plan_releases, plan_surges, release_surges, releases_wanted, surge_wanted, SurgePlan,
    SurgedSeen, WorkloadSeen,
};
use crate::core::interruption::{Command, DrainStep, PodRef, PodView};
use crate::core::lease::LeaseOutcome;
use crate::core::TargetSpec;
use crate::error::{Error, Result};

/// The label on every object a surge raised (removed on restore).
pub const SURGING_LABEL: &str = "prewarm.io/surging";
const FIELD_MANAGER: &str = "prewarm-drain-surge";

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
        .map_err(|e| api_failure("get", &format!("replicaset/{ns}/{rs}"), e))?;
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
        .map_err(|e| api_failure("list", &format!("horizontalpodautoscalers in {ns}"), e))?;
    Ok(hpas.items.into_iter().find(|h| scales(h, name)))
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

/// Where a workload's surge is written: the floor object (the HPA that targets the Deployment,
/// or the KEDA ScaledObject that owns that HPA: KEDA rewrites the HPA from it), or the
/// Deployment itself.
enum WrittenOn {
    Floor(FloorObject),
    Deployment {
        api: Api<Deployment>,
        version: Option<String>,
    },
}

/// A Deployment as read for its surge: what the core plans from, and where the write goes.
struct WorkloadRead {
    replicas: u32,
    ready: u32,
    on: SurgeOn,
    written_on: WrittenOn,
    display: String,
}

async fn read_workload(client: &kube::Client, ns: &str, name: &str) -> Result<WorkloadRead> {
    let api = Api::<Deployment>::namespaced(client.clone(), ns);
    let display = format!("deployment/{ns}/{name}");
    let d = api
        .get(name)
        .await
        .map_err(|e| api_failure("get", &display, e))?;
    let (replicas, ready) = replica_counts(&d);
    let (on, written_on, display) = match hpa_for(client, ns, name).await? {
        Some(hpa) => {
            let on = hpa::floor::floor_object_of(client, hpa).await?;
            let display = on.object.clone();
            (
                SurgeOn::Floor(on.view.clone()),
                WrittenOn::Floor(on),
                display,
            )
        }
        None => (
            SurgeOn::Replicas(annotations_of(&d.metadata)),
            WrittenOn::Deployment {
                api,
                version: d.metadata.resource_version.clone(),
            },
            display,
        ),
    };
    Ok(WorkloadRead {
        replicas,
        ready,
        on,
        written_on,
        display,
    })
}

/// A Deployment's `spec.replicas` (1 when unset) and ready replicas.
pub fn replica_counts(d: &Deployment) -> (u32, u32) {
    let count = |n: Option<i32>, none: u32| n.map_or(none, |r| u32::try_from(r).unwrap_or(0));
    (
        count(d.spec.as_ref().and_then(|s| s.replicas), 1),
        count(d.status.as_ref().and_then(|s| s.ready_replicas), 0),
    )
}

/// The merge patch that writes a planned surge on the object it is recorded on (`field`: the
/// floor's, or the Deployment's `replicas`); None when there is nothing to write.
pub fn surge_patch(version: Option<&String>, surge: &WorkloadSurge, field: &str) -> Option<Value> {
    let writes = surge.count.is_some() || !surge.annotations.is_empty();
    let spec = surge.count.map(|n| json!({ field: n }));
    writes.then(|| merge_body(version, &surge.annotations, spec))
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
    retry_on_conflict(SURGE_ATTEMPTS, |_| async move {
        let read = read_workload(client, ns, name).await?;
        let surge = plan_workload_surge(read.replicas, &read.on, intent, now)
            .map_err(|m| Error::kube("plan surge", read.display.clone(), m, false))?;
        let outcome = match (&read.written_on, surge.outcome) {
            (WrittenOn::Floor(on), Some(o)) => format!("{} {} {o}", on.object, on.field),
            (WrittenOn::Floor(on), None) => format!("{} unchanged", on.object),
            (WrittenOn::Deployment { .. }, o) => {
                format!("replicas {}", o.unwrap_or(LeaseOutcome::Unchanged))
            }
        };
        match &read.written_on {
            WrittenOn::Floor(on) => {
                if let Some(body) = surge_patch(Some(&on.resource_version), &surge, on.field) {
                    on.write(&body).await?;
                }
            }
            WrittenOn::Deployment { api, version } => {
                if let Some(body) = surge_patch(version.as_ref(), &surge, "replicas") {
                    let params = PatchParams {
                        field_manager: Some(FIELD_MANAGER.into()),
                        ..PatchParams::default()
                    };
                    api.patch(name, &params, &Patch::Merge(body))
                        .await
                        .map_err(|e| api_failure("patch", &read.display, e))?;
                }
            }
        }
        Ok(SurgeWrite {
            outcome,
            user_edit_kept: surge.user_edit_kept,
            want: surge.want,
            ready: read.ready,
        })
    })
    .await
}

/// Conflicting surge writes are re-read and re-planned this often within one step (with the
/// conflict backoff, about 0.4 s in all): a Deployment's controllers write its status several
/// times in a row while it rolls out, and 3 attempts were seen to lose to that on the stack.
const SURGE_ATTEMPTS: usize = 5;

/// Observes the workloads of the step's pods and lets the core add the step's surges
/// (`core::interruption::surge_step`): the `Surge` commands, and the evictions they hold back.
/// Reads nothing unless the step evicts and the drain wants surges now.
pub async fn gate(
    client: &kube::Client,
    targets: &[TargetSpec],
    observed: &Observation,
    step: &mut DrainStep,
    drain_id: &str,
    now: f64,
) -> SurgePlan {
    if !surge_wanted(step, now) {
        return SurgePlan::default();
    }
    let (workloads, errors) = observe_workloads(client, targets, observed, step).await;
    let mut plan = plan_surges(step, &observed.pod_views, &workloads, drain_id, now);
    plan.errors.extend(errors);
    plan
}

/// The workloads of the node's serving pods in the surge namespaces, as read; a workload that
/// could not be read is an error (its evictions then go ahead as planned).
async fn observe_workloads(
    client: &kube::Client,
    targets: &[TargetSpec],
    observed: &Observation,
    step: &DrainStep,
) -> (Vec<WorkloadSeen>, Vec<String>) {
    let evicting: BTreeSet<&PodRef> = step.evictions().collect();
    let mut errors = Vec::new();
    let mut cache = BTreeMap::new();
    let mut pods_of: BTreeMap<(String, String), Vec<PodRef>> = BTreeMap::new();
    for (pod, view) in surgeable_pods(observed, targets) {
        match deployment_of(client, pod, &mut cache).await {
            Ok(Some(d)) => (pods_of.entry((view.pod.namespace.clone(), d)))
                .or_default()
                .push(view.pod.clone()),
            Ok(None) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    let mut workloads = Vec::new();
    for ((namespace, deployment), pods) in pods_of {
        // Only the workloads this step evicts from are surged.
        if !pods.iter().any(|p| evicting.contains(p)) {
            continue;
        }
        match read_workload(client, &namespace, &deployment).await {
            Ok(read) => workloads.push(WorkloadSeen {
                namespace,
                deployment,
                pods,
                replicas: read.replicas,
                ready: read.ready,
                on: read.on,
            }),
            Err(e) => errors.push(format!("{namespace}/{deployment}: {e}")),
        }
    }
    (workloads, errors)
}

/// The node's pods a surge may stand in for: still serving (not terminating, not finished), in
/// the surge namespaces.
pub fn surgeable_pods<'a>(
    observed: &'a Observation,
    targets: &[TargetSpec],
) -> impl Iterator<Item = (&'a Pod, &'a PodView)> {
    let namespaces = surge_namespaces(targets);
    let serving =
        move |v: &PodView| !v.terminating() && !v.finished && namespaces.contains(&v.pod.namespace);
    (observed.pods.iter().zip(&observed.pod_views)).filter(move |(_, v)| serving(v))
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

/// Observes the surge records when `step` ends its drain and lets the core add the drain's
/// `ReleaseSurge` commands (`surge_step::plan_releases`). Returns the listings that failed: the
/// drain is then not finished, and its next step plans the release again.
pub async fn plan_release(
    client: &kube::Client,
    targets: &[TargetSpec],
    step: &mut DrainStep,
    drain_id: &str,
) -> Vec<String> {
    if !releases_wanted(step) {
        return Vec::new();
    }
    let (surged, failed) = surged_in(client, targets).await;
    plan_releases(step, &surged, drain_id);
    failed.iter().map(|e| format!("surge: {e}")).collect()
}

/// Gives back `drain_id`'s surges (its node is gone): the records observed, the core's
/// `ReleaseSurge` commands carried out. One line per workload restored or lowered.
pub async fn release(
    client: &kube::Client,
    targets: &[TargetSpec],
    drain_id: &str,
    now: f64,
) -> Vec<Result<String>> {
    release_where(client, targets, now, false, |s| {
        release_surges(s, |d| d == drain_id)
    })
    .await
    .into_iter()
    .map(|r| r.map(|released| released.line))
    .collect()
}

/// Carries out one `Command::ReleaseSurge`: `drain`'s share of Deployment `ns/name`'s surge
/// given back.
pub async fn release_surge(
    client: &kube::Client,
    ns: &str,
    name: &str,
    drain: &str,
    now: f64,
) -> Result<Released> {
    let intent = SurgeIntent::Release {
        drain: drain.to_string(),
    };
    let w = surge_workload(client, ns, name, &intent, now).await?;
    Ok(Released {
        line: format!("{ns}/{name} (drain {drain}): {}", w.outcome),
        user_edit_kept: w.user_edit_kept,
    })
}

/// Surged objects in `ns`, with the Deployment each surge is for.
async fn surged_workloads(client: &kube::Client, ns: &str) -> Result<Vec<SurgedSeen>> {
    let params = ListParams::default().labels(&format!("{SURGING_LABEL}=true"));
    let mut out = Vec::new();
    let deployments = Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&params)
        .await
        .map_err(|e| api_failure("list", &format!("surged deployments in {ns}"), e))?;
    for d in deployments.items {
        let name = d.metadata.name.clone().unwrap_or_default();
        out.extend(surged_seen(&d.metadata, name));
    }
    let hpas = Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), ns)
        .list(&params)
        .await
        .map_err(|e| {
            api_failure(
                "list",
                &format!("surged horizontalpodautoscalers in {ns}"),
                e,
            )
        })?;
    for h in hpas.items {
        if let Some(target) = h.spec.as_ref().map(|s| s.scale_target_ref.name.clone()) {
            out.extend(surged_seen(&h.metadata, target));
        }
    }
    out.extend(surged_scaled_objects(client, ns, &params).await?);
    Ok(out)
}

/// The surge record on an object raised for Deployment `deployment` (None: none, or unreadable).
pub fn surged_seen(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    deployment: String,
) -> Option<SurgedSeen> {
    Some(SurgedSeen {
        namespace: meta.namespace.clone().unwrap_or_default(),
        deployment,
        record: SurgeRecord::from_annotations(&annotations_of(meta)).ok()??,
    })
}

/// Surged KEDA ScaledObjects (the floor of a KEDA-owned HPA is raised there). A cluster without
/// KEDA has no such resource (404): none.
async fn surged_scaled_objects(
    client: &kube::Client,
    ns: &str,
    params: &ListParams,
) -> Result<Vec<SurgedSeen>> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &scaled_object::resource());
    let listed = match api.list(params).await {
        Ok(l) => l.items,
        Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
        Err(e) => {
            return Err(api_failure(
                "list",
                &format!("surged scaledobjects in {ns}"),
                e,
            ))
        }
    };
    Ok(listed
        .into_iter()
        .filter_map(|so| {
            let target = so.data["spec"]["scaleTargetRef"]["name"].as_str()?;
            surged_seen(&so.metadata, target.to_string())
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
    release_where(client, targets, now, dry_run, |s| {
        release_surges(s, |_| true)
    })
    .await
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
pub async fn surged_in(
    client: &kube::Client,
    targets: &[TargetSpec],
) -> (Vec<SurgedSeen>, Vec<Error>) {
    let mut failed = Vec::new();
    let mut surged = Vec::new();
    for ns in surge_namespaces(targets) {
        match surged_workloads(client, &ns).await {
            Ok(w) => surged.extend(w),
            Err(e) => failed.push(e),
        }
    }
    (surged, failed)
}

/// Observes the surge records, lets `plan` (the core's) say which shares go back, and carries
/// its `ReleaseSurge` commands out (`dry_run`: only says which would be given back).
async fn release_where(
    client: &kube::Client,
    targets: &[TargetSpec],
    now: f64,
    dry_run: bool,
    plan: impl Fn(&[SurgedSeen]) -> Vec<Command>,
) -> Vec<Result<Released>> {
    let (surged, failed) = surged_in(client, targets).await;
    let mut out: Vec<Result<Released>> = failed.into_iter().map(Err).collect();
    for command in plan(&surged) {
        let Command::ReleaseSurge {
            namespace: ns,
            deployment: name,
            drain,
        } = &command
        else {
            continue;
        };
        out.push(match dry_run {
            true => Ok(Released {
                line: format!("{ns}/{name} (drain {drain}): would be given back"),
                user_edit_kept: false,
            }),
            false => release_surge(client, ns, name, drain, now).await,
        });
    }
    out
}
