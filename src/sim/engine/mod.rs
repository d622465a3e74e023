//! The discrete-event simulation of one policy on one request stream.
//!
//! What is simulated, in the order it happens in a real cluster:
//! - requests arrive, take a free slot of a serving replica or wait in one FIFO queue;
//! - an HPA (shared by every policy, autoscaling/v2 semantics: sim/hpa.rs) creates and removes
//!   inference pods from the scraped gauges it can see;
//! - pending pods preempt warm balloon pods on Ready nodes, or are nominated to nodes that are
//!   still launching, or make the provisioner (Karpenter or Cluster Autoscaler) launch nodes after
//!   its batching window;
//! - a pod on a fresh node waits for the node, the image/weights pull, then the model load;
//!   on a warm node only for the model load;
//! - Karpenter removes empty nodes and repacks underutilised ones after `consolidateAfter`,
//!   within its disruption budget (disruption.rs); Cluster Autoscaler removes empty nodes, and
//!   in the rough world drains nodes under half used (ca_scale_down.rs);
//! - a headroom controller sets the number of balloon pods: none, a fixed N, a percentage of
//!   the serving replicas, or prewarm's own `crate::core::decide()` fed with the `Observation`
//!   the Lambda's queries would return (lambda_view.rs); or, instead of balloons, a raised HPA floor
//!   (minReplicas by hour, or prewarm's `Plan::hpa_floor`) that the HPA reads at its next sync;
//! - the clairvoyant node hints launch a node one lead time before each moment a first pass
//!   needed one (`RunConfig::prelaunch`).
//!
//! Time is seconds from the start of the trace; `decide()` sees `base_epoch + t`.

use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use crate::core::lead::LeadBook;
use crate::core::{HeadroomState, PolicySpec, TargetSpec};

use super::classes::Class;
use super::model::{Hpa, Model, Provisioner};
use super::stats::{DayStats, GpuSplit, LogHistogram, Waterfall};

pub use lambda_view::BandCoverage;
pub use launch::LaunchModel;
pub use lead::{LeadReport, LeadTime};
pub use pool::{run_pool, PoolResult};
pub use residual::{ResidualSeries, StreamSteps};
pub use world::{World, WorldName};

/// One request as the engine sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    pub arrival: f64,
    /// Seconds the request occupies a slot (prefill + decode).
    pub service_s: f64,
    /// The prefill part of `service_s`: time to first token is the wait plus this.
    pub prefill_s: f64,
    /// Its client (`TraceRecord::client`): with `RunConfig::classes`, what class it counts in.
    pub client: u32,
}

/// Who adds warm capacity beyond the HPA's own sizing: warm balloon pods (none, a fixed N, a
/// percentage, prewarm's `decide()`), or a raised HPA floor (`minReplicas`) that the HPA reads
/// at its next sync (a schedule by hour, or prewarm's `Plan::hpa_floor`).
#[derive(Clone, Debug)]
// PolicySpec carries the season list and the zone name (policy v2); one per run, not worth a box.
#[allow(clippy::large_enum_variant)]
pub enum Headroom {
    None,
    Fixed(u32),
    /// This percentage of the serving replicas (rounded up), re-set every `tick_s`.
    Percent {
        percent: f64,
        tick_s: f64,
    },
    Prewarm {
        policy: PolicySpec,
        target: Box<TargetSpec>,
    },
    /// A replica floor by hour: during hour `h` (counted from t = 0, the floor changing at each
    /// hour boundary, the boundary included) the HPA's minReplicas is
    /// `max(user's minReplicas, floors[h % floors.len()])`, at most maxReplicas (a KEDA cron
    /// scaler or a scheduled-scaling action writing minReplicas). No balloons.
    ScheduledFloor {
        floors: Arc<Vec<u32>>,
    },
    /// prewarm's own decision every tick, applied as the HPA floor (`hpa.raiseMinReplicas`,
    /// `Plan::hpa_floor`) instead of balloons: no balloons are kept.
    PrewarmFloor {
        policy: PolicySpec,
        target: Box<TargetSpec>,
    },
}

