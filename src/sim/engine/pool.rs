//! Several deployments (models) on one NodePool: each its own HPA, queue, replicas and model
//! load, every node shared. A node holds replicas of any model, a balloon on it is preempted by
//! whichever model's pod is pending first, and Karpenter's batching, launches and consolidation
//! see every model's pods. The engine's one loop: a single model is a pool of one (`run`).
//! Changes when how the deployments share the pool does.
//!
//! Each deployment is one `Sim` with its own events; the pool's node set (`Cluster`: nodes,
//! balloons, the disruption controller's command, the launch draws, the consolidation freeze)
//! is moved into the deployment whose event runs, and out again after it, so every line of the
//! one-model engine runs unchanged on the shared nodes. What the one-model engine does by itself only
//! for its own pods is done here for all:
//! - after any event, the other deployments' pending pods are placed (room freed by one
//!   model's scale-down, or a balloon, takes another's pending pod at once, as the scheduler
//!   would);
//! - Karpenter's disruption controller runs once, in the first deployment, and the pods of every
//!   deployment on a node it deletes are evicted and replaced.
//!
//! Known simplifications: each deployment keeps its own provisioner batch (Karpenter batches all
//! pending pods of the pool together; a later batch still lands on the room of an earlier
//! launch, as Karpenter's in-flight nodes take pending pods), and a consolidation candidate's
//! repack counts the pending pods of the first deployment only. Every model has the same
//! replica size (`Model::gpus_per_replica`), so a balloon fits any of them.

use crate::core::{PolicySpec, TargetSpec};
use crate::sim::tier_split::{self, TargetDemand, Tier};

use super::events::Kind;
use super::pods::Phase;
use super::waterfall::Rates;
use super::{Cluster, Headroom, Request, RunConfig, RunResult, Sim};

/// The correlation of the deployments' forecast errors in the split (tier_split): independent,
/// the clients of different models are different users.
const SPLIT_CORRELATION: f64 = 0.0;

/// A split deployment's prewarm policy and target (every one of them sets prewarm's HPA floor).
fn floor_of(cfg: &RunConfig) -> (&PolicySpec, &TargetSpec) {
    match &cfg.headroom {
        Headroom::PrewarmFloor { policy, target } => (policy, target),
        _ => unreachable!("the split sets prewarm's HPA floor"),
    }
}

/// What a pool run measured: each deployment's own result (the nodes' GPU-seconds are charged
/// to whichever deployment's event ended them: add the `scored.gpu.total` up), and how often
/// the split chose warm nodes.
#[derive(Clone, Debug, Default)]
pub struct PoolResult {
    pub models: Vec<RunResult>,
    /// Split only: pool decisions, those that chose the split tier, and the warm nodes they
    /// asked for, summed over decisions.
    pub split_ticks: u64,
    pub split_chosen: u64,
    pub warm_nodes_sum: u64,
}

impl PoolResult {
    /// Node GPU-seconds from the scoring start.
    pub fn gpu_seconds(&self) -> f64 {
        self.models.iter().map(|r| r.scored.gpu.total).sum()
    }
}

struct Pool<'a> {
    sims: Vec<Sim<'a>>,
    /// Whether the pool's spare is split (`run_pool`).
    split: bool,
    /// The pool's node set while no deployment's event runs.
    cluster: Cluster,
    result: PoolResult,
    /// What the GPUs are doing since `accrued_to` (the waterfall).
    rates: Rates,
    accrued_to: f64,
}

