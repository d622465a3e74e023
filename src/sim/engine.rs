//! The discrete-event simulation of one policy on one request stream.
//!
//! What is simulated, in the order it happens in a real cluster:
//! - requests arrive, take a free slot of a serving replica or wait in one FIFO queue;
//! - an HPA-like replica controller (shared by every policy) creates and removes inference pods;
//! - pending pods preempt warm balloon pods on Ready nodes, or are nominated to nodes that are
//!   still launching, or make the provisioner (Karpenter or Cluster Autoscaler) launch nodes after
//!   its batching window;
//! - a pod on a fresh node waits for the node, the image/weights pull, then the model load;
//!   on a warm node only for the model load;
//! - empty nodes are removed after `empty_after_s` (Karpenter `consolidateAfter`);
//! - a headroom controller sets the number of balloon pods: none, a fixed N, or prewarm's own
//!   `crate::core::decide()` fed with an `Observation` built from the simulated metrics.
//!
//! Time is seconds from the start of the trace; `decide()` sees `base_epoch + t`.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use crate::core::{decide, HeadroomState, Observation, PolicySpec, Sample, TargetSpec};

use super::model::{Model, Provisioner};

/// One request as the engine sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    pub arrival: f64,
    pub service_s: f64,
}

/// Who sets the number of warm balloon pods.
#[derive(Clone, Debug)]
// PolicySpec carries the season list and the zone name (policy v2); one per run, not worth a box.
#[allow(clippy::large_enum_variant)]
pub enum Headroom {
    None,
    Fixed(u32),
    Prewarm {
        policy: PolicySpec,
        target: Box<TargetSpec>,
    },
}

/// How many inference replicas run.
#[derive(Clone, Debug, PartialEq)]
pub enum Replicas {
    /// The HPA-like controller of `Model::hpa`.
    Hpa,
    /// A fixed fleet, never scaled.
    Static(u32),
}

/// The demand the cluster was already serving when the trace starts (steady state).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WarmStart {
    /// Inference replicas serving at t = 0 on Ready nodes (balloons are warm too: a fixed
    /// buffer's N, or what prewarm's first decision at t = 0 asks for).
    pub replicas: u32,
    /// Metric history before t = 0: arrival rate (req/s), mean service time (s), running.
    pub rate: f64,
    pub service_s: f64,
    pub running: f64,
}

/// Everything one run needs besides the request stream.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub model: Model,
    pub provisioner: Provisioner,
    pub replicas: Replicas,
    pub headroom: Headroom,
    pub warm: WarmStart,
    /// Requests waiting longer than this are "delayed".
    pub slo_wait_s: f64,
    /// Resolution of the metric history and of the recorded series (METRICS_STEP_SECONDS).
    pub step_s: f64,
    /// Unix time of t = 0, for the timestamps `decide()` sees.
    pub base_epoch: f64,
}

/// One point of the recorded series, every `step_s`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Point {
    pub t: f64,
    /// GPUs on Ready nodes (serving, loading, or held by balloons): the warm capacity.
    pub ready_gpus: u32,
    pub serving_replicas: u32,
    pub balloons: u32,
    pub waiting: u32,
}

/// What one run measured.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    pub requests: u64,
    /// Queue wait of every request, seconds, by arrival index.
    pub waits: Vec<f32>,
    /// Waited longer than the SLO for any reason (e.g. a model load on a warm node).
    pub delayed_any: u64,
    pub gpu_seconds: f64,
    /// GPU-seconds of replicas with at least one request in flight.
    pub busy_gpu_seconds: f64,
    pub cost_usd: f64,
    /// Inference pods that had to wait for a node to launch or for its image pull.
    pub cold_starts: u64,
    pub nodes_launched: u64,
    pub peak_replicas: u32,
    pub end_s: f64,
    pub series: Vec<Point>,
    /// Prewarm only: decisions taken and how many changed the headroom.
    pub decisions: u64,
    pub headroom_changes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    // Same-time order: completions free slots first, the metric sample is taken before the
    // controllers that read it.
    Completion { pod: usize },
    PodServing { pod: usize },
    Sample,
    Hpa,
    Tick,
    Provision,
    EmptyCheck { node: usize },
}