/// Seconds of one slot of `Headroom::ScheduledFloor`.
pub const FLOOR_SLOT_S: f64 = 3600.0;

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
    /// Node launch times and capacity errors.
    pub launch: LaunchModel,
    /// Seed of the launch draws.
    pub seed: u64,
    /// Seconds between a scrape and the moment a query can see it (remote write / AMP).
    pub ingestion_lag_s: f64,
    /// Nothing before this is measured (the metric history fills with the trace's own past).
    pub burn_in_s: f64,
    /// Totals (not the per-day figures) count from here: the burn-in or the end of training.
    pub score_from_s: f64,
    /// Clairvoyant node hints: times a first pass needed a new node; each gets one launched one
    /// (sampled) lead time earlier.
    pub prelaunch: Option<Arc<Vec<f64>>>,
    /// The class of each client (by `Request::client`; a client past the end is interactive):
    /// the scored figures are also kept per class (`Scored::classes`). None: one class.
    pub classes: Option<Arc<Vec<Class>>>,
    /// Where prewarm's lead time comes from: LEAD_TIME_SECONDS as configured, or learned from
    /// the run's own node boots, pulls and loads (lead.rs).
    pub lead_time: LeadTime,
    /// Where the simulated cluster departs from what prewarm is told (world.rs).
    pub world: World,
    /// The request stream's per-step arrivals and no-wait peak (residual.rs), when the caller
    /// counted them already over the very requests this run gets (a comparison's first pass):
    /// every policy's run shares them. None: the run counts them itself.
    pub stream_steps: Option<Arc<StreamSteps>>,
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
    /// Inference pods the HPA runs (pending, starting and serving; draining ones left out).
    pub replicas: u32,
    /// Inference pods waiting for a node.
    pub pending: u32,
    /// Node cold starts so far (from t = 0, burn-in included): differences give when they came.
    pub cold_starts: u64,
}

/// What one run measured from `score_from_s` on.
#[derive(Clone, Debug, Default)]
pub struct Scored {
    pub requests: u64,
    /// Waited longer than the SLO wait (any cause).
    pub delayed: u64,
    pub waits: LogHistogram,
    /// Wait plus prefill.
    pub ttft: LogHistogram,
    /// The nodes' GPU-seconds, and those with a request in flight.
    pub gpu: GpuSplit,
    /// The same GPU-seconds by cause (waterfall.rs). In a pool, the nodes' parts (boot,
    /// balloons, empty) are the first deployment's.
    pub waterfall: Waterfall,
    /// Inference pods that waited for a node to launch or for its image pull.
    pub cold_starts: u64,
    /// Replicas that loaded their model while requests queued for them.
    pub replica_cold_starts: u64,
    pub nodes_launched: u64,
    /// The same per-request figures per client class, indexed by `Class as usize` (empty
    /// without `RunConfig::classes`).
    pub classes: Vec<ClassScored>,
}

/// What one run measured from `score_from_s` on for the requests of one client class. A replica
/// cold start counts for every class with a request queued when the replica came up, so the
/// classes' counts can add up to more than the total.
#[derive(Clone, Debug, Default)]
pub struct ClassScored {
    pub requests: u64,
    pub delayed: u64,
    pub waits: LogHistogram,
    pub replica_cold_starts: u64,
}

/// What one run measured.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    /// Every request simulated (burn-in included).
    pub requests: u64,
    pub scored: Scored,
    /// Per day from t = 0, without the burn-in.
    pub days: Vec<DayStats>,
    pub nodes_launched: u64,
    /// (launched, Ready) of every node launched by a provisioner or the node hints.
    pub launches: Vec<(f64, f64)>,
    /// When the pods that made the provisioner launch each node went pending (one entry per
    /// node): the clairvoyant node hints's foresight.
    pub node_demand_times: Vec<f64>,
    pub peak_replicas: u32,
    pub end_s: f64,
    pub series: Vec<Point>,
    /// Prewarm only: decisions taken and how many changed the headroom.
    pub decisions: u64,
    pub headroom_changes: u64,
    /// Prewarm only: coverage of its lead-time band on the scored days.
    pub band: BandCoverage,
    /// What the residual decomposition reads (core::policy::residual).
    pub residual: ResidualSeries,
    /// Prewarm learning its lead time only: what it learned and when.
    pub lead: Option<LeadReport>,
}