impl<'a> Pool<'a> {
    /// Runs `f` on deployment `m` with the pool's state in it, its clock at `now`.
    fn with<T>(&mut self, m: usize, now: f64, f: impl FnOnce(&mut Sim<'a>) -> T) -> T {
        let sim = &mut self.sims[m];
        sim.now = sim.now.max(now);
        std::mem::swap(&mut self.cluster, &mut sim.cluster);
        let out = f(sim);
        std::mem::swap(&mut self.cluster, &mut sim.cluster);
        out
    }

    /// Places the pending pods of every deployment but `except`.
    fn schedule_others(&mut self, except: usize, now: f64) {
        for j in 0..self.sims.len() {
            if j != except && self.sims[j].pending_inference > 0 {
                self.with(j, now, |s| s.schedule());
            }
        }
    }

    /// The deployment with the earliest event, and its time.
    fn next_event(&self) -> Option<(usize, f64)> {
        let mut best: Option<(usize, f64, u8)> = None;
        for (m, s) in self.sims.iter().enumerate() {
            if let Some(e) = s.events.peek() {
                let class = super::events::class(&e.kind);
                if best.is_none_or(|(_, t, c)| (e.t(), class) < (t, c)) {
                    best = Some((m, e.t(), class));
                }
            }
        }
        best.map(|(m, t, _)| (m, t))
    }

    fn handle(&mut self, m: usize) {
        let e = self.sims[m].events.pop().expect("peeked");
        let now = e.t();
        match &e.kind {
            // One disruption controller (or Cluster Autoscaler scale-down) for the pool: the
            // first deployment's.
            Kind::Disruption | Kind::DisruptionValidate | Kind::ScaleDown if m > 0 => return,
            // The pool's decision runs on the first deployment's ticks (its policy); the
            // others' end.
            Kind::Tick if self.split && m > 0 => return,
            Kind::Tick if self.split => {
                let (policy, _) = floor_of(self.sims[0].cfg);
                self.sims[0].now = now;
                self.split_tick(now, policy);
                let next = now + policy.tick_s;
                self.sims[0].push(next, Kind::Tick);
                self.schedule_others(usize::MAX, now);
                return;
            }
            _ => {}
        }
        let validate = matches!(e.kind, Kind::DisruptionValidate | Kind::ScaleDown);
        self.with(m, now, |s| {
            s.now = now;
            s.handle(e.kind)
        });
        if validate {
            for j in 1..self.sims.len() {
                self.with(j, now, |s| s.evict_from_deleting());
            }
        }
        self.schedule_others(m, now);
    }

    /// prewarm's decision for every deployment, split by `tier_split` between their HPA floors
    /// and the pool's warm nodes (balloons of the first deployment's size).
    fn split_tick(&mut self, now: f64, policy: &PolicySpec) {
        let mut plans = Vec::with_capacity(self.sims.len());
        let mut demands = Vec::with_capacity(self.sims.len());
        for m in 0..self.sims.len() {
            let (_, target) = floor_of(self.sims[m].cfg);
            let (plan, held) = self.with(m, now, |s| {
                (
                    s.prewarm_decision(policy, target),
                    s.raised_min.unwrap_or(0),
                )
            });
            let gpus_per_replica = self.sims[m].gpr();
            let demand = match plan.hpa_floor {
                Some(upper) => {
                    // The central forecast at the lead: the upper band's replicas scaled by the
                    // rate without the error quantile (the sizing is proportional to the rate).
                    let f = &plan.forecast;
                    let central = if f.rate_at_horizon > 0.0 {
                        let c = (f.rate_at_horizon - f.error_quantile).max(0.0);
                        upper as f64 * c / f.rate_at_horizon
                    } else {
                        upper as f64
                    };
                    TargetDemand {
                        central,
                        upper: upper as f64,
                        gpus_per_replica,
                    }
                }
                // Failing static: the floor held as is, no band.
                None => TargetDemand {
                    central: held as f64,
                    upper: held as f64,
                    gpus_per_replica,
                },
            };
            demands.push(demand);
            plans.push(plan);
        }
        let node_gpus = self.sims[0].cfg.provisioner.instance.gpus;
        let split = tier_split::split(&demands, node_gpus, SPLIT_CORRELATION);
        self.result.split_ticks += 1;
        if split.tier == Tier::Split {
            self.result.split_chosen += 1;
        }
        self.result.warm_nodes_sum += u64::from(split.warm_nodes);
        for (m, mut plan) in plans.into_iter().enumerate() {
            plan.hpa_floor = plan.hpa_floor.map(|_| split.floors[m]);
            self.with(m, now, |s| {
                s.apply_hpa_floor(&plan, policy);
                s.headroom_state = plan.next_state;
                s.headroom_state.spare = 0;
            });
        }
        let gpr = self.sims[0].gpr().max(1);
        let balloons = split.warm_nodes * (node_gpus / gpr);
        self.with(0, now, |s| s.set_balloons(balloons));
    }

    fn idle(&self) -> bool {
        self.sims.iter().all(|s| s.idle())
    }

    /// The waterfall's GPU-seconds up to `t`.
    fn accrue(&mut self, t: f64) {
        self.rates.accrue(self.accrued_to, t, &mut self.sims);
        self.accrued_to = t;
    }

    /// Takes the rates anew (after anything that can move a pod or a node).
    fn retake_rates(&mut self) {
        self.rates = Rates::of(&self.cluster, &self.sims, self.accrued_to);
    }

    /// Whether deployment `m`'s next event can move a pod or a node: all but a completion on a
    /// replica that keeps serving.
    fn moves_pods(&self, m: usize) -> bool {
        let s = &self.sims[m];
        match s.events.peek().map(|e| &e.kind) {
            Some(Kind::Completion { pod }) => s.pods[*pod].draining,
            _ => true,
        }
    }
}

impl Sim<'_> {
    /// Evicts (and replaces) this deployment's pods on nodes Karpenter is deleting: another
    /// deployment's disruption pass deleted them.
    fn evict_from_deleting(&mut self) {
        let on_deleting: Vec<usize> = self
            .live_pods
            .iter()
            .copied()
            .filter(|&p| {
                let pod = &self.pods[p];
                let node = match pod.phase {
                    Phase::Starting { node, .. } | Phase::Serving { node } => node,
                    Phase::Pending | Phase::Gone => return false,
                };
                !pod.draining && self.cluster.nodes[node].alive && self.cluster.nodes[node].deleting
            })
            .collect();
        if on_deleting.is_empty() {
            return;
        }
        for pod in on_deleting {
            self.new_pod();
            self.remove_pod(pod);
        }
        self.schedule();
    }
}

