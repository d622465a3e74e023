//! A drain's surges replayed offline (`prewarm explain --cluster-state`): the workloads of the
//! node's pods and the surge records, as the handler's adapter observes them, read from STATE's
//! Deployments, ReplicaSets and HorizontalPodAutoscalers; a `Surge` or `ReleaseSurge` written on
//! them with the adapter's own patch (`surge_patch`). One reason to change: how surges are seen
//! and written offline.
//!
//! No surge pod becomes Ready offline (nothing runs): a held eviction waits for its pod's due
//! time. A KEDA-owned HPA's surge, written on its ScaledObject (not in STATE), is not replayed.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::replay_state::{patch_object, ClusterState};
use crate::adapters::kube::drain::surge::{
    replica_counts, surge_namespaces, surge_patch, surgeable_pods, surged_seen,
};
use crate::adapters::kube::drain::Observation;
use crate::adapters::kube::hpa::floor::floor_view;
use crate::adapters::kube::shape::owners::{controller_of, scales};
use crate::core::interruption::surge::SurgeIntent;
use crate::core::interruption::surge_floor::{plan_workload_surge, SurgeOn};
use crate::core::interruption::surge_step::{SurgedSeen, WorkloadSeen};
use crate::core::interruption::{Command, PodRef};
use crate::core::lease::LeaseOutcome;
use crate::core::TargetSpec;

fn named(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ns: &str,
    name: &str,
) -> bool {
    meta.namespace.as_deref() == Some(ns) && meta.name.as_deref() == Some(name)
}

impl ClusterState {
    /// The workloads of the node's serving pods in the surge namespaces, as the adapter's `gate`
    /// reads them (a pod's Deployment through its ReplicaSet).
    pub fn workloads(&self, observed: &Observation, targets: &[TargetSpec]) -> Vec<WorkloadSeen> {
        let mut pods_of: BTreeMap<(String, String), Vec<PodRef>> = BTreeMap::new();
        for (pod, view) in surgeable_pods(observed, targets) {
            if let Some(d) = self.deployment_of(pod) {
                (pods_of.entry((view.pod.namespace.clone(), d)).or_default())
                    .push(view.pod.clone());
            }
        }
        (pods_of.into_iter())
            .filter_map(|((namespace, deployment), pods)| {
                let (replicas, ready) = replica_counts(self.deployment(&namespace, &deployment)?);
                Some(WorkloadSeen {
                    on: self.surge_on(&namespace, &deployment)?,
                    namespace,
                    deployment,
                    pods,
                    replicas,
                    ready,
                })
            })
            .collect()
    }

    /// The surge records of the surge namespaces, on Deployments and on the HPAs that scale them.
    pub fn surged(&self, targets: &[TargetSpec]) -> Vec<SurgedSeen> {
        let namespaces = surge_namespaces(targets);
        let on_deployments = (self.deployments.iter())
            .filter_map(|d| surged_seen(&d.metadata, d.metadata.name.clone()?));
        let on_hpas = (self.hpas.iter()).filter_map(|h| {
            surged_seen(&h.metadata, h.spec.as_ref()?.scale_target_ref.name.clone())
        });
        (on_deployments.chain(on_hpas))
            .filter(|s| namespaces.contains(&s.namespace))
            .collect()
    }

    /// Writes a `Surge` or `ReleaseSurge` of drain `drain_id` planned at `now` on the objects;
    /// says what it did (None: another command, or a workload not in STATE).
    pub fn write_surge(&mut self, command: &Command, drain_id: &str, now: f64) -> Option<String> {
        let (ns, name, intent) = match command {
            Command::Surge {
                namespace,
                deployment,
                k,
                ..
            } => (
                namespace,
                deployment,
                SurgeIntent::Hold {
                    drain: drain_id.to_string(),
                    k: *k,
                },
            ),
            Command::ReleaseSurge {
                namespace,
                deployment,
                drain,
            } => (
                namespace,
                deployment,
                SurgeIntent::Release {
                    drain: drain.clone(),
                },
            ),
            _ => return None,
        };
        let (replicas, _) = replica_counts(self.deployment(ns, name)?);
        let on = self.surge_on(ns, name)?;
        let surge = match plan_workload_surge(replicas, &on, &intent, now) {
            Ok(s) => s,
            Err(e) => return Some(format!("{ns}/{name}: {e}")),
        };
        let outcome = surge.outcome.unwrap_or(LeaseOutcome::Unchanged);
        let floor = matches!(on, SurgeOn::Floor(_));
        let field = if floor { "minReplicas" } else { "replicas" };
        if let Some(patch) = surge_patch(None, &surge, field) {
            let in_ns = |m: &ObjectMeta| m.namespace.as_deref() == Some(ns.as_str());
            if floor {
                let hpa = (self.hpas.iter_mut()).find(|h| in_ns(&h.metadata) && scales(h, name));
                if let Some(h) = hpa {
                    patch_object(h, &patch)
                }
            } else if let Some(d) =
                (self.deployments.iter_mut()).find(|d| named(&d.metadata, ns, name))
            {
                patch_object(d, &patch)
            }
        }
        let object = if floor { "hpa " } else { "" };
        Some(format!("{ns}/{name}: {object}{field} {outcome}"))
    }

    fn deployment(&self, ns: &str, name: &str) -> Option<&Deployment> {
        self.deployments
            .iter()
            .find(|d| named(&d.metadata, ns, name))
    }

    fn hpa_of(&self, ns: &str, name: &str) -> Option<&HorizontalPodAutoscaler> {
        (self.hpas.iter()).find(|h| h.metadata.namespace.as_deref() == Some(ns) && scales(h, name))
    }

    fn deployment_of(&self, pod: &Pod) -> Option<String> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let rs = controller_of(pod.metadata.owner_references.as_ref(), "ReplicaSet")?;
        let rs = (self.replica_sets.iter()).find(|r| named(&r.metadata, ns, rs))?;
        controller_of(rs.metadata.owner_references.as_ref(), "Deployment").map(str::to_string)
    }

    /// Where Deployment `ns/name`'s surge is recorded: the floor of the HPA that scales it (None
    /// when KEDA owns that HPA), else its own replicas.
    fn surge_on(&self, ns: &str, name: &str) -> Option<SurgeOn> {
        match self.hpa_of(ns, name) {
            Some(h) => Some(floor_view(h))
                .filter(|v| v.keda_owner.is_none())
                .map(SurgeOn::Floor),
            None => {
                let d = self.deployment(ns, name)?;
                Some(SurgeOn::Replicas(
                    d.metadata.annotations.clone().unwrap_or_default(),
                ))
            }
        }
    }
}
