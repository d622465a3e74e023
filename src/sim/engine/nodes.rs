//! Nodes: launch, readiness, the provisioner's batching, placement choices and removal of
//! empty nodes without Karpenter's disruption controller (Cluster Autoscaler in the exact world;
//! disruption.rs has Karpenter's, ca_scale_down.rs the rough world's Cluster Autoscaler).

use super::events::Kind;
use super::launch::Stream;
use super::Sim;

#[derive(Clone, Debug)]
pub(super) struct Node {
    pub(super) gpus: u32,
    pub(super) used: u32,
    pub(super) balloons: u32,
    pub(super) launched: f64,
    pub(super) ready_at: f64,
    pub(super) image_ready_at: Option<f64>,
    pub(super) empty_since: Option<f64>,
    /// When a pod was last bound to it or left it (Karpenter's lastPodEventTime; initially when
    /// it is Ready).
    pub(super) last_pod_event: f64,
    /// Karpenter (or Cluster Autoscaler draining it) is deleting it: nothing more is placed on
    /// it, it goes when its pods are gone.
    pub(super) deleting: bool,
    /// Since when Cluster Autoscaler has found it unneeded (ca_scale_down.rs).
    pub(super) unneeded_since: Option<f64>,
    pub(super) alive: bool,
    /// Its boot has been learned, or has nothing to teach (lead.rs).
    pub(super) lead_learned: bool,
}