/// Runs the deployments `cfgs` on one NodePool (the first's provisioner, launch model and seed).
/// Each request goes to the deployment `model_of_client[client]` (0 past the end). Each
/// deployment's own `RunConfig::headroom` sets its spare (balloons, if any, on the first only:
/// they are the pool's), or with `split` prewarm decides per deployment every tick (the first's
/// policy, each its own target) and `tier_split` divides the pool's spare between each
/// deployment's HPA floor and warm nodes (balloons) shared by the pool: every deployment's
/// headroom must then be `Headroom::PrewarmFloor`.
pub fn run_pool(
    cfgs: &[RunConfig],
    split: bool,
    model_of_client: &[usize],
    requests: impl Iterator<Item = Request>,
    mut on_request: impl FnMut(),
) -> PoolResult {
    assert!(!cfgs.is_empty(), "a pool needs a deployment");
    assert!(
        !split
            || cfgs
                .iter()
                .all(|c| matches!(c.headroom, Headroom::PrewarmFloor { .. })),
        "the split sets prewarm's HPA floor"
    );
    let mut pool = Pool {
        sims: cfgs.iter().map(Sim::new).collect(),
        split,
        cluster: Cluster::default(),
        result: PoolResult::default(),
        rates: Rates::default(),
        accrued_to: 0.0,
    };
    for m in 0..cfgs.len() {
        pool.with(m, 0.0, |s| {
            s.warm_start();
            s.start_controllers();
        });
    }
    pool.retake_rates();
    let mut requests = requests.peekable();
    loop {
        let next_arrival = requests.peek().map(|r| r.arrival);
        if next_arrival.is_none() && pool.idle() {
            break;
        }
        let event = pool.next_event();
        let event_first = match (event, next_arrival) {
            (Some((_, t)), Some(a)) => t <= a,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        if event_first {
            let (m, t) = event.expect("peeked");
            pool.accrue(t);
            let moves = pool.moves_pods(m);
            pool.handle(m);
            if moves {
                pool.retake_rates();
            }
        } else {
            let r = requests.next().expect("peeked");
            pool.accrue(r.arrival);
            let m = model_of_client
                .get(r.client as usize)
                .copied()
                .unwrap_or(0)
                .min(cfgs.len() - 1);
            // Arrivals touch only their deployment's queue and replicas, not the nodes.
            let s = &mut pool.sims[m];
            s.now = s.now.max(r.arrival);
            s.on_arrival(r);
            on_request();
        }
    }
    let end = pool.sims.iter().map(|s| s.now).fold(0.0, f64::max);
    pool.accrue(end);
    let sims = std::mem::take(&mut pool.sims);
    let mut cluster = pool.cluster;
    let mut result = pool.result;
    for mut sim in sims {
        sim.now = end;
        std::mem::swap(&mut cluster, &mut sim.cluster);
        result.models.push(sim.finish());
    }
    result
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