#[derive(Debug)]
struct Event {
    t: f64,
    seq: u64,
    kind: Kind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    // BinaryHeap is a max-heap: reverse so the earliest event comes first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .t
            .total_cmp(&self.t)
            .then_with(|| class(&other.kind).cmp(&class(&self.kind)))
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

fn class(kind: &Kind) -> u8 {
    match kind {
        Kind::Completion { .. } => 0,
        Kind::PodServing { .. } => 1,
        Kind::Sample => 2,
        Kind::Hpa => 3,
        Kind::Tick => 4,
        Kind::Provision => 5,
        Kind::EmptyCheck { .. } => 6,
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Pending,
    Starting { node: usize, serving_at: f64 },
    Serving { node: usize },
    Gone,
}

#[derive(Clone, Debug)]
struct Pod {
    phase: Phase,
    active: u32,
    draining: bool,
    busy_since: f64,
    cold: bool,
}

impl Pod {
    /// A new pod in `phase`, serving nothing yet.
    fn new(phase: Phase) -> Self {
        Pod {
            phase,
            active: 0,
            draining: false,
            busy_since: 0.0,
            cold: false,
        }
    }
}

#[derive(Clone, Debug)]
struct Node {
    gpus: u32,
    used: u32,
    balloons: u32,
    launched: f64,
    ready_at: f64,
    image_ready_at: Option<f64>,
    empty_since: Option<f64>,
    alive: bool,
}

#[derive(Clone, Copy, Debug)]
struct Waiting {
    arrival: f64,
    service_s: f64,
    index: usize,
}

/// The simulator state of one run.
struct Sim<'a> {
    cfg: &'a RunConfig,
    now: f64,
    seq: u64,
    events: BinaryHeap<Event>,
    pods: Vec<Pod>,
    live_pods: Vec<usize>,
    pending_pods: VecDeque<usize>,
    pending_inference: u32,
    cold_starting: u32,
    pending_balloons: u32,
    nodes: Vec<Node>,
    provision_scheduled: bool,
    free: Vec<usize>,
    queue: VecDeque<Waiting>,
    active_total: u64,
    hpa_window: VecDeque<(f64, u32)>,
    // Metric history on the step grid.
    arrivals_per_step: Vec<u32>,
    service_per_step: Vec<(f64, u32)>,
    waiting_at_boundary: Vec<u32>,
    running_at_boundary: Vec<u32>,
    headroom_state: HeadroomState,
    consolidation_frozen: bool,
    result: RunResult,
}

impl<'a> Sim<'a> {
    fn new(cfg: &'a RunConfig) -> Self {
        Sim {
            cfg,
            now: 0.0,
            seq: 0,
            events: BinaryHeap::new(),
            pods: Vec::new(),
            live_pods: Vec::new(),
            pending_pods: VecDeque::new(),
            pending_inference: 0,
            cold_starting: 0,
            pending_balloons: 0,
            nodes: Vec::new(),
            provision_scheduled: false,
            free: Vec::new(),
            queue: VecDeque::new(),
            active_total: 0,
            hpa_window: VecDeque::new(),
            arrivals_per_step: Vec::new(),
            service_per_step: Vec::new(),
            waiting_at_boundary: Vec::new(),
            running_at_boundary: Vec::new(),
            headroom_state: HeadroomState::default(),
            consolidation_frozen: false,
            result: RunResult::default(),
        }
    }

    fn push(&mut self, t: f64, kind: Kind) {
        self.seq += 1;
        self.events.push(Event {
            t,
            seq: self.seq,
            kind,
        });
    }

    fn gpr(&self) -> u32 {
        self.cfg.model.gpus_per_replica
    }

    fn slots(&self) -> u32 {
        self.cfg.model.slots_per_replica
    }

    // ---- nodes ------------------------------------------------------------------------------

