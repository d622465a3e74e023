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

use std::collections::{BinaryHeap, VecDeque};

use crate::core::{decide, HeadroomState, PolicySpec, TargetSpec};

use super::model::{Model, Provisioner};

/// One request as the engine sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    pub arrival: f64,
    pub service_s: f64,
}

/// Who sets the number of warm balloon pods.
#[derive(Clone, Debug)]
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

mod controllers;
mod events;
mod metrics;
mod nodes;
mod pods;
mod requests;

use events::{Event, Kind};
use nodes::Node;
use pods::{Phase, Pod};
use requests::Waiting;

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
