//! The replacement of a draining node: one placeholder pod per drain (`shape::placeholder`), made
//! in the balloon namespace of the target that manages the node's NodePool. It is the drain's reservation
//! on capacity, visible on the cluster: labelled with the drain id (the instance id: the same for
//! every notice about the instance, and known after the node is gone, so a redelivered or
//! superseding notice never makes a second one), annotated with its owner and expiry.
//!
//! - `request` makes it (a no-op when it exists);
//! - `observe_replacement` says whether it is Running on a Ready node other than the draining
//!   one: the drain's "replacement ready", counted for this drain alone;
//! - `release` deletes it (hand-over, end of the drain, un-drain) and gives back any headroom a
//!   drain reserved under the previous design (an upgrade from it must not strand that capacity);
//! - `placeholders_in` observes them for the tick's collection (`core::interruption::plan_collection`),
//!   which deletes those whose drain is gone, over or expired.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use super::{api_failure, has_draining_taint, is_balloon, is_ready, pod_view};
use crate::adapters::kube::headroom::release_replacement;
use crate::adapters::kube::shape::node_pool_of;
use crate::adapters::kube::shape::placeholder::{
    drain_label, placeholder_for, placeholder_name, placeholder_pod, PlaceholderSettings,
    REPLACEMENT_FOR, RESERVATION_EXPIRES_AT,
};
use crate::core::interruption::state::parse_time;
use crate::core::interruption::{PlaceholderSeen, PodRef, ReplacementSeen};
use crate::core::{HeadroomKind, TargetSpec};
use crate::error::Result;

/// The targets whose headroom lives on `node_pool`. Several targets may share a pool; the
/// placeholder goes to the first one's balloon namespace (by configuration order).
pub fn target_for_pool<'a>(targets: &'a [TargetSpec], node_pool: &str) -> Option<&'a TargetSpec> {
    targets.iter().find(|t| t.node_pool == node_pool)
}

/// The namespace placeholders of `target` live in: its headroom's (balloon or buffer) namespace.
fn balloon_namespace(target: &TargetSpec) -> Option<&str> {
    match &target.headroom {
        HeadroomKind::Balloon { namespace, .. }
        | HeadroomKind::CapacityBuffer { namespace, .. } => Some(namespace),
        HeadroomKind::NodePoolReplicas => None,
    }
}

/// The NodePool of `node` and the namespace its drain's placeholder goes to; None when no
/// target with a balloon namespace manages the pool (no placeholder can be made).
pub fn placeholder_home<'a>(
    targets: &'a [TargetSpec],
    node: &'a Node,
) -> Option<(&'a str, &'a str)> {
    let pool = node_pool_of(node)?;
    target_for_pool(targets, pool)
        .and_then(balloon_namespace)
        .map(|ns| (pool, ns))
}

/// What a request for a replacement did, for the step's log line.
#[derive(Clone, Debug, PartialEq)]
pub enum Requested {
    /// The placeholder `namespace/name` (false `created`: it was there already).
    Placeholder {
        pod: String,
        gpus: u32,
        created: bool,
    },
    /// No prewarm target with a balloon namespace manages the node's NodePool: no placeholder.
    /// The drain then waits for its deadline.
    NoTarget { node_pool: Option<String> },
}

/// The drain a step acts for, and what its placeholder is made of (the executor's, and
/// `prewarm explain --cluster-state`'s replay of it).
#[derive(Clone, Copy)]
pub struct DrainContext<'a> {
    /// The drain's id (the instance id): its placeholder and surges are keyed by it.
    pub drain_id: &'a str,
    /// When the step was planned (Unix seconds): the limits' room, the surges and their release
    /// are judged at this time.
    pub now: f64,
    /// The notice the step acts for, named in Events and owning the placeholder.
    pub event_id: &'a str,
    /// Where the replacement placeholder goes, and whose NodePool limits make room for it.
    pub targets: &'a [TargetSpec],
    /// What replacement placeholders are made of.
    pub placeholder: &'a PlaceholderSettings,
}