impl Sim<'_> {
    /// Launches a node Ready after `launch_s` (None: Ready now with images, the warm start).
    pub(super) fn launch_node(&mut self, launch_s: Option<f64>) -> usize {
        let ready_now = launch_s.is_none();
        let p = &self.cfg.provisioner;
        let ready_at = self.now + launch_s.unwrap_or(0.0);
        let image_ready_at = if ready_now {
            Some(self.now)
        } else if self.cfg.model.prepull {
            Some(ready_at + self.image_pull_s(self.cluster.nodes.len()))
        } else {
            None
        };
        self.cluster.nodes.push(Node {
            gpus: p.instance.gpus,
            used: 0,
            balloons: 0,
            launched: self.now,
            ready_at,
            image_ready_at,
            empty_since: None,
            last_pod_event: ready_at,
            deleting: false,
            unneeded_since: None,
            alive: true,
            // A node Ready from the start booted before the trace: nothing to learn from it.
            lead_learned: ready_now,
        });
        self.result.nodes_launched += 1;
        if !ready_now {
            self.cluster.last_scale_up = Some(self.now);
            self.result.launches.push((self.now, ready_at));
            if self.now >= self.cfg.score_from_s {
                self.result.scored.nodes_launched += 1;
            }
        }
        let id = self.cluster.nodes.len() - 1;
        self.cluster.live_nodes.push(id);
        id
    }

    /// A launch by the provisioner: its duration drawn from the launch model.
    fn launch_drawn(&mut self) -> usize {
        let median = self.cfg.provisioner.node_launch_s;
        let mut rng = super::launch::draw_stream(
            self.cfg.seed,
            Stream::Provisioner,
            self.cluster.launches_drawn,
        );
        self.cluster.launches_drawn += 1;
        let launch_s = self.cfg.launch.sample(median, &mut rng);
        self.launch_node(Some(launch_s))
    }

    /// The node hints' foresight: for each time a first pass needed a node, a node launched one
    /// lead time (a drawn launch, the image pull and the model load) earlier.
    pub(super) fn schedule_prelaunches(&mut self, demand_times: &[f64]) {
        let median = self.cfg.provisioner.node_launch_s;
        let after_ready = self.cfg.model.image_pull_s + self.cfg.model.model_load_s;
        for &t in demand_times {
            let index = self.prelaunch_s.len();
            let mut rng =
                super::launch::draw_stream(self.cfg.seed, Stream::NodeHints, index as u64);
            let launch_s = self.cfg.launch.sample(median, &mut rng);
            self.prelaunch_s.push(launch_s);
            let at = (t - launch_s - after_ready).max(0.0);
            self.push(at, Kind::Prelaunch { index });
        }
    }

    pub(super) fn on_prelaunch(&mut self, index: usize) {
        let node = self.launch_node(Some(self.prelaunch_s[index]));
        // Unused, it is removed after consolidateAfter like any empty node.
        self.check_empty(node);
    }

    pub(super) fn free_gpus(&self, node: usize) -> u32 {
        let n = &self.cluster.nodes[node];
        n.gpus - n.used
    }

    /// Marks a node empty (and schedules its removal) when nothing is left on it; with
    /// Karpenter's disruption controller or Cluster Autoscaler's scans, only terminates a node
    /// it is deleting once empty.
    pub(super) fn check_empty(&mut self, node: usize) {
        if self.cfg.provisioner.disruption.is_some() || self.ca_drains() {
            let n = &self.cluster.nodes[node];
            if n.alive && n.deleting && n.used == 0 {
                self.terminate_node(node);
            }
            return;
        }
        let n = &mut self.cluster.nodes[node];
        if !n.alive || n.used > 0 || n.empty_since.is_some() {
            return;
        }
        let since = self.now.max(n.ready_at);
        n.empty_since = Some(since);
        let at = since + self.cfg.provisioner.empty_after_s;
        self.push(at, Kind::EmptyCheck { node });
    }

    pub(super) fn terminate_node(&mut self, node: usize) {
        let n = &mut self.cluster.nodes[node];
        n.alive = false;
        let (launched, gpus) = (n.launched, n.gpus as f64);
        self.charge_gpus(launched, gpus);
    }

    pub(super) fn on_empty_check(&mut self, node: usize) {
        let n = &self.cluster.nodes[node];
        let Some(since) = n.empty_since else { return };
        if !n.alive || n.used > 0 || since + self.cfg.provisioner.empty_after_s > self.now + 1e-9 {
            return;
        }
        if self.cluster.consolidation_frozen {
            // Budgets "0" for Empty: look again once prewarm may have released the freeze.
            let retry = self.now + self.cfg.step_s;
            self.push(retry, Kind::EmptyCheck { node });
            return;
        }
        self.terminate_node(node);
    }

    pub(super) fn ready_gpus(&self) -> u32 {
        self.cluster
            .live_nodes
            .iter()
            .map(|&i| &self.cluster.nodes[i])
            .filter(|n| n.alive && n.ready_at <= self.now)
            .map(|n| n.gpus)
            .sum()
    }

    /// Ready node with room, Ready node with a balloon to preempt, launching node with room,
    /// launching node with a balloon (the order the scheduler and Karpenter's in-flight node
    /// simulation would use). Returns the node and whether a balloon is preempted.
    pub(super) fn pick_node_for_inference(&self) -> Option<(usize, bool)> {
        let gpr = self.gpr();
        let mut best: Option<(u8, usize)> = None;
        for &i in &self.cluster.live_nodes {
            let n = &self.cluster.nodes[i];
            if !n.alive || n.deleting {
                continue;
            }
            let ready = n.ready_at <= self.now;
            let rank = if n.gpus - n.used >= gpr {
                if ready {
                    0
                } else {
                    2
                }
            } else if n.balloons > 0 {
                if ready {
                    1
                } else {
                    3
                }
            } else {
                continue;
            };
            if best.is_none_or(|(r, _)| rank < r) {
                best = Some((rank, i));
                if rank == 0 {
                    break;
                }
            }
        }
        best.map(|(rank, i)| (i, rank == 1 || rank == 3))
    }

    pub(super) fn pick_node_for_balloon(&self) -> Option<usize> {
        let gpr = self.gpr();
        self.cluster.live_nodes.iter().copied().find(|&i| {
            self.cluster.nodes[i].alive
                && !self.cluster.nodes[i].deleting
                && self.free_gpus(i) >= gpr
        })
    }

    pub(super) fn on_provision(&mut self) {
        let p = &self.cfg.provisioner;
        let closes = (self.batch_last + p.batch_s).min(self.batch_start + p.batch_max_s);
        if closes > self.now + 1e-9 {
            // New pods came while the batch was open: it stays open a while longer.
            self.push(closes, Kind::Provision);
            return;
        }
        self.provision_scheduled = false;
        let gpr = self.gpr();
        let need = (self.pending_inference + self.cluster.pending_balloons) * gpr;
        let per_node = self.cfg.provisioner.instance.gpus;
        if per_node < gpr {
            // A replica that fits no node stays pending forever; the CLI rejects this setup.
            return;
        }
        // Replicas do not straddle nodes: count whole replicas per node.
        let replicas_per_node = per_node / gpr;
        let nodes = (need / gpr).div_ceil(replicas_per_node);
        let demanded_at = self.batch_start;
        for _ in 0..nodes {
            self.launch_drawn();
            self.result.node_demand_times.push(demanded_at);
        }
        self.schedule();
    }
}
