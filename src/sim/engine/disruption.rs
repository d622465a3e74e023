//! Karpenter's disruption controller for the simulated NodePool: emptiness, single-node and (in
//! the rough world) multi-node consolidation (consolidationPolicy WhenEmptyOrUnderutilized),
//! `consolidateAfter`, the node budget, the validation wait, and the repacking of the pods of a
//! consolidated node. Changes when the simulated Karpenter's node removal is made to follow
//! Karpenter more closely.
//!
//! Sources (kubernetes-sigs/karpenter, pkg/controllers/):
//! - nodeclaim/disruption/consolidation.go (`Consolidation.Reconcile`): a node is consolidatable
//!   once `consolidateAfter` has passed since its last pod event (a pod bound to it or gone from
//!   it), or since it was initialised if none;
//! - disruption/controller.go: the methods are tried in order (emptiness, multi-node, then
//!   single-node consolidation), one command per pass, a pass every 10 s while nothing is found;
//! - disruption/emptiness.go and disruption/singlenodeconsolidation.go (`ComputeCommands`): empty
//!   candidates are deleted up to the budget; otherwise the candidates are sorted by disruption
//!   cost (about the number of pods on them) and the first whose pods all schedule on the other
//!   nodes is deleted (or replaced by one cheaper node: not modelled, the simulated NodePool has
//!   one instance type, so no replacement is ever cheaper);
//! - disruption/multinodeconsolidation.go (`firstNConsolidationOption`), the rough world's
//!   `World::multi_node_consolidation`: the candidates sorted by disruption cost, cut to the
//!   budget, and the longest prefix of two or more whose pods all fit on the other nodes is
//!   deleted in one command. Its other option, the prefix replaced by one cheaper node, is not
//!   modelled: with one instance type and whole replicas, the pods of k nodes fit on the rest
//!   plus one new node exactly when they fit on the rest with one of the k kept, so deleting
//!   k - 1 frees the same nodes without a launch;
//! - disruption/validation.go: a command is carried out only if it still holds `consolidationTTL`
//!   (15 s) later;
//! - NodePool `spec.disruption.budgets`: at most `budget_nodes` nodes being disrupted at once.
//!   The shipped NodePool's business-hours "0" budget is not modelled (the trace's clock is not
//!   the user's office hours); prewarm's consolidation freeze is (budget 0 while it holds).
//!
//! A deleted node's pods are evicted at once (the PodDisruptionBudget that would let them go one
//! by one is not modelled): each inference pod's ReplicaSet creates a replacement, which loads
//! its model on the node it lands on before it serves; the evicted pod finishes its requests.
//! Balloons go back to pending and are placed like any balloon.

use super::events::Kind;
use super::pods::Phase;
use super::Sim;

/// Seconds between two passes of the disruption controller when it found nothing to do.
const POLL_S: f64 = 10.0;
/// Seconds a command waits before it is checked again and carried out (consolidationTTL).
const VALIDATION_S: f64 = 15.0;