/// The drain's placeholder as it would be created, and its namespace (pure: `request` and
/// `prewarm explain --cluster-state` both build it with this), shaped like the pods of `pods`
/// the planner names in `stands_for` (balloon pods left out: they are room, not workload); None
/// when no target with a balloon namespace manages the node's pool.
pub fn placeholder_object(
    ctx: &DrainContext,
    node: &Node,
    pods: &[Pod],
    stands_for: &[PodRef],
    expires_at: f64,
) -> Option<(String, Pod)> {
    let DrainContext {
        targets,
        placeholder: settings,
        drain_id,
        event_id: owner_event,
        ..
    } = *ctx;
    let (pool, namespace) = placeholder_home(targets, node)?;
    let moving: Vec<&Pod> = pods
        .iter()
        .filter(|p| stands_for.contains(&pod_view(p).pod))
        .filter(|p| !is_balloon(p, &settings.priority_class))
        .collect();
    let placeholder = placeholder_for(
        node,
        pool,
        &moving,
        drain_id,
        owner_event,
        namespace,
        settings,
        expires_at,
    );
    let object: Pod = serde_json::from_value(placeholder_pod(&placeholder))
        .expect("the placeholder builder makes a valid Pod");
    Some((namespace.to_string(), object))
}

/// Makes the drain's placeholder, shaped like the pods of `pods` (the node's) named in
/// `stands_for`.
pub async fn request(
    client: &kube::Client,
    ctx: &DrainContext<'_>,
    node: &Node,
    pods: &[Pod],
    stands_for: &[PodRef],
    expires_at: f64,
    gpus: u32,
) -> Result<Requested> {
    let Some((namespace, object)) = placeholder_object(ctx, node, pods, stands_for, expires_at)
    else {
        return Ok(Requested::NoTarget {
            node_pool: node_pool_of(node).map(str::to_string),
        });
    };
    let name = placeholder_name(ctx.drain_id);
    let created = match Api::<Pod>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &object)
        .await
    {
        Ok(_) => true,
        Err(kube::Error::Api(s)) if s.code == 409 => false,
        Err(e) => return Err(api_failure("create", &format!("pod/{namespace}/{name}"), e)),
    };
    Ok(Requested::Placeholder {
        pod: format!("{namespace}/{name}"),
        gpus,
        created,
    })
}

/// The list selector of drain `drain_id`'s placeholders (by the label its id becomes), or of
/// every drain's.
pub fn placeholder_selector(drain_id: Option<&str>) -> ListParams {
    ListParams::default().labels(&match drain_id {
        Some(id) => format!("{REPLACEMENT_FOR}={}", drain_label(id)),
        None => REPLACEMENT_FOR.to_string(),
    })
}

async fn placeholders(client: &kube::Client, drain_id: Option<&str>) -> Result<Vec<Pod>> {
    Api::<Pod>::all(client.clone())
        .list(&placeholder_selector(drain_id))
        .await
        .map(|l| l.items)
        .map_err(|e| api_failure("list", "replacement placeholders", e))
}

/// Whether the drain's own placeholder runs on a Ready node other than `draining_node` (and not
/// being drained itself).
pub async fn observe_replacement(
    client: &kube::Client,
    drain_id: &str,
    draining_node: &str,
) -> Result<ReplacementSeen> {
    let found = placeholders(client, Some(drain_id)).await?;
    let mut hosts = Vec::new();
    for host in found
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| host_elsewhere(p, draining_node))
    {
        let node = Api::<Node>::all(client.clone())
            .get_opt(host)
            .await
            .map_err(|e| api_failure("get", &format!("node/{host}"), e))?;
        hosts.extend(node);
    }
    Ok(replacement_seen(&found, draining_node, &hosts))
}

/// The node a placeholder runs on, when it is Running on a node other than `draining_node`.
fn host_elsewhere<'a>(placeholder: &'a Pod, draining_node: &str) -> Option<&'a str> {
    let running = placeholder.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    placeholder
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|host| running && *host != draining_node)
}

