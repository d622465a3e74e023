//! Room in a NodePool's `spec.limits` for the replacements of its draining nodes.
//!
//! Karpenter counts every node of a NodePool against its limits until the node is gone (a
//! StateNode's capacity, `Node.status.capacity`, plus 1 for `nodes`), and refuses to launch a
//! node that would take the usage past a limit. A draining node is still there, so at the cap
//! its replacement would never launch and the drain would evict at its deadline with no warm
//! capacity. While a drain's reservation lasts (`room_needed`), the limits to write are therefore the cap plus the
//! capacity of every draining node of the pool, per resource the cap names; when the reservation ends
//! the room goes with it. The tick and the interruption function both compute this from what
//! the cluster shows, so they agree and never undo each other.

use std::collections::BTreeMap;

use super::interruption::{reservation_expiry, DrainState};
use super::quantity::Quantity;

/// Karpenter's count of nodes in `spec.limits`.
pub const NODES_RESOURCE: &str = "nodes";

/// What the room needs to know of one node.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolNode {
    pub name: String,
    /// Its `karpenter.sh/nodepool` label.
    pub node_pool: Option<String>,
    /// Its drain, if it carries one.
    pub drain: Option<DrainState>,
    /// `status.capacity`: resource name -> quantity.
    pub capacity: BTreeMap<String, String>,
}

/// The limits to write and the draining nodes they make room for.
#[derive(Clone, Debug, PartialEq)]
pub struct Room {
    pub limits: BTreeMap<String, String>,
    /// Names of the nodes whose capacity was added (empty: the limits are the cap).
    pub draining: Vec<String>,
}

/// Whether a node carrying `drain` needs room at `now`: from the claim until the drain's reservation
/// expires (`reservation_expiry`: the instance's end plus the survivor grace), in every phase. A
/// drained node counts too: Karpenter still counts it until it is gone, and the pods it evicted
/// (for which the placeholder stood in) may still wait for a node; room only ever covers nodes
/// that are still there, so it ends when the node goes, when an un-drain removes the drain, or
/// at the reservation's expiry, whichever comes first.
pub fn room_needed(drain: &DrainState, now: f64) -> bool {
    now < reservation_expiry(drain)
}

