//! Inference pods: creation, binding to nodes, the wait for node, image and model, removal.

use std::collections::VecDeque;

use super::events::Kind;
use super::Sim;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Phase {
    Pending,
    Starting { node: usize, serving_at: f64 },
    Serving { node: usize },
    Gone,
}

#[derive(Clone, Debug)]
pub(super) struct Pod {
    pub(super) phase: Phase,
    pub(super) active: u32,
    pub(super) draining: bool,
    pub(super) busy_since: f64,
    pub(super) cold: bool,
    /// When it became Ready (the warm start's replicas: t = 0).
    pub(super) serving_since: f64,
    /// The whole image pull it waited for (None: the image was there, or it came while a pull
    /// was under way) and when its container starts: what its pull and load are learned from
    /// (lead.rs).
    pub(super) pulled_s: Option<f64>,
    pub(super) started_at: f64,
}

impl Pod {
    /// A new pod in `phase`, serving nothing yet.
    pub(super) fn new(phase: Phase) -> Self {
        Pod {
            phase,
            active: 0,
            draining: false,
            busy_since: 0.0,
            cold: false,
            serving_since: 0.0,
            pulled_s: None,
            started_at: 0.0,
        }
    }
}

impl Sim<'_> {
    pub(super) fn new_pod(&mut self) -> usize {
        self.pods.push(Pod::new(Phase::Pending));
        let id = self.pods.len() - 1;
        self.live_pods.push(id);
        self.pending_inference += 1;
        self.pending_pods.push_back(id);
        id
    }

    /// Binds a pending inference pod to `node`; returns when it will serve.
    pub(super) fn bind(&mut self, pod: usize, node: usize) {
        let load = self.model_load_s(pod);
        let pull = self.image_pull_s(node);
        let now = self.now;
        let n = &mut self.cluster.nodes[node];
        n.empty_since = None;
        n.last_pod_event = now;
        let starts_the_pull = n.image_ready_at.is_none();
        let image_ready = *n
            .image_ready_at
            .get_or_insert_with(|| now.max(n.ready_at) + pull);
        // The pull it waits for from the later of its binding and the node's Ready, when it saw
        // the node's whole pull (it started it, or it was bound before the node was Ready, when
        // a pre-pull starts); one bound while a pull was under way saw only its rest.
        let from = now.max(n.ready_at);
        let whole_pull = (image_ready > from + 1e-9 && (starts_the_pull || now <= n.ready_at))
            .then_some(image_ready - from);
        let waits_for_node = image_ready > now + 1e-9;
        let started_at = now.max(image_ready);
        let serving_at = started_at + load;
        self.pending_inference -= 1;
        if waits_for_node {
            self.cold_starting += 1;
            if self.now >= self.cfg.score_from_s {
                self.result.scored.cold_starts += 1;
            }
            self.count_node_cold_start();
        }
        let p = &mut self.pods[pod];
        p.cold = waits_for_node;
        p.pulled_s = whole_pull;
        p.started_at = started_at;
        p.phase = Phase::Starting { node, serving_at };
        self.push(serving_at, Kind::PodServing { pod });
    }

    /// Places pending pods: inference pods first (they preempt balloons), then balloons.
    pub(super) fn schedule(&mut self) {
        let gpr = self.gpr();
        let mut still_pending = VecDeque::new();
        while let Some(pod) = self.pending_pods.pop_front() {
            if self.pods[pod].phase != Phase::Pending {
                continue;
            }
            match self.pick_node_for_inference() {
                Some((node, preempt)) => {
                    if preempt {
                        self.cluster.nodes[node].balloons -= 1;
                        self.cluster.nodes[node].last_pod_event = self.now;
                        self.cluster.pending_balloons += 1;
                    } else {
                        self.cluster.nodes[node].used += gpr;
                    }
                    self.bind(pod, node);
                }
                None => still_pending.push_back(pod),
            }
        }
        self.pending_pods = still_pending;
        while self.cluster.pending_balloons > 0 {
            let Some(node) = self.pick_node_for_balloon() else {
                break;
            };
            let n = &mut self.cluster.nodes[node];
            n.used += gpr;
            n.balloons += 1;
            n.empty_since = None;
            n.last_pod_event = self.now;
            self.cluster.pending_balloons -= 1;
        }
        // Karpenter's batcher: the first pending pod opens a batch, each new one keeps it open
        // for the idle time, up to its maximum length (on_provision).
        let pending = self.pending_inference + self.cluster.pending_balloons;
        if pending > 0 && !self.provision_scheduled {
            self.provision_scheduled = true;
            self.batch_start = self.now;
            self.batch_last = self.now;
            let at = self.now + self.cfg.provisioner.batch_s;
            self.push(at, Kind::Provision);
        } else if pending > self.batch_pending {
            self.batch_last = self.now;
        }
        self.batch_pending = pending;
    }

    pub(super) fn on_pod_serving(&mut self, pod: usize) {
        let Phase::Starting { node, serving_at } = self.pods[pod].phase else {
            return;
        };
        if serving_at > self.now + 1e-9 {
            return;
        }
        if self.pods[pod].cold {
            self.cold_starting -= 1;
        }
        self.pods[pod].phase = Phase::Serving { node };
        self.pods[pod].serving_since = self.now;
        let (pulled_s, started_at) = (self.pods[pod].pulled_s, self.pods[pod].started_at);
        self.learn_replica_start(pod, pulled_s, started_at);
        if !self.queue.is_empty() {
            self.count_replica_cold_start();
        }
        if !self.queue.is_empty() && self.now >= self.cfg.score_from_s {
            // Requests queued while this replica loaded its model: a cold start in their path.
            self.result.scored.replica_cold_starts += 1;
            for (c, &queued) in self.queued_by_class.iter().enumerate() {
                if let Some(class) = self.result.scored.classes.get_mut(c) {
                    class.replica_cold_starts += u64::from(queued > 0);
                }
            }
        }
        self.free.push(pod);
        self.drain_queue();
    }

    /// Removes one inference pod (HPA scale-down): pending and starting pods go at once,
    /// a serving pod stops taking requests and goes when its last request is done.
    pub(super) fn remove_pod(&mut self, pod: usize) {
        match self.pods[pod].phase {
            Phase::Pending => {
                self.pending_inference -= 1;
                self.pods[pod].phase = Phase::Gone;
            }
            Phase::Starting { node, .. } => {
                if self.pods[pod].cold {
                    self.cold_starting -= 1;
                }
                self.pods[pod].phase = Phase::Gone;
                self.release(node);
            }
            Phase::Serving { node } => {
                self.pods[pod].draining = true;
                if self.pods[pod].active == 0 {
                    self.pods[pod].phase = Phase::Gone;
                    self.release(node);
                }
            }
            Phase::Gone => {}
        }
    }

    pub(super) fn release(&mut self, node: usize) {
        let gpr = self.gpr();
        self.cluster.nodes[node].used -= gpr;
        self.cluster.nodes[node].last_pod_event = self.now;
        self.check_empty(node);
    }

    pub(super) fn replica_count(&self) -> u32 {
        self.live_pods
            .iter()
            .filter(|&&p| self.pods[p].phase != Phase::Gone && !self.pods[p].draining)
            .count() as u32
    }

    pub(super) fn serving_count(&self) -> u32 {
        self.live_pods
            .iter()
            .filter(|&&p| {
                matches!(self.pods[p].phase, Phase::Serving { .. }) && !self.pods[p].draining
            })
            .count() as u32
    }

    pub(super) fn compact_live_pods(&mut self) {
        let pods = &self.pods;
        self.live_pods.retain(|&p| pods[p].phase != Phase::Gone);
    }
}