/// How a drain sees its placeholders (`placeholders`: this drain's, as listed; `hosts`: the nodes
/// they run on, as read): Running when one not being deleted runs on a Ready node other than the
/// draining one and not being drained itself (room on a draining node is no replacement),
/// Pending when one exists, else Absent. Pure: the handler and `prewarm explain
/// --cluster-state` both judge with it.
pub fn replacement_seen(
    placeholders: &[Pod],
    draining_node: &str,
    hosts: &[Node],
) -> ReplacementSeen {
    let live: Vec<&Pod> = placeholders
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    if live.is_empty() {
        return ReplacementSeen::Absent;
    }
    let runs_elsewhere = live
        .iter()
        .filter_map(|p| host_elsewhere(p, draining_node))
        .any(|host| {
            hosts.iter().any(|n| {
                n.metadata.name.as_deref() == Some(host) && is_ready(n) && !has_draining_taint(n)
            })
        });
    if runs_elsewhere {
        ReplacementSeen::Running
    } else {
        ReplacementSeen::Pending
    }
}

/// Planning tells a placeholder not made yet from one that cannot be made: an absent one where
/// no target with a balloon namespace manages the node's pool is `NoTarget`.
pub fn seen_with_home(
    seen: ReplacementSeen,
    targets: &[TargetSpec],
    node: &Node,
) -> ReplacementSeen {
    if seen == ReplacementSeen::Absent && placeholder_home(targets, node).is_none() {
        ReplacementSeen::NoTarget
    } else {
        seen
    }
}

pub(crate) async fn delete_placeholder(client: &kube::Client, pod: &Pod) -> Result<String> {
    delete_placeholder_named(
        client,
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default(),
    )
    .await
}

/// Deletes placeholder `ns`/`name` at once; one already gone is done.
pub async fn delete_placeholder_named(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Result<String> {
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    match Api::<Pod>::namespaced(client.clone(), ns)
        .delete(name, &dp)
        .await
    {
        Ok(_) => Ok(format!("placeholder {ns}/{name} deleted")),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(format!("placeholder {ns}/{name} gone")),
        Err(e) => Err(api_failure("delete", &format!("pod/{ns}/{name}"), e)),
    }
}

/// Deletes the drain's placeholder, and gives back headroom a drain reserved under the previous
/// design (with no NodePool known, every target is asked; a drain id holding nothing is a no-op
/// there). Returns what was released, one result per object.
pub async fn release(
    client: &kube::Client,
    targets: &[TargetSpec],
    node_pool: Option<&str>,
    drain_id: &str,
) -> Vec<Result<String>> {
    let mut out = Vec::new();
    match placeholders(client, Some(drain_id)).await {
        Ok(pods) => {
            for p in &pods {
                out.push(delete_placeholder(client, p).await);
            }
        }
        Err(e) => out.push(Err(e)),
    }
    for t in targets
        .iter()
        .filter(|t| node_pool.is_none_or(|p| t.node_pool == p))
    {
        match release_replacement(client, t, drain_id).await {
            Ok(r) if r.changed => out.push(Ok(format!("headroom of {} (earlier design)", t.name))),
            // Nothing held, or no such object: no reservation of the earlier design to return.
            Ok(_) | Err(crate::error::Error::NotFound { .. }) => {}
            Err(e) => out.push(Err(e)),
        }
    }
    out
}

/// `prewarm restore`: deletes every drain's placeholder in `target`'s balloon (or buffer)
/// namespace, running drains' included (the user is uninstalling). Returns one line per
/// placeholder; `dry_run` deletes nothing.
pub async fn delete_placeholders_of(
    client: &kube::Client,
    target: &TargetSpec,
    dry_run: bool,
) -> Result<Vec<String>> {
    let Some(ns) = balloon_namespace(target) else {
        return Ok(Vec::new());
    };
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&placeholder_selector(None))
        .await
        .map_err(|e| api_failure("list", &format!("replacement placeholders in {ns}"), e))?
        .items;
    let mut out = Vec::new();
    for pod in &pods {
        out.push(if dry_run {
            format!(
                "placeholder {ns}/{} would be deleted",
                pod.metadata.name.as_deref().unwrap_or_default()
            )
        } else {
            delete_placeholder(client, pod).await?
        });
    }
    Ok(out)
}

