//! The inference pods of a target as demand signals: unschedulable Pending pods (demand that is
//! already waiting for capacity) and Ready pods (replicas serving now).

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use super::api_error::from_kube;
pub use crate::core::policy::observe::PodCounts;
use crate::core::TargetSpec;
use crate::error::Result;

fn condition<'a>(pod: &'a Pod, kind: &str) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

/// Pending, not being deleted, and the scheduler said Unschedulable (PodScheduled=False).
pub fn is_unschedulable(pod: &Pod) -> bool {
    let pending = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending");
    pending
        && pod.metadata.deletion_timestamp.is_none()
        && condition(pod, "PodScheduled")
            .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
}

/// Running with Ready=True and not being deleted.
pub fn is_serving(pod: &Pod) -> bool {
    let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    running
        && pod.metadata.deletion_timestamp.is_none()
        && condition(pod, "Ready").is_some_and(|c| c.status == "True")
}

/// On a node (PodScheduled=True), not Ready yet, not being deleted, not finished: pulling the
/// image or loading the model. Capacity that is coming, not demand.
pub fn is_loading(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Pending") | Some("Running"))
        && pod.metadata.deletion_timestamp.is_none()
        && condition(pod, "PodScheduled").is_some_and(|c| c.status == "True")
        && condition(pod, "Ready").is_none_or(|c| c.status != "True")
}

pub fn count(pods: &[Pod]) -> PodCounts {
    PodCounts {
        unschedulable: pods.iter().filter(|p| is_unschedulable(p)).count() as u32,
        serving: pods.iter().filter(|p| is_serving(p)).count() as u32,
        loading: pods.iter().filter(|p| is_loading(p)).count() as u32,
    }
}

/// Lists the target's inference pods (pod_namespace + pod_selector): counted as demand, and the
/// lead times' pull and load samples. None when the target names no pods.
pub async fn target_pods(client: &kube::Client, target: &TargetSpec) -> Result<Option<Vec<Pod>>> {
    let (Some(namespace), Some(selector)) = (&target.pod_namespace, &target.pod_selector) else {
        return Ok(None);
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = pods
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| from_kube("list", "pods", &format!("pods {namespace}/{selector}"), e))?;
    Ok(Some(list.items))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: &str, conditions: &[(&str, &str, Option<&str>)], deleting: bool) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "p",
                "deletionTimestamp": if deleting { Some("2026-11-29T12:00:00Z") } else { None }
            },
            "status": {
                "phase": phase,
                "conditions": conditions.iter().map(|(t, s, r)| serde_json::json!({
                    "type": t, "status": s, "reason": r
                })).collect::<Vec<_>>()
            }
        }))
        .unwrap()
    }

    #[test]
    fn pods_are_classified_by_phase_and_conditions() {
        let unschedulable = ("PodScheduled", "False", Some("Unschedulable"));
        let cases = [
            (pod("Pending", &[unschedulable], false), true, false),
            // Scheduled but still starting (image pull): not waiting for capacity.
            (
                pod("Pending", &[("PodScheduled", "True", None)], false),
                false,
                false,
            ),
            // Gated or not yet seen by the scheduler.
            (
                pod(
                    "Pending",
                    &[("PodScheduled", "False", Some("SchedulingGated"))],
                    false,
                ),
                false,
                false,
            ),
            (pod("Pending", &[], false), false, false),
            (pod("Pending", &[unschedulable], true), false, false),
            (
                pod("Running", &[("Ready", "True", None)], false),
                false,
                true,
            ),
            (
                pod("Running", &[("Ready", "False", None)], false),
                false,
                false,
            ),
            (
                pod("Running", &[("Ready", "True", None)], true),
                false,
                false,
            ),
            (
                pod("Succeeded", &[("Ready", "False", None)], false),
                false,
                false,
            ),
        ];
        for (i, (p, unsched, serving)) in cases.iter().enumerate() {
            assert_eq!(is_unschedulable(p), *unsched, "case {i}");
            assert_eq!(is_serving(p), *serving, "case {i}");
        }
        let all: Vec<Pod> = cases.into_iter().map(|(p, _, _)| p).collect();
        assert_eq!(
            count(&all),
            PodCounts {
                unschedulable: 1,
                serving: 1,
                // The scheduled-but-starting Pending pod (the Running ones carry no
                // PodScheduled condition in this table).
                loading: 1,
            }
        );
    }

    #[test]
    fn loading_pods_are_scheduled_and_not_ready() {
        let scheduled = ("PodScheduled", "True", None);
        let cases = [
            (pod("Pending", &[scheduled], false), true),
            (
                pod("Running", &[scheduled, ("Ready", "False", None)], false),
                true,
            ),
            (
                pod("Running", &[scheduled, ("Ready", "True", None)], false),
                false,
            ),
            (
                pod("Running", &[scheduled, ("Ready", "False", None)], true),
                false,
            ),
            (pod("Succeeded", &[scheduled], false), false),
            (
                pod(
                    "Pending",
                    &[("PodScheduled", "False", Some("Unschedulable"))],
                    false,
                ),
                false,
            ),
        ];
        for (i, (p, loading)) in cases.iter().enumerate() {
            assert_eq!(is_loading(p), *loading, "case {i}");
        }
    }
}