mod ca_scale_down;
mod controllers;
mod disruption;
mod events;
mod lambda_view;
mod launch;
mod lead;
mod metrics;
mod nodes;
mod pods;
mod pool;
mod requests;
mod residual;
mod waterfall;
mod world;

use events::{Event, Kind};
use nodes::Node;
use pods::{Phase, Pod};
use requests::Waiting;

/// The node set of a NodePool: the nodes, the balloons still to place, Karpenter's disruption
/// command and consolidation freeze, and the launch draws. One per pool, whatever deployments
/// share it.
#[derive(Default)]
struct Cluster {
    nodes: Vec<Node>,
    /// Indices of nodes that may be alive, in launch order (dead ones dropped at each sample).
    live_nodes: Vec<usize>,
    pending_balloons: u32,
    consolidation_frozen: bool,
    /// Provisioner launches drawn so far: the n-th launch of every run draws from the same
    /// stream (common random numbers, see `launch::draw_stream`).
    launches_drawn: u64,
    /// Karpenter's command waiting for its validation (nodes to delete).
    disruption_pending: Vec<usize>,
    /// When the provisioner last launched a node (Cluster Autoscaler's scale-down waits
    /// `--scale-down-delay-after-add` after it).
    last_scale_up: Option<f64>,
}

/// The simulator state of one deployment.
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
    /// Node cold starts from t = 0 (the series' running count).
    cold_starts_so_far: u64,
    /// The nodes and what holds them: the pool's, shared by every deployment on it.
    cluster: Cluster,
    /// Launch durations drawn for the node hints' early launches, by `Kind::Prelaunch` index.
    prelaunch_s: Vec<f64>,
    provision_scheduled: bool,
    /// The provisioner's open batch: when its first pending pod came, when the latest did, and
    /// how many were pending at the last look.
    batch_start: f64,
    batch_last: f64,
    batch_pending: u32,
    free: Vec<usize>,
    queue: VecDeque<Waiting>,
    /// Requests of each class in `queue` (for the per-class replica cold starts).
    queued_by_class: [u64; Class::ALL.len()],
    active_total: u64,
    /// The HPA's recommendations (time, replicas the metric asked for), for its stabilisation
    /// windows; the newest is what it wants now.
    hpa_window: VecDeque<(f64, u32)>,
    /// The HPA's scale events (time, signed change), for its rate policies.
    hpa_events: VecDeque<(f64, i64)>,
    /// What an HPA at the user's target and minReplicas would set at the latest sync
    /// (`update_hpa_wants`), and its recommendations: above it is the waterfall's warm excess.
    hpa_wants: u32,
    wants_window: VecDeque<(f64, u32)>,
    // What the servers export, per scrape (every step): gauges at the scrape, and the
    // completions and their end-to-end latency (queueing included) since the previous one.
    waiting_at_boundary: Vec<u32>,
    running_at_boundary: Vec<u32>,
    /// Replicas serving (not draining) at each scrape: the pods that exported the gauges.
    serving_at_boundary: Vec<u32>,
    completions_at: Vec<u32>,
    latency_sum_at: Vec<f64>,
    /// The arrival-rate and service-time queries' answers already computed (lambda_view.rs).
    settled_answers: std::cell::RefCell<lambda_view::RateMemo>,
    /// Scrapes the metric store lost (world.rs; empty when it loses none).
    lost_scrapes: Vec<bool>,
    headroom_state: HeadroomState,
    /// prewarm-floor: the HPA's minReplicas as prewarm raised it (None: the user's value), and
    /// until when its lease holds (a failing-static tick gives it back once expired).
    raised_min: Option<u32>,
    raised_min_lease_until: f64,
    /// Prewarm: (newest visible scrape, upper forecast, lead time it was asked for, whether the
    /// profile sized it) of each scored decision with a band.
    band_checks: Vec<(i64, f64, f64, bool)>,
    /// The lead times learned so far (`LeadTime::Learned`).
    lead_book: LeadBook,
    /// The stream's steps being counted (None when `RunConfig::stream_steps` gave them).
    stream_steps: Option<StreamSteps>,
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
            cold_starts_so_far: 0,
            cluster: Cluster::default(),
            prelaunch_s: Vec::new(),
            provision_scheduled: false,
            batch_start: 0.0,
            batch_last: 0.0,
            batch_pending: 0,
            free: Vec::new(),
            queue: VecDeque::new(),
            queued_by_class: [0; Class::ALL.len()],
            active_total: 0,
            hpa_window: VecDeque::new(),
            hpa_events: VecDeque::new(),
            hpa_wants: 0,
            wants_window: VecDeque::new(),
            waiting_at_boundary: Vec::new(),
            running_at_boundary: Vec::new(),
            serving_at_boundary: Vec::new(),
            completions_at: Vec::new(),
            latency_sum_at: Vec::new(),
            settled_answers: Default::default(),
            lost_scrapes: Vec::new(),
            headroom_state: HeadroomState::default(),
            raised_min: None,
            raised_min_lease_until: 0.0,
            band_checks: Vec::new(),
            lead_book: Default::default(),
            stream_steps: cfg
                .stream_steps
                .is_none()
                .then(|| StreamSteps::new(cfg.step_s)),
            result: RunResult {
                scored: Scored {
                    classes: match cfg.classes {
                        Some(_) => vec![ClassScored::default(); Class::ALL.len()],
                        None => Vec::new(),
                    },
                    ..Scored::default()
                },
                ..RunResult::default()
            },
        }
    }

    /// The class a request of `client` counts in.
    fn class_of(&self, client: u32) -> Class {
        self.cfg
            .classes
            .as_ref()
            .and_then(|c| c.get(client as usize).copied())
            .unwrap_or(Class::Interactive)
    }

    fn push(&mut self, t: f64, kind: Kind) {
        self.seq += 1;
        self.events.push(Event::new(t, self.seq, kind));
    }

    fn gpr(&self) -> u32 {
        self.cfg.model.gpus_per_replica
    }

    fn slots(&self) -> u32 {
        self.cfg.model.slots_per_replica
    }

    fn handle(&mut self, kind: Kind) {
        match kind {
            Kind::Completion { pod } => self.on_completion(pod),
            Kind::PodServing { pod } => self.on_pod_serving(pod),
            Kind::Sample => self.on_sample(),
            Kind::Hpa => self.on_hpa(),
            Kind::Tick => self.on_tick(),
            Kind::Provision => self.on_provision(),
            Kind::EmptyCheck { node } => self.on_empty_check(node),
            Kind::Disruption => self.on_disruption(),
            Kind::DisruptionValidate => self.on_disruption_validate(),
            Kind::ScaleDown => self.on_ca_scale_down(),
            Kind::Prelaunch { index } => self.on_prelaunch(index),
        }
    }

    fn idle(&self) -> bool {
        self.queue.is_empty() && self.active_total == 0
    }

    fn finish(mut self) -> RunResult {
        if let Headroom::Prewarm { policy, .. } | Headroom::PrewarmFloor { policy, .. } =
            &self.cfg.headroom
        {
            self.score_bands(policy);
        }
        for i in self.cluster.live_nodes.clone() {
            if self.cluster.nodes[i].alive {
                self.terminate_node(i);
            }
        }
        self.result.end_s = self.now;
        self.residual_finish();
        self.result
    }

    /// The first sample, the replica controller, the headroom controller's ticks and the
    /// node hints' early launches.
    fn start_controllers(&mut self) {
        let cfg = self.cfg;
        self.push(0.0, Kind::Sample);
        // A static fleet's syncs only follow what an HPA would want (the waterfall).
        self.push(0.0, Kind::Hpa);
        match &cfg.headroom {
            Headroom::Prewarm { policy, .. } | Headroom::PrewarmFloor { policy, .. } => {
                self.push(policy.tick_s, Kind::Tick)
            }
            Headroom::Percent { tick_s, .. } => self.push(*tick_s, Kind::Tick),
            Headroom::None | Headroom::Fixed(_) | Headroom::ScheduledFloor { .. } => {}
        }
        if let Some(times) = &cfg.prelaunch {
            self.schedule_prelaunches(times);
        }
        self.start_disruption();
        self.start_ca_scale_down();
    }

    /// A Ready node with a free replica-sized slot, launching one (Ready at once) if none.
    fn warm_node(&mut self) -> usize {
        let gpr = self.gpr();
        let found = self.cluster.live_nodes.iter().copied().find(|&i| {
            self.cluster.nodes[i].alive
                && !self.cluster.nodes[i].deleting
                && self.free_gpus(i) >= gpr
        });
        match found {
            Some(node) => node,
            None => self.launch_node(None),
        }
    }

    /// The steady state before the trace: replicas serving, balloons warm, nodes Ready. A
    /// raised HPA floor (a schedule's at t = 0, or prewarm's first decision) has been holding
    /// its replicas already.
    fn warm_start(&mut self) {
        let replicas = match self.cfg.replicas {
            Replicas::Hpa => self.cfg.warm.replicas,
            Replicas::Static(n) => n,
        };
        // The HPA at the user's target has been running too (for a static fleet or a lower
        // target, as it would have).
        let user = Hpa {
            target_utilization: self.cfg.model.hpa.wanted_utilization,
            ..self.cfg.model.hpa.clone()
        };
        self.hpa_wants = user.raw_desired(self.cfg.warm.running.ceil() as u64, self.slots());
        if self.cfg.replicas == Replicas::Hpa {
            self.hpa_wants = self.hpa_wants.min(self.cfg.warm.replicas);
        }
        self.wants_window.push_back((self.now, self.hpa_wants));
        self.add_warm_replicas(replicas);
        let balloons = match &self.cfg.headroom {
            Headroom::None | Headroom::ScheduledFloor { .. } => 0,
            Headroom::Fixed(n) => *n,
            Headroom::Percent { percent, .. } => percent_of(replicas, *percent),
            Headroom::Prewarm { policy, target } => {
                let plan = self.prewarm_decision(policy, target);
                self.headroom_state = plan.next_state;
                plan.desired_spare
            }
            Headroom::PrewarmFloor { policy, target } => {
                let plan = self.prewarm_decision(policy, target);
                self.apply_hpa_floor(&plan, policy);
                self.headroom_state = plan.next_state;
                0
            }
        };
        let raises_floor = matches!(
            self.cfg.headroom,
            Headroom::ScheduledFloor { .. } | Headroom::PrewarmFloor { .. }
        );
        let replicas = if raises_floor && self.cfg.replicas == Replicas::Hpa {
            let floor = self.hpa_min_replicas();
            self.add_warm_replicas(floor.saturating_sub(replicas));
            replicas.max(floor)
        } else {
            replicas
        };
        let gpr = self.gpr();
        for _ in 0..balloons {
            let node = self.warm_node();
            self.cluster.nodes[node].used += gpr;
            self.cluster.nodes[node].balloons += 1;
        }
        self.headroom_state.spare = balloons;
        // The replica controller has been running too: its scale-down window remembers wanting
        // the warm replicas, so it does not drop them at the first sync.
        self.hpa_window.push_back((self.now, replicas));
    }

    /// `count` more inference replicas serving on Ready nodes (the warm start).
    fn add_warm_replicas(&mut self, count: u32) {
        let gpr = self.gpr();
        for _ in 0..count {
            let node = self.warm_node();
            self.cluster.nodes[node].used += gpr;
            self.pods.push(Pod::new(Phase::Serving { node }));
            let pod = self.pods.len() - 1;
            self.live_pods.push(pod);
            self.free.push(pod);
        }
    }
}

/// Runs one policy over `requests` (in arrival order): a pool of one deployment. `on_request` is
/// called once per request simulated (progress reporting).
pub fn run(
    cfg: &RunConfig,
    requests: impl Iterator<Item = Request>,
    on_request: impl FnMut(),
) -> RunResult {
    let one = std::slice::from_ref(cfg);
    let mut result = run_pool(one, false, &[], requests, on_request);
    result.models.pop().expect("one deployment")
}

#[cfg(test)]
mod lead_tests;
#[cfg(test)]
mod scale_down_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod waterfall_tests;
#[cfg(test)]
mod world_tests;

/// Balloons for `percent` % of `replicas`, rounded up.
pub(crate) fn percent_of(replicas: u32, percent: f64) -> u32 {
    (replicas as f64 * percent / 100.0 - 1e-9).ceil().max(0.0) as u32
}