/// The limits for `pool`: `cap` plus, per resource `cap` names, the capacity of every node of
/// the pool under a drain reservation (`nodes`: one per such node). With no such node the cap is
/// returned as written. Errors name a quantity that cannot be read.
pub fn limits_with_room(
    cap: &BTreeMap<String, String>,
    pool: &str,
    nodes: &[PoolNode],
    now: f64,
) -> Result<Room, String> {
    let draining: Vec<&PoolNode> = nodes
        .iter()
        .filter(|n| n.node_pool.as_deref() == Some(pool))
        .filter(|n| n.drain.as_ref().is_some_and(|d| room_needed(d, now)))
        .collect();
    if draining.is_empty() {
        return Ok(Room {
            limits: cap.clone(),
            draining: Vec::new(),
        });
    }
    let mut limits = BTreeMap::new();
    for (resource, raw) in cap {
        let mut total = Quantity::parse(raw).ok_or_else(|| {
            format!("limit {resource}={raw:?} of NodePool {pool} is not a quantity")
        })?;
        for node in &draining {
            let add = if resource == NODES_RESOURCE {
                "1"
            } else {
                match node.capacity.get(resource) {
                    Some(q) => q.as_str(),
                    None => continue,
                }
            };
            let add = Quantity::parse(add).ok_or_else(|| {
                format!(
                    "capacity {resource}={add:?} of node {} is not a quantity",
                    node.name
                )
            })?;
            total = total
                .checked_add(add)
                .ok_or_else(|| format!("limit {resource} of NodePool {pool} overflows"))?;
        }
        limits.insert(resource.clone(), total.format_like(raw));
    }
    Ok(Room {
        limits,
        draining: draining.iter().map(|n| n.name.clone()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interruption::{NoticeKind, Phase};
    use crate::test_util::string_map;

    /// 2026-12-01T00:00:00Z.
    const T0: f64 = 1_796_083_200.0;

    /// A spot drain noticed at T0: instance end T0+120, so its reservation lasts until T0+120+600
    /// (the survivor grace) unless it finishes first.
    fn drain(phase: Phase) -> DrainState {
        DrainState {
            deadline: Some(T0 + 90.0),
            instance_end: Some(T0 + 120.0),
            ..DrainState::test(NoticeKind::SpotInterruption, phase, T0)
        }
    }

    /// A p5.48xlarge-like node: 8 GPUs, 192 vCPU, 2048Gi.
    fn node(name: &str, pool: &str, phase: Option<Phase>) -> PoolNode {
        PoolNode {
            name: name.into(),
            node_pool: Some(pool.into()),
            drain: phase.map(drain),
            capacity: string_map(&[
                ("nvidia.com/gpu", "8"),
                ("cpu", "192"),
                ("memory", "2147483648Ki"),
                ("pods", "110"),
            ]),
        }
    }

    type Case = (
        &'static str,
        BTreeMap<String, String>,
        Vec<PoolNode>,
        f64,
        BTreeMap<String, String>,
        Vec<&'static str>,
    );

    /// (situation, cap, nodes, now, expected limits, nodes counted) - expected values by hand.
    #[test]
    fn the_cap_grows_by_each_live_drains_node_and_only_while_its_reservation_lasts() {
        let gpu64 = string_map(&[("nvidia.com/gpu", "64")]);
        let cases: [Case; 10] = [
            (
                "no drain: the cap as written",
                gpu64.clone(),
                vec![node("a", "gpu", None), node("b", "gpu", None)],
                T0,
                gpu64.clone(),
                vec![],
            ),
            (
                "one node waiting for its replacement: 64 + 8",
                gpu64.clone(),
                vec![node("a", "gpu", Some(Phase::WaitingForReplacement))],
                T0 + 10.0,
                string_map(&[("nvidia.com/gpu", "72")]),
                vec!["a"],
            ),
            (
                "evicting and prewarmed drains hold their reservation too: 64 + 8 + 8",
                gpu64.clone(),
                vec![
                    node("a", "gpu", Some(Phase::Evicting)),
                    node("b", "gpu", Some(Phase::Prewarmed)),
                    node("c", "gpu", None),
                ],
                T0 + 10.0,
                string_map(&[("nvidia.com/gpu", "80")]),
                vec!["a", "b"],
            ),
            (
                "a drained node still counts (Karpenter counts it until it is gone; its evicted pods may wait for a node)",
                gpu64.clone(),
                vec![node("a", "gpu", Some(Phase::Drained))],
                T0 + 100.0,
                string_map(&[("nvidia.com/gpu", "72")]),
                vec!["a"],
            ),
            (
                "a reservation past its expiry (T0+720) counts no more",
                gpu64.clone(),
                vec![node("a", "gpu", Some(Phase::WaitingForReplacement))],
                T0 + 720.0,
                gpu64.clone(),
                vec![],
            ),
            (
                "one second before the expiry it still counts",
                gpu64.clone(),
                vec![node("a", "gpu", Some(Phase::WaitingForReplacement))],
                T0 + 719.0,
                string_map(&[("nvidia.com/gpu", "72")]),
                vec!["a"],
            ),
            (
                "a drain in another NodePool makes no room in this one",
                gpu64.clone(),
                vec![node("a", "cpu-pool", Some(Phase::WaitingForReplacement))],
                T0 + 10.0,
                gpu64.clone(),
                vec![],
            ),
            (
                "every resource the cap names: cpu 1000 + 192, 4Ti + 2Ti (in the cap's suffix), nodes 10 + 1",
                string_map(&[("cpu", "1000"), ("memory", "4Ti"), ("nodes", "10")]),
                vec![node("a", "gpu", Some(Phase::Evicting))],
                T0 + 10.0,
                string_map(&[("cpu", "1192"), ("memory", "6Ti"), ("nodes", "11")]),
                vec!["a"],
            ),
            (
                "milli-cpu cap: 1500m + 192 = 193500m",
                string_map(&[("cpu", "1500m")]),
                vec![node("a", "gpu", Some(Phase::Evicting))],
                T0 + 10.0,
                string_map(&[("cpu", "193500m")]),
                vec!["a"],
            ),
            (
                "a resource the node lacks adds nothing",
                string_map(&[("aws.amazon.com/neuron", "16"), ("nvidia.com/gpu", "64")]),
                vec![node("a", "gpu", Some(Phase::Evicting))],
                T0 + 10.0,
                string_map(&[("aws.amazon.com/neuron", "16"), ("nvidia.com/gpu", "72")]),
                vec!["a"],
            ),
        ];
        for (situation, cap, nodes, now, want, counted) in cases {
            let room = limits_with_room(&cap, "gpu", &nodes, now).unwrap();
            assert_eq!(room.limits, want, "{situation}");
            assert_eq!(room.draining, counted, "{situation}");
        }
    }

    #[test]
    fn an_unreadable_quantity_is_an_error_naming_it() {
        let draining = vec![node("a", "gpu", Some(Phase::Evicting))];
        let err =
            limits_with_room(&string_map(&[("cpu", "lots")]), "gpu", &draining, T0).unwrap_err();
        assert!(err.contains("cpu") && err.contains("lots"), "{err}");
        let mut odd = node("b", "gpu", Some(Phase::Evicting));
        odd.capacity.insert("cpu".into(), "12 cores".into());
        let err = limits_with_room(&string_map(&[("cpu", "10")]), "gpu", &[odd], T0).unwrap_err();
        assert!(err.contains("node b"), "{err}");
    }
}
