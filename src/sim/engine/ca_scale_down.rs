//! Cluster Autoscaler's scale-down in the rough world (`World::ca_utilization_threshold`): a
//! node under the utilisation threshold whose pods fit on the other nodes is unneeded; one
//! unneeded for `--scale-down-unneeded-time` is removed: empty ones together, a non-empty one
//! drained (its pods evicted and replaced elsewhere) one at a time. Changes when the simulated
//! Cluster Autoscaler's scale-down is made to follow it more closely. (The exact world's
//! Cluster Autoscaler removes empty nodes only, nodes.rs.)
//!
//! Source: the Cluster Autoscaler FAQ (kubernetes/autoscaler, cluster-autoscaler/FAQ.md, "How
//! does scale-down work?" and "What are the parameters to CA?"):
//! - a scan every `--scan-interval` (10 s) re-checks which nodes are unneeded: requests under
//!   half the node's allocatable (on a node with GPUs the GPUs only,
//!   `--scale-down-gpu-utilization-threshold` 0.5, per the flag's help in main.go) and every
//!   pod movable to the other nodes; a node that stops being unneeded starts its count again;
//! - no scale-down for `--scale-down-delay-after-add` (10 min) after a scale-up;
//! - empty nodes go in bulk (up to `--max-scale-down-parallelism`, 10), nodes to drain one at a
//!   time (`--max-drain-parallelism` 1): their pods are evicted, the node is deleted once they
//!   have terminated.
//!
//! Balloons (priority -10, Cluster Autoscaler's expendable-pods cutoff, not under it) count in
//! the utilisation and must fit elsewhere like any pod; no pod here carries
//! `safe-to-evict: "false"`, local storage or a PodDisruptionBudget that would block a drain.

use super::events::Kind;
use super::Sim;

/// `--scan-interval`.
const SCAN_S: f64 = 10.0;
/// `--scale-down-delay-after-add`.
const DELAY_AFTER_ADD_S: f64 = 600.0;
/// `--max-scale-down-parallelism`: empty nodes removed in one scan.
const MAX_EMPTY_AT_ONCE: usize = 10;

impl Sim<'_> {
    /// Cluster Autoscaler drains underutilised nodes (the rough world, without Karpenter).
    pub(super) fn ca_drains(&self) -> bool {
        self.cfg.provisioner.disruption.is_none() && self.cfg.world.ca_utilization_threshold > 0.0
    }

    pub(super) fn start_ca_scale_down(&mut self) {
        if self.ca_drains() {
            self.push(0.0, Kind::ScaleDown);
        }
    }

    /// One scan: the unneeded nodes updated, then (out of the delay after a scale-up and the
    /// consolidation freeze) those unneeded long enough removed.
    pub(super) fn on_ca_scale_down(&mut self) {
        self.push(self.now + SCAN_S, Kind::ScaleDown);
        self.update_unneeded();
        let cooling = self
            .cluster
            .last_scale_up
            .is_some_and(|t| self.now < t + DELAY_AFTER_ADD_S);
        if cooling || self.cluster.consolidation_frozen {
            return;
        }
        let unneeded_s = self.cfg.provisioner.empty_after_s;
        let ripe: Vec<usize> = self
            .cluster
            .live_nodes
            .iter()
            .copied()
            .filter(|&i| {
                self.cluster.nodes[i]
                    .unneeded_since
                    .is_some_and(|s| s + unneeded_s <= self.now + 1e-9)
            })
            .collect();
        let (empty, busy): (Vec<usize>, Vec<usize>) = ripe
            .into_iter()
            .partition(|&i| self.cluster.nodes[i].used == 0);
        for &node in empty.iter().take(MAX_EMPTY_AT_ONCE) {
            self.delete_node(node);
        }
        let draining = self.cluster.live_nodes.iter().any(|&i| {
            let n = &self.cluster.nodes[i];
            n.alive && n.deleting
        });
        let drain = busy
            .into_iter()
            .filter(|&i| self.fits_without(&[i]))
            .min_by_key(|&i| (self.cluster.nodes[i].used, i));
        if let (false, Some(node)) = (draining, drain) {
            self.delete_node(node);
            self.schedule();
        }
    }

    /// Marks each Ready node unneeded (since now, unless it already was) or not.
    fn update_unneeded(&mut self) {
        let threshold = self.cfg.world.ca_utilization_threshold;
        for i in self.cluster.live_nodes.clone() {
            let n = &self.cluster.nodes[i];
            let unneeded = n.alive
                && !n.deleting
                && n.ready_at <= self.now
                && f64::from(n.used) < threshold * f64::from(n.gpus)
                && (n.used == 0 || self.fits_without(&[i]));
            let n = &mut self.cluster.nodes[i];
            n.unneeded_since = if unneeded {
                n.unneeded_since.or(Some(self.now))
            } else {
                None
            };
        }
    }
}