/// The placeholders the tick's collection judges (`core::interruption::plan_collection`): those
/// in the targets' balloon namespaces not being deleted already, and the listings that failed.
///
/// The collection lists them before the nodes, and a drain writes its claim on the node before
/// it makes its placeholder: so every placeholder seen has its drain on the nodes listed after
/// it, and a drain being claimed right now never loses its new placeholder to the collection.
pub async fn placeholders_in(
    client: &kube::Client,
    targets: &[TargetSpec],
) -> (Vec<PlaceholderSeen>, Vec<crate::error::Error>) {
    // Per balloon namespace of the targets, where drains make them: the tick may list pods
    // there and nowhere else (its RBAC has no cluster-wide pod list).
    let namespaces: BTreeSet<&str> = targets.iter().filter_map(balloon_namespace).collect();
    let mut seen = Vec::new();
    let mut failed = Vec::new();
    for ns in namespaces {
        match Api::<Pod>::namespaced(client.clone(), ns)
            .list(&placeholder_selector(None))
            .await
        {
            Ok(l) => seen.extend(
                l.items
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .map(placeholder_seen),
            ),
            Err(e) => failed.push(api_failure(
                "list",
                &format!("replacement placeholders in {ns}"),
                e,
            )),
        }
    }
    (seen, failed)
}

fn placeholder_seen(pod: &Pod) -> PlaceholderSeen {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    PlaceholderSeen {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        drain_id: labels.get(REPLACEMENT_FOR).cloned().unwrap_or_default(),
        expires_at: pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(RESERVATION_EXPIRES_AT))
            .and_then(|t| parse_time(t)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn placeholder(node: Option<&str>, phase: &str, deleting: bool) -> Pod {
        let mut p = json!({"metadata": {"name": "prewarm-replacement-i-1", "namespace": "prewarm"},
            "spec": {"containers": []}, "status": {"phase": phase}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = n.into();
        }
        if deleting {
            p["metadata"]["deletionTimestamp"] = "2026-11-29T12:00:00Z".into();
        }
        serde_json::from_value(p).unwrap()
    }

    fn node(name: &str, ready: bool, draining: bool) -> Node {
        let taints = if draining {
            json!([{"key": "prewarm.io/draining", "value": "rebalance", "effect": "NoSchedule"}])
        } else {
            json!([])
        };
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}}))
        .unwrap()
    }

    /// Running only on a Ready node other than the draining one ("a") that is not draining
    /// itself; any other live placeholder is Pending; none, or only one being deleted, Absent.
    #[test]
    fn a_placeholder_counts_only_running_on_a_ready_node_elsewhere() {
        use ReplacementSeen::*;
        let hosts = [
            node("a", true, false),
            node("b", true, false),
            node("c", false, false),
            node("d", true, true),
        ];
        let cases = [
            (vec![], Absent),
            (vec![placeholder(Some("b"), "Running", true)], Absent),
            (vec![placeholder(None, "Pending", false)], Pending),
            (vec![placeholder(Some("a"), "Running", false)], Pending),
            (vec![placeholder(Some("b"), "Pending", false)], Pending),
            (vec![placeholder(Some("c"), "Running", false)], Pending),
            (vec![placeholder(Some("d"), "Running", false)], Pending),
            (vec![placeholder(Some("e"), "Running", false)], Pending),
            (vec![placeholder(Some("b"), "Running", false)], Running),
        ];
        for (i, (placeholders, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                replacement_seen(&placeholders, "a", &hosts),
                expected,
                "case {i}"
            );
        }
    }
}
