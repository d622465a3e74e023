//! Lead times learned from the simulator's own events, the way the Lambda's tick learns them
//! from the cluster (`crate::core::lead`): each node's boot (launch to Ready) in its NodePool,
//! each replica's image pull (bound, or its node Ready, to its container's start) and model load
//! (container start to Ready) for its target, kept in a `LeadBook`; before each decision the
//! horizon is `core::lead::horizon` over that book and stands in for LEAD_TIME_SECONDS, which
//! stays the fallback until every phase has its samples.
//!
//! What is learned when mirrors what the tick can see: a node's boot once it is Ready at a
//! decision (the tick lists NodeClaims), a replica's phases when it turns Ready. A replica that
//! found its image on the node pulled nothing and teaches no pull (the kubelet says "already
//! present"): learning its zero would pull the pull's quantile down to a warm node's. Nor does
//! one bound while its node's pull was under way: it saw only the rest of the pull, and enough
//! of those (replicas the HPA adds on a node still pulling) would bring the quantile below the
//! pull a new node takes.

use serde::Serialize;
use std::borrow::Cow;

use crate::core::lead::{self, Horizon, LeadSample, Phase};
use crate::core::{PolicySpec, TargetSpec};

use super::Sim;

/// Where the simulated prewarm's lead time comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LeadTime {
    /// LEAD_TIME_SECONDS (`PolicySpec::lead_time_s`) as configured, never learned.
    Configured,
    /// Learned from the run's own nodes and replicas: the sum of each phase's `quantile`,
    /// LEAD_TIME_SECONDS until every phase is learned.
    Learned { quantile: f64 },
}

/// What a run's lead-time learning did (prewarm runs with `LeadTime::Learned` only).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LeadReport {
    /// The quantile of each phase's window the horizon sums.
    pub quantile: f64,
    /// LEAD_TIME_SECONDS: the fallback while learning.
    pub configured_s: f64,
    /// The horizon of the last decision: what was learned, or why the fallback stood.
    pub last: Option<Horizon>,
    /// When (trace seconds) the first decision on a learned horizon was made.
    pub learned_from_s: Option<f64>,
    /// Decisions made on the fallback, and why the last of them was.
    pub fallback_decisions: u64,
    pub last_fallback: Option<String>,
    /// The shortest and longest learned horizon a decision used.
    pub learned_range_s: Option<(f64, f64)>,
}

impl Sim<'_> {
    /// Unix time now, as the tick stamps what it learns.
    fn unix_now(&self) -> f64 {
        self.cfg.base_epoch + self.now
    }

    /// Learns the boot of every node Ready by now and not learned yet: launch to Ready. Nodes
    /// Ready from the start (the warm start) booted before the trace and teach nothing (they
    /// are made learned: `Sim::launch_node`).
    fn learn_node_boots(&mut self, pool: &str) {
        let now = self.unix_now();
        let base = self.cfg.base_epoch;
        for &i in &self.cluster.live_nodes {
            let n = &mut self.cluster.nodes[i];
            if n.lead_learned || n.ready_at > self.now {
                continue;
            }
            n.lead_learned = true;
            let sample = LeadSample {
                id: format!("node-{i}"),
                at: base + n.ready_at,
                seconds: n.ready_at - n.launched,
            };
            self.lead_book.learn(Phase::NodeBoot, pool, sample, now);
        }
    }

    /// Learns a replica's pull and load as it turns Ready (now): the whole pull it waited for,
    /// if it saw one, and its container's start at `started_at` to now.
    pub(super) fn learn_replica_start(
        &mut self,
        pod: usize,
        pulled_s: Option<f64>,
        started_at: f64,
    ) {
        let cfg = self.cfg;
        let (LeadTime::Learned { .. }, Some(target)) =
            (cfg.lead_time, cfg.headroom.prewarm_target())
        else {
            return;
        };
        let target = &target.name;
        let now = self.unix_now();
        let base = self.cfg.base_epoch;
        if let Some(seconds) = pulled_s {
            let sample = LeadSample {
                id: format!("pod-{pod}"),
                at: base + started_at,
                seconds,
            };
            self.lead_book.learn(Phase::ImagePull, target, sample, now);
        }
        let sample = LeadSample {
            id: format!("pod-{pod}"),
            at: now,
            seconds: self.now - started_at,
        };
        self.lead_book.learn(Phase::ModelLoad, target, sample, now);
    }

    /// The policy a decision runs with now: LEAD_TIME_SECONDS replaced by the learned horizon
    /// (`core::lead::horizon`, the tick's function) when the run learns it.
    pub(super) fn with_learned_lead<'p>(
        &mut self,
        policy: &'p PolicySpec,
        target: &TargetSpec,
    ) -> Cow<'p, PolicySpec> {
        let LeadTime::Learned { quantile } = self.cfg.lead_time else {
            return Cow::Borrowed(policy);
        };
        self.learn_node_boots(&target.node_pool);
        let horizon =
            lead::target_horizon(&self.lead_book, target, policy, quantile, self.unix_now());
        let report = self.result.lead.get_or_insert(LeadReport {
            quantile,
            configured_s: policy.lead_time_s,
            last: None,
            learned_from_s: None,
            fallback_decisions: 0,
            last_fallback: None,
            learned_range_s: None,
        });
        if horizon.learned() {
            report.learned_from_s.get_or_insert(self.now);
            let s = horizon.seconds;
            report.learned_range_s = Some(
                report
                    .learned_range_s
                    .map_or((s, s), |(lo, hi)| (lo.min(s), hi.max(s))),
            );
        } else {
            report.fallback_decisions += 1;
            report.last_fallback.clone_from(&horizon.fallback);
        }
        let decided = horizon.applied_to(policy);
        report.last = Some(horizon);
        Cow::Owned(decided)
    }
}

impl super::Headroom {
    /// The target prewarm decides for, for the two prewarm headroom controllers.
    pub(super) fn prewarm_target(&self) -> Option<&TargetSpec> {
        match self {
            super::Headroom::Prewarm { target, .. }
            | super::Headroom::PrewarmFloor { target, .. } => Some(target),
            _ => None,
        }
    }
}