    fn launch_node(&mut self, ready_now: bool) -> usize {
        let p = &self.cfg.provisioner;
        let ready_at = if ready_now {
            self.now
        } else {
            self.now + p.node_launch_s
        };
        let image_ready_at = if ready_now {
            Some(self.now)
        } else if self.cfg.model.prepull {
            Some(ready_at + self.cfg.model.image_pull_s)
        } else {
            None
        };
        self.nodes.push(Node {
            gpus: p.instance.gpus,
            used: 0,
            balloons: 0,
            launched: self.now,
            ready_at,
            image_ready_at,
            empty_since: None,
            alive: true,
        });
        self.result.nodes_launched += 1;
        self.nodes.len() - 1
    }

    fn free_gpus(&self, node: usize) -> u32 {
        let n = &self.nodes[node];
        n.gpus - n.used
    }

    /// Marks a node empty (and schedules its removal) when nothing is left on it.
    fn check_empty(&mut self, node: usize) {
        let n = &mut self.nodes[node];
        if !n.alive || n.used > 0 || n.empty_since.is_some() {
            return;
        }
        let since = self.now.max(n.ready_at);
        n.empty_since = Some(since);
        let at = since + self.cfg.provisioner.empty_after_s;
        self.push(at, Kind::EmptyCheck { node });
    }

    fn terminate_node(&mut self, node: usize) {
        let price = self.cfg.provisioner.usd_per_node_hour();
        let n = &mut self.nodes[node];
        n.alive = false;
        let seconds = self.now - n.launched;
        self.result.gpu_seconds += n.gpus as f64 * seconds;
        self.result.cost_usd += price * seconds / 3600.0;
    }

    fn on_empty_check(&mut self, node: usize) {
        let n = &self.nodes[node];
        let Some(since) = n.empty_since else { return };
        if !n.alive || n.used > 0 || since + self.cfg.provisioner.empty_after_s > self.now + 1e-9 {
            return;
        }
        if self.consolidation_frozen {
            // Budgets "0" for Empty: look again once prewarm may have released the freeze.
            let retry = self.now + self.cfg.step_s;
            self.push(retry, Kind::EmptyCheck { node });
            return;
        }
        self.terminate_node(node);
    }

    fn ready_gpus(&self) -> u32 {
        self.nodes
            .iter()
            .filter(|n| n.alive && n.ready_at <= self.now)
            .map(|n| n.gpus)
            .sum()
    }

    // ---- pods -------------------------------------------------------------------------------

    fn new_pod(&mut self) -> usize {
        self.pods.push(Pod::new(Phase::Pending));
        let id = self.pods.len() - 1;
        self.live_pods.push(id);
        self.pending_inference += 1;
        self.pending_pods.push_back(id);
        id
    }

    /// Binds a pending inference pod to `node`; returns when it will serve.
    fn bind(&mut self, pod: usize, node: usize) {
        let load = self.cfg.model.model_load_s;
        let pull = self.cfg.model.image_pull_s;
        let now = self.now;
        let n = &mut self.nodes[node];
        n.empty_since = None;
        let image_ready = *n
            .image_ready_at
            .get_or_insert_with(|| now.max(n.ready_at) + pull);
        let waits_for_node = image_ready > now + 1e-9;
        let serving_at = now.max(image_ready) + load;
        self.pending_inference -= 1;
        if waits_for_node {
            self.cold_starting += 1;
            self.result.cold_starts += 1;
        }
        let p = &mut self.pods[pod];
        p.cold = waits_for_node;
        p.phase = Phase::Starting { node, serving_at };
        self.push(serving_at, Kind::PodServing { pod });
    }

    /// Places pending pods: inference pods first (they preempt balloons), then balloons.
    fn schedule(&mut self) {
        let gpr = self.gpr();
        let mut still_pending = VecDeque::new();
        while let Some(pod) = self.pending_pods.pop_front() {
            if self.pods[pod].phase != Phase::Pending {
                continue;
            }
            match self.pick_node_for_inference() {
                Some((node, preempt)) => {
                    if preempt {
                        self.nodes[node].balloons -= 1;
                        self.pending_balloons += 1;
                    } else {
                        self.nodes[node].used += gpr;
                    }
                    self.bind(pod, node);
                }
                None => still_pending.push_back(pod),
            }
        }
        self.pending_pods = still_pending;
        while self.pending_balloons > 0 {
            let Some(node) = self.pick_node_for_balloon() else {
                break;
            };
            let n = &mut self.nodes[node];
            n.used += gpr;
            n.balloons += 1;
            n.empty_since = None;
            self.pending_balloons -= 1;
        }
        if (self.pending_inference > 0 || self.pending_balloons > 0) && !self.provision_scheduled {
            self.provision_scheduled = true;
            let at = self.now + self.cfg.provisioner.batch_s;
            self.push(at, Kind::Provision);
        }
    }