impl Sim<'_> {
    /// Starts the disruption controller's passes (a NodePool with `disruption`).
    pub(super) fn start_disruption(&mut self) {
        if self.cfg.provisioner.disruption.is_some() {
            self.push(0.0, Kind::Disruption);
        }
    }

    /// One pass: find a command; if there is one, wait for its validation, else poll again.
    pub(super) fn on_disruption(&mut self) {
        let command = self.disruption_command();
        if command.is_empty() {
            let next = self.now + POLL_S;
            self.push(next, Kind::Disruption);
            return;
        }
        self.cluster.disruption_pending = command;
        let at = self.now + VALIDATION_S;
        self.push(at, Kind::DisruptionValidate);
    }

    /// The validation: every node of the command must still qualify, then they are deleted and
    /// the next pass follows at once.
    pub(super) fn on_disruption_validate(&mut self) {
        let command = std::mem::take(&mut self.cluster.disruption_pending);
        let still = self.budget_left() >= command.len() as u32
            && command.iter().all(|&n| self.consolidatable(n))
            && (command.iter().all(|&n| self.cluster.nodes[n].used == 0)
                || self.fits_without(&command));
        if still {
            for node in command {
                self.delete_node(node);
            }
            self.schedule();
        }
        self.push(self.now, Kind::Disruption);
    }

    /// Nodes the budget still allows to disrupt now.
    fn budget_left(&self) -> u32 {
        let Some(d) = &self.cfg.provisioner.disruption else {
            return 0;
        };
        if self.cluster.consolidation_frozen {
            return 0;
        }
        let disrupting = self
            .cluster
            .live_nodes
            .iter()
            .filter(|&&i| self.cluster.nodes[i].alive && self.cluster.nodes[i].deleting)
            .count() as u32;
        d.budget_nodes.saturating_sub(disrupting)
    }

    /// Initialised (Ready), not already going, and `consolidateAfter` past its last pod event.
    fn consolidatable(&self, node: usize) -> bool {
        let n = &self.cluster.nodes[node];
        n.alive
            && !n.deleting
            && n.ready_at <= self.now
            && n.last_pod_event + self.cfg.provisioner.empty_after_s <= self.now + 1e-9
    }

    /// Replica-sized places a node has free.
    fn free_places(&self, node: usize) -> u32 {
        self.free_gpus(node) / self.gpr()
    }

    /// Whether the pods that would need a place if `nodes` went, their own (replicas and
    /// balloons) and those already pending (the scheduling simulation places them too), fit in
    /// the replica-sized places free on the other nodes that are not going.
    pub(super) fn fits_without(&self, nodes: &[usize]) -> bool {
        let room: u32 = self
            .cluster
            .live_nodes
            .iter()
            .filter(|&&i| {
                !nodes.contains(&i)
                    && self.cluster.nodes[i].alive
                    && !self.cluster.nodes[i].deleting
            })
            .map(|&i| self.free_places(i))
            .sum();
        let gpr = self.gpr();
        let theirs: u32 = nodes
            .iter()
            .map(|&n| self.cluster.nodes[n].used / gpr)
            .sum();
        room >= theirs + self.pending_inference + self.cluster.pending_balloons
    }

    /// Empty consolidatable nodes up to the budget, else (multi-node consolidation) the longest
    /// run of two or more of the cheapest to disrupt whose pods fit elsewhere, else the
    /// cheapest-to-disrupt node whose pods fit elsewhere (fewest pods, then the oldest), else
    /// nothing.
    fn disruption_command(&self) -> Vec<usize> {
        let budget = self.budget_left();
        if budget == 0 {
            return Vec::new();
        }
        let Some(d) = &self.cfg.provisioner.disruption else {
            return Vec::new();
        };
        let candidates = self
            .cluster
            .live_nodes
            .iter()
            .copied()
            .filter(|&i| self.consolidatable(i));
        let empty: Vec<usize> = candidates
            .clone()
            .filter(|&i| self.cluster.nodes[i].used == 0)
            .take(budget as usize)
            .collect();
        if !empty.is_empty() || !d.underutilized {
            return empty;
        }
        let mut by_cost: Vec<usize> = candidates.collect();
        by_cost.sort_by_key(|&i| (self.cluster.nodes[i].used, i));
        if self.cfg.world.multi_node_consolidation {
            by_cost.truncate(budget as usize);
            // The longest prefix wins: one more node only takes room away and adds pods.
            if let Some(n) = (2..=by_cost.len())
                .rev()
                .find(|&n| self.fits_without(&by_cost[..n]))
            {
                return by_cost[..n].to_vec();
            }
        }
        by_cost
            .into_iter()
            .find(|&i| self.fits_without(&[i]))
            .into_iter()
            .collect()
    }

    /// Deletes a node: no more pods land on it, its balloons go pending, its inference pods are
    /// evicted and replaced; it terminates once its last evicted pod has finished.
    pub(super) fn delete_node(&mut self, node: usize) {
        let gpr = self.gpr();
        let n = &mut self.cluster.nodes[node];
        n.deleting = true;
        let balloons = n.balloons;
        n.balloons = 0;
        n.used -= balloons * gpr;
        self.cluster.pending_balloons += balloons;
        let on_node: Vec<usize> = self
            .live_pods
            .iter()
            .copied()
            .filter(|&p| {
                let pod = &self.pods[p];
                !pod.draining
                    && matches!(pod.phase, Phase::Starting { node: at, .. } | Phase::Serving { node: at } if at == node)
            })
            .collect();
        for pod in on_node {
            self.new_pod();
            self.remove_pod(pod);
        }
        // Terminates it now if nothing is left to finish.
        self.check_empty(node);
    }
}
