//! The controllers: the replica controller (an HPA, its arithmetic in sim/hpa.rs) and the
//! headroom controller (balloons).

use crate::core::{decide, Plan, PolicySpec, TargetSpec};
use crate::sim::hpa;
use crate::sim::model::Hpa;

use super::events::Kind;
use super::pods::Phase;
use super::{Headroom, Sim};

impl Sim<'_> {
    /// One sync of the HPA: read the metric as the controller would, recommend, stabilise and
    /// rate-limit (sim/hpa.rs), then scale the Deployment. A sync without a readable metric
    /// (no scrape visible yet, no pod with a sample) changes nothing, as in Kubernetes.
    ///
    /// The minReplicas it uses is read at each sync (`hpa_min_replicas`: the user's, or a raised
    /// floor). As `reconcileAutoscaler` in kubernetes/kubernetes
    /// pkg/controller/podautoscaler/horizontal.go does, before any metric is read: a target at 0
    /// replicas with a minReplicas other than 0 is not scaled ("ScalingDisabled"); fewer
    /// replicas than minReplicas are set to minReplicas at once ("Current number of replicas
    /// below Spec.MinReplicas"), without the stabilisation windows or the rate policies
    /// (`normalizeDesiredReplicasWithBehaviors` is not called on that path) and without a
    /// recommendation recorded, while the change is still stored as a scale event
    /// (`storeScaleEvent`) that later rate limits count. Otherwise the metric's recommendation
    /// is normalised as usual, the floor applied after the rate limits
    /// (`convertDesiredReplicasWithBehaviorRate`: a scale-down stops at minReplicas).
    pub(super) fn on_hpa(&mut self) {
        let min_replicas = self.hpa_min_replicas();
        let hpa = &self.cfg.model.hpa;
        let next = self.now + hpa.sync_s;
        self.push(next, Kind::Hpa);
        let current = self.replica_count();
        self.update_hpa_wants(current);
        if self.cfg.replicas != super::Replicas::Hpa {
            return;
        }
        if min_replicas > hpa.min_replicas {
            if current == 0 {
                return;
            }
            if current < min_replicas {
                self.hpa_events
                    .push_back((self.now, i64::from(min_replicas - current)));
                for _ in current..min_replicas {
                    self.new_pod();
                }
                self.schedule();
                self.compact_live_pods();
                return;
            }
        }
        let target = hpa.target_per_pod(self.slots());
        let desired = if current == 0 {
            let Some(scrape) = self.hpa_scrape() else {
                return;
            };
            hpa::recommend_from_zero(f64::from(self.in_system_at(scrape)), target)
        } else {
            let Some(reading) = self.hpa_reading() else {
                return;
            };
            hpa::recommend(reading, current, target, hpa.tolerance)
        };
        let floored;
        let hpa = if min_replicas == hpa.min_replicas {
            hpa
        } else {
            floored = Hpa {
                min_replicas,
                ..hpa.clone()
            };
            &floored
        };
        let set = hpa::normalise(
            hpa,
            &mut self.hpa_window,
            &mut self.hpa_events,
            self.now,
            current,
            desired,
        );
        if set > current {
            for _ in current..set {
                self.new_pod();
            }
            self.schedule();
        } else if set < current {
            self.scale_down(current - set);
        }
        self.compact_live_pods();
    }

    /// What an HPA at the user's target and minReplicas would set now, with its own
    /// stabilisation memory (`wants_window`): the waterfall's line between target headroom and
    /// warm excess, whatever raised the fleet above it (a floor, a lower target, a static
    /// fleet). A sync without a readable metric leaves it as it was.
    fn update_hpa_wants(&mut self, current: u32) {
        let hpa = &self.cfg.model.hpa;
        let target = f64::from(self.slots()) * hpa.wanted_utilization;
        let desired = if current == 0 {
            self.hpa_scrape()
                .map(|s| hpa::recommend_from_zero(f64::from(self.in_system_at(s)), target))
        } else {
            self.hpa_reading()
                .map(|r| hpa::recommend(r, current, target, hpa.tolerance))
        };
        if let Some(desired) = desired {
            self.hpa_wants = hpa::normalise(
                hpa,
                &mut self.wants_window,
                &mut Default::default(),
                self.now,
                current,
                desired,
            );
        }
    }

    /// The HPA's minReplicas now: the user's (`Model::hpa`), raised by a scheduled floor or by
    /// prewarm's floor, never above maxReplicas.
    pub(super) fn hpa_min_replicas(&self) -> u32 {
        let hpa = &self.cfg.model.hpa;
        let raised = match &self.cfg.headroom {
            Headroom::ScheduledFloor { floors } if !floors.is_empty() => {
                let slot = (self.now / super::FLOOR_SLOT_S + 1e-9).floor().max(0.0) as usize;
                floors[slot % floors.len()]
            }
            Headroom::PrewarmFloor { .. } => self.raised_min.unwrap_or(0),
            _ => 0,
        };
        hpa.min_replicas.max(raised.min(hpa.max_replicas))
    }

    /// What the Lambda's tick does with `plan.hpa_floor` for `hpa.raiseMinReplicas`
    /// (core/policy/decide.rs `floor_intent`, core/floor.rs `plan_floor`): a
    /// floor above the user's minReplicas (at most maxReplicas) is written and its lease renewed
    /// for max(SCALE_DOWN_DELAY_SECONDS, 120 s); a floor at or below the user's value gives it
    /// back; a failing-static tick (or no floor) holds the raise as is until its lease expires,
    /// then gives it back.
    pub(super) fn apply_hpa_floor(&mut self, plan: &Plan, policy: &PolicySpec) {
        let hpa = &self.cfg.model.hpa;
        let failing = matches!(plan.action, crate::core::Action::FailStatic);
        let before = self.raised_min;
        match plan.hpa_floor {
            Some(want) if !failing => {
                let want = want.min(hpa.max_replicas);
                if want > hpa.min_replicas {
                    self.raised_min = Some(want);
                    self.raised_min_lease_until = self.now + policy.floor_lease_s();
                } else {
                    self.raised_min = None;
                }
            }
            _ => {
                if self.raised_min_lease_until <= self.now {
                    self.raised_min = None;
                }
            }
        }
        if self.raised_min != before {
            self.result.headroom_changes += 1;
        }
    }

    /// What the HPA reads now: the newest scrape its metric path lets it see (`metrics_lag_s`
    /// after the scrape) and the pods as the pod lister has them now, grouped as
    /// replica_calculator.go's `groupPods` does for a Pods metric. The servers share one queue
    /// here, so each pod that served at the scrape reports an equal share of that scrape's
    /// waiting + running.
    fn hpa_reading(&self) -> Option<hpa::PodsReading> {
        let scrape = self.hpa_scrape()?;
        let scraped_at = scrape as f64 * self.cfg.step_s;
        let serving_then = self.serving_at_boundary[scrape];
        if serving_then == 0 {
            return None;
        }
        let in_system = self.in_system_at(scrape);
        let (mut with_metric, mut missing, mut pending) = (0, 0, 0);
        for &p in &self.live_pods {
            let pod = &self.pods[p];
            if pod.draining {
                continue;
            }
            match pod.phase {
                Phase::Pending => pending += 1,
                // Before the model load starts the container is not running: phase Pending.
                Phase::Starting { .. } if self.now < pod.started_at - 1e-9 => pending += 1,
                Phase::Starting { .. } => missing += 1,
                Phase::Serving { .. } if pod.serving_since <= scraped_at + 1e-9 => with_metric += 1,
                Phase::Serving { .. } => missing += 1,
                Phase::Gone => {}
            }
        }
        if with_metric == 0 {
            return None;
        }
        Some(hpa::PodsReading {
            mean: f64::from(in_system) / f64::from(serving_then),
            with_metric,
            missing,
            pending,
        })
    }

    /// The newest scrape the HPA's metric path lets it see now, if any.
    fn hpa_scrape(&self) -> Option<usize> {
        let seen = self.now - self.cfg.model.hpa.metrics_lag_s;
        if seen < -1e-9 {
            return None;
        }
        let scrape = (seen / self.cfg.step_s + 1e-9).floor() as usize;
        // The metrics adapter's instant query: a lost scrape reads as the kept one before it.
        (scrape < self.serving_at_boundary.len()).then(|| self.stored_scrape(scrape))
    }

    /// The HPA metric's sum over the pods at a scrape: the requests waiting or running, or in
    /// the rough world the running ones (the batch size, which the queue does not fill).
    fn in_system_at(&self, scrape: usize) -> u32 {
        let waiting = if self.cfg.world.hpa_on_batch_size {
            0
        } else {
            self.waiting_at_boundary[scrape]
        };
        waiting + self.running_at_boundary[scrape]
    }

    /// Removes `count` replicas: pending ones first, then starting, then the least busy.
    pub(super) fn scale_down(&mut self, count: u32) {
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

    pub(super) fn balloon_count(&self) -> u32 {
        self.cluster.pending_balloons
            + self
                .cluster
                .live_nodes
                .iter()
                .map(|&i| &self.cluster.nodes[i])
                .filter(|n| n.alive)
                .map(|n| n.balloons)
                .sum::<u32>()
    }

    /// Scales the balloon Deployment to `target` pods.
    pub(super) fn set_balloons(&mut self, target: u32) {
        let current = self.balloon_count();
        if target > current {
            self.cluster.pending_balloons += target - current;
            self.schedule();
            return;
        }
        let mut remove = current - target;
        let from_pending = remove.min(self.cluster.pending_balloons);
        self.cluster.pending_balloons -= from_pending;
        remove -= from_pending;
        if remove == 0 {
            return;
        }
        // Take balloons from the emptiest nodes first so whole nodes can be consolidated;
        // launching nodes before Ready ones.
        let mut order: Vec<usize> = self
            .cluster
            .live_nodes
            .iter()
            .copied()
            .filter(|&i| self.cluster.nodes[i].alive && self.cluster.nodes[i].balloons > 0)
            .collect();
        order.sort_by_key(|&i| {
            let n = &self.cluster.nodes[i];
            (n.ready_at <= self.now, n.used - n.balloons * self.gpr())
        });
        let gpr = self.gpr();
        for i in order {
            if remove == 0 {
                break;
            }
            let take = remove.min(self.cluster.nodes[i].balloons);
            self.cluster.nodes[i].balloons -= take;
            self.cluster.nodes[i].used -= take * gpr;
            self.cluster.nodes[i].last_pod_event = self.now;
            remove -= take;
            self.check_empty(i);
        }
    }

    /// One call of the Lambda's `decide()` on what its eyes see now (counted), with the lead
    /// time learned so far when the run learns it (lead.rs).
    pub(super) fn prewarm_decision(&mut self, policy: &PolicySpec, target: &TargetSpec) -> Plan {
        let policy = self.with_learned_lead(policy, target);
        let policy = policy.as_ref();
        let obs = self.observation(policy, target);
        self.result.decisions += 1;
        let plan = decide(
            &obs,
            target,
            policy,
            &self.headroom_state,
            self.cfg.base_epoch + self.now,
        );
        self.result.band.tick_s = policy.tick_s;
        self.record_band(&plan.forecast, policy.lead_time_s);
        self.residual_upper(plan.forecast.rate_at_horizon);
        plan
    }

    pub(super) fn on_tick(&mut self) {
        let (policy, target, as_floor) = match &self.cfg.headroom {
            Headroom::Prewarm { policy, target } => (policy, target, false),
            Headroom::PrewarmFloor { policy, target } => (policy, target, true),
            Headroom::Percent { percent, tick_s } => {
                let want = super::percent_of(self.serving_count(), *percent);
                self.set_balloons(want);
                let next = self.now + tick_s;
                self.push(next, Kind::Tick);
                return;
            }
            Headroom::None | Headroom::Fixed(_) | Headroom::ScheduledFloor { .. } => return,
        };
        let plan = self.prewarm_decision(policy, target);
        if as_floor {
            // prewarm-floor: the same decision, applied as the HPA's floor; no balloons, so the
            // headroom object reads back 0 spare.
            self.apply_hpa_floor(&plan, policy);
        } else {
            if plan.changes_size() {
                self.result.headroom_changes += 1;
            }
            // What the Lambda does: size the object to the plan, persist next_state on it, and
            // read the object's size back as `spare` next time.
            self.set_balloons(plan.desired_spare);
        }
        if let Some(freeze) = plan.freeze_consolidation {
            if target.freeze_consolidation {
                self.cluster.consolidation_frozen = freeze;
            }
        }
        self.headroom_state = plan.next_state;
        self.headroom_state.spare = self.balloon_count();
        let next = self.now + policy.tick_s;
        self.push(next, Kind::Tick);
    }
}