    /// Ready node with room, Ready node with a balloon to preempt, launching node with room,
    /// launching node with a balloon (the order the scheduler and Karpenter's in-flight node
    /// simulation would use). Returns the node and whether a balloon is preempted.
    fn pick_node_for_inference(&self) -> Option<(usize, bool)> {
        let gpr = self.gpr();
        let mut best: Option<(u8, usize)> = None;
        for (i, n) in self.nodes.iter().enumerate() {
            if !n.alive {
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

    fn pick_node_for_balloon(&self) -> Option<usize> {
        let gpr = self.gpr();
        (0..self.nodes.len()).find(|&i| self.nodes[i].alive && self.free_gpus(i) >= gpr)
    }

    fn on_provision(&mut self) {
        self.provision_scheduled = false;
        let gpr = self.gpr();
        let need = (self.pending_inference + self.pending_balloons) * gpr;
        let per_node = self.cfg.provisioner.instance.gpus;
        if per_node < gpr {
            // A replica that fits no node stays pending forever; the CLI rejects this setup.
            return;
        }
        // Replicas do not straddle nodes: count whole replicas per node.
        let replicas_per_node = per_node / gpr;
        let nodes = (need / gpr).div_ceil(replicas_per_node);
        for _ in 0..nodes {
            self.launch_node(false);
        }
        self.schedule();
    }

    fn on_pod_serving(&mut self, pod: usize) {
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
        self.free.push(pod);
        self.drain_queue();
    }

    /// Removes one inference pod (HPA scale-down): pending and starting pods go at once,
    /// a serving pod stops taking requests and goes when its last request is done.
    fn remove_pod(&mut self, pod: usize) {
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

    fn release(&mut self, node: usize) {
        let gpr = self.gpr();
        self.nodes[node].used -= gpr;
        self.check_empty(node);
    }

    fn replica_count(&self) -> u32 {
        self.live_pods
            .iter()
            .filter(|&&p| self.pods[p].phase != Phase::Gone && !self.pods[p].draining)
            .count() as u32
    }

    fn serving_count(&self) -> u32 {
        self.live_pods
            .iter()
            .filter(|&&p| {
                matches!(self.pods[p].phase, Phase::Serving { .. }) && !self.pods[p].draining
            })
            .count() as u32
    }

    fn compact_live_pods(&mut self) {
        let pods = &self.pods;
        self.live_pods.retain(|&p| pods[p].phase != Phase::Gone);
    }

    // ---- requests ---------------------------------------------------------------------------

    /// The serving replica with a free slot on top of the free list, dropping stale entries.
    fn free_replica(&mut self) -> Option<usize> {
        let slots = self.slots();
        while let Some(&pod) = self.free.last() {
            let p = &self.pods[pod];
            if matches!(p.phase, Phase::Serving { .. }) && !p.draining && p.active < slots {
                return Some(pod);
            }
            self.free.pop();
        }
        None
    }

    fn start(&mut self, pod: usize, w: Waiting) {
        let wait = self.now - w.arrival;
        self.result.waits[w.index] = wait as f32;
        if wait > self.cfg.slo_wait_s {
            self.result.delayed_any += 1;
        }
        // The service-time metric (the servers' latency histogram) is recorded at admission: the
        // engine knows a request's slot time then, and per step the mean is the same.
        self.record_service(w.service_s);
        let slots = self.slots();
        let p = &mut self.pods[pod];
        if p.active == 0 {
            p.busy_since = self.now;
        }
        p.active += 1;
        let full = p.active == slots;
        self.active_total += 1;
        if full && self.free.last() == Some(&pod) {
            self.free.pop();
        }
        let done = self.now + w.service_s;
        self.push(done, Kind::Completion { pod });
    }

    fn on_arrival(&mut self, r: Request) {
        let index = self.result.waits.len();
        self.result.waits.push(f32::NAN);
        self.result.requests += 1;
        let step = (r.arrival / self.cfg.step_s) as usize;
        if self.arrivals_per_step.len() <= step {
            self.arrivals_per_step.resize(step + 1, 0);
        }
        self.arrivals_per_step[step] += 1;
        let w = Waiting {
            arrival: r.arrival,
            service_s: r.service_s,
            index,
        };
        if self.queue.is_empty() {
            if let Some(pod) = self.free_replica() {
                self.start(pod, w);
                return;
            }
        }
        self.queue.push_back(w);
    }

    fn on_completion(&mut self, pod: usize) {
        let slots = self.slots();
        let gpr = self.gpr() as f64;
        self.active_total -= 1;
        let was_full;
        {
            let p = &mut self.pods[pod];
            was_full = p.active == slots;
            p.active -= 1;
            if p.active == 0 {
                self.result.busy_gpu_seconds += gpr * (self.now - p.busy_since);
            }
        }
        let p = &self.pods[pod];
        if p.draining {
            if p.active == 0 {
                if let Phase::Serving { node } = p.phase {
                    self.pods[pod].phase = Phase::Gone;
                    self.release(node);
                }
            }
            return;
        }
        if let Some(w) = self.queue.pop_front() {
            // FIFO: the slot just freed takes the oldest waiting request.
            self.start(pod, w);
        } else if was_full {
            self.free.push(pod);
        }
    }

    fn drain_queue(&mut self) {
        while !self.queue.is_empty() {
            let Some(pod) = self.free_replica() else {
                return;
            };
            let w = self.queue.pop_front().expect("queue is not empty");
            self.start(pod, w);
        }
    }

    fn record_service(&mut self, service_s: f64) {
        let step = (self.now / self.cfg.step_s) as usize;
        if self.service_per_step.len() <= step {
            self.service_per_step.resize(step + 1, (0.0, 0));
        }
        let slot = &mut self.service_per_step[step];
        slot.0 += service_s;
        slot.1 += 1;
    }

    // ---- controllers ------------------------------------------------------------------------

    fn on_hpa(&mut self) {
        let hpa = &self.cfg.model.hpa;
        let in_system = self.queue.len() as u64 + self.active_total;
        let raw = hpa.raw_desired(in_system, self.slots());
        let window = hpa.scale_down_window_s;
        self.hpa_window.push_back((self.now, raw));
        while self
            .hpa_window
            .front()
            .is_some_and(|&(t, _)| t <= self.now - window)
        {
            self.hpa_window.pop_front();
        }
        let current = self.replica_count();
        if raw > current {
            let by_percent = (current as f64 * hpa.scale_up_percent / 100.0).ceil() as u32;
            let limit = hpa.scale_up_pods.max(by_percent);
            let target = raw.min(current + limit);
            for _ in current..target {
                self.new_pod();
            }
            self.schedule();
        } else {
            let stabilized = self.hpa_window.iter().map(|&(_, d)| d).max().unwrap_or(raw);
            if stabilized < current {
                self.scale_down(current - stabilized);
            }
        }
        self.compact_live_pods();
        let next = self.now + hpa.sync_s;
        self.push(next, Kind::Hpa);
    }

    /// Removes `count` replicas: pending ones first, then starting, then the least busy.
    fn scale_down(&mut self, count: u32) {
        let mut candidates: Vec<(u8, u32, usize)> = self
            .live_pods
            .iter()
            .filter_map(|&p| {
                let pod = &self.pods[p];
                if pod.draining {
                    return None;
                }
                match pod.phase {
                    Phase::Pending => Some((0, 0, p)),
                    Phase::Starting { .. } => Some((1, 0, p)),
                    Phase::Serving { .. } => Some((2, pod.active, p)),
                    Phase::Gone => None,
                }
            })
            .collect();
        // Newest first within a class (a ReplicaSet removes the youngest pods).
        candidates.sort_by(|a, b| {
            (a.0, a.1, std::cmp::Reverse(a.2)).cmp(&(b.0, b.1, std::cmp::Reverse(b.2)))
        });
        for &(_, _, pod) in candidates.iter().take(count as usize) {
            self.remove_pod(pod);
        }
    }

    fn balloon_count(&self) -> u32 {
        self.pending_balloons
            + self
                .nodes
                .iter()
                .filter(|n| n.alive)
                .map(|n| n.balloons)
                .sum::<u32>()
    }

    /// Scales the balloon Deployment to `target` pods.
    fn set_balloons(&mut self, target: u32) {
        let current = self.balloon_count();
        if target > current {
            self.pending_balloons += target - current;
            self.schedule();
            return;
        }
        let mut remove = current - target;
        let from_pending = remove.min(self.pending_balloons);
        self.pending_balloons -= from_pending;
        remove -= from_pending;
        if remove == 0 {
            return;
        }
        // Take balloons from the emptiest nodes first so whole nodes can be consolidated;
        // launching nodes before Ready ones.
        let mut order: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].alive && self.nodes[i].balloons > 0)
            .collect();
        order.sort_by_key(|&i| {
            let n = &self.nodes[i];
            (n.ready_at <= self.now, n.used - n.balloons * self.gpr())
        });
        let gpr = self.gpr();
        for i in order {
            if remove == 0 {
                break;
            }
            let take = remove.min(self.nodes[i].balloons);
            self.nodes[i].balloons -= take;
            self.nodes[i].used -= take * gpr;
            remove -= take;
            self.check_empty(i);
        }
    }

    fn on_sample(&mut self) {
        let boundary = (self.now / self.cfg.step_s).round() as usize;
        let waiting = self.queue.len() as u32;
        let running = self.active_total as u32;
        if self.waiting_at_boundary.len() <= boundary {
            self.waiting_at_boundary.resize(boundary + 1, 0);
            self.running_at_boundary.resize(boundary + 1, 0);
        }
        self.waiting_at_boundary[boundary] = waiting;
        self.running_at_boundary[boundary] = running;
        let serving = self.serving_count();
        self.result.peak_replicas = self.result.peak_replicas.max(self.replica_count());
        let point = Point {
            t: self.now,
            ready_gpus: self.ready_gpus(),
            serving_replicas: serving,
            balloons: self.balloon_count(),
            waiting,
        };
        self.result.series.push(point);
        let next = self.now + self.cfg.step_s;
        self.push(next, Kind::Sample);
    }

    /// The metric history a tick would fetch: `window_s` of samples on the step grid ending at
    /// the last complete step, the steady state before t = 0 standing in for older history.
    fn observation(&self, policy: &PolicySpec) -> Observation {
        let step = self.cfg.step_s;
        let base = self.cfg.base_epoch;
        let steps = (policy.window_s / step).round() as i64;
        let now_boundary = (self.now / step + 1e-9).floor() as i64;
        let warm = self.cfg.warm;
        let mut obs = Observation {
            pending_pods: self.pending_inference + self.cold_starting,
            serving_replicas: Some(self.serving_count()),
            ..Observation::default()
        };
        let mut last_service = warm.service_s;
        // Service-time history: carry the last known mean through steps without completions.
        for j in 0..(now_boundary - steps).max(0) {
            if let Some(&(sum, n)) = self.service_per_step.get(j as usize) {
                if n > 0 {
                    last_service = sum / n as f64;
                }
            }
        }
        for j in (now_boundary - steps)..now_boundary {
            // Step j covers [j*step, (j+1)*step); its sample is stamped at its end.
            let t = base + (j + 1) as f64 * step;
            let rate = if j < 0 {
                warm.rate
            } else {
                *self.arrivals_per_step.get(j as usize).unwrap_or(&0) as f64 / step
            };
            if j >= 0 {
                if let Some(&(sum, n)) = self.service_per_step.get(j as usize) {
                    if n > 0 {
                        last_service = sum / n as f64;
                    }
                }
            }
            let b = j + 1;
            let (waiting, running) = if b <= 0 {
                (0.0, warm.running)
            } else {
                (
                    *self.waiting_at_boundary.get(b as usize).unwrap_or(&0) as f64,
                    *self.running_at_boundary.get(b as usize).unwrap_or(&0) as f64,
                )
            };
            obs.arrival_rate.push(Sample::new(t, rate));
            obs.service_time_s.push(Sample::new(t, last_service));
            obs.waiting.push(Sample::new(t, waiting));
            obs.running.push(Sample::new(t, running));
        }
        obs
    }

    fn on_tick(&mut self) {
        let Headroom::Prewarm { policy, target } = &self.cfg.headroom else {
            return;
        };
        let obs = self.observation(policy);
        let plan = decide(
            &obs,
            target,
            policy,
            &self.headroom_state,
            self.cfg.base_epoch + self.now,
        );
        self.result.decisions += 1;
        if plan.changes_size() {
            self.result.headroom_changes += 1;
        }
        // What the Lambda does: size the object to the plan, persist next_state on it, and read
        // the object's size back as `spare` next time.
        self.set_balloons(plan.desired_spare);
        if let Some(freeze) = plan.freeze_consolidation {
            if target.freeze_consolidation {
                self.consolidation_frozen = freeze;
            }
        }
        self.headroom_state = plan.next_state;
        self.headroom_state.spare = self.balloon_count();
        let next = self.now + policy.tick_s;
        self.push(next, Kind::Tick);
    }

    fn idle(&self) -> bool {
        self.queue.is_empty() && self.active_total == 0
    }

    fn finish(mut self) -> RunResult {
        for i in 0..self.nodes.len() {
            if self.nodes[i].alive {
                self.terminate_node(i);
            }
        }
        self.result.end_s = self.now;
        self.result
    }

    /// A Ready node with a free replica-sized slot, launching one (Ready at once) if none.
    fn warm_node(&mut self) -> usize {
        let gpr = self.gpr();
        match (0..self.nodes.len()).find(|&i| self.nodes[i].alive && self.free_gpus(i) >= gpr) {
            Some(node) => node,
            None => self.launch_node(true),
        }
    }

    /// The steady state before the trace: replicas serving, balloons warm, nodes Ready.
    fn warm_start(&mut self) {
        let gpr = self.gpr();
        let replicas = match self.cfg.replicas {
            Replicas::Hpa => self.cfg.warm.replicas,
            Replicas::Static(n) => n,
        };
        for _ in 0..replicas {
            let node = self.warm_node();
            self.nodes[node].used += gpr;
            self.pods.push(Pod::new(Phase::Serving { node }));
            let pod = self.pods.len() - 1;
            self.live_pods.push(pod);
            self.free.push(pod);
        }
        let balloons = match &self.cfg.headroom {
            Headroom::None => 0,
            Headroom::Fixed(n) => *n,
            Headroom::Prewarm { policy, target } => {
                let obs = self.observation(policy);
                let plan = decide(
                    &obs,
                    target,
                    policy,
                    &self.headroom_state,
                    self.cfg.base_epoch,
                );
                self.result.decisions += 1;
                self.headroom_state = plan.next_state;
                plan.desired_spare
            }
        };
        for _ in 0..balloons {
            let node = self.warm_node();
            self.nodes[node].used += gpr;
            self.nodes[node].balloons += 1;
        }
        self.headroom_state.spare = balloons;
        // The replica controller has been running too: its scale-down window remembers wanting
        // the warm replicas, so it does not drop them at the first sync.
        self.hpa_window.push_back((self.now, replicas));
    }
}

/// Runs one policy over `requests` (in arrival order). `on_request` is called once per request
/// simulated (progress reporting).
pub fn run(
    cfg: &RunConfig,
    requests: impl Iterator<Item = Request>,
    mut on_request: impl FnMut(),
) -> RunResult {
    let mut sim = Sim::new(cfg);
    sim.warm_start();
    sim.push(0.0, Kind::Sample);
    if cfg.replicas == Replicas::Hpa {
        sim.push(0.0, Kind::Hpa);
    }
    if let Headroom::Prewarm { policy, .. } = &cfg.headroom {
        sim.push(policy.tick_s, Kind::Tick);
    }
    let mut requests = requests.peekable();
    loop {
        let next_arrival = requests.peek().map(|r| r.arrival);
        if next_arrival.is_none() && sim.idle() {
            break;
        }
        let event_first = match (sim.events.peek(), next_arrival) {
            (Some(e), Some(a)) => e.t <= a,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        if event_first {
            let e = sim.events.pop().expect("peeked");
            sim.now = e.t;
            match e.kind {
                Kind::Completion { pod } => sim.on_completion(pod),
                Kind::PodServing { pod } => sim.on_pod_serving(pod),
                Kind::Sample => sim.on_sample(),
                Kind::Hpa => sim.on_hpa(),
                Kind::Tick => sim.on_tick(),
                Kind::Provision => sim.on_provision(),
                Kind::EmptyCheck { node } => sim.on_empty_check(node),
            }
        } else {
            let r = requests.next().expect("peeked");
            sim.now = sim.now.max(r.arrival);
            sim.on_arrival(r);
            on_request();
        }
    }
    sim.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::model::{instance_type, Hpa};

    fn config() -> RunConfig {
        RunConfig {
            model: Model {
                prefill_tokens_per_s: 1000.0,
                decode_tokens_per_s: 10.0,
                slots_per_replica: 8,
                gpus_per_replica: 1,
                image_pull_s: 0.0,
                model_load_s: 0.0,
                prepull: true,
                hpa: Hpa {
                    target_utilization: 1.0,
                    sync_s: 15.0,
                    scale_down_window_s: 300.0,
                    scale_up_pods: 4,
                    scale_up_percent: 100.0,
                    min_replicas: 1,
                    max_replicas: 10,
                },
            },
            provisioner: Provisioner {
                instance: instance_type("g5.xlarge").unwrap().clone(),
                node_launch_s: 41.0,
                batch_s: 1.0,
                empty_after_s: 600.0,
                price_factor: 1.0,
            },
            replicas: Replicas::Static(1),
            headroom: Headroom::None,
            warm: WarmStart {
                replicas: 1,
                rate: 2.0,
                service_s: 3.0,
                running: 6.0,
            },
            slo_wait_s: 10.0,
            step_s: 15.0,
            base_epoch: 1_000_000.0,
        }
    }

    #[test]
    fn the_observation_is_the_metric_history_a_tick_would_fetch() {
        // A 60 s window at a 15 s step is 4 samples, stamped at the end of each step and ending
        // with the last complete step. At t = 31 the complete steps are [0,15) and [15,30); the
        // two before t = 0 are the steady state (2 req/s, 3 s service, 6 running, none waiting).
        let cfg = config();
        let mut sim = Sim::new(&cfg);
        sim.warm_start();
        let policy = PolicySpec {
            window_s: 60.0,
            ..PolicySpec::default()
        };
        for (t, kind) in [
            (0.0, "sample"),
            (1.0, "req"),
            (2.0, "req"),
            (15.0, "sample"),
            (16.0, "req"),
            (30.0, "sample"),
        ] {
            sim.now = t;
            if kind == "req" {
                sim.on_arrival(Request {
                    arrival: t,
                    service_s: 100.0,
                });
            } else {
                sim.on_sample();
            }
        }
        sim.now = 31.0;
        let obs = sim.observation(&policy);
        let base = cfg.base_epoch;
        let times: Vec<f64> = obs.arrival_rate.iter().map(|s| s.t - base).collect();
        assert_eq!(times, vec![-15.0, 0.0, 15.0, 30.0]);
        let rates: Vec<f64> = obs.arrival_rate.iter().map(|s| s.v).collect();
        assert_eq!(rates, vec![2.0, 2.0, 2.0 / 15.0, 1.0 / 15.0]);
        let service: Vec<f64> = obs.service_time_s.iter().map(|s| s.v).collect();
        assert_eq!(service, vec![3.0, 3.0, 100.0, 100.0]);
        // Running at the boundaries 15 and 30: 2 then 3 requests in their 100 s slots.
        let running: Vec<f64> = obs.running.iter().map(|s| s.v).collect();
        assert_eq!(running, vec![6.0, 6.0, 2.0, 3.0]);
        assert!(obs.waiting.iter().all(|s| s.v == 0.0));
        assert_eq!(obs.serving_replicas, Some(1));
        assert_eq!(obs.pending_pods, 0);
        assert_eq!(obs.problem, None);
    }
}
